"""Chat messages: validation at the door of the history store, and how they are shown.

A message is refused here, with an error naming the field, rather than discovered by a
crash in a later tick or an API error when history is sent back to the model.

What players write reaches prompts only through :func:`quoted` (one JSON string: its line
breaks, quotes and markers stay inside it) or :func:`one_line`, so no player can start a
line of a prompt that looks like a summary, a role or an instruction.
"""

import json
import re
from operator import attrgetter

from .markers import GATE_HEADERS, NOTES_HEADER, SUMMARY_MARKER, SUMMARY_PREAMBLE
from .sentences import LIST_MARK

ROLES = ("system", "user", "assistant", "tool")
SENDABLE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
_SENDABLE = frozenset(SENDABLE_KEYS)
# How a builder's request (``aitask``) reads: the builder's words are data, as a player's.
REQUEST_VERB = "asks you as a builder"
# An event line as ``ai.prompt_rendering.render_event`` writes it: the words one quoted unit.
_EVENT_LINE = re.compile(
    rf"^(?P<speaker>.+?) (?P<verb>says|whispers to you|emotes|{REQUEST_VERB}), "
    r"(?P<text>\".*\")$"
)


class MessageValidationError(ValueError):
    """Raised for a message that the history store refuses."""


def _validate_tool_calls(tool_calls):
    if not isinstance(tool_calls, list):
        raise MessageValidationError("'tool_calls' must be a list of tool calls")
    for index, call in enumerate(tool_calls):
        where = f"tool_calls[{index}]"
        if not isinstance(call, dict):
            raise MessageValidationError(f"{where} must be a dict")
        if not isinstance(call.get("id"), str) or not call["id"]:
            raise MessageValidationError(f"{where} needs a non-empty string 'id'")
        function = call.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise MessageValidationError(f"{where} needs a 'function' with a string 'name'")
        if not isinstance(function.get("arguments", ""), str):
            raise MessageValidationError(f"{where}.function.arguments must be a JSON string")


def validate_message(message):
    """Check that ``message`` is a well-formed chat message, or raise.

    Args:
        message (dict): ``{role, content, ...}`` with optional ``name``, ``tool_calls``,
            ``tool_call_id`` and ``metadata``.

    Raises:
        MessageValidationError: naming the field that is wrong.
    """
    if not isinstance(message, dict):
        raise MessageValidationError(f"a message must be a dict, not {type(message).__name__}")
    role = message.get("role")
    if role not in ROLES:
        raise MessageValidationError(f"unknown role {role!r}: expected one of {', '.join(ROLES)}")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise MessageValidationError(
            f"'content' must be a string or None, not {type(content).__name__}"
        )
    tool_calls = message.get("tool_calls")
    if tool_calls:
        if role != "assistant":
            raise MessageValidationError("only an assistant message may carry 'tool_calls'")
        _validate_tool_calls(tool_calls)
    elif content is None:
        raise MessageValidationError(f"a {role} message without tool calls needs 'content'")
    if role == "tool" and not message.get("tool_call_id"):
        raise MessageValidationError("a tool result needs the 'tool_call_id' it answers")
    metadata = message.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise MessageValidationError("'metadata' must be a dict")
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise MessageValidationError("'name' must be a string")


def is_summary(message):
    """Return whether ``message`` is a compaction's ``[CONTEXT SUMMARY]`` (the contrib's own)."""
    return (message.get("metadata") or {}).get("type") == "compaction"


def summary_text(content):
    """Return a summary message's text without its marker and reference line (older
    summaries, stored before the reference line, have none)."""
    text = (content or "").strip().removeprefix(SUMMARY_MARKER).strip()
    return text.removeprefix(SUMMARY_PREAMBLE).strip()


def summary_items(text):
    """Yield ``(item, listed)`` for each line of a summary's text that states something:
    its list mark removed (``listed`` says it had one), the quality gate's headers left out,
    up to its notes."""
    for line in text.splitlines():
        item = LIST_MARK.sub("", line).strip()
        if item == NOTES_HEADER:
            return
        if item and item not in GATE_HEADERS:
            yield item, item != line.strip()


# What a summary of each depth is, in words (deeper ones: "a summary of summaries").
NESTED_SUMMARIES = {
    1: "a summary of messages",
    2: "a summary of a summary",
    3: "a summary of a summary of a summary",
}


def summary_depth(depth):
    """Return what a summary's depth (its metadata's ``successive_compactions``) means.

    The count is how deeply summaries nest, not how many compactions ran in a row: a
    summary of messages has depth 1, and each later summary that folds it in one more.
    """
    return f"{NESTED_SUMMARIES.get(depth, 'a summary of summaries')} (depth {depth})"


