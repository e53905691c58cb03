"""When an automatic compaction cannot make room: it escalates, and converges.

A sleep or emergency compaction first lets its ``compact_strategy`` replace the messages
older than the preserve window. A summary is asked for only when those messages are worth
one (:func:`worth_summarizing`) and are not those of a summary refused before
(:func:`refused_before`); else, or when the strategy leaves usage over the kind's threshold
(a summary refused as not smaller or as a stall, nothing worth masking), it escalates:

1. a smaller preserve floor: the newest message and half the preserved tokens are kept
   (``ai.sleep.common.old_messages``), chosen before the strategy runs;
2. masking the old tool outputs (``ai.sleep.masking``), no model call;
3. archiving the older messages whole (``ai.sleep.archiving``), after the pre-compaction
   extraction when the compaction has not run it yet: what is archived unsummarized keeps
   its facts in the journal;
4. when usage is still over the threshold: one notice to builders, on the log channel and
   in the log, until the frame or the window changes.

A summary whose call failed does not escalate: the model may answer next time, and the
guard against repeated compactions (``ai.sleep.common.is_stuck``) holds until then.

A window too small for this to work is refused when it is set
(:func:`check_window_fits_frame`).
"""

import math

from evennia.utils import logger
from twisted.internet import defer

from ..context_usage import ContextUsage, describe_frame, measure_context, measure_frame
from ..log_channel import post_to_log_channel
from ..signals import CompactionPlan
from ..utils.markers import SUMMARY_MARKER, SUMMARY_PREAMBLE
from ..utils.message_format import is_summary
from ..utils.token_counter import count_message_tokens
from ..utils.value_checks import ConfigError
from ..utils.wording import percent, plural
from .archiving import archive_oldest
from .common import PRESERVE_ROOM_SHARE, kind_threshold, old_messages
from .masking import mask_tool_outputs

# A summary is worth asking for when the messages are at least this many times the
# smallest summary: its marker, its reference line and a few lines of text.
SUMMARY_WORTH_FACTOR = 2
MIN_SUMMARY_TEXT_TOKENS = 40
# What a refused summary's result carries, so that the next attempt does something else.
REFUSED_FOR_SIZE = "refused_for_size"


def smallest_summary_tokens(model):
    """Return the tokens of the smallest useful ``[CONTEXT SUMMARY]`` message."""
    marker = {"role": "system", "content": f"{SUMMARY_MARKER}\n{SUMMARY_PREAMBLE}\n"}
    return count_message_tokens(marker, model) + MIN_SUMMARY_TEXT_TOKENS


def worth_summarizing(messages, model):
    """Return whether ``messages`` hold enough tokens for a summary to be smaller."""
    tokens = sum(message["token_count"] for message in messages)
    return tokens >= SUMMARY_WORTH_FACTOR * smallest_summary_tokens(model)


def room_history_needs(model):
    """Return the tokens history needs beside the frame under the emergency threshold: the
    preserved newest messages may take ``PRESERVE_ROOM_SHARE`` of that room, and the rest
    must hold messages worth a summary."""
    worth = SUMMARY_WORTH_FACTOR * smallest_summary_tokens(model)
    return math.ceil(worth / (1 - PRESERVE_ROOM_SHARE))


def smallest_window(frame_tokens, threshold, model):
    """Return the smallest context limit, a multiple of 100, whose share under ``threshold``
    holds a frame of ``frame_tokens`` and the room history needs."""
    hundreds = (frame_tokens + room_history_needs(model)) / threshold / 100
    return math.ceil(round(hundreds, 6)) * 100


def check_window_fits_frame(script, max_tokens):
    """Refuse a ``max_context_tokens`` under :func:`smallest_window` for the prompt's frame.

    Below it no emergency compaction can bring usage under the threshold: every tick would
    compact in vain, or archive what it could have summarized.

    Raises:
        ConfigError: naming the frame's size, the room history needs and the least window.
    """
    if script.obj is None or max_tokens is None:
        return
    # Rendered now, without an event: the least window does not depend on the last call.
    frame_tokens, parts = measure_frame(script, script.obj)
    usage = ContextUsage(frame_tokens, 0, max_tokens, 0, parts)
    threshold = script.get_config("compact_emergency_threshold")
    model = script.history.model
    least = smallest_window(usage.frame_tokens, threshold, model)
    if max_tokens >= least:
        return
    raise ConfigError(
        f"max_context_tokens={max_tokens} refused: the prompt without any history is "
        f"already {describe_frame(usage)}, and history needs {room_history_needs(model)} "
        f"beside it under the {percent(threshold)} emergency threshold (a summary worth making and "
        f"the newest messages); use at least {least:,}"
    )


def attempt_key(messages):
    """Return what identifies a compaction attempt: its first and last message ids."""
    return (messages[0]["id"], messages[-1]["id"]) if messages else None


def remember_refused(script, kind, messages):
    """Remember that a ``kind`` summary of ``messages`` was refused for its size."""
    refused = dict(script.ndb.refused_compactions or {})
    refused[kind] = attempt_key(messages)
    script.ndb.refused_compactions = refused


def refused_before(script, kind, messages):
    """Return whether the last refused ``kind`` summary tried these same ``messages``."""
    return (script.ndb.refused_compactions or {}).get(kind) == attempt_key(messages)


