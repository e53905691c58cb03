"""Speaking: ``say`` makes the assistant talk in its room, or whisper in a private turn.

What the model's words send to players is first made :func:`spoken` (plain text, see
``ai.utils.speech``, without the speaker tag a small model copies), then said in lines of
at most ``SPEECH_LIMIT`` characters: a longer answer is said in parts, and what is beyond
``MAX_SPEECH_PARTS`` of them is cut, with a mark players see. Nothing is dropped unsaid.
"""

import re

from ..audience import listeners_of
from ..utils.columns import fitted
from ..utils.speech import plain_speech, speech_parts
from ..utils.text_tool_calls import looks_like_markup
from .base import Tool, ToolResult
from .registry import register_tool

# The longest line the assistant says at once, and how many lines one answer may take.
SPEECH_LIMIT = 2000
MAX_SPEECH_PARTS = 4


def spoken(character, text):
    """Return what players may hear of the model's ``text``: plain, without a speaker tag."""
    return without_own_name(character, plain_speech(text))


def speak(character, message, audience=None):
    """Say ``message`` to the room, or whisper it to ``audience`` (dbrefs) only, in parts
    when it is longer than ``SPEECH_LIMIT`` characters.

    Returns:
        tuple: ``(said, report)``: the words said (a cut marked), and how they were said,
        for the tool result (``You said: ...``, ``You whispered to <name>: ...``).
    """
    parts, left_out = speech_parts(message, SPEECH_LIMIT, MAX_SPEECH_PARTS)
    listeners = listeners_of(audience)
    for part in parts:
        if not audience:
            character.at_say(part)
        elif listeners:
            character.at_say(part, whisper=True, receivers=listeners)
    names = ", ".join(obj.key for obj in listeners) or "nobody"
    how = f"You whispered to {names}" if audience else "You said"
    if len(parts) > 1:
        how += f", in {len(parts)} parts"
    if left_out:
        how += f" (too long: the last {left_out} characters were cut)"
    said = " ".join(parts)
    return said, f"{how}: {said}"


def without_own_name(character, text):
    """Return ``text`` without a leading ``<the assistant's name>:`` or ``You:``, the
    transcript formats a small model copies into its replies ("Fennick: Thank you..." from
    Fennick, "You: I see." after the system prompt's example)."""
    names = f"(?:{re.escape(character.key)}|you)"
    prefix = re.match(rf"\s*\**{names}\**\s*:\s*", text or "", re.I)
    return text[prefix.end() :] if prefix and text[prefix.end() :].strip() else text


def tell_room(location, text, **kwargs):
    """Show ``text`` to everyone in ``location`` as it is written.

    Evennia's ``msg_contents`` reads its text as a template (``{key}`` fields, ``$func()``
    calls): a player's braces or a held call's arguments (``give ({"item": ...})``) raised
    a KeyError there. The text goes in as the value of the template's one field instead.
    ``kwargs`` go to ``msg_contents`` (``exclude``, ``from_obj``).
    """
    location.msg_contents("{text}", mapping={"text": text}, **kwargs)


def emote(character, text, audience=None):
    """Show ``text`` (a pose the contrib words, never the model's speech) to the room, or to
    ``audience`` (dbrefs) only, wrapped to a client's default width."""
    text = fitted(plain_speech(text))
    if not audience:
        tell_room(character.location, text, from_obj=character)
        return
    for listener in listeners_of(audience):
        listener.msg(text, from_obj=character)


def say(ctx, message):
    """Say ``message`` to the turn's audience, unless it is markup or code."""
    message = spoken(ctx.character, message)
    if not message:
        return ToolResult(ok=False, content="Not said: it holds only control characters.")
    if looks_like_markup(message):
        return ToolResult(
            ok=False, content="Not said: that looks like code or markup. Say it in plain words."
        )
    said, report = speak(ctx.character, message, ctx.audience)
    return ToolResult(ok=True, content=report, data={"message": said})


register_tool(
    Tool(
        name="say",
        description="Say your reply aloud. Ends your turn.",
        parameters={
            "type": "object",
            "properties": {
                "message": {
                    "type": "string",
                    "minLength": 1,
                    "description": "One or two short sentences.",
                }
            },
            "required": ["message"],
            "additionalProperties": False,
        },
        categories=frozenset({"terminal", "communication"}),
        handler=say,
    )
)
