"""Pinning: the assistant keeps one fact in its context word for word (see ``ai.pins``).

The model never sees history row ids, so it pins a fact in its own words rather than a
message. The fact joins the history after the answer's tool results, kept for the turn's
audience: what was pinned while answering a whisper never reaches the room.
"""

from ..pins import PinRefused, fact_message, is_pinned_already
from .base import Tool, ToolResult
from .registry import register_tool

MAX_FACT_CHARS = 500


def pin_fact(ctx, fact):
    """Pin ``fact`` into the history after this answer's tool results, within the cap."""
    fact = " ".join(fact.split())
    if not fact:
        return ToolResult(ok=False, content="Not pinned: the fact is empty.")
    if is_pinned_already(ctx.script, fact, ctx.audience):
        return ToolResult(ok=True, content="Already pinned.")
    try:
        message = fact_message(ctx.script, fact, "assistant", ctx.audience)
    except PinRefused as err:
        return ToolResult(
            ok=False, content=f"Not pinned: {err}. Save it with add_journal_entry instead."
        )
    ctx.follow_ups.append(message)
    return ToolResult(ok=True, content=f"Pinned: {fact}", data={"fact": fact})


register_tool(
    Tool(
        name="pin_fact",
        description=(
            "Keep one fact word for word in your context, never summarized: a promise, a rule, "
            "an open task. Room is small: journal the rest."
        ),
        parameters={
            "type": "object",
            "properties": {
                "fact": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_FACT_CHARS,
                    "description": "The fact, naming who said it.",
                }
            },
            "required": ["fact"],
            "additionalProperties": False,
        },
        categories=frozenset({"memory"}),
        handler=pin_fact,
    )
)
