"""Context compaction: replace old history with one ``[CONTEXT SUMMARY]`` message.

The split keeps a preserve window of recent messages verbatim (the last
``compact_preserve_window`` messages or the most recent 20% of ``max_context_tokens``,
whichever keeps more) and never separates a tool-calling message from its results. Only
the messages to compact are sent to the summary call, in chunks when they do not fit the
summarizing model's window. Replacement is one transaction: the replaced messages are
archived (linked to their summary), never deleted; messages appended meanwhile stay; a
failed, empty or not-smaller summary changes nothing.
"""

from django.utils import timezone
from evennia.utils import logger
from twisted.internet import defer

from ..audience import audience_groups, with_audience
from ..config import compact_strategy
from ..context_usage import describe_frame, measure_context
from ..helpers.journal import add_entry
from ..history import HistoryChanged
from ..litellm_loader import model_input_window
from ..llm_interaction import (
    SUMMARY_MAX_WORDS,
    compaction_prompt,
    context_window,
    generate_context_summary,
    summary_model,
    summary_request,
)
from ..prompt_assembly import history_units
from ..utils.markers import SUMMARY_MARKER, SYNTHESIS_MARKER
from ..utils.message_format import is_summary
from ..utils.token_counter import count_message_tokens, count_tokens, stored_tokens
from .common import (
    old_messages,
    replace_recorded,
    save_figures,
    skipped,
    within_preserve_window,
)
from .masking import mask_tool_outputs
from .notify import announce_compaction

# From this many successive compactions on, summaries of summaries lose accuracy (said once).
ACCURACY_WARNING_AT = 3
# Room the summary call needs beside the transcript and its instructions: the answer
# (about two tokens a word, to be safe), the transcript's header and message framing.
SUMMARY_ANSWER_TOKENS = SUMMARY_MAX_WORDS * 2 + 50
# A transcript chunk is never made smaller than this, however small the window.
MIN_CHUNK_TOKENS = 200
EMPTY_SUMMARY = "the summary came back empty"


def summarizer_window(script):
    """Return the input window of the model that writes summaries."""
    model = script.get_config("compact_model")
    return (model and model_input_window(model)) or context_window(script)


def fit_for_summary(message, limit, model):
    """Return ``message``, or a copy cut to fit ``limit`` tokens for the summary call.

    Its content and its tool calls' arguments keep their head and tail; the middle is left
    out, more of it until the copy fits. Only the summary call sees the cut copy; the whole
    message stays in the archive.
    """
    tokens = stored_tokens(message, model)
    if tokens <= limit:
        return message
    share = limit / tokens * 0.9
    trimmed = message
    for _ in range(5):
        trimmed = {**message, "content": _cut_middle(message.get("content"), share)}
        if message.get("tool_calls"):
            trimmed["tool_calls"] = [
                {
                    **call,
                    "function": {
                        **call["function"],
                        "arguments": _cut_middle(call["function"].get("arguments"), share),
                    },
                }
                for call in message["tool_calls"]
            ]
        trimmed["token_count"] = count_message_tokens(trimmed, model)
        if trimmed["token_count"] <= limit:
            break
        share *= limit / trimmed["token_count"] * 0.9
    return trimmed


def _cut_middle(text, share):
    """Return ``text`` cut to about ``share`` of its length, its head and tail kept."""
    if not text or share >= 1:
        return text
    half = int(len(text) * share / 2)
    left_out = f" [... {len(text) - 2 * half} characters left out ...] "
    return f"{text[:half]}{left_out}{text[len(text) - half:]}"


