"""Handing things over: ``give``, the shipped dangerous tool (it changes the world)."""

from .base import Tool, ToolResult
from .registry import register_tool
from .targets import resolve_entity


def give(ctx, item, recipient):
    """Give ``item``, which the assistant carries, to ``recipient`` in its room."""
    carried = ctx.character.search(item.strip(), location=ctx.character, quiet=True)
    if len(carried) != 1:
        held = ", ".join(obj.key for obj in ctx.character.contents) or "nothing"
        return ToolResult(ok=False, content=f"You carry no single {item!r}; you carry: {held}.")
    target, error = resolve_entity(ctx.character, recipient)
    if error:
        return ToolResult(ok=False, content=error)
    thing = carried[0]
    if not thing.move_to(target, quiet=True, move_type="give"):
        return ToolResult(ok=False, content=f"{thing.key} could not be given to {target.key}.")
    ctx.character.location.msg_contents(
        f"{ctx.character.key} gives {thing.key} to {target.key}.", from_obj=ctx.character
    )
    return ToolResult(
        ok=True,
        content=f"You gave {thing.key} to {target.key}.",
        data={"item": thing.dbref, "recipient": target.dbref},
    )


register_tool(
    Tool(
        name="give",
        description="Give something you carry to someone here.",
        parameters={
            "type": "object",
            "properties": {
                "item": {"type": "string", "minLength": 1, "description": "What you carry."},
                "recipient": {
                    "type": "string",
                    "minLength": 1,
                    "description": 'Who gets it: a name here or a dbref like "#6".',
                },
            },
            "required": ["item", "recipient"],
            "additionalProperties": False,
        },
        categories=frozenset({"dangerous"}),
        handler=give,
    )
)
