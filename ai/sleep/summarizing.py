"""The summary call of a compaction: a transcript cut to the summarizing model's window.

Messages that do not fit the window together are summarized in chunks of whole tool-call
units (a unit too large on its own is cut in its middle for the call alone), and the
partial summaries are merged by one more call. Every strategy that writes a summary
(``summary``, ``hybrid``, ``assistant_runs``) calls :func:`summarize`.
"""

from twisted.internet import defer

from ..litellm_loader import model_input_window
from ..llm_interaction import (
    SUMMARY_MAX_WORDS,
    context_window,
    generate_context_summary,
    summary_instructions,
    summary_model,
)
from ..prompt_assembly import history_units
from ..utils.markers import SUMMARY_MARKER
from ..utils.token_counter import count_message_tokens, count_tokens, stored_tokens
from ..utils.wording import plural

# Room the summary call needs beside the transcript and its instructions: the answer
# (about two tokens a word, to be safe), the transcript's header and message framing.
SUMMARY_ANSWER_TOKENS = SUMMARY_MAX_WORDS * 2 + 50
# A transcript chunk is never made smaller than this, however small the window.
MIN_CHUNK_TOKENS = 200
EMPTY_SUMMARY = "the summary came back empty"
TOO_LARGE = "the summary call would not fit"
CALL_FAILED = "summary call failed"


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
def summarize(script, messages, instructions=None):
    """Summarize ``messages``; in chunks, merged into one summary, when they do not fit.

    The partial summaries are merged by one more call when they fit its window together;
    otherwise they are joined as they are (merging again could loop without shrinking).

    Args:
        instructions (tuple, optional): ``(prompt, request after the transcript)`` in place
            of the summary's own (``summary_instructions``).

    Returns:
        Deferred: Fires with ``(summary text or None, error text or None)``.
    """
    model = summary_model(script)
    instructions = instructions or summary_instructions(script)
    reserve = sum(count_tokens(text, model) for text in instructions) + SUMMARY_ANSWER_TOKENS
    limit = max(summarizer_window(script) - reserve, MIN_CHUNK_TOKENS)
    summaries = []
    chunks = chunk_for_window(messages, limit, model)
    for chunk in chunks:
        summary, error = yield _summarize_once(script, chunk, instructions)
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
    merged = yield _summarize_once(script, partial, instructions)
    return merged


@defer.inlineCallbacks
def _summarize_once(script, messages, instructions):
    """Make one summary call; return ``(summary, None)`` or ``(None, why it failed)``.

    A call that would not fit the summarizing model's window is not sent (a chunk is never
    smaller than ``MIN_CHUNK_TOKENS``, however small the window).
    """
    model = summary_model(script)
    payload = sum(count_tokens(text, model) for text in instructions)
    payload += sum(stored_tokens(message, model) for message in messages)
    window = summarizer_window(script)
    if payload > window:
        return None, f"{TOO_LARGE}: {payload} tokens, over the {window}-token window"
    answer = yield generate_context_summary(script, messages, instructions=instructions)
    if not answer.ok:
        return None, f"{CALL_FAILED} ({answer.error_kind}): {answer.error}"
    if not answer.content.strip():
        return None, EMPTY_SUMMARY
    return answer.content.strip(), None


def describe_mechanically(messages):
    """Say what a run of messages held, for a chunk whose summary came back empty."""
    tools = sorted(
        {call["function"]["name"] for m in messages for call in m.get("tool_calls") or ()}
    )
    used = f"; tools used: {', '.join(tools)}" if tools else ""
    return f"({plural(len(messages), 'message')} in which the summary found nothing to keep{used}.)"
