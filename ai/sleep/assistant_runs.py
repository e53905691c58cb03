"""Compaction strategy ``assistant_runs``: summarize only the assistant's long stretches.

Among the messages older than the preserve window, each run of two or more assistant
messages in a row (with the tool results that answer them: in this game a tool result
belongs to the assistant's turn) is replaced by one assistant message that says, in the
past tense, what the assistant did and said. Players' messages are never touched and keep
their place; so do single assistant messages.

A run ends at anything that is not the assistant's own: a player's message, a system
message (an earlier ``[CONTEXT SUMMARY]`` or note), an earlier run's summary (never
summarized again: a run's summary is always a first summary), a pinned message, and a
change of audience (what was whispered is summarized apart). A run holds whole tool-call
units only.

Every run is summarized before anything is stored, then all are stored in one
transaction with their ``CompactionRecord``: a failed or empty summary of any run changes
nothing (all or nothing, as the summary strategy does); a run whose summary is not
smaller than itself is kept as it is. The summaries are not journaled: the facts were
journaled by the extraction before the compaction, and what a run summary says about the
assistant's own actions stays in the history, beside the players' words it answered.
"""

from django.utils import timezone
from evennia.utils import logger
from twisted.internet import defer

from ..audience import message_audience
from ..prompt_assembly import history_units
from ..utils.faithfulness import Repairs, check_summary, examples_of, read_transcript
from ..utils.message_format import is_summary
from ..utils.wording import plural
from .common import (
    CompactionRefused,
    compaction_message,
    finish,
    old_messages,
    replace_recorded,
    skipped,
)
from .quality_gate import describe_report
from .summarizing import summarize

STRATEGY = "assistant_runs"
# How a run's summary opens: a record of the past in the assistant's own voice, which a
# model reads as what it did rather than as a format to answer in.
RUN_SUMMARY_PREFIX = "(Summary of my earlier actions)"
RUN_SUMMARY_MAX_WORDS = 120
RUN_PROMPT = f"""You are condensing a stretch of your own earlier turn in a game, where you, \
the players' assistant, used tools and spoke, so that you can go on without its details.

Say in the first person and the past tense what you did and what you said, and to whom: \
what the tools found, the answers you gave, what you promised or decided, with exact names \
and numbers. Tell only what the messages show: an action only when a tool call made it. \
Leave out how tools were called and anything said twice. Write at most \
{RUN_SUMMARY_MAX_WORDS} words."""
RUN_REQUEST = f"""In a few short sentences, say what you did and said above, in the first \
person and the past tense ("I <did what> and told <name> <what>."). Keep exact names and \
numbers; add nothing the messages above do not show; do not copy the transcript. At most \
{RUN_SUMMARY_MAX_WORDS} words."""


def find_runs(messages):
    """Return the runs of ``messages`` that compact into one summary each, oldest first.

    Args:
        messages (list): The messages older than the preserve window, pinned ones included
            (``common.old_messages``), oldest first.

    Returns:
        list: Each run a list of consecutive messages: whole tool-call units of assistant
        messages and tool results, one audience, two or more assistant messages.
    """
    runs, current, audience = [], [], None
    for unit in history_units(messages):
        joins = _joins_run(unit)
        unit_audience = tuple(sorted(message_audience(unit[0]) or ()))
        if current and (not joins or unit_audience != audience):
            _close(current, runs)
            current = []
        if joins:
            current += unit
            audience = unit_audience
    _close(current, runs)
    return runs


def _joins_run(unit):
    """Tell whether a tool-call unit may be part of a run: the assistant's own, unpinned and
    no summary."""
    return all(
        message["role"] in ("assistant", "tool")
        and not message.get("pinned")
        and not is_summary(message)
        for message in unit
    )


def _close(run, runs):
    """Add ``run`` to ``runs`` when it holds two or more assistant messages."""
    if sum(message["role"] == "assistant" for message in run) >= 2:
        runs.append(run)


