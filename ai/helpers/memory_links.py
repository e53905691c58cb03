"""Links between long-term memories and the journal: lineage, privacy and supersession.

Every Mem0 memory the assistant makes has one :class:`~ai.models.MemoryLink` row, written
in the reactor thread, that names its journal entry (and through it the history messages
it came from), who may hear it, and when it held: ``valid_from``, and once a newer fact
replaced it, ``invalid_at`` and ``superseded_by``. Mem0 keeps the vectors; this table keeps
what a builder and the ranking need to know.
"""

import uuid
from collections import namedtuple

from django.db import connection, transaction
from django.utils import timezone

from ..audience import may_hear, may_supersede
from ..models import JournalEntry, MemoryLink
from ..utils.markers import SUPERSEDED_MARK
from ..utils.raw_rows import rows_by, select_rows

NAMESPACE_ATTRIBUTE = "ai_memory_namespace"
# Journal entries that are records of the past rather than facts: never made memories.
NOT_FACTS = ("compaction",)
# A link row's and a journal row's columns, in the model's order (read in plain SQL).
_LINK_FIELDS = [field.attname for field in MemoryLink._meta.concrete_fields]
_ENTRY_FIELDS = [field.attname for field in JournalEntry._meta.concrete_fields]
# The journal entries waiting for consolidation, written as the ORM writes
# ``consolidated=False`` so that the partial index ``ai_entry_pending_idx`` serves it.
_UNCONSOLIDATED = "db_object_id = %s AND NOT consolidated"


def memory_namespace(character):
    """Return the assistant's own Mem0 namespace, made once and kept on the character.

    A random name rather than the dbref: a database reset or a restored backup must not
    hand one assistant's memories to another that reuses its id.
    """
    namespace = character.attributes.get(NAMESPACE_ATTRIBUTE)
    if not namespace:
        namespace = f"assistant-{uuid.uuid4().hex}"
        character.attributes.add(NAMESPACE_ATTRIBUTE, namespace)
    return namespace


def entries_to_consolidate(character, limit):
    """Return up to ``limit`` journal rows not yet consolidated, oldest first (read in
    plain SQL, as ``links_for`` reads links: the ORM's query cost a dreaming tick more)."""
    rows = select_rows(
        JournalEntry, _ENTRY_FIELDS, _UNCONSOLIDATED, [character.id], f"ORDER BY id LIMIT {limit:d}"
    )
    return [JournalEntry.from_db(connection.alias, _ENTRY_FIELDS, row) for row in rows]


def count_unconsolidated(character):
    """Return how many journal entries still wait for consolidation."""
    table = connection.ops.quote_name(JournalEntry._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE {_UNCONSOLIDATED}", [character.id])
        return cursor.fetchone()[0]


def mark_consolidated(entries):
    """Mark the journal rows ``entries`` consolidated (one plain UPDATE)."""
    table = connection.ops.quote_name(JournalEntry._meta.db_table)
    ids = [entry.id for entry in entries]
    if not ids:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET consolidated = %s WHERE id IN ({', '.join(['%s'] * len(ids))})",
            [True, *ids],
        )


def links_to_check(character, after, limit):
    """Return ``(id, memory_id, entry_id)`` of up to ``limit`` of the character's links that
    have a memory, from the link id ``after`` on, in id order (plain SQL)."""
    return select_rows(
        MemoryLink,
        ["id", "memory_id", "entry_id"],
        "db_object_id = %s AND id > %s AND memory_id <> %s",
        [character.id, after, ""],
        f"ORDER BY id LIMIT {limit:d}",
    )


def remembered_texts(character, entry_ids):
    """Return ``(audience, text)`` of each link with a memory made of the character's journal
    entries ``entry_ids`` (the entries' own ids, ``entry_id``), in link order (plain SQL)."""
    if not entry_ids:
        return []
    journal = connection.ops.quote_name(JournalEntry._meta.db_table)
    marks = ", ".join(["%s"] * len(entry_ids))
    return select_rows(
        MemoryLink,
        ["audience", "text"],
        # The link's ``entry_id`` is its entry's key; the journal's is the seeds' text id.
        f"memory_id <> %s AND entry_id IN (SELECT {journal}.id FROM {journal} "
        f"WHERE {journal}.db_object_id = %s AND {journal}.entry_id IN ({marks}))",
        ["", character.id, *entry_ids],
        "ORDER BY id",
    )


def links_for(character, entries):
    """Return ``({entry id: link}, ids of entries whose link already existed)``.

    Entries without a link get one now, without a memory id, in one transaction. The
    existing ones are read in plain SQL (``ai.utils.raw_rows``): usually there are none,
    and the ORM's query cost a dreaming tick about a millisecond to find that out.
    """
    by_id = {entry.id: entry for entry in entries}  # the character's entries
    links = {}
    for entry_id, values in rows_by(MemoryLink, _LINK_FIELDS, by_id, key="entry_id").items():
        links[entry_id] = MemoryLink.from_db(connection.alias, _LINK_FIELDS, values)
        links[entry_id].entry = by_id[entry_id]
    resumed = set(links)
    new = [
        MemoryLink(
            db_object_id=character.id,
            entry=entry,
            text=entry.content,
            audience=entry.audience,
            valid_from=entry.timestamp,
        )
        for entry in entries
        if entry.id not in links
    ]
    with transaction.atomic():
        for link in MemoryLink.objects.bulk_create(new):
            links[link.entry_id] = link
    return links, resumed


def set_memory_ids(links):
    """Save the ``memory_id`` of each of ``links``: one statement run per row, which costs
    the reactor a fraction of what ``bulk_update`` spends building its CASE expression."""
    table = connection.ops.quote_name(MemoryLink._meta.db_table)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {table} SET memory_id = %s WHERE id = %s",
            [(link.memory_id, link.id) for link in links],
        )


