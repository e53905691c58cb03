"""How the offline engine breaks a goal into steps and works on one.

It is no model: every goal gets the same three steps around its own words, and a step it
is asked to work on is done at once (``complete_goal``, then ``noop``), so that a goal is
broken down and pursued to its end over a few autonomous ticks. It reads the instructions
of ``ai.goal_decomposition`` and ``ai.autonomy`` as any model would: from the last user
message.
"""

import re

# "Goal #<n> to break down: <text>" (goal_decompose's pending event).
_TO_BREAK_DOWN = re.compile(r"Goal #(?P<number>\d+) to break down: (?P<text>[^\n]+)")
# "... Work on your goal #<n>: <text>" (tick_autonomous's pending event).
_TO_WORK_ON = re.compile(r"Work on your goal #(?P<number>\d+): (?P<text>[^\n]+)")


def steps_for(text):
    """Return the numbered steps the engine writes for a goal of ``text``."""
    goal = text.strip().rstrip(".")
    return f"1. Look around for what needs doing\n2. Do it: {goal}\n3. Check that it is done"


def goal_work(messages, names):
    """Return the engine's answer to a goal's pending event, or None if it is none.

    Args:
        messages (list): The chat messages sent, oldest first.
        names (list): The names of the offered tools.

    Returns:
        tuple or None: ``(text, None)`` for a text answer, or ``(None, (name, arguments))``
        for one tool call.
    """
    users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    asked = _TO_BREAK_DOWN.search(users[-1]) if users else None
    if asked and not names:
        return steps_for(asked["text"]), None
    if "complete_goal" not in names:
        return None
    working = _TO_WORK_ON.search(users[-1]) if users else None
    if working is None:
        return None
    # The step is done once a tool said so (this turn, or the turn before).
    done = re.compile(rf"#{working['number']} is done\b")
    if any(m.get("role") == "tool" and done.search(str(m.get("content"))) for m in messages):
        return None, ("noop", {})
    return None, ("complete_goal", {"goal": int(working["number"])})
