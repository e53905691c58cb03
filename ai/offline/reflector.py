"""How the offline engine reflects: insights that join journal entries sharing a subject.

A reflection's pending event lists the entries to reflect on, one a line,
``[<id>] (importance <n>) "<text>"`` under ``REFLECTION_HEADER`` (see ``ai.reflection``).
The engine groups them by what they share: first a person they name (the speaker of an
entry written ``<Name> said: ...``, or a capitalised name inside a sentence), else a
keyword. For each of the first ``INSIGHTS_AT_MOST`` groups of two entries or more, oldest
first and no entry in two groups, it writes one insight that says the entries together,
in the third person, and cites them (``add_journal_entry``), one call an answer; then
``noop``. It knows what it wrote from the result of its last call, the only trace a
reflection's next call is shown: an insight's result names what it cites.
"""

import re
from dataclasses import dataclass

from ..utils.markers import REFLECTION_HEADER
from ..utils.message_format import unquoted
from .reading import request_text
from .text_tools import STOPWORDS, keywords, sentences, words

INSIGHTS_AT_MOST = 2
# Entries one insight joins at most, and the characters of each it repeats.
CITES_AT_MOST = 3
CLAUSE_CHARS = 200
_ENTRY_LINE = re.compile(
    r"^\[(?P<id>[^\]\s]+)\] \(importance (?P<importance>\d+)\) (?P<text>\".*\")$"
)
# "Bob said: ...", the journal's own way of naming who said a fact.
_SPEAKER = re.compile(
    r"^(?P<name>[A-Z][\w'-]*(?: [A-Z][\w'-]*)?) (?:said|says|told me|mentioned)[:,]? (?P<fact>.+)$"
)
_NAME = re.compile(r"\b[A-Z][a-z][\w-]*")
# What the add_journal_entry tool answers for an insight it wrote.
_WRITTEN = re.compile(r"Journaled insight \S+, citing (?P<ids>[^.()]+)\.")
# The first person, as the third person says it.
_THIRD_PERSON = {
    "i": "they",
    "me": "them",
    "my": "their",
    "mine": "theirs",
    "myself": "themselves",
    "i'm": "they're",
    "i've": "they've",
    "i'll": "they'll",
    "i'd": "they'd",
}
_AFTER_THEY = {"am": "are", "was": "were"}
_NUMBERS = {2: "two", 3: "three"}


@dataclass(frozen=True)
class Entry:
    """One listed entry: its id, importance, speaker (or None) and what it states."""

    entry_id: str
    importance: int
    speaker: str | None
    fact: str

    def names(self):
        """Return the names the entry holds, lower-cased: its speaker's, and the
        capitalised words inside a sentence (a sentence's first word may be any word)."""
        found = {self.speaker.lower()} if self.speaker else set()
        for sentence in sentences(self.fact):
            for match in _NAME.finditer(sentence):
                name = match.group().removesuffix("'s").lower()
                if match.start() and name not in STOPWORDS:
                    found.add(name)
        return found

    def keywords(self):
        """Return the entry's content words, its speaker's name among them."""
        return keywords(self.fact) | self.names()


def is_reflection_request(messages):
    """Tell whether the chat is a reflection on listed journal entries."""
    return request_text(messages, REFLECTION_HEADER) is not None


def listed_entries(messages):
    """Return the entries a reflection lists, in their order."""
    entries = []
    for line in request_text(messages, REFLECTION_HEADER).splitlines()[1:]:
        match = _ENTRY_LINE.match(line)
        text = unquoted(match["text"]) if match else None
        if not text:
            continue
        said = _SPEAKER.match(text)
        speaker, fact = (said["name"], said["fact"]) if said else (None, text)
        entries.append(Entry(match["id"], int(match["importance"]), speaker, fact.strip()))
    return entries


