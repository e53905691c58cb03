"""Dangerous tool calls held for a builder: what waits, who is told, and what became of it.

Where the execution pattern asks for confirmation, a dangerous tool (one that changes the
world) is not run: the call waits in ``script.db.awaiting_confirmation`` with its turn's
audience and the words the assistant meant to say with it. Those words are not said while
the call waits (they would tell of a deed not done); the players who asked hear that a
builder was asked, builders hear on the log channel how to answer, and once a builder runs
or drops the call (``aiconfirm``), the players hear which, and the assistant reads it in
its history.
"""

import json

from evennia.utils.dbserialize import deserialize
from twisted.internet import defer

from .audience import with_audience
from .log_channel import post_to_log_channel
from .prompt_contexts import CONTEXT_TICK_EVENT
from .tools import ToolContext, execute_tool
from .tools.communication import emote, speak
from .utils.message_format import tool_call_text

# What the players of the turn see; the builder's name is not theirs to know.
ASKED = "{name} has asked a builder to allow this first: {action}."
DONE = "A builder allowed it, and {name} did it: {action}."
FAILED = "A builder allowed it, but {name} could not do it: {action}."
DISCARDED = "A builder did not allow it, so {name} did not do it: {action}."
# What the assistant reads back for the held call: it knows nothing was done yet.
HELD_RESULT = (
    "Not run: {tool} is dangerous and awaits a builder's confirmation; you were heard asking "
    "a builder for it."
)
# What the assistant reads after an allowed call made for a goal's step: the turn that made
# it is over, and a small model did not connect the result with the goal (issue 21).
FOR_GOAL = (
    ' It was for your goal #{goal}: if it is reached now, call complete_goal with {{"goal": '
    "{goal}}}."
)
# The longest argument value a player sees whole in a call's description.
SHOWN_VALUE_CHARS = 60


class NoSuchCall(LookupError):
    """No call waits under the number a builder gave."""


def waiting_calls(script):
    """Return the calls ``script`` waits on, in order, as plain dicts."""
    return [deserialize(entry) for entry in script.db.awaiting_confirmation or ()]


def describe_call(call):
    """Return a tool call as players read it, e.g. ``give (item: <thing>, recipient: <name>)``."""
    name = call["function"]["name"]
    raw = call["function"].get("arguments") or "{}"
    try:
        arguments = json.loads(raw)
    except ValueError:
        arguments = raw
    if not isinstance(arguments, dict):
        return f"{name} ({_shown(arguments)})"
    if not arguments:
        return name
    return f"{name} ({', '.join(f'{key}: {_shown(value)}' for key, value in arguments.items())})"


def _shown(value):
    text = " ".join(str(value).split())
    return text if len(text) <= SHOWN_VALUE_CHARS else text[: SHOWN_VALUE_CHARS - 1] + "…"


def hold_call(context, call, words):
    """Keep ``call`` for a builder, and tell the turn's audience and the builders so.

    Args:
        context (ToolContext): The turn that made the call.
        call (dict): The dangerous tool call.
        words (list): What the assistant said with it: said only once it has run.

    Returns:
        str: The tool message the assistant reads for the call.
    """
    script, character = context.script, context.character
    goal = (context.event or {}).get("goal")
    waiting = [
        *(script.db.awaiting_confirmation or ()),
        _entry(call, context.audience, words, goal),
    ]
    script.db.awaiting_confirmation = waiting
    action = describe_call(call)
    _tell(character, ASKED.format(name=character.key, action=action), context.audience)
    post_to_log_channel(script, _waiting_notice(character, len(waiting), action, context.event))
    return HELD_RESULT.format(tool=call["function"]["name"])


def _entry(call, audience, words, goal):
    # The turn's audience goes with the call: it runs, later, for them alone; so does the
    # goal whose step made it, if any.
    return {**call, "audience": audience, "words": [w for w in words if w], "goal": goal}


def _waiting_notice(character, number, action, event):
    """Return the log channel's notice of a waiting call: what, asked by whom, and how to
    run or drop it."""
    asker = (event or {}).get("speaker_name")
    if not asker:
        asked = "on its own"
    elif (event or {}).get("type") == "whisper":
        asked = f"whispered by {asker}"
    else:
        asked = f"asked by {asker}"
    key = character.key
    return (
        f"{key} waits for a builder: {action} ({asked}). To run it: aiconfirm {key} = "
        f"{number}; to drop it: aiconfirm/discard {key} = {number}."
    )


def _take(script, number):
    """Remove waiting call ``number`` (counted from 1) and return it.

    Raises:
        NoSuchCall: when no call waits under that number.
    """
    waiting = list(script.db.awaiting_confirmation or ())
    if not (isinstance(number, int) and 1 <= number <= len(waiting)):
        raise NoSuchCall(number)
    entry = deserialize(waiting.pop(number - 1))
    script.db.awaiting_confirmation = waiting
    return entry


def confirm_call(script, character, number, builder):
    """Run waiting call ``number`` for its turn's audience, as ``builder`` allowed.

    Its players hear that it was done (and then the words the assistant meant to say with
    it) or that it failed; the assistant reads the outcome in its history.

    Raises:
        NoSuchCall: when no call waits under that number (nothing runs).

    Returns:
        Deferred: Fires with ``(the call, the tool's ToolResult)``.
    """
    call, audience, words, goal = _split(_take(script, number))
    return _run_allowed(script, character, call, (audience, words, goal), builder)


@defer.inlineCallbacks
def _run_allowed(script, character, call, held, builder):
    audience, words, goal = held
    context = ToolContext(script, character, CONTEXT_TICK_EVENT, audience=audience)
    outcome = yield defer.maybeDeferred(execute_tool, call, context)
    action = describe_call(call)
    told = DONE if outcome.ok else FAILED
    _tell(character, told.format(name=character.key, action=action), audience)
    text = f"{builder.key} allowed your call {tool_call_text(call)}; it returned: {outcome.content}"
    _note(script, text + (FOR_GOAL.format(goal=goal) if goal and outcome.ok else ""), audience)
    for word in words if outcome.ok else ():
        if character.location is not None:
            said, _ = speak(character, word, audience)
            script.append_message(
                {"role": "assistant", "content": said, "metadata": with_audience({}, audience)}
            )
    return call, outcome


def discard_call(script, character, number, builder):
    """Drop waiting call ``number`` unrun, as ``builder`` decided; its players hear so, and
    the assistant reads it in its history.

    Raises:
        NoSuchCall: when no call waits under that number.

    Returns:
        dict: The dropped call.
    """
    call, audience, _, _ = _split(_take(script, number))
    _tell(character, DISCARDED.format(name=character.key, action=describe_call(call)), audience)
    text = tool_call_text(call)
    _note(script, f"{builder.key} did not allow your call {text}; it was not run.", audience)
    return call


def _split(entry):
    """Return a stored entry's ``(call, audience, words, goal)`` (entries held before the
    words or the goal were kept have none)."""
    audience = entry.pop("audience", None)
    words = entry.pop("words", None) or []
    return entry, audience, words, entry.pop("goal", None)


def _note(script, text, audience):
    script.append_message(
        {"role": "user", "content": text, "metadata": with_audience({}, audience)}
    )


def _tell(character, text, audience):
    """Show ``text`` to ``audience`` (the room when None) as a pose of the assistant's."""
    if character.location is not None:
        emote(character, text, audience)
