"""The assistant's journal: one :class:`~ai.models.JournalEntry` row per entry.

Entries follow the seeds' format: ``id``, ``timestamp``, ``content``, ``source_type``,
``importance`` (1-10) and ``tags``, plus ``source_message_ids`` naming the history messages
an entry came from, for what was learned in private ``audience`` (who may hear it; see
``ai.audience``), and for an insight (source ``reflection``) ``cites``, the ids of the
entries it came from (see ``ai.reflection``). Each write is bounded in size, and costs the
same whatever the journal's length: one entry row and one row per distinct word (the index
that search reads).

The active journal, which search and recall read, leaves out archived entries (moved out
by the episodic prune, see ``helpers.episodic_index``); ``journal_entries`` lists them too.
"""

import hashlib
import itertools
import re
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone

from ..audience import may_hear
from ..importance_scoring import heuristic_importance
from ..models import JournalEntry, JournalWord
from ..utils.facts import plain_words
from ..utils.faithfulness import check_summary, credits_speaker, read_transcript
from ..utils.grounding import survives, transcript_words, unfounded
from ..utils.markers import SYNTHESIS_MARKER
from ..utils.message_format import one_line, read_event, summary_items
from ..utils.raw_rows import insert_column, select_rows
from ..utils.sentences import sentences

MAX_ENTRY_CHARS = 2000
_WORD = re.compile(r"\w+")
# Words this short ("a", "of", "is") would match nearly every entry.
_MIN_WORD = 3
# Entries a search scores in Python at most: the best by shared words, then by substring.
_CANDIDATES = 200
# A query of at most this many words is also looked for inside words and phrases.
_SUBSTRING_WORDS = 2
# A word held by more entries than this is too common to find candidates by.
_COMMON_WORD = 500
# Ids one query asks for when a wanted id may be taken: it and its first numbered ones.
_IDS_ASKED = 10
# Entries that may cite the live history: the newest this many (history is recent).
RECENT_CITING = 1000
# A player's own words about themselves: "I", "I'm", "my", "me".
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|[Mm]y|[Mm]e|[Mm]ine|[Mm]yself)\b")
# The source of an insight, which a reflection writes and which cites entries.
INSIGHT_SOURCE = "reflection"
# Entries no reflection covers: insights themselves, and a compaction's whole summary.
NOT_REFLECTED = (INSIGHT_SOURCE, "compaction")


def as_entry(row):
    """Return a journal row as the seeds' entry dict (``audience`` only when private,
    ``cites`` only for an insight, ``archived`` only when archived)."""
    entry = {
        "id": row.entry_id,
        "timestamp": row.timestamp.isoformat(),
        "content": row.content,
        "source_type": row.source_type,
        "importance": row.importance,
        "tags": list(row.tags or ()),
        "source_message_ids": list(row.source_message_ids or ()),
    }
    if row.audience:
        entry["audience"] = list(row.audience)
    if row.cites:
        entry["cites"] = list(row.cites)
    if row.archived:
        entry["archived"] = True
    return entry


def journal_entries(character, source_type=None):
    """Return every entry, archived ones too, as a plain list (oldest first), or those of one
    source."""
    rows = JournalEntry.objects.filter(db_object_id=character.id)
    if source_type:
        rows = rows.filter(source_type=source_type)
    return [as_entry(row) for row in rows]


def listed(entries):
    """Return each entry's content on one line, for a listing of the journal.

    A compaction's synthesis is a whole summary, and a summary of a summary keeps what the
    earlier one told: listed as it is, each would open like the one before it. It is listed
    as its marker and the statements that the synthesis before it (for the same audience)
    did not hold: what that compaction kept of the newer messages (all of its statements,
    marked, when it kept nothing new). An insight is marked with the entries it cites.

    Args:
        entries (list): Journal entries, oldest first (as :func:`journal_entries` gives them).

    Returns:
        list: One string per entry, in the same order.
    """
    earlier = {}  # audience -> the words of the latest synthesis it may hear
    lines = []
    for entry in entries:
        if entry["source_type"] == INSIGHT_SOURCE:
            lines.append(f"{insight_mark(entry)} {one_line(entry['content'])}")
            continue
        if entry["source_type"] != "compaction":
            lines.append(one_line(entry["content"]))
            continue
        audience = tuple(entry.get("audience") or ())
        statements = synthesis_statements(entry["content"])
        head = SYNTHESIS_MARKER
        if audience in earlier:
            new = [line for line in statements if not survives(line, earlier[audience])]
            head += " new:" if new else " nothing new:"
            statements = new or statements
        earlier[audience] = set(plain_words(entry["content"]))
        lines.append(f"{head} {' / '.join(statements)}")
    return lines


