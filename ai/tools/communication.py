"""Speaking: ``say`` makes the assistant talk in its room, or whisper in a private turn."""

import re

from ..audience import listeners_of
from ..utils.text_tool_calls import looks_like_markup
from .base import Tool, ToolResult
from .registry import register_tool


def speak(character, message, audience=None):
    """Say ``message`` to the room, or whisper it to ``audience`` (dbrefs) only.

    Returns:
        str: How it was said, for the tool result (``You said`` or ``You whispered to``).
    """
    if not audience:
        character.at_say(message)
        return "You said"
    listeners = listeners_of(audience)
    if listeners:
        character.at_say(message, whisper=True, receivers=listeners)
    return f"You whispered to {', '.join(obj.key for obj in listeners) or 'nobody'}"


def without_own_name(character, text):
    """Return ``text`` without a leading ``<the assistant's name>:`` or ``You:``, the
    transcript formats a small model copies into its replies ("Fennick: Thank you..." from
    Fennick, "You: I see." after the system prompt's example)."""
    names = f"(?:{re.escape(character.key)}|you)"
    prefix = re.match(rf"\s*\**{names}\**\s*:\s*", text or "", re.I)
    return text[prefix.end() :] if prefix and text[prefix.end() :].strip() else text


def emote(character, text, audience=None):
    """Show ``text`` (a pose, not speech) to the room, or to ``audience`` (dbrefs) only."""
    if not audience:
        character.location.msg_contents(text, from_obj=character)
        return
    for listener in listeners_of(audience):
        listener.msg(text, from_obj=character)


def say(ctx, message):
    """Say ``message`` to the turn's audience, unless it is markup or code."""
    message = without_own_name(ctx.character, message)
    if looks_like_markup(message):
        return ToolResult(
            ok=False, content="Not said: that looks like code or markup. Say it in plain words."
        )
    how = speak(ctx.character, message, ctx.audience)
    return ToolResult(ok=True, content=f"{how}: {message}", data={"message": message})


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
                    "maxLength": 2000,
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
