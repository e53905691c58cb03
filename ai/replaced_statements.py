"""Players' statements a summary kept that later words replace, left out of the prompt.

The quality gate keeps players' statements in their own words under ``SAID_HEADER``
("- Zeno: "I promised Moss to bring cheese on Saturday.""). A later compaction cannot
see what an earlier summary kept, so when the player corrected it ("Correction: I
promised Moss to bring barley on Saturday.") both lines stayed live, and
Qwen2.5-Coder-1.5B answered with the first. When a prompt is assembled, a kept statement
that a later one replaces (a later kept statement, or a sentence of a later player's
message: ``utils.facts.replaces``) is left out; the stored summary is untouched, so undo
and ``aihistory`` show it whole.
"""

from functools import lru_cache

from .utils.facts import LaterStatements, statement_replaces
from .utils.markers import GATE_HEADERS, NOTES_HEADER, SAID_HEADER, SUMMARY_MARKER
from .utils.message_format import read_event, unquoted
from .utils.sentences import sentences

# Pairs of sentences compared, remembered across ticks: the same summary lines meet the
# same later messages on every tick until the history changes.
_COMPARED = 8192


def without_replaced(messages):
    """Return ``messages`` with each summary's kept statements that a later message replaces
    left out (the changed messages are copies)."""
    # Only a system message can be a summary: the others are passed over in the loop.
    said = [_kept_statements(m) if m.get("role") == "system" else () for m in messages]
    if not any(said):
        return messages
    result = list(messages)
    later = LaterStatements(_replaces)  # of the messages after the one being read
    for index in range(len(messages) - 1, -1, -1):
        kept = said[index]
        if not kept:
            later.add(_player_sentences(messages[index]))
            continue
        stale = {line for line, statement in kept if later.replace(statement)}
        if stale:
            result[index] = dict(messages[index], content=_without(messages[index], stale))
        later.add(statement for _, statement in kept)
    return result


def _kept_statements(message):
    """Return ``[(line, (speaker, sentence))]`` of the statements a summary message kept
    verbatim."""
    content = message.get("content")
    if message.get("role") != "system" or not isinstance(content, str):
        return []
    if not content.startswith(SUMMARY_MARKER) or SAID_HEADER not in content:
        return []
    kept, inside = [], False
    for line in content.splitlines():
        if line.strip() in (*GATE_HEADERS, NOTES_HEADER):
            inside = line.strip() == SAID_HEADER
            continue
        speaker, colon, words = line.partition(": ")
        sentence = unquoted(words.strip()) if inside and line.startswith("- ") and colon else None
        if sentence:
            kept.append((line, (speaker.removeprefix("- ").strip(), sentence)))
    return kept


@lru_cache(maxsize=_COMPARED)
def _player_sentences_of(content):
    speaker, verb, words = read_event(content)
    return tuple((speaker, s) for s in sentences(words)) if verb not in (None, "emotes") else ()


def _player_sentences(message):
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, str):
        return ()
    return _player_sentences_of(content)


_replaces = lru_cache(maxsize=_COMPARED)(statement_replaces)


def _without(message, stale):
    """Return the content of ``message`` without the ``stale`` lines, and without the
    header of a block they emptied."""
    lines = [line for line in message["content"].splitlines() if line not in stale]
    kept = []
    for at, line in enumerate(lines):
        following = lines[at + 1] if at + 1 < len(lines) else None
        empty = following is None or following.strip() in (*GATE_HEADERS, NOTES_HEADER)
        if line.strip() == SAID_HEADER and empty:
            continue
        kept.append(line)
    return "\n".join(kept)
