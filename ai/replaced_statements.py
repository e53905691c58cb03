"""Players' statements a summary kept that later words replace, left out of the prompt.

The quality gate keeps players' statements in their own words under ``SAID_HEADER``
("- Zeno: "I promised Moss to bring cheese on Saturday.""). A later compaction cannot
see what an earlier summary kept, so when the player corrected it ("Correction: I
promised Moss to bring barley on Saturday.") both lines stayed live, and
Qwen2.5-Coder-1.5B answered with the first. When a prompt is assembled, a kept statement
that a later one replaces (a later kept statement, or a sentence of a later player's
message: ``utils.facts.replaces``) is left out; the stored summary is untouched, so undo
and ``aihistory`` show it whole. The players' sentences after the last summary are filed
once and kept between calls, so a call reads only the messages said since the last one.
"""

from functools import lru_cache
from itertools import repeat
from operator import is_

from .utils.facts import LaterStatements, statement_replaces
from .utils.markers import GATE_HEADERS, NOTES_HEADER, SAID_HEADER, SUMMARY_MARKER
from .utils.message_format import StoredMessage, read_event, unquoted
from .utils.sentences import sentences

# Pairs of sentences compared, remembered across ticks: the same summary lines meet the
# same later messages on every tick until the history changes.
_COMPARED = 8192
# The statements after a history's last summary, filed, by the first message after it:
# one a history, those of the histories read most recently kept.
_FILED_TAILS = 512
_FILED = {}


def without_replaced(messages):
    """Return ``messages`` with each summary's kept statements that a later message replaces
    left out (the changed messages are copies)."""
    said = _summaries_kept(messages)
    if not said:
        return messages
    last = max(said)
    newest = _newest_statements(messages[last + 1 :])  # what every summary is compared with
    result = list(messages)
    later = LaterStatements(_replaces)  # of the messages between the one read and those
    for index in range(last, -1, -1):
        kept = said.get(index)
        if not kept:
            later.add(_player_sentences(messages[index]))
            continue
        stale = {
            line
            for line, statement in kept
            if newest.replace(statement) or later.replace(statement)
        }
        if stale:
            # Still a stored message, which keeps its own sendable part (the prompt sends
            # the parts of stored messages without a step each: ai.utils.message_format).
            result[index] = StoredMessage(messages[index], content=_without(messages[index], stale))
        later.add(statement for _, statement in kept)
    return result


def _summaries_kept(messages):
    """Return ``{index: kept statements}`` of the summaries in ``messages`` that kept any."""
    # Only a system message can be a summary, and a history holds few: found by the list's
    # own search, not a Python step a message (thousands, on every call).
    roles, said, start = list(map(dict.get, messages, repeat("role"))), {}, 0
    while True:
        try:
            index = roles.index("system", start)
        except ValueError:
            return said
        kept = _kept_statements(messages[index])
        if kept:
            said[index] = kept
        start = index + 1


class _Filed:
    """The players' statements of the messages after a history's last summary, filed, and
    the messages read (the held history's own, which are never changed)."""

    def __init__(self):
        self.statements = LaterStatements(_replaces)
        self.messages = []


def _newest_statements(messages):
    """Return the :class:`LaterStatements` of the players' sentences in ``messages`` (those
    after the last summary). Kept from call to call: when the very messages read last time
    begin them, only the messages added since are read (a statement replaced stays replaced,
    whatever is said after it)."""
    stored = len(messages)
    while stored and not isinstance(messages[stored - 1], StoredMessage):
        stored -= 1  # a loop's own messages, new at each call, come last
    filed = _FILED.pop(id(messages[0]), None) if stored else None
    read = len(filed.messages) if filed else 0
    if filed is None or read > stored or not all(map(is_, filed.messages, messages)):
        filed, read = _Filed(), 0
    for message in messages[read:stored]:
        filed.statements.add(_player_sentences(message))
    if stored:
        filed.messages = messages[:stored]  # held here, so that no other takes their ids
        _FILED[id(messages[0])] = filed
        while len(_FILED) > _FILED_TAILS:
            del _FILED[next(iter(_FILED))]  # the tail read longest ago
    if stored == len(messages):
        return filed.statements
    unstored = LaterStatements(_replaces)
    for message in messages[stored:]:
        unstored.add(_player_sentences(message))
    return _Both(filed.statements, unstored)


class _Both:
    """Two :class:`LaterStatements` read as one."""

    def __init__(self, *parts):
        self.parts = parts

    def replace(self, statement):
        """Tell whether a statement of either part replaces ``statement``."""
        return any(part.replace(statement) for part in self.parts)


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