def insight_mark(entry):
    """Return how a listing marks an insight: ``[reflection on <id>, <id>]``."""
    return f"[reflection on {', '.join(entry.get('cites') or ()) or 'nothing'}]"


def synthesis_statements(content):
    """Return the statements of a synthesis entry's summary (its list items, and the
    sentences of its other lines), without its marker, the quality gate's headers and notes."""
    found = []
    for item, listed in summary_items(content.removeprefix(SYNTHESIS_MARKER)):
        # A list item is one statement; a line of prose may hold several.
        found += [item] if listed else sentences(item)
    return found


def recent_entries(character, audience, limit):
    """Return those of the newest ``limit`` active entries that ``audience`` may hear,
    oldest first (``limit`` bounds the rows read, not the entries returned)."""
    rows = JournalEntry.objects.filter(db_object_id=character.id, archived=False)
    rows = rows.order_by("-id")[:limit]
    return [as_entry(row) for row in reversed(rows) if may_hear(row.audience, audience)]


def entries_citing(character, message_ids, audience, limit=RECENT_CITING):
    """Return the entries ``audience`` may hear that cite one of ``message_ids``, oldest first.

    Only the newest ``limit`` active entries are read: history messages are recent.
    """
    wanted = set(message_ids)
    return [
        entry
        for entry in recent_entries(character, audience, limit)
        if wanted & set(entry["source_message_ids"])
    ]


def count_entries(character):
    """Return how many entries the journal holds (one indexed count)."""
    return JournalEntry.objects.filter(db_object_id=character.id).count()


@dataclass(frozen=True)
class EntryText:
    """What an entry's text gives the journal, read from words alone (no database), so
    that a long one (a compaction's synthesis) can be read in a thread."""

    content: str
    source_type: str
    importance: int
    tags: list
    normalized: str
    score: float
    words: list


def entry_text(content, source_type, importance=5, tags=(), max_chars=MAX_ENTRY_CHARS):
    """Return the :class:`EntryText` of an entry (the arguments as :func:`add_entry`'s).

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
    tags = [str(tag) for tag in tags]
    return EntryText(
        content,
        source_type,
        importance,
        tags,
        digest(content),
        heuristic_importance(content, source_type, importance, tags),
        indexed_words(content, tags),
    )


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
    cites=(),
):
    """Append one entry to the journal and return it.

    Args:
        character (AssistantCharacter): Whose journal.
        content (str): The entry's text, at most ``max_chars`` characters.
        source_type (str): Where it came from (``conversation``, ``compaction``, ...).
        importance (int): 1 (trivial) to 10 (vital).
        tags (iterable): Short labels.
        entry_id (str, optional): The id; ``journal_<timestamp>`` by default, with ``_2``,
            ``_3``... when taken.
        source_message_ids (iterable): Ids of the history messages it came from.
        max_chars (int or None): The content's length limit; None for none (a compaction's
            synthesis is as long as its summary).
        audience (list, optional): The dbrefs that may hear it; None for anyone.
        cites (iterable): For an insight, the ids of the entries it came from.

    Raises:
        ValueError: for empty or oversized content or an importance out of range.
    """
    text = entry_text(content, source_type, importance, tags, max_chars)
    return write_entry(character, text, entry_id, source_message_ids, audience, cites)


def write_entry(character, text, entry_id=None, source_message_ids=(), audience=None, cites=()):
    """Append the entry of ``text`` (:func:`entry_text`) to the journal and return it; the
    other arguments are :func:`add_entry`'s."""
    now = timezone.now()
    with transaction.atomic():
        row = JournalEntry.objects.create(
            db_object_id=character.id,
            entry_id=unique_id(character, entry_id or f"journal_{now.strftime('%Y%m%d_%H%M%S')}"),
            timestamp=now,
            content=text.content,
            normalized=text.normalized,
            source_type=text.source_type,
            importance=text.importance,
            tags=text.tags,
            score=text.score,
            source_message_ids=list(source_message_ids),
            audience=sorted(audience) if audience else None,
            cites=list(cites),
            reflected=text.source_type in NOT_REFLECTED,
        )
        # Plain SQL, one statement: a compaction's synthesis may hold thousands of words,
        # for which the ORM's bulk_create spent half a second of the reactor's time, and a
        # statement a word three times what one statement costs. Ids and words (no NUL in
        # \w+) go to the database as they are.
        insert_column(
            JournalWord, {"entry_id": row.id, "db_object_id": character.id}, "word", text.words
        )
    return as_entry(row)


