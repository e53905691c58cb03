"""Context compaction: the strategies, and the summary that replaces old history with one
``[CONTEXT SUMMARY]`` message.

``compact_strategy`` chooses what a compaction does to the messages older than the preserve
window (:data:`RUNNERS`): ``summary`` (below), ``masking`` (``ai.sleep.masking``),
``assistant_runs`` (``ai.sleep.assistant_runs``) or ``hybrid`` (masking, then a summary if
usage is still over the threshold).

The split keeps a preserve window of recent messages verbatim (the last
``compact_preserve_window`` messages or the most recent 20% of ``max_context_tokens``,
whichever keeps more; less of the window when the frame takes much of it, see
``ai.sleep.common.preserve_tokens``) and never separates a tool-calling message from its results. Only
the messages to compact are sent to the summary call, in chunks when they do not fit the
summarizing model's window (``ai.sleep.summarizing``). Replacement is one transaction: the replaced messages are
archived (linked to their summary), never deleted; messages appended meanwhile stay; a
failed, empty or not-smaller summary changes nothing, and so does one that would remove
less than ``STALL_SHARE`` of the history (a stall, not repeated until the history changes).
An automatic compaction that cannot make room escalates (``ai.sleep.escalation``).
Facts journaled from the compacted messages that a summary dropped are appended to it
(``quality_gate``); ``ai.signals`` tells receivers before and after, and lets them veto.
"""

from dataclasses import replace

from django.utils import timezone
from evennia.utils import logger
from twisted.internet import defer

from ..audience import audience_groups
from ..config import compact_strategy
from ..context_usage import measure_context
from ..helpers.journal import entry_text, write_entry
from ..llm_interaction import summary_instructions
from ..signals import CompactionPlan, post_compaction, pre_compaction, send_logged
from ..utils.markers import (
    NOTES_HEADER,
    SUMMARY_MARKER,
    SUMMARY_PREAMBLE,
    SYNTHESIS_MARKER,
)
from ..utils.message_format import is_summary, summary_depth, summary_text
from ..utils.wording import percent, percent_against
from .assistant_runs import compact_assistant_runs
from .common import (
    WORD_READING,
    CompactionRefused,
    compaction_message,
    finish,
    is_stuck,
    kind_threshold,
    old_messages,
    replace_recorded,
    skipped,
    stalled,
    start_threshold,
    within_preserve_window,
)
from .escalation import (
    REFUSED_FOR_SIZE,
    make_room,
    needs_room,
    remember_refused,
    summary_split,
    worth_summarizing,
)
from .masking import mask_tool_outputs
from .quality_gate import describe_report, empty_report, gate_summary
from .summarizing import CALL_FAILED, EMPTY_SUMMARY, describe_mechanically, summarize

# From this depth on (successive_compactions: how deeply summaries nest), summaries of
# summaries lose accuracy (said once).
ACCURACY_WARNING_AT = 3
REFUSED_BY_GATE = (
    "the quality gate kept no line of the summary ({examples_dropped} copied examples, "
    "{strangers_dropped} naming strangers, {actions_dropped} claiming actions no tool made, "
    "{speakers_dropped} crediting words to someone who did not say them)"
)