def groups_of(entries):
    """Return up to ``INSIGHTS_AT_MOST`` groups ``(subject, by_name, entries)``, no entry in
    two.

    A name shared by two entries or more wins over a keyword; then the larger group; then
    the group whose entries come first.
    """
    groups, left = [], list(entries)
    while left and len(groups) < INSIGHTS_AT_MOST:
        best = None
        for by_name in (True, False):
            shared = [entry.names() if by_name else entry.keywords() for entry in left]
            for subject in dict.fromkeys(s for subjects in shared for s in subjects):
                members = [entry for entry, has in zip(left, shared) if subject in has]
                key = (not by_name, -len(members), [left.index(entry) for entry in members])
                if len(members) > 1 and (best is None or key < best[0]):
                    best = (key, (subject, by_name, members[:CITES_AT_MOST]))
        if best is None:
            break
        groups.append(best[1])
        left = [entry for entry in left if entry not in best[1][2]]
    return groups


def third_person(fact):
    """Return ``fact`` with the first person in the third ("I lost my key" -> "they lost
    their key")."""
    said, after_they = [], False
    for token in re.split(r"([^\w'\u2019]+)", fact):
        lower = token.lower().replace("\u2019", "'")
        if after_they and lower in _AFTER_THEY:
            token = _AFTER_THEY[lower]
        elif lower in _THIRD_PERSON:
            token = _THIRD_PERSON[lower]
        if token.strip():
            after_they = token == "they"
        said.append(token)
    return "".join(said)


def clause(entry, with_speaker):
    """Return what ``entry`` states as a clause of a longer sentence."""
    fact = entry.fact.rstrip(" .!")
    if len(fact) > CLAUSE_CHARS:
        fact = fact[:CLAUSE_CHARS].rsplit(" ", 1)[0] + "..."
    if entry.speaker:
        fact = third_person(fact)
    first = (words(fact) or [""])[0]
    if first in STOPWORDS:
        fact = fact[:1].lower() + fact[1:]  # "The ferry..." goes on a sentence; "Mira..." not
    return f"{entry.speaker} said {fact}" if entry.speaker and with_speaker else fact


def insight(subject, by_name, members):
    """Return the text of the insight that joins ``members``, which share ``subject``."""
    count = _NUMBERS.get(len(members), str(len(members)))
    speaker = members[0].speaker
    if by_name and speaker and all(entry.speaker == speaker for entry in members):
        if subject == speaker.lower():
            head = f"{speaker} has told me {count} things that belong together"
            parts = [clause(entry, False) for entry in members]
            return f"{head}: {', '.join(parts[:-1])} and {parts[-1]}."
    if by_name:
        head = f"{count.capitalize()} things I noted concern {spelled(subject, members)}"
    else:
        head = f'{count.capitalize()} things I noted share the word "{subject}"'
    parts = [clause(entry, True) for entry in members]
    return f"{head}: {', '.join(parts[:-1])} and {parts[-1]}."


def spelled(name, members):
    """Return ``name`` (lower-cased) as the entries spell it."""
    for entry in members:
        for text in (entry.speaker or "", entry.fact):
            match = re.search(rf"\b{re.escape(name)}\b", text, re.IGNORECASE)
            if match and match.group()[:1].isupper():
                return match.group()
    return name


def written_so_far(messages, groups):
    """Return how many of ``groups`` the reflection wrote, as its last result tells, or
    None when the last call did something else (a refusal, a journal read)."""
    results = [m.get("content") or "" for m in messages[1:] if m.get("role") != "user"]
    if not results:
        return 0
    found = _WRITTEN.search(results[-1])
    cited = set(found["ids"].split(", ")) if found else set()
    for index, (_, _, members) in enumerate(groups):
        if cited and cited <= {entry.entry_id for entry in members}:
            return index + 1
    return None


def next_insight(messages):
    """Return the arguments of the next insight a reflection writes, or None when it has
    written all it had to write (or its last call did something else).

    Args:
        messages (list): The chat, with the reflection's listing.

    Returns:
        dict or None: ``content``, ``cites``, ``importance`` and ``tags``.
    """
    groups = groups_of(listed_entries(messages))
    done = written_so_far(messages, groups)
    if done is None or done >= len(groups):
        return None
    subject, by_name, members = groups[done]
    return {
        "content": insight(subject, by_name, members),
        "cites": [entry.entry_id for entry in members],
        "importance": max(entry.importance for entry in members),
        "tags": [subject],
    }
