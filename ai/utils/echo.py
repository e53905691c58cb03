"""Telling whether a reply only repeats the line it answers (small models often do)."""

import re

_WORD = re.compile(r"\w+")
# A line this short ("Hello there!") may well be answered with the same words.
MIN_WORDS = 4
SHARE = 0.8


def is_echo(reply, line):
    """Tell whether ``reply`` holds most of the words of ``line``, the line it answers."""
    said = set(_WORD.findall((line or "").lower()))
    if len(said) < MIN_WORDS:
        return False
    return len(said & set(_WORD.findall((reply or "").lower()))) >= SHARE * len(said)
