"""The assistant's goals: one :class:`~ai.models.Goal` row per goal, a tree by ``parent``.

A goal is added within three limits (the script's ``goal_max_active``, ``goal_max_depth``
and ``goal_max_chars``), each refusal naming its limit; a parent is never made its own
descendant. Goals are closed, never deleted: done, blocked or dropped (with a reason);
closing a goal drops its active sub-goals, and a goal whose steps are all done or dropped,
at least one done, is done with them. A goal still active after ``goal_turn_limit``
autonomous turns on it is blocked (a builder resumes it with ``aigoal/resume``). What a
goal came from is kept: its ``source`` (builder, player, self or decomposition) and
``origin`` (who asked, or which goal it is a step of). A goal keeps the ``audience`` of
the turn that made it (see ``ai.audience``): one asked for in a whisper is only ever shown
in turns private to its whisperer.
"""

from django.db import transaction
from django.db.models import F

from ..audience import may_hear
from ..models import GOAL_SOURCES, GOAL_STATUSES, Goal
from ..utils.message_format import one_line
from .idle_checks import HAS_ACTIVE_GOALS, remembered

PRIORITY_RANGE = (1, 10)
DEFAULT_PRIORITY = 5
# Priorities from which the goal_urgency signal says "high", and up to which "low".
URGENT_PRIORITY = 8
LOW_PRIORITY = 3
# Statuses a goal may be closed with (``active`` reopens a blocked one).
CLOSED_STATUSES = ("done", "blocked", "dropped")
# Ends the reason of a goal that goal_turn_limit blocked.
TURN_LIMIT_MARK = "(goal_turn_limit)"


class GoalRefused(ValueError):
    """A goal operation that was refused; its message names the limit or the reason."""


class GoalLimits:
    """The limits goals are added within, read from a script's configuration."""

    def __init__(self, max_active, max_depth, max_chars):
        self.max_active = max_active
        self.max_depth = max_depth
        self.max_chars = max_chars

    @classmethod
    def of(cls, script):
        """Return the limits configured on ``script``."""
        return cls(
            script.get_config("goal_max_active"),
            script.get_config("goal_max_depth"),
            script.get_config("goal_max_chars"),
        )


def has_active_goals(character):
    """Tell whether ``character`` has an active goal: one indexed query, whose answer is kept
    until a goal of the character is written (see ``idle_checks``)."""
    return remembered(
        character,
        HAS_ACTIVE_GOALS,
        lambda: Goal.objects.filter(db_object_id=character.id, status="active").exists(),
    )


def get_goal(character, number, audience=False):
    """Return goal ``number`` of ``character``.

    Args:
        character (AssistantCharacter): Whose goal.
        number (int): The goal's id.
        audience (list or None or False): Refuse a goal that this audience may not hear,
            as if it did not exist; False (the default) for a builder, who sees every goal.

    Raises:
        GoalRefused: when there is no such goal (for that audience).
    """
    goal = None
    if isinstance(number, int) and not isinstance(number, bool):
        goal = Goal.objects.filter(db_object_id=character.id, id=number).first()
    if goal is None or (audience is not False and not may_hear(goal.audience, audience)):
        raise GoalRefused(f"there is no goal #{number}")
    return goal


def depth_of(goal):
    """Return the level of ``goal`` in its tree: 1 for a goal without a parent."""
    depth = 1
    while goal.parent_id is not None:
        goal = goal.parent
        depth += 1
    return depth


def add_goal(
    character,
    text,
    source,
    limits,
    priority=DEFAULT_PRIORITY,
    parent=None,
    audience=None,
    origin="",
):
    """Add one active goal and return it.

    Args:
        character (AssistantCharacter): Whose goal.
        text (str): What the goal is, at most ``limits.max_chars`` characters.
        source (str): One of ``GOAL_SOURCES``.
        limits (GoalLimits): The limits it is added within.
        priority (int): 1 (low) to 10 (urgent).
        parent (Goal, optional): The active goal it is a step of.
        audience (list, optional): The dbrefs that may hear it; None for anyone. A sub-goal
            of a private goal is kept for the parent's audience when given none.
        origin (str): What it came from (who asked, a message, the parent).

    Raises:
        GoalRefused: naming the limit or the value refused, or the active goal of the same
            parent that has this text already; nothing is written.
    """
    text = check_text(text, limits)
    check_priority(priority)
    if source not in GOAL_SOURCES:
        raise GoalRefused(f"source must be one of {', '.join(GOAL_SOURCES)}")
    if parent is not None:
        if parent.db_object_id != character.id:
            raise GoalRefused(f"there is no goal #{parent.id}")
        if parent.status != "active":
            raise GoalRefused(f"goal #{parent.id} is {parent.status}, not active")
        if depth_of(parent) + 1 > limits.max_depth:
            raise GoalRefused(
                f"goal #{parent.id} is at the deepest level goal_max_depth "
                f"({limits.max_depth}) allows"
            )
        audience = audience or parent.audience
    same = Goal.objects.filter(
        db_object_id=character.id, status="active", parent=parent, text__iexact=text
    ).first()
    if same is not None:
        raise GoalRefused(f"goal #{same.id} is that goal already")
    _check_room(character.id, limits)
    return Goal.objects.create(
        db_object_id=character.id,
        parent=parent,
        text=text,
        priority=priority,
        source=source,
        audience=sorted(audience) if audience else None,
        origin=one_line(origin)[:255],
    )