@defer.inlineCallbacks
def compact_conversation_history(
    script, character, force=False, kind=None, extract=None, usage=None
):
    """Compact the assistant's history if it is over its threshold (or if forced), with
    its ``compact_strategy`` (see :data:`RUNNERS`).

    ``pre_compaction`` receivers see the plan first and may veto it; ``post_compaction``
    receivers get the result (see ``ai.signals``).

    Args:
        script (AssistantScript): The assistant's script.
        character (AssistantCharacter): The assistant (for its journal).
        force (bool): Compact even below the threshold (emergencies, builders).
        kind (str, optional): ``sleep``, ``emergency`` or ``manual``, for logs and results.
            Only ``manual`` runs again after a stall with the history unchanged.
        extract (callable, optional): Returns a Deferred; run just before a summary is made
            or messages are archived whole (pre-compaction extraction), never for masking.
        usage (ContextUsage, optional): The context as measured just now, with nothing
            written since; measured if None.

    Returns:
        Deferred: Fires with the result dict: ``skipped`` and ``reason``; or ``success``
        False and ``error`` (and ``stalled`` True for a stall); or ``success`` True with the
        counts, ``original_tokens``, ``new_tokens`` (history tokens before and after),
        ``reduction_pct``, ``strategy``, ``compaction_id`` and more.
    """
    config = script.effective_config()
    kind = kind or ("emergency" if force else "sleep")
    if not config["compact_enabled"] and not force:
        return skipped("compaction disabled")
    if not len(script.history):
        return skipped("no history")
    before = usage or measure_context(script, character)
    threshold = start_threshold(config)
    if before.usage < threshold and not force:
        return skipped(
            f"below threshold ({percent_against(before.usage, threshold)} < {percent(threshold)})",
            token_usage=before.usage,
        )
    if kind != "manual" and is_stuck(script, kind):
        return skipped(f"the last {kind} compaction did not help; history unchanged")
    if script.ndb.compacting:
        return skipped("a compaction is already running")
    strategy = compact_strategy(config)
    script.ndb.compacting = True  # from here: the messages are read in a worker thread
    try:
        if kind == "manual" or strategy == "masking":
            to_compact, read_at = yield old_messages(script, kind, before, config)
        else:
            to_compact, read_at = yield summary_split(script, kind, before, config)
    finally:
        script.ndb.compacting = False
    if not to_compact:
        return within_preserve_window(before, config)
    tokens = sum(message["token_count"] for message in to_compact)
    stall = stalled(script, kind, tokens, before.history_tokens)
    if stall:
        return stall
    plan = CompactionPlan(
        kind, strategy, to_compact, len(to_compact), tokens, before.history_tokens, read_at
    )
    vetoes = send_logged(pre_compaction, script, character=character, plan=plan)
    if vetoes:
        logger.log_info(f"AI {script.label}: {kind} compaction vetoed: {'; '.join(vetoes)}")
        result = skipped(f"vetoed: {'; '.join(vetoes)}", kind=kind, vetoed=True)
    else:
        result = yield RUNNERS[strategy](script, character, plan, before, config, extract)
        usage = kind != "manual" and needs_room(script, character, kind, config, result)
        if usage:
            result = yield make_room(script, character, kind, config, result, extract, usage)
    send_logged(post_compaction, script, character=character, result=result)
    return result


