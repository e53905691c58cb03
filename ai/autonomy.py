"""What an idle awake tick does for the assistant's goals: break one down, or work on one.

On an awake tick with no pending event (and ``autonomy_enabled``), the tick asks whether
the assistant has an active goal (of the database once, then kept in memory until a goal
is written: ``helpers.idle_checks``); without one, nothing else runs (see
docs/benchmarks.md, "Idle and reflection ticks"). With one, the tick does at most one of these:

1. ``goal_decompose`` for the most urgent goal of its own (a step of no goal) never broken
   into steps (see ``ai.goal_decomposition``). A failure is retried after
   ``autonomous_interval`` x 2^n ticks (n: its failures in a row, kept on the goal, so a
   reload does not retry at once; 16 times the interval at most), and not after
   ``MAX_DECOMPOSE_FAILURES``: the goal is then pursued whole.
2. A ``tick_autonomous`` turn toward the next step (the first goal without active steps in
   the active tree, most urgent first), at most every ``autonomous_interval`` idle ticks.
   A turn that achieves nothing (only safe tools such as ``noop``, no tool call, and no
   goal changed) doubles the wait, up to 16 times the interval; progress resets it. The
   turn ends before its next model call when a player's event comes: it is answered next.
   A goal still active after ``goal_turn_limit`` turns on it is marked blocked, saying so
   (``helpers.goals.count_turn``), and the next step is worked on: a small model can
   otherwise repeat a step it cannot do (give again what it gave) while it is awake.

Ticks are counted in ``script.ndb``: a reload starts the autonomous interval afresh.
Autonomy does not keep the assistant awake: a tick without a player's event counts
towards ``sleep_after_idle_ticks`` whatever it did, and an assistant asleep pursues
nothing (its goals wait for it to wake).
"""

from django.utils import timezone
from evennia.utils import logger
from twisted.internet import defer

from .goal_decomposition import start_decomposition
from .helpers.goals import (
    awaiting_decomposition,
    count_turn,
    goal_urgency,
    has_active_goals,
    next_step,
)
from .models import Goal
from .prompt_contexts import CONTEXT_TICK_AUTONOMOUS, get_context_config
from .tool_execution import run_react_loop
from .tools import get_tool, tools_for
from .utils.message_format import one_line

# The longest wait, in multiples of autonomous_interval.
BACKOFF_CAP = 16
MAX_DECOMPOSE_FAILURES = 5
STEP_INSTRUCTION = (
    "No one is waiting for an answer now. Work on your goal #{number}: {text}{step_of}"
    "{steps}\n"
    "Take the next step with your tools: only tool calls act, and what you write is not "
    "said.{actions} When the goal is reached, call complete_goal with "
    '{{"goal": {number}}}; if you cannot go on with it, call block_goal with "goal" {number} '
    'and the "reason"; call noop only when the step must wait for someone.'
)
# The categories of the tools a step names as its ways to act (``utils.tool_categories``).
ACTING_CATEGORIES = {"world", "communication"}


def backoff_ticks(interval, failures):
    """Return the ticks to wait after ``failures`` fruitless attempts in a row."""
    return interval * min(2**failures, BACKOFF_CAP)


def _state(script):
    state = script.ndb.autonomy
    if state is None:
        state = script.ndb.autonomy = {"tick": 0, "last_turn": None, "misses": 0, "retry": {}}
    return state


@defer.inlineCallbacks
def pursue_goals(script, character, config):
    """Do what an idle awake tick does for the goals (see the module's docstring).

    Returns:
        Deferred: Fires with None when nothing ran, else a dict: ``status`` (``decomposed``,
        ``not_decomposed`` or ``autonomous``) and what ran.
    """
    if not config["autonomy_enabled"] or not has_active_goals(character):
        return None
    if script.ndb.decomposition is not None:
        return None  # a builder's aigoal/decompose is at work
    state = _state(script)
    state["tick"] += 1
    interval = config["autonomous_interval"]
    goal = _due_decomposition(character, config, state)
    if goal is not None:
        done = yield start_decomposition(script, character, goal)
        if not done.added:
            state["retry"][goal.id] = state["tick"] + backoff_ticks(
                interval, done.goal.decompose_failures
            )
        status = "decomposed" if done.added else "not_decomposed"
        return {"status": status, "goal": goal.id, "decomposition": done}
    if state["last_turn"] is not None:
        if state["tick"] - state["last_turn"] < backoff_ticks(interval, state["misses"]):
            return None
    goal = next_step(character)
    if goal is None:
        return None
    loop, progress = yield run_autonomous_turn(script, character, goal)
    state["last_turn"] = state["tick"]
    limited = False
    if loop.stop_reason != "yielded":
        limited = count_turn(goal, config["goal_turn_limit"])
        if limited:
            logger.log_info(f"AI {script.label}: goal #{goal.id} blocked: {goal.reason}")
        state["misses"] = 0 if progress or limited else state["misses"] + 1
    return {
        "status": "autonomous",
        "goal": goal.id,
        "loop": loop,
        "progress": progress,
        "turn_limit_reached": limited,
        "reply": " ".join(loop.said),
    }