def _check_room(character_id, limits):
    """Refuse one more active goal when ``goal_max_active`` are active already."""
    active = Goal.objects.filter(db_object_id=character_id, status="active").count()
    if active >= limits.max_active:
        raise GoalRefused(
            f"already {active} active goals, the most goal_max_active ({limits.max_active}) allows"
        )


def check_text(text, limits):
    """Return a goal's text on one line, or refuse it naming ``goal_max_chars``."""
    if not isinstance(text, str):
        raise GoalRefused("a goal's text must be text")
    text = " ".join(text.split())
    if not text:
        raise GoalRefused("a goal needs text")
    if len(text) > limits.max_chars:
        raise GoalRefused(
            f"the text has {len(text):,} characters; goal_max_chars allows {limits.max_chars:,}"
        )
    return text


def check_priority(priority):
    """Refuse a priority that is not a whole number from 1 to 10."""
    low, high = PRIORITY_RANGE
    if not isinstance(priority, int) or isinstance(priority, bool) or not low <= priority <= high:
        raise GoalRefused(f"priority must be a whole number from {low} to {high}")


def set_status(goal, status, reason=""):
    """Mark ``goal`` done, blocked, dropped, or active again (its turns counted afresh);
    return it.

    A goal done or dropped drops its active sub-goals with it (they were steps to it), and
    closes the goals it was the last open step of (see ``_close_finished_parents``): the
    returned goal's ``closed_parents`` lists them.

    Raises:
        GoalRefused: for an unknown status, or a blocked or dropped goal without a reason.
    """
    if status not in GOAL_STATUSES:
        raise GoalRefused(f"status must be one of {', '.join(GOAL_STATUSES)}")
    reason = " ".join((reason or "").split())
    if status in ("blocked", "dropped") and not reason:
        raise GoalRefused(f"a {status} goal needs a reason")
    goal.closed_parents = []
    with transaction.atomic():
        goal.status, goal.reason = status, reason
        if status == "active":
            goal.turns = 0
        goal.save(update_fields=["status", "reason", "turns", "updated_at"])
        if status in ("done", "dropped"):
            for child in _active_descendants(goal):
                child.status, child.reason = "dropped", f"goal #{goal.id} is {status}"
                child.save(update_fields=["status", "reason", "updated_at"])
            goal.closed_parents = _close_finished_parents(goal)
    return goal


def resume_goal(goal, limits):
    """Make a blocked or dropped ``goal`` active again, its turns counted afresh; return it.

    Raises:
        GoalRefused: when the goal is active or done, when the goal it is a step of is not
            active (that one is resumed first), or when ``goal_max_active`` are active.
    """
    if goal.status not in ("blocked", "dropped"):
        raise GoalRefused(
            f"goal #{goal.id} is {goal.status}; only a blocked or dropped goal resumes"
        )
    parent = goal.parent
    if parent is not None and parent.status != "active":
        raise GoalRefused(
            f"goal #{goal.id} is a step of #{parent.id}, which is {parent.status}: resume "
            f"#{parent.id} first"
        )
    _check_room(goal.db_object_id, limits)
    return set_status(goal, "active")


def count_turn(goal, limit):
    """Count one autonomous turn spent on ``goal``; when it is still active after ``limit``
    turns (``goal_turn_limit``; 0: no limit), mark it blocked, saying so.

    Returns:
        bool: Whether the limit blocked it.
    """
    Goal.objects.filter(id=goal.id).update(turns=F("turns") + 1)
    goal.refresh_from_db(fields=["status", "reason", "turns"])
    if not limit or goal.status != "active" or goal.turns < limit:
        return False
    set_status(goal, "blocked", f"not reached in {goal.turns} turns {TURN_LIMIT_MARK}")
    return True


