"""The builders' view of an assistant's goals, and their say in them."""

import re

from evennia.utils.ansi import raw

from ..goal_decomposition import start_decomposition
from ..helpers.goals import (
    DEFAULT_PRIORITY,
    GoalLimits,
    GoalRefused,
    add_goal,
    get_goal,
    goal_tree,
    move_goal,
    resume_goal,
    set_status,
)
from ..models import GOAL_STATUSES
from .common import AssistantCommand, find_assistant, privately

# ``[#<parent>] <text> [; priority <n>]``
_ADDED = re.compile(
    r"^(?:#(?P<parent>\S+)\s+)?(?P<text>.*?)(?:\s*;\s*priority\s+(?P<priority>\S+))?$", re.S
)


class CmdAiGoal(AssistantCommand):
    """
    List an assistant's goals, give it one, and close or break one down.

    Usage:
      aigoal [<assistant>]
      aigoal/add [<assistant>] = [#<parent>] <text> [; priority <1-10>]
      aigoal/done [<assistant>] = <number>
      aigoal/drop [<assistant>] = <number> [<reason>]
      aigoal/decompose [<assistant>] = <number>
      aigoal/move [<assistant>] = <number> <parent number or none>
      aigoal/resume [<assistant>] = <number>

    Switches:
      add       - give the assistant a goal (a step of #<parent> if given)
      done      - mark a goal done (its open steps are dropped)
      drop      - drop a goal, and its open steps
      decompose - ask the model now to break a goal into 2 to 6 steps
      move      - make a goal a step of another (or of none)
      resume    - make a blocked or dropped goal active again

    The plain form lists every goal, the most urgent first, each step under
    its goal: its number, status, priority (when not 5), where it came from
    and who may hear it. An assistant pursues its active goals when no one
    is talking to it (autonomy_enabled, every autonomous_interval ticks),
    and breaks a new goal into steps first; a goal whose steps are all done
    (or dropped) is done with its last one. A goal still active after
    goal_turn_limit turns on it is marked blocked. A goal asked for in a
    whisper stays private to its whisperer. Limits: goal_max_active,
    goal_max_depth and goal_max_chars (see aiconfig).

    Examples:
      aigoal helper
      aigoal/add helper = Greet everyone who comes in ; priority 7
      aigoal/add helper = #3 Learn the names of the regulars
      aigoal/done helper = 4
      aigoal/drop helper = 3 no longer needed
      aigoal/decompose helper = 3
      aigoal/resume helper = 5
    """

    key = "aigoal"
    switch_options = ("add", "done", "drop", "decompose", "move", "resume")
    locks = "cmd:perm(Builder)"
    help_category = "AI"

    def func(self):
        assistant = find_assistant(self.caller, self.lhs.strip())
        if assistant is None:
            return
        switch = self.switches[0] if self.switches else None
        if switch is None:
            self.page(self.listing(assistant))
            return
        if self.rhs is None or not self.rhs.strip():
            self.refuse(f"aigoal/{switch} needs '= ...' after the assistant; see help aigoal.")
        try:
            getattr(self, f"do_{switch}")(assistant, self.rhs.strip())
        except GoalRefused as err:
            self.tell(f"Refused: {err}.")

    def listing(self, assistant):
        tree = goal_tree(assistant, statuses=GOAL_STATUSES)
        if not tree:
            return f"{assistant.key} has no goals. Give it one with aigoal/add."
        lines = [f"Goals of {assistant.key}, the most urgent first:"]
        for goal, depth in tree:
            lines.append("  " * depth + privately(_line(goal), goal.audience))
        return "\n".join(lines)

    def do_add(self, assistant, text):
        match = _ADDED.match(text)
        parent = get_goal(assistant, _number(match["parent"])) if match["parent"] else None
        priority = _number(match["priority"]) if match["priority"] else DEFAULT_PRIORITY
        goal = add_goal(
            assistant,
            match["text"],
            "builder",
            GoalLimits.of(assistant.assistant_script),
            priority=priority,
            parent=parent,
            origin=f"{self.caller.key} ({self.caller.dbref})",
        )
        self.tell(f"{assistant.key} has a new goal: {_line(goal)}")

    def do_done(self, assistant, text):
        goal = set_status(get_goal(assistant, _number(text)), "done")
        closed = "".join(f", and with it #{parent.id}" for parent in goal.closed_parents)
        self.tell(f"Goal #{goal.id} of {assistant.key} is done{closed}.")

    def do_drop(self, assistant, text):
        number, _, reason = text.partition(" ")
        reason = reason.strip() or f"dropped by {self.caller.key}"
        goal = set_status(get_goal(assistant, _number(number)), "dropped", reason)
        self.tell(f"Goal #{goal.id} of {assistant.key} is dropped: {raw(goal.reason)}")

    def do_move(self, assistant, text):
        number, _, target = text.partition(" ")
        goal = get_goal(assistant, _number(number))
        target = target.strip().lstrip("#")
        parent = None if target.lower() in ("", "none") else get_goal(assistant, _number(target))
        move_goal(goal, parent, GoalLimits.of(assistant.assistant_script))
        under = f"a step of #{parent.id}" if parent else "a goal of its own"
        self.tell(f"Goal #{goal.id} of {assistant.key} is now {under}.")

    def do_resume(self, assistant, text):
        goal = get_goal(assistant, _number(text))
        resume_goal(goal, GoalLimits.of(assistant.assistant_script))
        self.tell(f"Goal #{goal.id} of {assistant.key} is active again.")

    def do_decompose(self, assistant, text):
        goal = get_goal(assistant, _number(text))
        if goal.status != "active":
            self.refuse(f"Goal #{goal.id} is {goal.status}; only an active goal is broken down.")
        self.tell(f"Asking {assistant.key}'s model to break goal #{goal.id} down...")
        script = assistant.assistant_script
        if script.ndb.decomposition is not None:
            self.refuse(f"{assistant.key} is breaking a goal down already; try again soon.")
        running = start_decomposition(script, assistant, goal)
        running.addCallback(lambda done: self.tell(_decomposed(done)))
        running.addErrback(lambda failure: self.tell(f"Failed: {failure.getErrorMessage()}"))


def _number(text):
    """Return ``text`` (``3`` or ``#3``) as a goal number, or refuse it."""
    text = (text or "").strip().lstrip("#")
    if not text.isdigit():
        raise GoalRefused(f"{text!r} is not a goal number")
    return int(text)


def _line(goal):
    """Return a goal as builders read it: number, status, priority, origin and text."""
    status = goal.status + (f" ({raw(goal.reason)})" if goal.reason else "")
    priority = f", priority {goal.priority}" if goal.priority != DEFAULT_PRIORITY else ""
    origin = f" from {raw(goal.origin)}" if goal.origin else ""
    return f"#{goal.id} {status}{priority}, {goal.source}{origin}: {raw(goal.text)}"


def _decomposed(done):
    goal = done.goal
    if not done.added:
        return f"Goal #{goal.id} was not broken down: {done.why}. It is unchanged."
    steps = "\n".join(f"  #{step.id} {raw(step.text)}" for step in done.added)
    return f"Goal #{goal.id} now has {len(done.added)} steps:\n{steps}"
