"""Things in the world: ``look`` at them, and ``give``, the shipped dangerous tool (it
changes the world)."""

from evennia.utils.ansi import strip_ansi

from ..utils.columns import fitted
from ..utils.markers import NOT_SEEN
from .base import Tool, ToolResult
from .communication import tell_room
from .registry import register_tool
from .targets import around, resolve_entity

# What ``look`` returns at most: a long description is cut, not sent whole on every call.
MAX_LOOK_CHARS = 2000


def look(ctx, target=""):
    """Describe the room, or something or someone in it or carried, as a player sees it.

    Only what is here: a dbref elsewhere in the game is not looked up, so a player cannot
    have the assistant describe places it is not in.
    """
    viewer = ctx.character
    if not target.strip():
        seen = viewer.location
        if seen is None:
            return ToolResult(ok=False, content=f"{NOT_SEEN} you are nowhere.")
    else:
        found = viewer.search(target.strip(), quiet=True)
        exact = [obj for obj in found if obj.key.lower() == target.strip().lower()]
        found = exact or found
        if len(found) != 1:
            problem = "more than one thing matches" if found else "nothing here matches"
            return ToolResult(
                ok=False, content=f"{NOT_SEEN} {problem} {target!r}; here: {around(viewer)}."
            )
        seen = found[0]
    text = strip_ansi(seen.return_appearance(viewer) or seen.key).strip()
    if len(text) > MAX_LOOK_CHARS:
        text = text[:MAX_LOOK_CHARS] + " [...]"
    return ToolResult(ok=True, content=text, data={"target": seen.dbref})


def _what_and_whom(ctx, item, recipient):
    """Return ``(thing, target, None)`` for a ``give`` that can run now, else
    ``(None, None, error)`` naming what is wrong and what there is to choose from."""
    giver = ctx.character
    carried = giver.search(item.strip(), location=giver, quiet=True)
    if len(carried) != 1:
        held = ", ".join(obj.key for obj in giver.contents) or "nothing"
        return None, None, f"You carry no single {item!r}; you carry: {held}."
    target, error = resolve_entity(giver, recipient)
    if error:
        return None, None, error
    if target == giver:
        return None, None, f"You carry {carried[0].key} already: name someone else here."
    return carried[0], target, None


def check_give(ctx, item, recipient):
    """Return why ``give`` would fail now, or None (asked before it is held for a builder)."""
    return _what_and_whom(ctx, item, recipient)[2]


def give(ctx, item, recipient):
    """Give ``item``, which the assistant carries, to ``recipient`` in its room."""
    thing, target, error = _what_and_whom(ctx, item, recipient)
    if error:
        return ToolResult(ok=False, content=error)
    if not thing.move_to(target, quiet=True, move_type="give"):
        return ToolResult(ok=False, content=f"{thing.key} could not be given to {target.key}.")
    tell_room(
        ctx.character.location,
        fitted(f"{ctx.character.key} gives {thing.key} to {target.key}."),
        from_obj=ctx.character,
    )
    return ToolResult(
        ok=True,
        content=f"You gave {thing.key} to {target.key}.",
        data={"item": thing.dbref, "recipient": target.dbref},
    )


register_tool(
    Tool(
        name="look",
        description="Look at the room, or at someone or something here.",
        parameters={
            "type": "object",
            "properties": {
                "target": {
                    "type": "string",
                    "description": "A name here; empty for the room.",
                },
            },
            "additionalProperties": False,
        },
        categories=frozenset({"safe", "world"}),
        handler=look,
    )
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
                    "description": "A name here, or a dbref.",
                },
            },
            "required": ["item", "recipient"],
            "additionalProperties": False,
        },
        categories=frozenset({"dangerous", "world"}),
        handler=give,
        check=check_give,
    )
)
