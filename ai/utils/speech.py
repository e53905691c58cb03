"""What players are sent of a model's words: plain text, in lines a room can take.

A model's text may carry what a terminal acts on instead of showing it (a bell, a new
window title, colours, a cleared screen: C0 control characters and ANSI / OSC escape
sequences) and internal formats it copied from its prompt: the ``Name (#4)`` of entity
profiles and tool results, or the ``\\"`` of a quoted line (another assistant's words
reach the prompt JSON-quoted). None of that is for players. Evennia's own ``|`` markup is
left alone: it is the game's, not a terminal's.

A leaf module: standard library only, nothing from the ``ai`` package.
"""

import re

# Escape sequences, 7-bit (ESC ...) and 8-bit (C1): strings (OSC, DCS, SOS, PM, APC) up to
# their terminator (or the line's end), control sequences (CSI), then any other escape.
_ESCAPES = re.compile(
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|\x1b[ -/]*[0-~]?"
)
# Control characters but tab and line break: C0, DEL and C1.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# A dbref after a name, as prompts and tool results show them: "Alice (#4)", "Alice(#4)".
_DBREF = re.compile(r"\s*\(#\d+\)")
# A quote escaped as in a JSON string: \" or \'.
_ESCAPED_QUOTE = re.compile(r"\\([\"'])")
# Where a long text is best cut: after a sentence, else at a space.
_SENTENCE_END = re.compile(r"[.!?…][\"')\]]*\s+|\n")
# What ends a part that was cut short, and how much of a line a cut may give up to end
# at a sentence or a word instead of inside one.
CUT_MARK = " [...]"
_SLACK = 0.5


def plain_speech(text):
    """Return ``text`` as players may be sent it: no control characters (tab and line break
    kept), no escape sequences, no dbrefs after names, no escaped quotes."""
    text = str(text or "").replace("\r\n", "\n")
    text = _CONTROLS.sub("", _ESCAPES.sub("", text))
    text = _ESCAPED_QUOTE.sub(r"\1", _DBREF.sub("", text))
    return text.strip()


def speech_parts(text, limit, max_parts):
    """Split ``text`` into at most ``max_parts`` lines of at most ``limit`` characters.

    Each part ends at a sentence, else at a word, where one is near the limit. What does
    not fit in ``max_parts`` is left out, and the last part then ends with ``CUT_MARK``.

    Returns:
        tuple: ``(parts, left_out)``: the lines, and how many characters were left out.
    """
    parts, rest = [], text.strip()
    while rest and len(parts) < max_parts:
        last = len(parts) == max_parts - 1
        room = limit - len(CUT_MARK) if last and len(rest) > limit else limit
        if len(rest) <= room:
            parts.append(rest)
            rest = ""
            break
        cut = _cut_at(rest, room)
        parts.append(rest[:cut].rstrip())
        rest = rest[cut:].strip()
    if rest:
        parts[-1] += CUT_MARK
    return parts, len(rest)


def _cut_at(text, room):
    """Return where to cut ``text`` to keep at most ``room`` characters: after the last
    sentence, else the last space, within the slack; else at ``room``."""
    floor = int(room * _SLACK)
    ends = [match.end() for match in _SENTENCE_END.finditer(text, floor, room)]
    if ends:
        return ends[-1]
    space = text.rfind(" ", floor, room)
    return space if space > 0 else room
