"""The assistant's journal: ``character.db.journal = {"entries": [...], ...}``.

Entries follow the seeds' format: ``id``, ``timestamp``, ``content``, ``source_type``,
``importance`` (1-10) and ``tags``, plus ``source_message_ids`` naming the history messages
an entry came from and, for what was learned in private, ``audience`` (who may hear it; see
``ai.audience``). Each write is bounded in size.
"""

import re

from django.utils import timezone
from evennia.utils.dbserialize import deserialize

from ..audience import may_hear

MAX_ENTRY_CHARS = 2000
_WORD = re.compile(r"\w+")
# Words this short ("a", "of", "is") would match nearly every entry.
_MIN_WORD = 3


def get_journal(character):
    """Return a plain copy of the character's journal dict (empty if it has none)."""
    journal = deserialize(character.db.journal) or {}
    journal.setdefault("entries", [])
    journal.setdefault("consolidated_entry_ids", [])
    return journal


def journal_entries(character):
    """Return the journal's entries as a plain list (oldest first)."""
    return get_journal(character)["entries"]


def add_entry(
    character,
    content,
    source_type,
    importance=5,
    tags=(),
    entry_id=None,
    source_message_ids=(),
    max_chars=MAX_ENTRY_CHARS,
    audience=None,
):
    """Append one entry to the journal and return it.

    Args:
        character (AssistantCharacter): Whose journal.
        content (str): The entry's text, at most ``max_chars`` characters.
        source_type (str): Where it came from (``conversation``, ``compaction``, ...).
        importance (int): 1 (trivial) to 10 (vital).
        tags (iterable): Short labels.
        entry_id (str, optional): The id; ``journal_<timestamp>_<n>`` by default.
        source_message_ids (iterable): Ids of the history messages it came from.
        max_chars (int or None): The content's length limit; None for none (a compaction's
            synthesis is as long as its summary).
        audience (list, optional): The dbrefs that may hear it; None for anyone.

    Raises:
        ValueError: for empty or oversized content or an importance out of range.
    """
    content = (content or "").strip()
    if not content:
        raise ValueError("a journal entry needs content")
    if max_chars is not None and len(content) > max_chars:
        raise ValueError(f"a journal entry is at most {max_chars} characters")
    if not isinstance(importance, int) or isinstance(importance, bool) or not 1 <= importance <= 10:
        raise ValueError("importance must be a whole number from 1 to 10")
    now = timezone.now()
    journal = get_journal(character)
    entries = journal["entries"]
    entry = {
        "id": unique_id(entry_id or f"journal_{now.strftime('%Y%m%d_%H%M%S')}", entries),
        "timestamp": now.isoformat(),
        "content": content,
        "source_type": source_type,
        "importance": importance,
        "tags": list(tags),
        "source_message_ids": list(source_message_ids),
    }
    if audience:
        entry["audience"] = sorted(audience)
    entries.append(entry)
    character.db.journal = journal
    return entry


def find_same(character, content, audience=None):
    """Return the entry ``audience`` may hear that says what ``content`` says, or None.

    Case, spacing and the end stop aside.
    """
    wanted = _normalized(content)
    return next(
        (e for e in visible_entries(character, audience) if _normalized(e["content"]) == wanted),
        None,
    )


def visible_entries(character, audience):
    """Return the journal's entries that ``audience`` may hear (oldest first)."""
    return [e for e in journal_entries(character) if may_hear(e.get("audience"), audience)]


def _normalized(text):
    return " ".join((text or "").lower().split()).rstrip(" .!")


def unique_id(wanted, entries):
    """Return ``wanted``, or ``wanted_2``, ``wanted_3``... if an entry already has it."""
    taken = {entry["id"] for entry in entries}
    candidate, number = wanted, 1
    while candidate in taken:
        number += 1
        candidate = f"{wanted}_{number}"
    return candidate


def _words(text):
    return {word for word in _WORD.findall(text.lower()) if len(word) >= _MIN_WORD}


def search_entries(character, query=None, limit=5, exclude_sources=(), audience=None):
    """Return up to ``limit`` journal entries, best first.

    Args:
        character (AssistantCharacter): Whose journal.
        query (str, optional): Without one, the newest entries come first. With one, entries
            that contain it or share words with it, ranked by shared words, importance, then
            recency.
        limit (int): How many entries at most.
        exclude_sources (iterable): History message ids; an entry drawn only from these
            (e.g. messages still in the live history) is left out.
        audience (list, optional): Who will hear the answer; entries kept for others are
            left out (None: the room, so only public entries).

    Returns:
        list: The entries.
    """
    excluded = set(exclude_sources)
    ranked = []
    for position, entry in enumerate(visible_entries(character, audience)):
        sources = set(entry.get("source_message_ids") or ())
        if sources and sources <= excluded:
            continue
        if not (query and query.strip()):
            ranked.append(((position,), entry))
            continue
        text = " ".join([entry["content"], *entry.get("tags", ())]).lower()
        score = len(_words(query) & _words(text)) + (query.strip().lower() in text)
        if score:
            ranked.append(((score, entry.get("importance", 0), position), entry))
    ranked.sort(key=lambda item: item[0], reverse=True)
    return [entry for _, entry in ranked[:limit]]


def cited_messages(content, messages):
    """Return the ids of the messages that share the most words with ``content``.

    Args:
        content (str): A journal entry's text.
        messages (list): Candidate history messages (with ``id`` and ``content``).

    Returns:
        list: Ids of the best matches (sharing at least two words), oldest first.
    """
    wanted = _words(content)
    scored = [(len(wanted & _words(m.get("content") or "")), m["id"]) for m in messages]
    best = max((score for score, _ in scored), default=0)
    return [message_id for score, message_id in scored if score == best and best >= 2]