@defer.inlineCallbacks
def compact_with_summary(script, character, plan, before, config, extract=None):
    """The ``summary`` strategy: replace ``plan``'s messages with one summary per audience,
    checked by the quality gate and with the plan's notes.

    Args:
        plan (CompactionPlan): What to compact (``ai.signals``).
        before (ContextUsage): The context's usage when the compaction started.
        config (dict): The script's effective configuration.
        extract (callable, optional): Run before the summary call (see
            :func:`compact_conversation_history`).

    Returns:
        Deferred: Fires with the compaction's result dict.
    """
    if plan.kind != "manual" and not worth_summarizing(plan.messages, script.history.model):
        # Decided before any call: extraction and the summary would be spent on a
        # compaction refused for its size (see ai.sleep.escalation). A builder who asks
        # gets the model's attempt.
        error = (
            f"{plan.tokens} tokens in {plan.message_count} messages are too few to be worth "
            "a summary"
        )
        return {"success": False, "kind": plan.kind, "error": error, REFUSED_FOR_SIZE: True}
    if extract:
        yield extract()
    if extract and plan.kind != "manual":
        now = measure_context(script, character)
        threshold = kind_threshold(config, plan.kind)
        if now.usage < threshold:
            # What the extraction did (a recalled note, a calibrated count) changed the
            # frame: a summary now would be a model call spent on a compaction refused for
            # removing too little, or one no longer needed (seen on Qwen2.5-Coder-1.5B).
            return skipped(
                "under the threshold after the pre-compaction extraction "
                f"({percent_against(now.usage, threshold)} < {percent(threshold)})",
                kind=plan.kind,
                token_usage=now.usage,
            )
    script.ndb.compacting = True
    summaries, gate = [], empty_report()
    instructions = summary_instructions(script)
    try:
        # Each audience's messages are summarized apart, so that a summary never tells
        # the room what was whispered (see ai.audience).
        groups, empty = audience_groups(plan.messages), 0
        for audience, members in groups:
            if all(is_summary(message) for message in members):
                # Nothing new for this audience: its summary stands as it is. Asked to
                # summarize a lone summary (an archive's placeholder), Qwen2.5-Coder-1.5B
                # made up a conversation.
                kept = "\n".join(summary_text(message["content"]) for message in members)
                summaries.append((audience, members, kept))
                continue
            summary, error = yield summarize(script, members, instructions)
            empty += error == EMPTY_SUMMARY
            if error == EMPTY_SUMMARY and empty < len(groups):
                # One audience's messages may hold nothing to keep (a whispered greeting):
                # say what they were rather than let them block every compaction; only
                # when every audience's summary is empty does the compaction fail.
                summary, error = describe_mechanically(members), None
            if not error:
                summary = yield gate_summary(
                    character, audience, members, summary, instructions, gate
                )
                error = None if summary else REFUSED_BY_GATE.format(**gate)
            if error:
                logger.log_warn(f"AI {script.label}: {plan.kind} compaction abandoned: {error}")
                # A model that did not answer may next time: no escalation (ai.sleep.escalation).
                failed = error.startswith(CALL_FAILED)
                return {
                    "success": False,
                    "kind": plan.kind,
                    "error": error,
                    "model_failed": failed,
                    **gate,
                }
            if plan.notes:
                summary = "\n".join([summary, NOTES_HEADER, *(f"- {n}" for n in plan.notes)])
            summaries.append((audience, members, summary))
        # The summary messages and synthesis entries are read in a thread too: counting a
        # long summary's tokens and indexing its words hold the reactor as the gate did.
        # The store of the model now (it may have changed during the summary call), for
        # the summaries' counts and their storing alike.
        store, now = script.history, timezone.now()
        written = yield WORD_READING.run(summaries_written, plan.kind, summaries, store.model, now)
    finally:
        script.ndb.compacting = False
    return _replace(script, character, plan, store, written, before, gate, now)


def summary_message(kind, audience, members, summary, model, now):
    """Return the ``[CONTEXT SUMMARY]`` system message standing for ``members``."""
    return compaction_message(
        "system",
        f"{SUMMARY_MARKER}\n{SUMMARY_PREAMBLE}\n{summary}",
        kind,
        audience,
        members,
        model,
        now,
    )


def summaries_written(kind, summaries, model, now):
    """Return, for each ``(audience, messages, summary text)`` of ``summaries``, the
    audience, the ``[CONTEXT SUMMARY]`` message standing for the messages and the
    synthesis entry's :class:`~ai.helpers.journal.EntryText`. Reads no database."""
    return [
        (
            audience,
            summary_message(kind, audience, members, summary, model, now),
            members,
            entry_text(
                f"{SYNTHESIS_MARKER}\n{summary}",
                "compaction",
                importance=7,
                tags=["compaction", "synthesis"],
                # As long as the summary: it already fitted the context it now stands in.
                max_chars=None,
            ),
        )
        for audience, members, summary in summaries
    ]