@defer.inlineCallbacks
def compact_assistant_runs(script, character, plan, before, config, extract=None):
    """Replace each run of assistant messages older than the preserve window by a summary.

    Args:
        script (AssistantScript): The assistant's script.
        character (AssistantCharacter): The assistant.
        plan (CompactionPlan): The compaction's kind and strategy (``ai.signals``); its
            messages leave out the pinned ones, which end runs, so they are read again.
        before (ContextUsage): The usage measured before the compaction.
        config (dict): The script's effective configuration.
        extract (callable, optional): Run before the first summary call (pre-compaction
            extraction), when there is a run to summarize.

    Returns:
        Deferred: Fires with the result dict of ``compact_conversation_history``, with
        ``runs`` (the runs replaced) and ``runs_kept`` (those whose summary was not
        smaller).
    """
    kind = plan.kind
    older, _ = yield old_messages(script, kind, before, config, with_pinned=True)
    runs = find_runs(older)
    if not runs:
        return skipped(
            "no run of two or more assistant messages to compact", token_usage=before.usage
        )
    if extract:
        yield extract()
    script.ndb.compacting = True
    summaries = []
    try:
        for run in runs:
            summary, error = yield summarize(script, run, (RUN_PROMPT, RUN_REQUEST))
            if error:
                return _failed(script, kind, "abandoned", error)
            summaries.append(summary)
    finally:
        script.ndb.compacting = False
    summaries, repairs = check_runs(character, older, runs, summaries)
    return _replace_runs(script, character, kind, runs, summaries, before, repairs)


def check_runs(character, older, runs, summaries):
    """Return ``(summaries, counts)``: each run's summary with what it invents dropped or
    corrected (``ai.utils.faithfulness``; "" when nothing is left), and the repairs counted.

    A run's summary may name whoever appears in the older messages (the players it
    answered), but may claim only the tool calls of its own run.
    """
    examples = examples_of((RUN_PROMPT, RUN_REQUEST))
    total, checked = Repairs().as_result(), []
    for run, summary in zip(runs, summaries):
        transcript = read_transcript(older, character.key, calls_from=run)
        summary, repairs = check_summary(summary, transcript, examples, self_word="I")
        repairs.add_to(total)
        checked.append(summary)
    return checked, total


def _replace_runs(script, character, kind, runs, summaries, before, repairs):
    """Store each run's summary in its place, those kept by the check and smaller than their
    run; return the result."""
    # The store of the model now: the model may have changed during the summary calls.
    model = script.history.model
    now = timezone.now()
    replacements = []
    for run, summary in zip(runs, summaries):
        if not summary:
            continue  # the check kept nothing of it: the run stays as it was
        message = compaction_message(
            "assistant",
            f"{RUN_SUMMARY_PREFIX} {summary}",
            kind,
            message_audience(run[0]),
            run,
            model,
            now,
            strategy=STRATEGY,
        )
        metadata = message["metadata"]
        if metadata["summary_token_count"] < metadata["original_token_count"]:
            replacements.append((message, run))
    if not replacements:
        error = "no run's summary is smaller than the run"
        if not any(summaries):
            error = "the quality gate kept no run's summary: each told what the run did not"
        return {**_failed(script, kind, "refused", error), **repairs}
    store = script.history
    try:
        record, stored = replace_recorded(
            script,
            store,
            kind,
            STRATEGY,
            now,
            lambda record: store.replace_each(replacements, record),
            sum(
                m["metadata"]["original_token_count"] - m["metadata"]["summary_token_count"]
                for m, _ in replacements
            ),
            before.history_tokens,
        )
    except CompactionRefused as refused:
        return {**refused.result, "strategy": STRATEGY}
    result = {
        "compacted_messages": sum(len(run) for _, run in replacements),
        "runs": len(replacements),
        "runs_kept": len(runs) - len(replacements),
        "summary_tokens": sum(m["metadata"]["summary_token_count"] for m, _ in replacements),
        "successive_compactions": 1,
        "summary_id": stored[0]["id"],
        "summary_ids": [message["id"] for message in stored],
        **repairs,
    }
    written = describe_report(plural(len(stored), "run summary", "run summaries"), result)
    return finish(script, character, record, before, result, written)


def _failed(script, kind, verb, error):
    """Log why a compaction changed nothing; return its result."""
    logger.log_warn(f"AI {script.label}: {kind} {STRATEGY} compaction {verb}: {error}")
    return {"success": False, "kind": kind, "strategy": STRATEGY, "error": error}
