"""The ``delegate`` tool: hand one sub-task to a sub-agent and read back only its result.

The sub-agent works in a fresh, bounded context (``ai.sub_agents``): the live history grows
by this call and its result, however many calls the sub-task took.
"""

from .base import Tool, ToolResult
from .registry import register_tool

# What a task may say at most: it is the sub-agent's whole brief, not a transcript.
MAX_TASK_CHARS = 1000


def delegate(ctx, task):
    """Run ``task`` in a sub-agent; answer its result (a Deferred), or why it cannot run."""
    if ctx.sub_agent is None:
        return ToolResult(ok=False, content=f"delegate is not available in {ctx.context_type}.")
    return ctx.sub_agent(task.strip())


register_tool(
    Tool(
        name="delegate",
        description=(
            "Hand a sub-task to a helper that can look, read your journal and memories, and "
            "take notes; you get back only its result."
        ),
        parameters={
            "type": "object",
            "properties": {
                "task": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_TASK_CHARS,
                    "pattern": r"\S",
                    "description": "What to find out or do, in full.",
                },
            },
            "required": ["task"],
            "additionalProperties": False,
        },
        categories=frozenset({"delegation"}),
        handler=delegate,
    )
)