def chunk_for_window(messages, limit, model):
    """Split messages into runs of whole units whose transcript fits ``limit`` tokens.

    A unit costs its messages' stored token counts (counted once, when stored), which
    include the per-message overhead and so bound the transcript lines from above. A unit
    too large for ``limit`` on its own has its messages cut to fit (:func:`fit_for_summary`).
    """
    if messages and sum(stored_tokens(message, model) for message in messages) <= limit:
        return [list(messages)]  # all of it fits: no unit to look for
    chunks, current, used = [], [], 0
    for unit in history_units(messages):
        cost = sum(stored_tokens(message, model) for message in unit)
        if cost > limit:
            unit = [fit_for_summary(message, limit // len(unit), model) for message in unit]
            cost = sum(message["token_count"] for message in unit)
        if current and used + cost > limit:
            chunks.append(current)
            current, used = [], 0
        current += unit
        used += cost
    if current:
        chunks.append(current)
    return chunks


@defer.inlineCallbacks
def summarize(script, messages):
    """Summarize ``messages``; in chunks, merged into one summary, when they do not fit.

    The partial summaries are merged by one more call when they fit its window together;
    otherwise they are joined as they are (merging again could loop without shrinking).

    Returns:
        Deferred: Fires with ``(summary text or None, error text or None)``.
    """
    model = summary_model(script)
    reserve = count_tokens(compaction_prompt(script), model) + SUMMARY_ANSWER_TOKENS
    reserve += count_tokens(summary_request(script), model)
    limit = max(summarizer_window(script) - reserve, MIN_CHUNK_TOKENS)
    summaries = []
    chunks = chunk_for_window(messages, limit, model)
    for chunk in chunks:
        summary, error = yield _summarize_once(script, chunk)
        if error == EMPTY_SUMMARY and len(chunks) > 1:
            # One chunk of tool traffic may hold nothing to keep: say what it was rather
            # than fail the whole compaction over it.
            summary, error = describe_mechanically(chunk), None
        if error:
            return None, error
        summaries.append(summary)
    if len(summaries) == 1:
        return summaries[0], None
    partial = [
        {
            "role": "system",
            "content": f"{SUMMARY_MARKER}\n{text}",
            "metadata": {"type": "compaction"},
        }
        for text in summaries
    ]
    if len(chunk_for_window(partial, limit, model)) > 1:
        return "\n".join(summaries), None
    merged = yield _summarize_once(script, partial)
    return merged


@defer.inlineCallbacks
def _summarize_once(script, messages):
    """Make one summary call; return ``(summary, None)`` or ``(None, why it failed)``."""
    answer = yield generate_context_summary(script, messages)
    if not answer.ok:
        return None, f"summary call failed ({answer.error_kind}): {answer.error}"
    if not answer.content.strip():
        return None, EMPTY_SUMMARY
    return answer.content.strip(), None


def describe_mechanically(messages):
    """Say what a run of messages held, for a chunk whose summary came back empty."""
    tools = sorted(
        {call["function"]["name"] for m in messages for call in m.get("tool_calls") or ()}
    )
    used = f"; tools used: {', '.join(tools)}" if tools else ""
    return f"({len(messages)} messages in which the summary found nothing to keep{used}.)"


def previous_successive_count(messages):
    """Return the successive-compaction count of the newest summary among ``messages``."""
    counts = [
        message["metadata"].get("successive_compactions", 1)
        for message in messages
        if is_summary(message)
    ]
    return counts[-1] if counts else 0


def is_stuck(script, kind):
    """Return whether a ``kind`` compaction would only repeat the last one that did not help.

    True when the last ``kind`` compaction left usage over its threshold and the history
    has not changed since.
    """
    return (script.ndb.stuck_compactions or {}).get(kind) == script.history.totals()


def record_outcome(script, kind, still_over):
    """Remember whether a ``kind`` compaction left usage over its threshold.

    The history's state is kept with it, so that :func:`is_stuck` holds until it changes.
    """
    stuck = dict(script.ndb.stuck_compactions or {})
    stuck[kind] = script.history.totals() if still_over else None
    script.ndb.stuck_compactions = stuck


@defer.inlineCallbacks
def compact_conversation_history(script, character, force=False, kind=None, extract=None):
    """Compact the assistant's history if it is over its threshold (or if forced), with
    its ``compact_strategy`` (see :data:`RUNNERS`).

    Args:
        script (AssistantScript): The assistant's script.
        character (AssistantCharacter): The assistant (for its journal).
        force (bool): Compact even below the threshold (emergencies, builders).
        kind (str, optional): ``sleep``, ``emergency`` or ``manual``, for logs and results.
        extract (callable, optional): Returns a Deferred; run just before a summary is made
            (pre-compaction extraction), never when no summary is made.

    Returns:
        Deferred: Fires with the result dict: ``skipped`` and ``reason``; or ``success``
        False and ``error``; or ``success`` True with the counts, ``original_tokens``,
        ``new_tokens`` (history tokens before and after), ``reduction_pct`` and more.
    """
    config = script.effective_config()
    kind = kind or ("emergency" if force else "sleep")
    if not config["compact_enabled"] and not force:
        return skipped("compaction disabled")
    if not len(script.history):
        return skipped("no history")
    before = measure_context(script, character)
    threshold = start_threshold(config)
    if before.usage < threshold and not force:
        return skipped(
            f"below threshold ({before.usage:.1%} < {threshold:.0%})", token_usage=before.usage
        )
    if script.ndb.compacting:
        return skipped("a compaction is already running")
    runner = RUNNERS[compact_strategy(config)]
    return (yield runner(script, character, kind, before, config, extract))


def start_threshold(config):
    """Return the usage at which a compaction with ``config``'s strategy is due: the sleep
    threshold, or the masking threshold when lower for the strategies that mask."""
    threshold = config["compact_sleep_threshold"]
    if compact_strategy(config) in ("masking", "hybrid"):
        return min(threshold, config["compact_mask_threshold"])
    return threshold


@defer.inlineCallbacks
def compact_with_summary(script, character, kind, before, config, extract=None):
    """The ``summary`` strategy: replace the old messages with one summary per audience.

    Args:
        before (ContextUsage): The context's usage when the compaction started.
        config (dict): The script's effective configuration.
        extract (callable, optional): Run before the summary call (see
            :func:`compact_conversation_history`).
    """
    to_compact, read_at = old_messages(script, kind, before, config)
    if not to_compact:
        return within_preserve_window(before, config)
    if extract:
        yield extract()
    script.ndb.compacting = True
    summaries = []
    try:
        # Each audience's messages are summarized apart, so that a summary never tells
        # the room what was whispered (see ai.audience).
        for audience, members in audience_groups(to_compact):
            summary, error = yield summarize(script, members)
            if error:
                logger.log_warn(f"AI {script.label}: {kind} compaction abandoned: {error}")
                return {"success": False, "kind": kind, "error": error}
            summaries.append((audience, members, summary))
    finally:
        script.ndb.compacting = False
    return _replace(script, character, kind, summaries, to_compact, read_at, before, "summary")


def summary_message(kind, audience, members, summary, model, now):
    """Return the ``[CONTEXT SUMMARY]`` system message standing for ``members``."""
    marker = {
        "role": "system",
        "content": f"{SUMMARY_MARKER}\n{summary}",
        "metadata": with_audience(
            {
                "type": "compaction",
                "kind": kind,
                "compacted_count": len(members),
                "compacted_at": now.isoformat(),
                "original_token_count": sum(message["token_count"] for message in members),
                "successive_compactions": previous_successive_count(members) + 1,
            },
            audience,
        ),
    }
    marker["metadata"]["summary_token_count"] = count_message_tokens(marker, model)
    return marker


def _replace(script, character, kind, summaries, to_compact, read_at, before, strategy):
    """Store the summaries in place of ``to_compact`` and archive them; return the result.

    The compaction is recorded (a ``CompactionRecord`` its summaries link to) in the same
    transaction, so that ``aicompact/undo`` can put the messages back.

    Args:
        summaries (list): ``(audience, messages, summary text)`` for each audience.
        read_at (int): The history's revision when ``to_compact`` was read.
        strategy (str): The compaction strategy that chose ``to_compact``.
    """
    # The store of the model now: the model may have changed during the summary call.
    store = script.history
    model = store.model
    compacted_tokens = sum(message["token_count"] for message in to_compact)
    now = timezone.now()
    markers = [
        (summary_message(kind, audience, members, summary, model, now), members)
        for audience, members, summary in summaries
    ]
    summary_tokens = sum(marker["metadata"]["summary_token_count"] for marker, _ in markers)
    successive = max(marker["metadata"]["successive_compactions"] for marker, _ in markers)
    if summary_tokens >= compacted_tokens:
        error = (
            f"the summary ({summary_tokens} tokens) is not smaller than the "
            f"{compacted_tokens} tokens it would replace"
        )
        logger.log_warn(f"AI {script.label}: {kind} compaction refused: {error}")
        return {"success": False, "kind": kind, "error": error}
    try:
        record, stored = replace_recorded(
            script,
            store,
            kind,
            strategy,
            now,
            lambda record: store.replace_with_summaries(
                to_compact, markers, read_at, record=record
            ),
        )
    except HistoryChanged as err:
        return {"success": False, "kind": kind, "error": str(err)}
    for (audience, _, summary), message in zip(summaries, stored):
        add_entry(
            character,
            f"{SYNTHESIS_MARKER}\n{summary}",
            source_type="compaction",
            importance=7,
            tags=["compaction", "synthesis"],
            entry_id=f"compact_{now.strftime('%Y%m%d_%H%M%S')}",
            # The summary message; the messages it replaced link to it (``replaced_by``).
            source_message_ids=[message["id"]],
            # As long as the summary: it already fitted the context it now stands in.
            max_chars=None,
            audience=audience,
        )
    script.db.last_compaction = now.isoformat()
    after = measure_context(script, character)
    reduction = (1 - after.history_tokens / before.history_tokens) * 100
    logger.log_info(
        f"AI {script.label}: Context compaction: {len(to_compact)} messages → summary, "
        f"{before.history_tokens}→{after.history_tokens} tokens ({reduction:.0f}% reduction)"
    )
    if successive == ACCURACY_WARNING_AT:  # once, not at every later compaction
        logger.log_warn(
            f"AI {script.label}: {successive} successive compactions; summaries of summaries "
            "lose accuracy: check the journal's synthesis entries"
        )
    result = {
        "success": True,
        "kind": kind,
        "compacted_messages": len(to_compact),
        "preserved_messages": before.message_count - len(to_compact),
        "original_tokens": before.history_tokens,
        "new_tokens": after.history_tokens,
        "reduction_pct": reduction,
        "summary_tokens": summary_tokens,
        "usage_before": before.usage,
        "usage_after": after.usage,
        "successive_compactions": successive,
        "summary_id": stored[0]["id"],
        "summary_ids": [message["id"] for message in stored],
        "strategy": strategy,
        "compaction_id": record.id,
    }
    save_figures(record, result)
    announce_compaction(script, character, result)
    return result


def what_is_too_large(usage, threshold, compaction):
    """Say why usage is still over ``threshold`` after ``compaction``, naming the real cause."""
    if compaction.get("skipped") or not compaction.get("success"):
        failed = compaction.get("error") or compaction.get("reason")
        cause = f"nothing was compacted: {failed}"
    else:
        cause = f"{usage.message_count} messages are left"
    if usage.frame_tokens >= usage.max_tokens * threshold:
        return (
            f"{cause}; the prompt without history alone is {describe_frame(usage)} of "
            f"max_context_tokens {usage.max_tokens}"
        )
    return (
        f"{cause}; the prompt is {describe_frame(usage)} and the history kept "
        f"{usage.history_tokens} tokens in {usage.message_count} messages"
    )


@defer.inlineCallbacks
def compact_hybrid(script, character, kind, before, config, extract=None):
    """The ``hybrid`` strategy: mask old tool outputs, then summarize only when that did not
    bring usage under the threshold of ``kind`` (the emergency one in an emergency, else the
    sleep one).

    Each step that ran writes its own record (``aicompact/undo`` takes the summary back
    first). The result is that of the last step that changed the history, the other step's
    under its name (``masking`` or ``summary``); when the summary ran, its token and usage
    figures span both steps.
    """
    masked = mask_tool_outputs(script, character, kind, before, config)
    now = measure_context(script, character)
    limit = config[
        "compact_emergency_threshold" if kind == "emergency" else "compact_sleep_threshold"
    ]
    if now.usage < limit:
        return {**masked, "strategy": "hybrid"}
    summary = yield compact_with_summary(script, character, kind, now, config, extract)
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


# The function that runs each compact_strategy, called with (script, character, kind,
# usage before, config, extract) and firing with (or returning) the result dict.
RUNNERS = {
    "summary": compact_with_summary,
    "masking": mask_tool_outputs,
    "hybrid": compact_hybrid,
}