def unique_id(character, wanted):
    """Return ``wanted``, or ``wanted_2``, ``wanted_3``... if the journal already has it."""
    # Exact ids, which the unique index answers on any database: not LIKE, which SQLite
    # cannot answer from an index, nor a range of ids, which holds the numbered ones only where
    # text sorts by code point (a linguistic collation, as PostgreSQL's often is, does not).
    # Plain SQL: the ORM orders by id, for which SQLite read every entry by the owner index.
    where = f"db_object_id = %s AND entry_id IN ({', '.join(['%s'] * _IDS_ASKED)})"
    for start in itertools.count(1, _IDS_ASKED):
        numbers = range(start, start + _IDS_ASKED)
        wanted_ids = [f"{wanted}_{number}" if number > 1 else wanted for number in numbers]
        params = [character.id, *wanted_ids]
        taken = {entry_id for (entry_id,) in select_rows(JournalEntry, ["entry_id"], where, params)}
        free = [entry_id for entry_id in wanted_ids if entry_id not in taken]
        if free:
            return free[0]


def find_same(character, content, audience=None):
    """Return the entry ``audience`` may hear that says what ``content`` says, or None.

    Case, spacing and the end stop aside.
    """
    # Plain SQL for the usual answer, none: the ORM's query cost more than the read.
    found = select_rows(
        JournalEntry,
        ["id", "audience"],
        "db_object_id = %s AND normalized = %s",
        [character.id, digest(content)],
        "ORDER BY id",
    )
    same = next((pk for pk, heard_by in found if may_hear(heard_by, audience)), None)
    return as_entry(JournalEntry.objects.get(pk=same)) if same is not None else None


def digest(text):
    """Return what identifies an entry's content, case, spacing and end stop aside."""
    normalized = " ".join((text or "").lower().split()).rstrip(" .!")
    return hashlib.sha256(normalized.encode()).hexdigest()


def indexed_words(content, tags=()):
    """Return the words of an entry that search finds it by (its content's and tags')."""
    return sorted(word[:64] for word in shared_words(" ".join([content, *tags])))


def shared_words(text):
    """Return the words of ``text`` that search matches on (lower case, three letters on)."""
    return {word for word in _WORD.findall(text.lower()) if len(word) >= _MIN_WORD}


def _sharing_words(character, wanted, include_archived):
    """Return ids of up to ``_CANDIDATES`` entries sharing the query's telling words.

    Words that most entries hold ("gate" in a journal about a gate) tell little and cost a
    read of every entry holding them, so candidates come from the rarer words when there
    are any (the scoring still counts every shared word); else from the rarest word alone,
    newest entries first. Archived entries are counted and returned only when included.
    """
    # Holders are counted only as far as tells whether a word is common.
    held = _holders(character, sorted(wanted), include_archived, _COMMON_WORD + 1)
    if not held:
        return []
    # Built only now: a query's building costs more than the plain read above.
    words = JournalWord.objects.filter(db_object_id=character.id)
    if not include_archived:
        words = words.filter(entry__archived=False)
    telling = [word for word, (count, _) in held.items() if count <= _COMMON_WORD]
    if not telling:
        rarest = words.filter(word=_rarest(character, held, include_archived))
        return list(rarest.order_by("-entry_id").values_list("entry_id", flat=True)[:_CANDIDATES])
    return list(
        words.filter(word__in=telling)
        .values("entry_id")
        .annotate(shared=Count("id"))
        .order_by("-shared", "-entry_id")
        .values_list("entry_id", flat=True)[:_CANDIDATES]
    )


def _rarest(character, held, include_archived):
    """Return the word of ``held`` (each held by more than ``_COMMON_WORD`` entries) that the
    fewest entries hold, the first in order on a tie.

    Counting a word reads all its holders: the likeliest rarest, whose newest holders reach
    furthest back, is counted whole, the others only up to one past its count.
    """
    guess = min(held, key=lambda word: (held[word][1], word))
    fewest, _ = _holders(character, [guess], include_archived).get(guess, (0, None))
    others = _holders(character, sorted(set(held) - {guess}), include_archived, fewest + 1)
    return min([(fewest, guess)] + [(count, word) for word, (count, _) in others.items()])[1]


def _holders(character, words, include_archived, cap=None):
    """Return ``{word: (count, oldest)}`` for those of ``words`` that entries hold: how many
    do, counting the newest first and at most ``cap``, and the oldest entry counted.

    One statement for all the words, in plain SQL: the ORM's query building costs more than
    the query (see docs/benchmarks.md).
    """
    if not words:
        return {}
    quote = connection.ops.quote_name
    active = f" JOIN {quote(JournalEntry._meta.db_table)} e ON e.id = w.entry_id AND NOT e.archived"
    one = (
        "SELECT MAX(word), COUNT(*), MIN(entry_id) FROM (SELECT w.word, w.entry_id FROM "
        f"{quote(JournalWord._meta.db_table)} w{'' if include_archived else active} "
        "WHERE w.db_object_id = %s AND w.word = %s ORDER BY w.entry_id DESC"
        f"{'' if cap is None else ' LIMIT %s'}) newest"
    )
    params = [(character.id, word) + (() if cap is None else (cap,)) for word in words]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join([one] * len(words)), [p for row in params for p in row])
        return {word: (count, oldest) for word, count, oldest in cursor.fetchall() if count}


