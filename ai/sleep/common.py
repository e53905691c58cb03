"""What every compaction strategy shares: the split that keeps the newest messages, the
guard against compactions that do not help, the record a compaction writes with its
replacements, and the results of one that ran or did not."""

from django.db import transaction
from evennia.utils import logger
from twisted.internet import defer

from ..audience import with_audience
from ..config import compact_strategy
from ..context_usage import measure_context
from ..history import HistoryChanged
from ..models import CompactionRecord
from ..prompt_assembly import unit_start
from ..utils.message_format import is_summary
from ..utils.thread_pools import LazyPool
from ..utils.token_counter import kept_message_tokens
from ..utils.wording import percent, percent_against, plural
from .notify import announce_compaction

# The compaction's reading of words (the quality gate, archive markers, summary messages
# and synthesis entries), off the reactor: pure Python that holds the GIL, so one thread
# serves every assistant, and Twisted's pool, which Evennia shares, is left alone.
WORD_READING = LazyPool("ai-compaction", lambda: 1)
PRESERVE_TOKEN_SHARE = 0.2
# Share of the history's room (the threshold's tokens less the frame's) that the preserved
# tail may hold at most: a large frame leaves the rest of that room to compact.
PRESERVE_ROOM_SHARE = 0.5
# A compaction removing less than this share of the history's tokens failed: a stall.
STALL_SHARE = 0.05


def split_history(history, preserve_count, max_tokens, token_share=PRESERVE_TOKEN_SHARE):
    """Split history into ``(to_compact, to_preserve)``.

    The preserved tail is the larger of the last ``preserve_count`` messages and the most
    recent messages within ``token_share`` (20%) of ``max_tokens``; its start then moves
    back to the start of a whole unit, so a tool call stays with its results.
    """
    start = preserve_start(history, preserve_count, token_share * max_tokens)
    return history[:start], history[start:]


def preserve_start(newest, preserve_count, keep_tokens):
    """Return the index in ``newest`` of the first message :func:`split_history` preserves.

    ``newest`` is the whole history or its newest part, as long as that part holds more
    than ``preserve_count`` messages and more than ``keep_tokens`` tokens and begins with a
    message that is not a tool result (see
    :meth:`~ai.history.ConversationHistory.newest_outline`): the split then falls inside
    it, where it falls in the whole history.
    """
    keep_by_tokens, used = 0, 0
    for message in reversed(newest):
        used += message["token_count"]
        if used > keep_tokens:
            break
        keep_by_tokens += 1
    boundary = max(len(newest) - max(preserve_count, keep_by_tokens), 0)
    return unit_start(newest, boundary)


@defer.inlineCallbacks
def messages_to_compact(store, preserve_count, keep_tokens, with_pinned=False):
    """Return the live messages that :func:`split_history` would not preserve, and the
    history's revision when the split was found.

    The split is found in an outline of the newest messages (ids, roles, tool calls and
    token counts); only the messages before it are read whole, off the reactor
    (``ConversationHistory.read_messages``). Pinned ones are left out unless
    ``with_pinned``: a pin holds a whole tool-call unit (see
    ``ConversationHistory.set_pinned``).

    Returns:
        Deferred: Fires with ``(messages, revision)``.
    """
    newest = store.newest_outline(keep_tokens, preserve_count)
    start = preserve_start(newest, preserve_count, keep_tokens)
    before = newest[start]["position"] if start < len(newest) else None
    older = yield store.read_messages(before)
    if not with_pinned:
        older = [message for message in older if not message.get("pinned")]
    return older, newest.revision


