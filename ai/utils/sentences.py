"""Splitting text into sentences, a quoted passage kept whole.

A leaf module: standard library only, nothing from the ``ai`` package.
"""

import re

# A quote may hold the whole value of a fact, full stops included: kept out of the split.
QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”|«[^»\n]*»")
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+|;\s*")
# A list item's mark before a line: "- ", "* ", "1. ", "2) ".
LIST_MARK = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")
# Markdown emphasis, and a label opening a line a model stated ("**Insight 2:** ...").
_EMPHASIS = re.compile(r"\*\*|__")
_LABEL = re.compile(r"^(?:fact|insight|reflection)\s*\d*\s*[:.)-]\s*", re.IGNORECASE)


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


def stated_lines(text, min_words):
    """Return the lines of a model's text answer that state something, one a line: list
    marks, markdown emphasis and a label ("Fact 2:", "Insight 1:") removed, a wholly quoted
    line unquoted (a quotation inside it keeps its marks); questions, headings (a line
    ending in a colon) and lines of fewer than ``min_words`` words left out."""
    found = []
    for line in (text or "").splitlines():
        line = _LABEL.sub("", LIST_MARK.sub("", _EMPHASIS.sub("", line)).strip())
        if len(line) > 1 and line[0] == line[-1] == '"':
            line = line[1:-1]
        if len(line.split()) >= min_words and not line.endswith(("?", ":")):
            found.append(line)
    return found