def tool_call_text(call):
    """Return one tool call as ``name(arguments)``, for transcripts and builders."""
    return f"{call['function']['name']}({call['function'].get('arguments') or ''})"


class StoredMessage(dict):
    """A message read from the history store, which remembers its sendable part.

    The live history is held in memory across ticks (see ``ai.history``) and sent again on
    every call; working out the sendable part once per message keeps a call's cost down.
    """

    __slots__ = ("_sent",)

    def sendable_part(self):
        """Return the part a chat API accepts, kept with the message: never to be changed."""
        try:
            return self._sent
        except AttributeError:
            self._sent = _sendable_part(self)
            return self._sent

    def sendable(self):
        """Return a fresh copy of the part a chat API accepts."""
        return dict(self.sendable_part())


_KEPT_PART = attrgetter("_sent")  # a StoredMessage's part, once it was worked out


class SendableMessages(list):
    """Messages a chat API accepts as they are (an assembled prompt's), never to be changed:
    a stored message's is the part it keeps. :func:`provider_copy` copies them without
    looking into each."""


def sendable(message):
    """Return the part of a stored message that a chat API accepts (no metadata), new.

    A tool-calling message without text gets an empty content: llama.cpp's server refuses
    a missing or null one.
    """
    if isinstance(message, StoredMessage):
        return message.sendable()
    return _sendable_part(message)


def sendable_messages(messages):
    """Return the sendable part of each of ``messages`` as :class:`SendableMessages`: a
    stored message's kept part (sent as a copy: :func:`provider_copy`), another's new."""
    if not isinstance(messages, (list, tuple)):
        messages = list(messages)  # read by position below
    parts, rest = SendableMessages(), iter(messages)
    while True:
        try:
            # A prompt's history is stored messages whose parts are kept: taken with no
            # Python step a message (thousands, on every call).
            parts.extend(map(_KEPT_PART, rest))
            return parts
        except AttributeError:
            message = messages[len(parts)]  # the first whose part is not kept
        parts.append(_part_of(message))  # a stored one's worked out now, and kept
        if not isinstance(message, StoredMessage):
            # Not stored: a loop's own messages, which come last, and what follows them.
            parts.extend(map(_part_of, rest))
            return parts


def _part_of(message):
    """Return a stored message's kept part, another's new."""
    if isinstance(message, StoredMessage):
        return message.sendable_part()
    return _sendable_part(message)


def payload_of(messages):
    """Return what a call sends of ``messages`` as :class:`SendableMessages`: an assembled
    prompt's as they are, another list's sendable parts, new. The thread that calls the
    provider sends a copy (:func:`provider_copy`)."""
    if isinstance(messages, SendableMessages):
        return messages
    return SendableMessages(sendable(message) for message in messages)


def provider_copy(messages):
    """Return a copy of sendable ``messages`` for a provider's client, so that what it does
    to them never reaches the prompt (whose messages may be the history's own parts)."""
    return list(map(dict, messages))


def _sendable_part(message):
    keys = message.keys()
    if keys <= _SENDABLE and "content" in keys and None not in message.values():
        return dict(message)  # already sendable: an assembled prompt's message
    sent = {key: message[key] for key in SENDABLE_KEYS if message.get(key) is not None}
    if sent.get("tool_calls") and "content" not in sent:
        sent["content"] = ""
    return sent


def quoted(text):
    """Return ``text`` as one double-quoted unit, line breaks and quotes escaped (JSON)."""
    return json.dumps(str(text or ""), ensure_ascii=False)


def unquoted(text):
    """Return the words of a :func:`quoted` unit, or None if ``text`` is not one."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def read_event(content):
    """Split an event line into ``(speaker, verb, words)``; speaker and verb are None if it
    is no event.

    Only the whole line in the contrib's format counts: the words are one quoted unit; the
    verb is ``says``, ``whispers to you``, ``emotes`` or ``REQUEST_VERB``.
    """
    content = (content or "").strip()
    match = _EVENT_LINE.match(content)
    text = unquoted(match["text"]) if match else None
    if text is None:
        return None, None, content
    return match["speaker"].strip(), match["verb"], text.strip()


def one_line(text):
    """Return ``text`` on one line: its line breaks shown as `` / ``."""
    return " / ".join(part.strip() for part in str(text or "").splitlines() if part.strip())


def is_masked(message):
    """Return whether ``message`` is the placeholder of a masked tool output."""
    return (message.get("metadata") or {}).get("type") == "masked"
