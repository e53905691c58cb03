"""goal_decompose: one single-action call (no tools) breaks an active goal into steps.

The call runs the ``goal_decompose`` context (system prompt, goals, pending event = the
goal) through the ReAct loop, for the goal's audience: a goal asked for in a whisper is
broken down with only what its whisperer may hear. The reply is read by
``ai.utils.goal_lists``, whatever its shape; it is used only when it holds
``MIN_SUB_GOALS`` to ``MAX_SUB_GOALS`` short sub-goals, all added at once or none. An
unusable reply leaves the goal as it was, is logged with the reason, and counts a failure
on the goal (``Goal.decompose_failures``), from which the caller backs off.
"""

from dataclasses import dataclass, field

from django.db import transaction
from evennia.utils import logger
from twisted.internet import defer

from .helpers.goals import GoalLimits, GoalRefused, add_goal
from .models import Goal
from .prompt_contexts import CONTEXT_GOAL_DECOMPOSE
from .tool_execution import run_react_loop
from .utils.goal_lists import usable_sub_goals
from .utils.message_format import one_line

MIN_SUB_GOALS = 2
MAX_SUB_GOALS = 6
DECOMPOSE_INSTRUCTION = (
    "Goal #{number} to break down: {text}\n"
    f"Write {MIN_SUB_GOALS} to {MAX_SUB_GOALS} sub-goals, one per line, as a numbered list."
)


@dataclass
class Decomposition:
    """What one decomposition did.

    Attributes:
        goal (Goal): The goal broken down.
        added (list): The sub-goals added (none when the reply was unusable).
        why (str): Why nothing was added, or "".
        reply (str): The model's reply.
    """

    goal: object
    added: list = field(default_factory=list)
    why: str = ""
    reply: str = ""


def start_decomposition(script, character, goal):
    """Start :func:`decompose_goal`, kept in ``script.ndb.decomposition`` until it ends, so
    that a tick does not break a goal down while a builder's ``aigoal/decompose`` does.

    Returns:
        Deferred: Fires with a :class:`Decomposition`.
    """
    running = script.ndb.decomposition = decompose_goal(script, character, goal)

    def ended(result):
        script.ndb.decomposition = None
        return result

    return running.addBoth(ended)


@defer.inlineCallbacks
def decompose_goal(script, character, goal):
    """Ask the model to break ``goal`` into sub-goals, and add them when the reply is usable.

    Returns:
        Deferred: Fires with a :class:`Decomposition`.
    """
    event = {
        "type": "goal",
        "goal": goal.id,
        "instruction": DECOMPOSE_INSTRUCTION.format(number=goal.id, text=one_line(goal.text)),
    }
    loop = yield run_react_loop(
        script, character, CONTEXT_GOAL_DECOMPOSE, event=event, audience=goal.audience, memories=[]
    )
    answer = loop.last_answer
    reply = (answer.content or "") if answer is not None and answer.ok else ""
    limits = GoalLimits.of(script)
    if answer is None or not answer.ok:
        items, why = [], f"the model did not answer ({loop.stop_reason})"
    else:
        items, why = usable_sub_goals(reply, MIN_SUB_GOALS, MAX_SUB_GOALS, limits.max_chars)
    result = Decomposition(goal, why=why, reply=reply)
    if items:
        _add_steps(character, result, items, limits)
    _count(script, result)
    return result


def _add_steps(character, result, items, limits):
    """Add ``items`` as the steps of ``result.goal``, all of them or none."""
    goal = Goal.objects.filter(id=result.goal.id).first()
    if goal is None or goal.status != "active" or goal.children.exists():
        result.why = "the goal changed while the model was answering"
        return
    try:
        with transaction.atomic():
            result.added = [
                add_goal(
                    character,
                    item,
                    "decomposition",
                    limits,
                    priority=goal.priority,
                    parent=goal,
                    audience=goal.audience,
                    origin=f"goal #{goal.id}",
                )
                for item in items
            ]
    except GoalRefused as err:
        result.added, result.why = [], str(err)
    result.goal = goal


def _count(script, result):
    """Keep the goal's count of failed decompositions, and log a failure with its reason."""
    goal = result.goal
    failures = 0 if result.added else goal.decompose_failures + 1
    Goal.objects.filter(id=goal.id).update(decompose_failures=failures)
    goal.decompose_failures = failures
    if not result.added:
        logger.log_warn(
            f"AI {script.label}: goal #{goal.id} not broken down ({result.why}); "
            f"{failures} failed attempt{'s' if failures != 1 else ''}"
        )
