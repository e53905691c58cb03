"""How the offline engine answers a chat: deterministic replies and tool choices.

The pending event arrives as the last user message, written as ``<speaker> says: <words>``
(see ``ai.llm_interaction.render_event``). A question is answered from the best-matching
earlier line of the conversation; a greeting is returned; anything else is acknowledged.
When a speaking tool is offered, the reply goes through it and the turn then ends with
``noop`` (or plain text if ``noop`` is not offered).
"""

import hashlib
import json
import re
from dataclasses import dataclass, field

from .text_tools import is_question, keywords, words

SPEAK_TOOL_NAMES = ("say", "speak", "say_to_room")
_EVENT_LINE = re.compile(r"^(?P<speaker>.+?) (?:says|asks|tells you|whispers)[,:]\s*(?P<text>.*)$")
_GREETINGS = {"hello", "hi", "hey", "greetings", "morning", "evening"}


@dataclass
class Reply:
    """What the engine answers: text, or tool calls in OpenAI's format."""

    content: str | None = None
    tool_calls: list = field(default_factory=list)


def parse_event(content):
    """Split an event line into ``(speaker, words)``; the speaker is None if unknown."""
    first_line = (content or "").strip().splitlines()[0] if content else ""
    match = _EVENT_LINE.match(first_line)
    if not match:
        return None, first_line
    return match["speaker"].strip(), match["text"].strip().strip('"')


def tool_names(tools):
    """Return the names of the offered tool schemas."""
    return [tool.get("function", {}).get("name") for tool in tools or ()]


def make_tool_call(name, arguments, salt):
    """Build one OpenAI-style tool call with a deterministic id."""
    payload = json.dumps(arguments, sort_keys=True)
    digest = hashlib.sha1(f"{salt}|{name}|{payload}".encode()).hexdigest()[:12]
    return {
        "id": f"call_{digest}",
        "type": "function",
        "function": {"name": name, "arguments": payload},
    }


def _earlier_lines(messages):
    """Yield ``(speaker, text)`` for every line said before the pending event."""
    for message in messages[:-1]:
        if message.get("role") == "user":
            speaker, text = parse_event(message.get("content"))
            yield speaker, text
        elif message.get("role") == "system" and message is not messages[0]:
            for line in (message.get("content") or "").splitlines():
                if line.strip():
                    yield None, line.strip()


def best_recollection(question, messages):
    """Return ``(speaker, text)`` of the earlier line that shares most words with ``question``."""
    wanted = keywords(question)
    best, best_score = None, 0
    for speaker, text in _earlier_lines(messages):
        if is_question(text):
            continue
        score = len(wanted & keywords(text))
        if score >= best_score and score > 0:
            best, best_score = (speaker, text), score
    return best


def compose_reply(speaker, text, messages):
    """Return the words the assistant says back to ``speaker``."""
    who = speaker or "friend"
    if is_question(text):
        found = best_recollection(text, messages)
        if found is None:
            return f"I don't know that yet, {who}. Tell me and I will remember it."
        source, fact = found
        if source == speaker:
            return f"You told me: {fact}"
        if source:
            return f"{source} told me: {fact}"
        return f"From what I recall: {fact}"
    if set(words(text)[:2]) & _GREETINGS:
        return f"Hello, {who}! How can I help?"
    return f"Understood, {who}. I'll keep that in mind: {text}"


def _last_user_index(messages):
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return None


def respond(messages, tools=None):
    """Decide the engine's answer to a chat.

    Args:
        messages (list): The chat messages sent, oldest first.
        tools (list, optional): OpenAI-style tool schemas offered.

    Returns:
        Reply: Text or tool calls.
    """
    names = tool_names(tools)
    last_user = _last_user_index(messages)
    if last_user is None:
        return Reply(content="I am here.")
    turn = messages[last_user + 1 :]
    speaker, text = parse_event(messages[last_user].get("content"))
    reply_text = compose_reply(speaker, text, messages[: last_user + 1])
    speak_tool = next((name for name in SPEAK_TOOL_NAMES if name in names), None)
    if speak_tool is None:
        return Reply(content=reply_text)
    already_spoke = any(
        call["function"]["name"] == speak_tool
        for message in turn
        for call in message.get("tool_calls") or ()
    )
    if not already_spoke:
        return Reply(tool_calls=[make_tool_call(speak_tool, {"message": reply_text}, last_user)])
    if "noop" in names:
        return Reply(tool_calls=[make_tool_call("noop", {}, len(messages))])
    return Reply(content="")