def _searched(character, include_archived):
    """Return the journal rows :func:`search_entries` searches (the archived ones too if
    ``include_archived``)."""
    rows = JournalEntry.objects.filter(db_object_id=character.id)
    return rows if include_archived else rows.filter(archived=False)


def search_entries(
    character, query=None, limit=5, exclude_sources=(), audience=None, include_archived=False
):
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
        include_archived (bool): Also search the entries the episodic prune archived.

    Returns:
        list: The entries.
    """
    if query and query.strip():
        wanted = shared_words(query)
        ids = set(_sharing_words(character, wanted, include_archived))
        if len(query.split()) <= _SUBSTRING_WORDS:
            # A short query may be part of a word ("DAWN" in "Dawnbringer"): scan for it.
            by_text = _searched(character, include_archived).filter(
                content__icontains=query.strip()
            )
            ids.update(by_text.order_by("-id").values_list("id", flat=True)[:_CANDIDATES])
        if not ids:
            return []  # a line of more words builds no ORM query: a tick recalls for each
        candidates = _searched(character, include_archived).filter(id__in=ids)
    else:
        candidates = _searched(character, include_archived).order_by("-id")
    excluded = set(exclude_sources)
    ranked = []
    # The columns scoring reads, not whole rows: building a model costs more than its query.
    scored = candidates.values_list(
        "id", "importance", "content", "tags", "audience", "source_message_ids"
    )
    for row_id, importance, content, tags, heard_by, sources in scored.iterator():
        if not may_hear(heard_by, audience):
            continue
        sources = set(sources or ())
        if sources and sources <= excluded:
            continue
        if not (query and query.strip()):
            ranked.append(((row_id,), row_id))
            if len(ranked) >= limit:
                break
            continue
        text = " ".join([content, *(tags or ())]).lower()
        score = len(wanted & shared_words(text)) + (query.strip().lower() in text)
        if score:
            ranked.append(((score, importance, row_id), row_id))
    ranked.sort(key=lambda item: item[0], reverse=True)
    best = JournalEntry.objects.in_bulk([row_id for _, row_id in ranked[:limit]])
    return [as_entry(best[row_id]) for _, row_id in ranked[:limit]]


def transcript_fact(fact, messages, assistant_name):
    """Return ``fact`` as a note of ``messages`` may keep it, and why not when it may not.

    It must be told by what players said (``unfounded``), and words it credits to someone
    who did not say them go to the one who did, as a summary's do (the quality gate's
    check): read later, a wrong speaker is a swap.

    Returns:
        tuple: ``(fact, None)``, the fact credited to its speaker, or ``(None, why)``.
    """
    why = unfounded(fact, transcript_words(messages))
    if why:
        return None, why
    transcript = read_transcript(messages, assistant_name)
    fact, _ = check_summary(credited(fact, messages), transcript)
    if not fact:
        return None, "it tells what the conversation does not show"
    return fact, None


def credited(content, messages):
    """Return ``content`` credited to the player whose words it repeats in the first person
    ("I hid the map ..." -> "<speaker> said: I hid the map ..."): read later, an uncredited
    "I" would be the assistant's. Unchanged when it names no one by "I", "my" or "me", when
    it already says who spoke ("<name> says, ..."), or when the messages it cites are not
    one player's."""
    if not _FIRST_PERSON.search(content or "") or credits_speaker(content):
        return content
    cited = set(cited_messages(content, messages))
    speakers = {
        read_event(message.get("content"))[0]
        for message in messages
        if message.get("id") in cited and message.get("role") == "user"
    }
    if len(speakers) != 1 or None in speakers:
        return content
    (speaker,) = speakers
    if content.lower().startswith(speaker.lower()):
        return content
    return f"{speaker} said: {content}"


def cited_messages(content, messages):
    """Return the ids of the messages that share the most words with ``content``.

    Args:
        content (str): A journal entry's text.
        messages (list): Candidate history messages (with ``id`` and ``content``).

    Returns:
        list: Ids of the best matches (sharing at least two words), oldest first.
    """
    wanted = shared_words(content)
    scored = [(len(wanted & shared_words(m.get("content") or "")), m["id"]) for m in messages]
    best = max((score for score, _ in scored), default=0)
    return [message_id for score, message_id in scored if score == best and best >= 2]
