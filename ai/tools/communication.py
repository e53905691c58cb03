"""Speaking: ``say`` makes the assistant talk in its room."""

from .base import Tool, ToolResult
from .registry import register_tool


def say(ctx, message):
    """Say ``message`` aloud in the character's location."""
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