def _due_decomposition(character, config, state):
    """Return the most urgent goal to break down now, or None."""
    retry = state["retry"]
    for goal in awaiting_decomposition(character, config["goal_max_depth"]):
        failures = goal.decompose_failures
        if failures >= MAX_DECOMPOSE_FAILURES:
            continue
        if failures and goal.id not in retry:
            # Failures kept from before a reload: wait for them as if it had not happened.
            retry[goal.id] = state["tick"] + backoff_ticks(config["autonomous_interval"], failures)
        if retry.get(goal.id, 0) <= state["tick"]:
            return goal
    return None


@defer.inlineCallbacks
def run_autonomous_turn(script, character, goal):
    """Run one ``tick_autonomous`` turn toward ``goal``, for the goal's audience.

    The pending event asks for the next step of ``goal``; the ``goal_urgency`` signal comes
    from its priority. The turn yields to a player's event between two model calls.

    Returns:
        Deferred: Fires with ``(LoopResult, progress)``, ``progress`` telling whether a
        goal changed or a tool that is not merely safe ran.
    """
    started = timezone.now()
    parent = goal.parent
    step_of = f" (a step of #{parent.id}: {one_line(parent.text)})" if parent else ""
    config = get_context_config(CONTEXT_TICK_AUTONOMOUS, script)
    event = {
        "type": "goal_step",
        "goal": goal.id,
        "instruction": STEP_INSTRUCTION.format(
            number=goal.id,
            text=one_line(goal.text),
            step_of=step_of,
            steps=_closed_steps(goal),
            actions=_ways_to_act(config),
        ),
    }
    signals = dict(script.context_signals(), goal_urgency=goal_urgency(goal))
    loop = yield run_react_loop(
        script,
        character,
        CONTEXT_TICK_AUTONOMOUS,
        context_config=config,
        event=event,
        signals=signals,
        audience=goal.audience,
        yields_to_events=True,
    )
    changed = Goal.objects.filter(db_object_id=character.id, updated_at__gte=started).exists()
    acted = any("safe" not in get_tool(name).categories for name in loop.tools_called)
    progress = changed or acted
    logger.log_info(
        f"AI {script.label}: autonomous turn on goal #{goal.id}: {loop.stop_reason}, "
        f"{'progress' if progress else 'no progress'}"
    )
    return loop, progress


def _closed_steps(goal):
    """Return what became of ``goal``'s steps, when it has some and none is open (the
    turn then works on the goal itself): " (its steps: #4 done; #5 blocked: <reason>)"."""
    steps = goal.children.order_by("id")
    if not steps:
        return ""
    told = [
        f"#{step.id} {step.status}"
        + (f": {one_line(step.reason).rstrip('.')}" if step.status != "done" else "")
        for step in steps
    ]
    return f" (its steps: {'; '.join(told)})"


def _ways_to_act(config):
    """Return the sentence naming the tools ``config`` offers that act in the world or
    speak, as a small model reads them (" To act in the world: give(item, recipient),
    look(target), say(message)."), or "" when it offers none: in a listing of a dozen
    tools, a small model called none of them and ended each step with noop."""
    offered = tools_for(config.tool_filter, config.allowed_tool_categories)
    acting = [
        f"{tool.name}({', '.join(tool.parameters.get('properties') or {})})"
        for tool in sorted(offered, key=lambda tool: tool.name)
        if tool.categories & ACTING_CATEGORIES
    ]
    return f" To act in the world: {', '.join(acting)}." if acting else ""
