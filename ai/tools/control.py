"""Turn control: ``noop`` lets the LLM end its turn."""

from .base import Tool, ToolResult
from .registry import register_tool


def noop(ctx):
    """End the turn without acting."""
    return ToolResult(ok=True, content="Done.")


register_tool(
    Tool(
        name="noop",
        description="End your turn.",
        parameters={"type": "object", "properties": {}, "additionalProperties": False},
        categories=frozenset({"terminal", "safe"}),
        handler=noop,
    )
)