def old_messages(script, kind, before, config, with_pinned=False, floor=None):
    """Return the messages a ``kind`` compaction may replace (none when the preserve window
    holds them all; the pinned ones too if ``with_pinned``) and the history's revision when
    they were read.

    A builder who asks for a compaction gets one: only the preserve window's messages are
    kept, not 20% of the window (all of a short history at the default 100,000 tokens).

    Args:
        floor (int, optional): Messages kept at least, in place of ``compact_preserve_window``
            (an escalating compaction lowers it, see ``ai.sleep.escalation``); with a floor,
            the preserved tokens are halved too.

    Returns:
        Deferred: Fires with ``(messages, revision)`` (see :func:`messages_to_compact`).
    """
    keep = 0 if kind == "manual" else preserve_tokens(before, kind_threshold(config, kind))
    count = config["compact_preserve_window"] if floor is None else floor
    if floor is not None:
        keep /= 2
    return messages_to_compact(script.history, count, keep, with_pinned)


def preserve_tokens(usage, threshold):
    """Return the tokens of the newest messages an automatic compaction keeps at least.

    20% of the window, as long as that is at most half of the room history has under
    ``threshold`` (the threshold's tokens less the frame's); else that half. At a roomy
    window nothing changes; when the frame takes much of a small one, what the preserved
    tail leaves of the room is worth compacting.
    """
    room = max(threshold * usage.max_tokens - usage.frame_tokens, 0)
    return min(PRESERVE_TOKEN_SHARE * usage.max_tokens, PRESERVE_ROOM_SHARE * room)


def start_threshold(config):
    """Return the usage at which a compaction with ``config``'s strategy is due: the sleep
    threshold, or the masking threshold when lower for the strategies that mask."""
    threshold = config["compact_sleep_threshold"]
    if compact_strategy(config) in ("masking", "hybrid"):
        return min(threshold, config["compact_mask_threshold"])
    return threshold


def kind_threshold(config, kind):
    """Return the usage a ``kind`` compaction must bring the context under: the emergency
    or the sleep threshold. Masking starts lower (``start_threshold``), but what it leaves
    over its own threshold and under the sleep one is no reason to summarize or archive."""
    if kind == "emergency":
        return config["compact_emergency_threshold"]
    return config["compact_sleep_threshold"]


def within_preserve_window(before, config):
    """Return the result of a compaction that found every message in the preserve window."""
    kept = config["compact_preserve_window"]
    return skipped(
        "history within preserve window",
        token_usage=before.usage,
        hint=f"the last {plural(kept, 'message')} {'is' if kept == 1 else 'are'} kept; lower "
        "compact_preserve_window to compact more",
    )


def skipped(reason, **extra):
    """Return the result of a compaction that did not run."""
    return {"skipped": True, "reason": reason, **extra}


class CompactionRefused(Exception):
    """A compaction changed nothing: it would have removed too little (a stall), or its
    messages changed meanwhile. ``result`` is its failed result."""

    def __init__(self, result):
        super().__init__(result["error"])
        self.result = result


def replace_recorded(script, store, kind, strategy, now, replace, removed, history_tokens):
    """Record a compaction and make its replacements in one transaction, unless they would
    remove too little of the history (a stall, see :func:`stalled`).

    Args:
        store (ConversationHistory): The history replaced in (its tokenizer is recorded,
            so that an undo knows whether to count the restored messages again).
        strategy (str): The compaction strategy that chose what to replace.
        replace (callable): ``replace(record)``: makes the replacements, returns what it
            stored; its ``HistoryChanged`` rolls the record back with them.
        removed (int): The tokens the replacements take out of the history.
        history_tokens (int): The history's tokens before the compaction.

    Returns:
        tuple: ``(the CompactionRecord, what replace returned)``.

    Raises:
        CompactionRefused: a stall, or the history changed; nothing is stored.
    """
    stall = stalled(script, kind, removed, history_tokens)
    if stall:
        raise CompactionRefused(stall)
    try:
        with transaction.atomic():
            record = CompactionRecord.objects.create(
                db_script_id=script.id,
                kind=kind,
                strategy=strategy,
                created_at=now,
                result={"counted_for": store.counted_for},
            )
            return record, replace(record)
    except HistoryChanged as err:
        raise CompactionRefused({"success": False, "kind": kind, "error": str(err)}) from err


