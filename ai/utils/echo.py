"""Telling whether a reply only repeats the line it answers, or an earlier reply of its own.

Small models do both: they restate the player's line, and once a stock reply is in their
history they give it to every later message ("I'm glad you're doing well, Bob!").
"""

import re

_WORD = re.compile(r"\w+")
# A line this short ("Hello there!") may well be answered with the same words.
MIN_WORDS = 4
# An echo holds this share of the line's words at least...
COVERED = 0.7
# ...and adds this share of new words at most ("Bob runs the forge by the north gate."
# for "I run the forge by the north gate.").
NEW_AT_MOST = 0.3


def is_echo(reply, line):
    """Tell whether ``reply`` only repeats ``line``, the line it answers.

    An answer to a question holds most of the question's words ("The password for the
    cellar door is swordfish."), so for a question only the question asked back counts.
    """
    said = set(_WORD.findall((line or "").lower()))
    got = set(_WORD.findall((reply or "").lower()))
    if len(said) < MIN_WORDS or not got:
        return False
    covered = len(said & got) / len(said)
    if (line or "").strip().endswith("?"):
        return (reply or "").strip().endswith("?") and covered >= 0.8
    return covered >= COVERED and len(got - said) / len(got) <= NEW_AT_MOST


# A reply sharing this share of its words with an earlier one (a name aside) is a repeat...
SAME_AS_BEFORE = 0.8
# ...when it is this long at least: a short stock reply ("Understood, Bob.") may recur.
MIN_REPEAT_WORDS = 8


def repeats_itself(reply, earlier):
    """Tell whether ``reply`` says again what one of the ``earlier`` replies said."""
    got = set(_WORD.findall((reply or "").lower()))
    if len(got) < MIN_REPEAT_WORDS:
        return False
    for before in earlier:
        seen = set(_WORD.findall((before or "").lower()))
        if seen and len(got & seen) / len(got | seen) >= SAME_AS_BEFORE:
            return True
    return False
