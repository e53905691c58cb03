"""Splitting text into sentences, a quoted passage kept whole.

A leaf module: standard library only, nothing from the ``ai`` package.
"""

import re

# A quote may hold the whole value of a fact, full stops included: kept out of the split.
QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”|«[^»\n]*»")
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+|;\s*")
# A list item's mark before a line: "- ", "* ", "1. ", "2) ".
LIST_MARK = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")


def sentences(text):
    """Return the sentences of ``text``, quoted passages kept whole."""
    quotes = []

    def hide(match):
        quotes.append(match.group(0))
        return f"\x00{len(quotes) - 1}\x00"

    hidden = QUOTED.sub(hide, text or "")
    found = []
    for piece in _SENTENCE_END.split(hidden):
        piece = re.sub(r"\x00(\d+)\x00", lambda m: quotes[int(m.group(1))], piece).strip()
        if piece:
            found.append(piece)
    return found