def finish(script, character, record, before, result, written):
    """Complete the result of the stored compaction ``record``, log it, keep its figures in
    the record and announce it; return the result.

    Args:
        before (ContextUsage): The usage measured before the compaction.
        result (dict): What the strategy reports (``compacted_messages`` at least).
        written (str): What the compacted messages became, for the log.
    """
    script.db.last_compaction = record.created_at.isoformat()
    after = measure_context(script, character)
    reduction = (1 - after.history_tokens / before.history_tokens) * 100
    compacted = result["compacted_messages"]
    logger.log_info(
        f"AI {script.label}: Context compaction: {plural(compacted, 'message')} → {written}, "
        f"{before.history_tokens}→{after.history_tokens} tokens ({reduction:.0f}% reduction)"
    )
    result = {
        "success": True,
        "kind": record.kind,
        "preserved_messages": before.message_count - compacted,
        "original_tokens": before.history_tokens,
        "new_tokens": after.history_tokens,
        "reduction_pct": reduction,
        "usage_before": before.usage,
        "usage_after": after.usage,
        "strategy": record.strategy,
        "compaction_id": record.id,
        **result,
    }
    record.result.update(
        (key, value) for key, value in result.items() if isinstance(value, (str, int, float))
    )
    record.save(update_fields=["result"])
    announce_compaction(script, character, result)
    return result


def previous_successive_count(messages):
    """Return the successive-compaction count of the newest summary among ``messages``."""
    counts = [
        message["metadata"].get("successive_compactions", 1)
        for message in messages
        if is_summary(message)
    ]
    return counts[-1] if counts else 0


def compaction_message(role, content, kind, audience, members, model, now, **extra):
    """Return a message that a compaction writes in place of ``members``, with its metadata
    (``extra`` added to it)."""
    message = {
        "role": role,
        "content": content,
        "metadata": with_audience(
            {
                "type": "compaction",
                "kind": kind,
                "compacted_count": len(members),
                "compacted_at": now.isoformat(),
                "original_token_count": sum(message["token_count"] for message in members),
                "successive_compactions": previous_successive_count(members) + 1,
                **extra,
            },
            audience,
        ),
    }
    message["metadata"]["summary_token_count"] = kept_message_tokens(message, model)
    return message


def is_stuck(script, kind):
    """Return whether a ``kind`` compaction would only repeat the last one that did not help.

    True when the last ``kind`` compaction stalled or left usage over its threshold, and the
    history has not changed since.
    """
    return (script.ndb.stuck_compactions or {}).get(kind) == script.history.totals()


def record_outcome(script, kind, still_over):
    """Remember whether a ``kind`` compaction left usage over its threshold (or stalled).

    The history's state is kept with it, so that :func:`is_stuck` holds until it changes.
    """
    stuck = dict(script.ndb.stuck_compactions or {})
    stuck[kind] = script.history.totals() if still_over else None
    script.ndb.stuck_compactions = stuck


def stalled(script, kind, removed, history_tokens):
    """Return the failed result of a compaction removing ``removed`` of ``history_tokens``
    tokens, when that is under ``STALL_SHARE``; else None.

    A stall is remembered (:func:`record_outcome`): it is not tried again, but by a builder,
    until the history changes.
    """
    if removed >= STALL_SHARE * history_tokens:
        return None
    error = (
        f"stalled: it would remove {removed} of the history's {history_tokens} tokens "
        f"({percent_against(removed / history_tokens, STALL_SHARE)}, under "
        f"{percent(STALL_SHARE)})"
    )
    logger.log_warn(f"AI {script.label}: {kind} compaction refused: {error}")
    record_outcome(script, kind, True)
    return {"success": False, "kind": kind, "error": error, "stalled": True}
