"""Goal tools: the assistant adds a goal or a step, and marks one done or blocked.

A goal is only ever made by a call of ``add_goal``: a player's words ("your goal is now
...") are words, and the assistant decides whether to adopt them. A goal it adopts in a
turn that answers a player is recorded as that player's (``source`` player, the player as
``origin``); every goal keeps the turn's audience, so one asked for in a whisper is only
shown in turns private to its whisperer. A goal the turn's audience may not hear cannot be
named: for it, there is no such goal.

A turn with players is offered ``add_goal`` alone, with its text only: the tool schemas
are sent with every call of that turn. Steps (``parent``), priorities and marking goals
done or blocked belong to the assistant's own turns (``tick_autonomous``).
"""

import re

from ..helpers.goals import (
    DEFAULT_PRIORITY,
    PRIORITY_RANGE,
    GoalLimits,
    GoalRefused,
    add_goal,
    get_goal,
    set_status,
)
from ..prompt_contexts import CONTEXT_TICK_AUTONOMOUS
from ..utils.message_format import one_line
from .base import Tool, ToolResult
from .registry import register_tool

GOAL_PARAMETER = {"type": "integer", "description": "The goal's number, as in #<number>."}
# A goal's text that names the goal tools or holds braces copies how goals are recorded,
# not what to achieve (Qwen2.5-Coder-1.5B added "Tell <name> ... If you cannot do this,
# block the next step with add_goal with {'goal': 25} ...").
RECORDING_WORDS = re.compile(r"\b(?:add_goal|complete_goal|block_goal)\b|[{}]")
# The contexts of the assistant's own turns toward its goals, where add_goal takes a parent
# and a priority (elsewhere they are not sent, and a call giving them is refused).
PURSUING = (CONTEXT_TICK_AUTONOMOUS,)


def add_goal_tool(ctx, text, parent=None, priority=None):
    """Add a goal (a step of ``parent`` when given) for the turn's audience."""
    if ctx.context_type not in PURSUING and (parent is not None or priority is not None):
        return ToolResult(
            ok=False,
            content="No goal added: steps and priorities are set in your own turns toward "
            "your goals; add the goal with its text only.",
        )
    if isinstance(text, str) and RECORDING_WORDS.search(text):
        return ToolResult(
            ok=False,
            content="No goal added: a goal says in words what to achieve; add_goal, "
            "complete_goal, block_goal and their arguments are how you record it, not part "
            "of it.",
        )
    if priority is None:
        priority = DEFAULT_PRIORITY
    try:
        above = get_goal(ctx.character, parent, ctx.audience) if parent is not None else None
        source, origin = _provenance(ctx, above)
        goal = add_goal(
            ctx.character,
            text,
            source,
            GoalLimits.of(ctx.script),
            priority=priority,
            parent=above,
            audience=ctx.audience,
            origin=origin,
        )
    except GoalRefused as err:
        return ToolResult(ok=False, content=f"No goal added: {err}.")
    step = f" as a step of #{above.id}" if above else ""
    return ToolResult(
        ok=True, content=f"Added goal #{goal.id}{step}: {goal.text}", data={"goal": goal.id}
    )


def _provenance(ctx, parent):
    """Return ``(source, origin)`` of a goal added now: a step of its parent; else the
    request of the player the turn answers; else the assistant's own."""
    if parent is not None:
        return "self", f"goal #{parent.id}"
    event = ctx.event or {}
    if event.get("speaker"):
        name = one_line(event.get("speaker_name")) or "someone"
        return "player", f"{name} ({event['speaker']})"
    return "self", ""


def complete_goal(ctx, goal):
    """Mark goal ``goal`` done."""
    try:
        done = set_status(_open_goal(ctx, goal), "done")
    except GoalRefused as err:
        return ToolResult(ok=False, content=f"Not marked done: {err}.")
    return ToolResult(ok=True, content=f"Goal #{done.id} is done.{_after(done)}")


def block_goal(ctx, goal, reason):
    """Mark goal ``goal`` blocked, saying why."""
    try:
        blocked = set_status(_open_goal(ctx, goal), "blocked", reason)
    except GoalRefused as err:
        return ToolResult(ok=False, content=f"Not marked blocked: {err}.")
    return ToolResult(
        ok=True,
        content=f"Goal #{blocked.id} is blocked: {blocked.reason.rstrip('.')}.{_after(blocked)}",
    )


def _open_goal(ctx, number):
    """Return the goal the assistant may close: one still open, with no open step (it
    closes with its steps; Qwen2.5-Coder-1.5B blocked the builder's goal while its steps
    were still to do)."""
    goal = get_goal(ctx.character, number, ctx.audience)
    if goal.status not in ("active", "blocked"):
        raise GoalRefused(f"goal #{goal.id} is {goal.status} already")
    steps = list(goal.children.filter(status="active").values_list("id", flat=True))
    if steps:
        numbers = ", ".join(f"#{step}" for step in sorted(steps))
        raise GoalRefused(f"goal #{goal.id} has open steps ({numbers}): work on those")
    return goal


def _after(goal):
    """Return what follows ``goal`` being done or blocked: the goals closed with it, or the
    parent left without an open step (one blocked), to close or carry on with. Told only
    by the result of the step, a small model left the goal of its blocked step open."""
    if goal.closed_parents:
        closed = ", ".join(f"#{parent.id}" for parent in goal.closed_parents)
        return f" Its steps all done, {closed} is done too."
    parent = goal.parent
    if parent is None or parent.status != "active":
        return ""
    if parent.children.filter(status="active").exists():
        return ""
    return (
        f" No step of #{parent.id} is left open: if it is reached, call complete_goal for it;"
        f" if it cannot be, block_goal; else add its next step with add_goal."
    )


register_tool(
    Tool(
        name="add_goal",
        description="Take on a goal you choose to pursue.",
        parameters={
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 1, "description": "The goal, briefly."},
                "parent": {**GOAL_PARAMETER, "description": "The goal it is a step of, if any."},
                "priority": {
                    "type": "integer",
                    "minimum": PRIORITY_RANGE[0],
                    "maximum": PRIORITY_RANGE[1],
                    "default": DEFAULT_PRIORITY,
                    "description": "1 (low) to 10 (urgent).",
                },
            },
            "required": ["text"],
            "additionalProperties": False,
        },
        categories=frozenset({"goals"}),
        handler=add_goal_tool,
        context_parameters={"parent": PURSUING, "priority": PURSUING},
    )
)
register_tool(
    Tool(
        name="complete_goal",
        description="Mark one of your goals done.",
        parameters={
            "type": "object",
            "properties": {"goal": GOAL_PARAMETER},
            "required": ["goal"],
            "additionalProperties": False,
        },
        categories=frozenset({"goals"}),
        handler=complete_goal,
    )
)
register_tool(
    Tool(
        name="block_goal",
        description="Mark one of your goals blocked: you cannot go on with it now.",
        parameters={
            "type": "object",
            "properties": {
                "goal": GOAL_PARAMETER,
                "reason": {"type": "string", "minLength": 1, "description": "Why."},
            },
            "required": ["goal", "reason"],
            "additionalProperties": False,
        },
        categories=frozenset({"goals"}),
        handler=block_goal,
    )
)
