"""Speaking: ``say`` makes the assistant talk in its room."""

from ..utils.text_tool_calls import looks_like_markup
from .base import Tool, ToolResult
from .registry import register_tool


def say(ctx, message):
    """Say ``message`` aloud in the character's location, unless it is markup or code."""
    if looks_like_markup(message):
        return ToolResult(
            ok=False, content="Not said: that looks like code or markup. Say it in plain words."
        )
    ctx.character.at_say(message)
    return ToolResult(ok=True, content=f"You said: {message}", data={"message": message})


register_tool(
    Tool(
        name="say",
        description="Say your reply aloud to the players in the room. Ends your turn.",
        parameters={
            "type": "object",
            "properties": {
                "message": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 2000,
                    "description": "Your reply, one or two short sentences.",
                }
            },
            "required": ["message"],
            "additionalProperties": False,
        },
        categories=frozenset({"terminal", "communication"}),
        handler=say,
    )
)