def remembered_entries(character, entry_ids):
    """Return those of the journal ids ``entry_ids`` that long-term memory holds."""
    if not entry_ids:
        return set()  # most turns recall no entry: no query
    return set(
        # Found by the entries' ids (a unique index), not by the owner's every link.
        MemoryLink.objects.filter(entry__db_object_id=character.id, entry__entry_id__in=entry_ids)
        .exclude(memory_id="")
        .values_list("entry__entry_id", flat=True)
    )


def audience_key(audience):
    """Return how Mem0's metadata names an audience: its dbrefs, sorted, or "" (public)."""
    return ",".join(sorted(audience or ()))


def memory_metadata(link):
    """Return what Mem0 stores beside a memory: its link and who may hear it."""
    return {
        "link": str(link.id),
        "entry": link.entry.entry_id if link.entry else "",
        "audience": audience_key(link.audience),
    }


def supersede_older(character, newer):
    """Mark the memories that the new links in ``newer`` replace as superseded.

    Args:
        character (AssistantCharacter): Whose memories.
        newer (list): ``(link, ids of the memories whose words it replaces)``, oldest
            link first (see ``semantic_memory.remember_batch``); only memories that still
            hold and are no newer than the link are superseded.

    Only memories kept for the same listeners as the new one are touched
    (``audience.may_supersede``): a whisper never outdates what the room knows, nor a
    public line what one player whispered.

    Returns:
        list: The superseded links (saved).
    """
    own = {link.memory_id: link for link, _ in newer}  # the batch's own memories
    wanted = {memory_id for _, replaced in newer for memory_id in replaced} - set(own)
    candidates = dict(own)
    if wanted:
        candidates.update(
            (old.memory_id, old)
            for old in MemoryLink.objects.filter(
                db_object_id=character.id, memory_id__in=wanted, invalid_at__isnull=True
            )
        )
    superseded = {}
    for link, replaced in newer:
        for old in (candidates.get(memory_id) for memory_id in replaced):
            if old is None or old is link or old.invalid_at or old.valid_from > link.valid_from:
                continue
            if may_supersede(link.audience, old.audience):
                old.invalid_at, old.superseded_by = link.valid_from, link
                superseded[old.id] = old
    if superseded:
        MemoryLink.objects.bulk_update(superseded.values(), ["invalid_at", "superseded_by"])
    return list(superseded.values())


def recalled(character, hits, audience, limit, exclude_sources=()):
    """Rank Mem0 search ``hits`` for ``audience``: what still holds first, then the rest.

    Args:
        character (AssistantCharacter): Whose memories.
        hits (list): ``(memory id, text, score)`` from Mem0, best first.
        audience (list or None): Who will hear; memories kept for others are left out.
        limit (int): How many at most.
        exclude_sources (iterable): History message ids; a memory drawn only from these
            (messages the prompt still shows) is left out.

    Returns:
        list: Dicts with ``memory_id``, ``text``, ``score``, ``valid_from``, ``invalid_at``,
        ``superseded_by`` (the newer text, or None) and ``entry_id``.
    """
    if not hits:
        return []
    links = _links_of(character, [hit[0] for hit in hits])
    newer = rows_by(MemoryLink, ["text"], {link.superseded_by for link in links.values()})
    entries = rows_by(
        JournalEntry,
        ["source_message_ids", "entry_id", "score"],
        {link.entry for link in links.values()},
    )
    found, excluded = [], set(exclude_sources)
    for memory_id, _, score in hits:
        link = links.get(memory_id)
        if link is None or not may_hear(link.audience, audience):
            continue  # a memory without a link is unknown to the journal: never shown
        sources, entry_key, importance = entries.get(link.entry, ((), None, None))
        if sources and set(sources) <= excluded:
            continue
        found.append(
            {
                "memory_id": memory_id,
                "text": link.text,
                "score": round(float(score), 3),
                "valid_from": link.valid_from,
                "invalid_at": link.invalid_at,
                "superseded_by": newer.get(link.superseded_by, (None,))[0],
                "entry_id": entry_key,
                "importance": importance or None,
            }
        )
    found.sort(key=lambda memory: (memory["invalid_at"] is None, rank(memory)), reverse=True)
    return found[:limit]


# A memory's link as a recall reads it: ``superseded_by`` and ``entry`` are row ids.
_Link = namedtuple("_Link", "memory_id audience text valid_from invalid_at superseded_by entry")


def _links_of(character, memory_ids):
    """Return memory id -> its :data:`_Link`, read in plain SQL (a recall runs on every
    turn)."""
    marks = ", ".join(["%s"] * len(memory_ids))
    # The owner checked and the links ordered here (a later link of a memory wins): with
    # either in the SQL, SQLite read every link of the assistant by the owner index instead
    # of looking the few memories up by theirs.
    rows = select_rows(
        MemoryLink, ["id", "db_object_id", *_Link._fields], f"memory_id IN ({marks})", memory_ids
    )
    return {row[2]: _Link(*row[2:]) for row in sorted(rows) if row[1] == character.id}


def rank(memory):
    """Return a memory's ranking weight: its similarity, raised a little by importance."""
    importance = memory.get("importance")
    return memory["score"] * (1 + 0.05 * importance if importance is not None else 1.25)


def describe_memory(memory):
    """Return one line saying a memory and, for a superseded one, since when it is old."""
    if memory["invalid_at"] is None:
        return memory["text"]
    until = timezone.localtime(memory["invalid_at"]).strftime("%Y-%m-%d %H:%M")
    newer = f" by: {memory['superseded_by']}" if memory["superseded_by"] else ""
    return f"{SUPERSEDED_MARK}{until}; replaced{newer}) {memory['text']}"
