"""Archiving old messages whole: the last step of an automatic compaction that cannot make
room otherwise (see ``ai.sleep.escalation``).

The messages older than the preserve window are archived, linked to one short marker per
audience that says how many were archived and that ``search_history`` finds them, followed
by what the earlier summaries and markers among them kept, then the players' statements
among them that the journal does not hold, in their own words (``ai.sleep.quality_gate``),
within a share of the words replaced that shrinks when the archive would otherwise leave
usage over the threshold. No model is asked to summarize: the escalation runs the
pre-compaction extraction first, so that their facts are journaled, and the archive is
where the messages are read back. The compaction is recorded like any other, and
``aicompact/undo`` takes it back. The markers' texts, read from words alone, are written in
a thread (their work grows with the messages archived); the journal is read and the
history written in the reactor.
"""

from django.utils import timezone
from twisted.internet import defer

from ..audience import audience_groups
from ..helpers.journal import entries_citing
from ..utils.markers import ARCHIVE_MARKER
from ..utils.wording import plural
from .common import (
    STALL_SHARE,
    WORD_READING,
    CompactionRefused,
    compaction_message,
    finish,
    kind_threshold,
    replace_recorded,
)
from .quality_gate import STATEMENTS_SHARE, restore_earlier, restore_statements, statements

# The share of the archived words that the players' statements may fill, tried in turn: an
# archive that would not bring usage under the threshold keeps fewer, then only its marker;
# when none would, the most that still free more than a stall.
# All of their words first: a whisper and its answer hold about one statement's words.
STATEMENT_SHARES = (1.0, STATEMENTS_SHARE / 2, 0)


def marker_text(assistant, cited, members, share, said=None):
    """Return the text of the marker standing for ``members``, archived whole: what it
    is, then what the earlier summaries and markers among them kept (an archive of an
    archive keeps its statements), then the statements of theirs that nothing else (nor
    one of the ``cited`` journal entries) keeps, oldest first within ``share`` of their
    words. Reads no database.

    Args:
        assistant (str): The assistant's name.
        cited (list): The journal entries the marker's readers may hear that cite one of
            ``members``.
        members (list): The messages archived.
        share (float): The share of their words the statements may fill.
        said (list, optional): Their statements (``quality_gate.statements``), when read.
    """
    # The marker's own words are not counted against the share: for a short exchange (a
    # whisper and its answer) they alone would leave no room for its one statement.
    earlier, _ = restore_earlier(members, "", share)
    kept, _, _ = restore_statements(assistant, cited, members, earlier, share, said)
    return (
        f"{ARCHIVE_MARKER} {plural(len(members), 'earlier message')} "
        f"{'was' if len(members) == 1 else 'were'} archived without a summary "
        f"to make room; search_history finds them by their words.{kept}"
    )


def archive_markers(assistant, kind, model, now, groups):
    """Return, for each ``(audience, members, cited)`` of ``groups``, its marker
    (:func:`archive_marker`) at each of ``STATEMENT_SHARES``, a dict by share, its members'
    statements read once. Reads no database."""
    markers = []
    for audience, members, cited in groups:
        said = statements(members, assistant)
        markers.append(
            {
                share: archive_marker(
                    kind,
                    audience,
                    members,
                    model,
                    now,
                    marker_text(assistant, cited, members, share, said),
                )
                for share in STATEMENT_SHARES
            }
        )
    return markers


def archive_marker(kind, audience, members, model, now, text):
    """Return the system message of ``text`` (:func:`marker_text`) standing for
    ``members``."""
    return compaction_message(
        "system", text, kind, audience, members, model, now, archived_whole=True
    )


@defer.inlineCallbacks
def archive_oldest(script, character, plan, before, config, extract=None):
    """Archive ``plan``'s messages whole behind one marker per audience.

    Args:
        plan (CompactionPlan): The messages older than the preserve window (``ai.signals``).
        before (ContextUsage): The context's usage when the step started.
        config (dict): The script's effective configuration (its thresholds).
        extract (callable, optional): Not run here: the escalation runs it before.

    Returns:
        Deferred: Fires with the result, shaped as a summary compaction's
        (``archived_messages`` counts the messages archived); a failure when it would
        remove too little (a stall) or the history changed meanwhile.
    """
    groups = [
        (audience, members, entries_citing(character, [m["id"] for m in members], audience))
        for audience, members in audience_groups(plan.messages)
    ]
    store = script.history
    now = timezone.now()
    # Running, for builders' commands and the inspector, while the markers are written.
    script.ndb.compacting = True
    try:
        candidates = yield WORD_READING.run(
            archive_markers, character.key, plan.kind, store.model, now, groups
        )
    finally:
        script.ndb.compacting = False
    room = kind_threshold(config, plan.kind) * before.max_tokens
    tried = []  # the markers that would free more than a stall
    for share in STATEMENT_SHARES:
        markers = [
            (candidate[share], members) for (_, members, _), candidate in zip(groups, candidates)
        ]
        marker_tokens = sum(marker["metadata"]["summary_token_count"] for marker, _ in markers)
        freed = plan.tokens - marker_tokens
        if freed >= STALL_SHARE * before.history_tokens:
            tried.append((markers, marker_tokens))
            if before.total_tokens - freed < room:
                break
    else:
        # None brings usage under the threshold: the most statements that free enough, or
        # the bare marker (refused below as a stall when even it frees too little).
        markers, marker_tokens = tried[0] if tried else (markers, marker_tokens)
    try:
        record, stored = replace_recorded(
            script,
            store,
            plan.kind,
            "archive",
            now,
            lambda record: store.replace_with_summaries(
                plan.messages, markers, plan.read_at, record=record
            ),
            plan.tokens - marker_tokens,
            before.history_tokens,
        )
    except CompactionRefused as refused:
        return refused.result
    result = {
        "compacted_messages": len(plan.messages),
        "archived_messages": len(plan.messages),
        "summary_tokens": marker_tokens,
        "successive_compactions": max(m["metadata"]["successive_compactions"] for m, _ in markers),
        "summary_id": stored[0]["id"],
        "summary_ids": [message["id"] for message in stored],
    }
    return finish(script, character, record, before, result, "an archive marker")