def _close_finished_parents(goal):
    """Mark done each active ancestor of ``goal`` whose steps are now all done or dropped,
    at least one done (a goal broken into steps is reached when its steps are); return
    them, nearest first."""
    closed, parent = [], goal.parent
    while parent is not None and parent.status == "active":
        statuses = set(parent.children.values_list("status", flat=True))
        if "done" not in statuses or not statuses <= {"done", "dropped"}:
            break
        parent.status, parent.reason = "done", "its steps are done"
        parent.save(update_fields=["status", "reason", "updated_at"])
        closed.append(parent)
        parent = parent.parent
    return closed


def _active_descendants(goal):
    found, frontier = [], [goal.id]
    while frontier:
        children = list(Goal.objects.filter(parent_id__in=frontier, status="active"))
        found += children
        frontier = [child.id for child in children]
    return found


def move_goal(goal, parent, limits):
    """Make ``goal`` a step of ``parent`` (None: a goal of its own); return it.

    Raises:
        GoalRefused: when ``parent`` is ``goal`` or one of its descendants (a loop), or
            the subtree would reach deeper than ``goal_max_depth``.
    """
    if parent is not None:
        ancestor = parent
        while ancestor is not None:
            if ancestor.id == goal.id:
                raise GoalRefused(
                    f"goal #{parent.id} is goal #{goal.id} or one of its steps: a goal "
                    "cannot be a step of itself"
                )
            ancestor = ancestor.parent
        if parent.db_object_id != goal.db_object_id:
            raise GoalRefused(f"there is no goal #{parent.id}")
        deepest = (depth_of(parent) if parent else 0) + _height(goal)
        if deepest > limits.max_depth:
            raise GoalRefused(
                f"its steps would reach level {deepest}; goal_max_depth allows {limits.max_depth}"
            )
    goal.parent = parent
    goal.save(update_fields=["parent", "updated_at"])
    return goal


def _height(goal):
    """Return the levels of ``goal``'s subtree, itself included."""
    height, frontier = 1, [goal.id]
    while frontier := list(
        Goal.objects.filter(parent_id__in=frontier).values_list("id", flat=True)
    ):
        height += 1
    return height


def urgency_key(goal):
    """Sort key of sibling goals: the highest priority first, then the oldest."""
    return (-goal.priority, goal.id)


def goal_tree(character, audience=False, statuses=("active",)):
    """Return ``[(goal, depth), ...]`` depth first, most urgent first at every level.

    A goal's steps follow it; a goal whose parent is not listed (another status, or an
    audience that may not hear it) is not listed either.

    Args:
        character (AssistantCharacter): Whose goals.
        audience (list or None or False): Only the goals this audience may hear; False
            for every goal (a builder's view).
        statuses (tuple): The statuses listed.
    """
    rows = Goal.objects.filter(db_object_id=character.id, status__in=statuses)
    goals = [g for g in rows if audience is False or may_hear(g.audience, audience)]
    listed = {goal.id for goal in goals}
    children = {}
    for goal in goals:
        parent = goal.parent_id if goal.parent_id in listed else None
        if goal.parent_id is None or parent is not None:
            children.setdefault(parent, []).append(goal)
    tree = []

    def walk(parent, depth):
        for goal in sorted(children.get(parent, ()), key=urgency_key):
            tree.append((goal, depth))
            walk(goal.id, depth + 1)

    walk(None, 1)
    return tree


def next_step(character):
    """Return the goal to work on now: the first goal without active steps in the active
    tree (most urgent first), or None."""
    tree = goal_tree(character)
    for index, (goal, depth) in enumerate(tree):
        following = tree[index + 1] if index + 1 < len(tree) else None
        if following is None or following[1] <= depth:
            return goal
    return None


def awaiting_decomposition(character, max_depth):
    """Return the active goals of their own (steps of no goal), most urgent first, that
    were never broken into steps: no sub-goal of any status. None when ``max_depth`` allows
    no steps."""
    if max_depth < 2:
        return []
    goals = Goal.objects.filter(
        db_object_id=character.id, status="active", parent__isnull=True, children__isnull=True
    )
    return sorted(goals, key=urgency_key)


def goal_urgency(goal):
    """Return the ``goal_urgency`` signal of pursuing ``goal``: high, normal or low."""
    if goal.priority >= URGENT_PRIORITY:
        return "high"
    return "low" if goal.priority <= LOW_PRIORITY else "normal"


def describe_goal(goal):
    """Return one goal as the model reads it: ``#3 <text> (priority 7, asked by <name>)``."""
    notes = [f"priority {goal.priority}"] if goal.priority != DEFAULT_PRIORITY else []
    if goal.source == "player" and goal.origin:
        notes.append(f"asked by {goal.origin}")
    return f"#{goal.id} {one_line(goal.text)}" + (f" ({', '.join(notes)})" if notes else "")