@defer.inlineCallbacks
def summary_split(script, kind, before, config):
    """Return the messages an automatic summary replaces and their revision.

    The preserve window's split, unless its messages are too few for a summary or were
    refused before: then the smaller floor's (which may be no better; the strategy then
    makes no model call and the compaction escalates). When the frame alone reaches the
    threshold, no floor is lowered: nothing would make room.

    Returns:
        Deferred: Fires with ``(messages, revision)``.
    """
    messages, read_at = yield old_messages(script, kind, before, config)
    model = script.history.model
    if worth_summarizing(messages, model) and not refused_before(script, kind, messages):
        return messages, read_at
    if frame_leaves_no_room(before, kind_threshold(config, kind)):
        return messages, read_at
    return (yield old_messages(script, kind, before, config, floor=1))


def needs_room(script, character, kind, config, result):
    """Return the context's usage when ``result`` left it over the ``kind`` threshold for
    want of room (not for a model that failed, nor a veto), else None."""
    if result.get("vetoed") or result.get("model_failed"):
        return None
    if (result.get("summary") or {}).get("model_failed"):  # hybrid's summary step
        return None
    usage = measure_context(script, character)
    return usage if usage.usage >= kind_threshold(config, kind) else None


def frame_leaves_no_room(usage, threshold):
    """Return whether the prompt without history alone reaches ``threshold``: then no
    compaction can help, and none should take messages out of the live context."""
    return usage.frame_tokens >= threshold * usage.max_tokens


@defer.inlineCallbacks
def make_room(script, character, kind, config, result, extract=None, usage=None):
    """Mask, then archive the oldest messages whole, until usage is under the threshold.

    The archive first leaves live the summaries that open the history (the one just written
    above all), and takes them too only when that was not enough: a summary that has grown
    past the room history has is archived like the rest (still searchable, and journaled).
    ``extract`` (see ``compact_conversation_history``) runs before the first archive, unless
    it ran already in this compaction. ``usage`` is the context as last measured, when the
    history has not changed since.

    Returns:
        Deferred: Fires with the result of the last step that changed the history (else
        ``result``), with ``escalation``: each step's outcome.
    """
    threshold = kind_threshold(config, kind)
    steps, final = {}, result
    steps_to_try = (
        ("masking", mask_tool_outputs, False),
        ("archive", archive_oldest, True),
        ("archive with summaries", archive_oldest, False),
    )
    now = usage
    for name, runner, keep_summaries in steps_to_try:
        now = now or measure_context(script, character)
        if now.usage < threshold or frame_leaves_no_room(now, threshold):
            break
        messages, read_at = yield _older(script, kind, now, config, keep_summaries)
        extracted = getattr(extract, "ran", False)
        if messages and runner is archive_oldest and extract and not extracted:
            yield extract()
            now = measure_context(script, character)
            messages, read_at = yield _older(script, kind, now, config, keep_summaries)
        if not messages:
            continue
        tokens = sum(message["token_count"] for message in messages)
        plan = CompactionPlan(
            kind, name, messages, len(messages), tokens, now.history_tokens, read_at
        )
        step = yield defer.maybeDeferred(runner, script, character, plan, now, config)
        now = None
        steps[name] = step.get("error") or step.get("reason") or "done"
        if step.get("success"):
            final = step
    after = measure_context(script, character)
    if after.usage >= threshold:
        tell_no_room(script, character, kind, after, threshold, final)
    if not steps:
        return result
    return {**final, "escalation": {"first": brief(result), **steps}}


@defer.inlineCallbacks
def _older(script, kind, usage, config, keep_summaries):
    """Return a Deferred firing with the messages older than the smaller preserve floor,
    and their revision; without the summaries that open the history when
    ``keep_summaries``."""
    messages, read_at = yield old_messages(script, kind, usage, config, floor=1)
    while keep_summaries and messages and is_summary(messages[0]):
        messages = messages[1:]
    return messages, read_at


def brief(result):
    """Say in a few words what a compaction step did."""
    if result.get("success"):
        return "done"
    return result.get("error") or result.get("reason") or "nothing"


def tell_no_room(script, character, kind, usage, threshold, result):
    """Tell builders, once until the frame or the window changes, that no compaction can
    bring usage under ``threshold``."""
    said = (usage.frame_tokens, usage.max_tokens)
    if script.ndb.no_room_told == said:
        return
    script.ndb.no_room_told = said
    text = (
        f"{character.key} cannot make room in its context ({kind} compaction): "
        f"{what_is_too_large(usage, threshold, result)}. Raise max_context_tokens, or offer "
        "fewer tools (context_overrides); see docs/context.md."
    )
    logger.log_err(f"AI {script.label}: {text}")
    post_to_log_channel(script, text)


def what_is_too_large(usage, threshold, compaction):
    """Say why usage is still over ``threshold`` after ``compaction``, naming the real cause."""
    if compaction.get("skipped") or not compaction.get("success"):
        failed = compaction.get("error") or compaction.get("reason")
        cause = f"nothing was compacted: {failed}"
    else:
        cause = f"{plural(usage.message_count, 'message')} left"
    if usage.frame_tokens >= usage.max_tokens * threshold:
        return (
            f"{cause}; the prompt without history alone is {describe_frame(usage)} of "
            f"max_context_tokens {usage.max_tokens}"
        )
    return (
        f"{cause}; the prompt is {describe_frame(usage)} and the history kept "
        f"{usage.history_tokens} tokens in {plural(usage.message_count, 'message')}"
    )