def _replace(script, character, plan, store, written, before, gate, now):
    """Store the summaries in place of ``plan``'s messages and archive them; return the
    result.

    Args:
        plan (CompactionPlan): What was compacted, read at ``plan.read_at``.
        store (ConversationHistory): The history, counting with the model the summaries
            were counted with.
        written (list): What :func:`summaries_written` returned.
        before (ContextUsage): The context's usage when the compaction started.
        gate (dict): What the quality gate did (``facts_checked``, ``facts_appended``...),
            for the result.
        now (datetime): When the summaries were written.
    """
    kind, to_compact = plan.kind, plan.messages
    compacted_tokens = sum(message["token_count"] for message in to_compact)
    markers = [(marker, members) for _, marker, members, _ in written]
    summary_tokens = sum(marker["metadata"]["summary_token_count"] for marker, _ in markers)
    successive = max(marker["metadata"]["successive_compactions"] for marker, _ in markers)
    if summary_tokens >= compacted_tokens:
        error = (
            f"the summary ({summary_tokens} tokens) is not smaller than the "
            f"{compacted_tokens} tokens it would replace"
        )
        logger.log_warn(f"AI {script.label}: {kind} compaction refused: {error}")
        remember_refused(script, kind, to_compact)
        return {"success": False, "kind": kind, "error": error, REFUSED_FOR_SIZE: True}
    try:
        record, stored = replace_recorded(
            script,
            store,
            kind,
            plan.strategy,
            now,
            lambda record: store.replace_with_summaries(
                to_compact, markers, plan.read_at, record=record
            ),
            compacted_tokens - summary_tokens,
            before.history_tokens,
        )
    except CompactionRefused as refused:
        remember_refused(script, kind, to_compact)
        return refused.result
    for (audience, _, _, synthesis), message in zip(written, stored):
        write_entry(
            character,
            synthesis,
            entry_id=f"compact_{now.strftime('%Y%m%d_%H%M%S')}",
            # The summary message; the messages it replaced link to it (``replaced_by``).
            source_message_ids=[message["id"]],
            audience=audience,
        )
    if successive == ACCURACY_WARNING_AT:  # once, not at every later compaction
        logger.log_warn(
            f"AI {script.label}: this summary is {summary_depth(successive)}; summaries of "
            "summaries lose accuracy: check the journal's synthesis entries"
        )
    result = {
        "compacted_messages": len(to_compact),
        "summary_tokens": summary_tokens,
        "successive_compactions": successive,
        "summary_id": stored[0]["id"],
        "summary_ids": [message["id"] for message in stored],
        **gate,
        "notes": list(plan.notes),
    }
    return finish(script, character, record, before, result, describe_report("summary", gate))


@defer.inlineCallbacks
def compact_hybrid(script, character, plan, before, config, extract=None):
    """The ``hybrid`` strategy: mask old tool outputs, then summarize only when that did not
    bring usage under the threshold of ``plan.kind`` (the emergency one in an emergency,
    else the sleep one), or, for a builder's compaction, when masking changed nothing.

    Each step that ran writes its own record (``aicompact/undo`` takes the summary back
    first). The result is that of the last step that changed the history, the other step's
    under its name (``masking`` or ``summary``); when the summary ran, its token and usage
    figures span both steps.
    """
    masked = mask_tool_outputs(script, character, plan, before, config)
    now = measure_context(script, character)
    limit = kind_threshold(config, plan.kind)
    # A builder who asks for a compaction gets one: the summary, when masking did nothing.
    if now.usage < limit and (masked.get("success") or plan.kind != "manual"):
        return {**masked, "strategy": "hybrid"}
    to_compact, read_at = yield old_messages(script, plan.kind, now, config)
    tokens = sum(message["token_count"] for message in to_compact)
    summarized = replace(
        plan,
        strategy="summary",
        messages=to_compact,
        message_count=len(to_compact),
        tokens=tokens,
        history_tokens=now.history_tokens,
        read_at=read_at,
    )
    if to_compact:
        summary = yield compact_with_summary(script, character, summarized, now, config, extract)
    else:
        summary = within_preserve_window(now, config)
    if not summary.get("success"):
        if masked.get("success"):
            return {**masked, "strategy": "hybrid", "summary": summary}
        return {**summary, "strategy": "hybrid", "masking": masked}
    return {
        **summary,
        "strategy": "hybrid",
        "masking": masked,
        "original_tokens": before.history_tokens,
        "usage_before": before.usage,
        "reduction_pct": (1 - summary["new_tokens"] / before.history_tokens) * 100,
    }


# The function that runs each compact_strategy, called with (script, character, plan,
# usage before, config, extract) and firing with (or returning) the result dict.
RUNNERS = {
    "summary": compact_with_summary,
    "masking": mask_tool_outputs,
    "assistant_runs": compact_assistant_runs,
    "hybrid": compact_hybrid,
}
