"""Long-term memory: Mem0 search at 10,000 memories, a dreaming tick's reactor time, and
whether facts that changed are recalled by their current value.

1. ``search``: a namespace filled with 1,000 then 10,000 memories (embedded in batches and
   written to the FAISS store directly, which is set-up, not what is measured); then the
   median and 95th percentile of Mem0 ``search`` on the worker, and of ``recall`` (search
   plus the link table's join and the audience filter).
2. ``dreaming_tick``: a dreaming tick (``at_repeat`` asleep, which runs ``run_sleep_tick``)
   with 20 new journal entries to consolidate, on a
   journal of 1,000 and 20,000 entries beside the 10,000 memories, after one warm-up tick.
   Reported: the reactor thread's CPU time over the tick (Mem0 runs on its worker and does
   not count), and in a second tick the longest the reactor went without turning (a 2 ms
   probe), i.e. the longest single hold.
3. ``changed_facts``: an assistant on the offline engine hears facts, some changed once or
   twice later, through ticks, compactions and sleep cycles; then each fact's question is
   recalled from long-term memory alone, and the fact counts when the first memory that
   still holds carries the current value.

Everything runs inside Twisted's real reactor, as in the server. Prints JSON; always exits
0 (a report, not a test). Run from the repository root:
``make bench``.
"""

import json
import os
import statistics
import sys
import time

from bench_env import new_assistant, setup_evennia
from twisted.internet import defer, task
from twisted.python.failure import Failure

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demo")
)
from play import run_in_reactor  # noqa: E402  (the demo's reactor runner)

SEARCH_SIZES = (1000, 10000)
QUERIES = 50
TICK_JOURNAL_SIZES = (1000, 20000)
NEW_ENTRIES = 20
TARGET_SEARCH_P50_MS = 30
TARGET_TICK_REACTOR_MS = 20
PEOPLE = ("Alice", "Bob", "Carol", "Dana", "Eli", "Finn", "Gus", "Hana")
THINGS = ("forge", "ferry", "oak", "cellar", "horse", "map", "bees", "silver", "lantern")

# (speaker, line): facts, then changes; the questions and the current values follow.
CONVERSATION = [
    ("Alice", "The password for the cellar door is swordfish."),
    ("Bob", "My forge stands by the north gate."),
    ("Carol", "Dana lives in Oakvale."),
    ("Alice", "The ferry to Port Ashby leaves at six bells."),
    ("Bob", "Edwin keeps bees in Riverrun."),
    ("Carol", "The map to the dragon lair is hidden in the bell tower."),
    ("Alice", "The password for the cellar door is now marmalade."),
    ("Carol", "Dana moved to Rivertown."),
    ("Bob", "The ferry to Port Ashby now leaves at nine bells."),
    ("Alice", "The password for the cellar door is now quince."),
    ("Carol", "Dana moved to Lakeside."),
]
QUESTIONS = {
    "What is the password for the cellar door?": "quince",
    "Where does Dana live?": "Lakeside",
    "When does the ferry to Port Ashby leave?": "nine bells",
    "Where is Bob's forge?": "north gate",
    "Who keeps bees in Riverrun?": "Edwin",
    "Where is the map to the dragon lair?": "bell tower",
}
FILLER = [("Dana", f"Nice weather for the {thing} today.") for thing in THINGS]


def fact(index):
    """Return the ``index``-th filler fact: varied people, things and numbers."""
    who, what = PEOPLE[index % len(PEOPLE)], THINGS[(index // 8) % len(THINGS)]
    return f"{who} said the {what} number {index} is kept by the north gate of ward {index % 97}."


def percentiles(times):
    """Return the median and 95th percentile of ``times`` (seconds) in milliseconds."""
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return round(statistics.median(ordered) * 1000, 2), round(p95 * 1000, 2)


@defer.inlineCallbacks
def fill_memories(character, start, stop):
    """Store memories ``start`` to ``stop`` in the assistant's namespace, with their links."""
    import uuid

    from django.utils import timezone

    from ai.helpers.memory_links import memory_namespace
    from ai.models import MemoryLink
    from ai.semantic_memory import WORKER

    namespace = memory_namespace(character)
    texts = [fact(index) for index in range(start, stop)]
    ids = [str(uuid.uuid4()) for _ in texts]

    def insert(memory):
        vectors = memory.embedding_model.embed_batch(texts)
        now = timezone.now().isoformat()
        payloads = [
            {"data": text, "user_id": namespace, "created_at": now, "hash": str(index)}
            for index, text in enumerate(texts)
        ]
        memory.vector_store.insert(vectors=vectors, payloads=payloads, ids=ids)

    yield WORKER.call(insert)
    MemoryLink.objects.bulk_create(
        MemoryLink(db_object_id=character.id, memory_id=memory_id, text=text)
        for memory_id, text in zip(ids, texts)
    )


@defer.inlineCallbacks
def measure_search(character):
    """Return the search and recall percentiles at each size."""
    from ai.helpers.memory_links import memory_namespace
    from ai.semantic_memory import WORKER, recall, search_memories

    namespace, rows, filled = memory_namespace(character), [], 0
    for size in SEARCH_SIZES:
        yield fill_memories(character, filled, size)
        filled = size
        queries = [f"Who keeps the {THINGS[i % 9]} of ward {i}?" for i in range(QUERIES)]
        searched, recalled = [], []
        for query in queries:
            started = time.perf_counter()
            yield WORKER.call(search_memories, namespace, query, 5)
            searched.append(time.perf_counter() - started)
            started = time.perf_counter()
            yield recall(character, query, None, 5)
            recalled.append(time.perf_counter() - started)
        search_p50, search_p95 = percentiles(searched)
        recall_p50, recall_p95 = percentiles(recalled)
        rows.append(
            {
                "memories": size,
                "search_p50_ms": search_p50,
                "search_p95_ms": search_p95,
                "recall_p50_ms": recall_p50,
                "recall_p95_ms": recall_p95,
            }
        )
    return rows


def fill_journal(character, start, stop, consolidated):
    """Bulk-insert journal entries ``start`` to ``stop`` (see ``bench/journal.py``)."""
    from journal import fill

    from ai.models import JournalEntry

    fill(character, start, stop)
    JournalEntry.objects.filter(db_object_id=character.id).update(consolidated=consolidated)


@defer.inlineCallbacks
def measure_dreaming_tick(character):
    """Return the reactor thread's CPU time and longest hold of a dreaming tick per size."""
    script, rows, filled = character.assistant_script, [], 0
    for size in TICK_JOURNAL_SIZES:
        fill_journal(character, filled, size, consolidated=True)
        filled = size
        measured = []
        for tick in ("warm-up", "cpu", "hold"):
            add_new_entries(character, f"{size} {tick}")
            gaps, last = [], [time.perf_counter()]

            def probe():
                now = time.perf_counter()
                gaps.append(now - last[0])
                last[0] = now

            probing = task.LoopingCall(probe)
            if tick == "hold":
                probing.start(0.002)
            script.wake_up("bench")
            script.fall_asleep("bench")
            yield script.at_repeat()  # dozing
            cpu, wall = time.thread_time(), time.perf_counter()
            result = (yield script.at_repeat())["memory"]  # dreaming
            measured.append((time.thread_time() - cpu, time.perf_counter() - wall, gaps))
            if probing.running:
                probing.stop()
        (cpu, wall, _), (_, _, gaps) = measured[1], measured[2]
        consolidated = result["memory_consolidation"].get("consolidated_entry_ids") or []
        rows.append(
            {
                "journal_entries": size,
                "consolidated": len(consolidated),
                "reactor_cpu_ms": round(cpu * 1000, 1),
                "longest_hold_ms": round(max(gaps) * 1000, 1),
                "tick_wall_ms": round(wall * 1000, 1),
            }
        )
    return rows


def add_new_entries(character, label):
    """Journal ``NEW_ENTRIES`` entries for the next dreaming tick to consolidate."""
    from ai.helpers.journal import add_entry

    for index in range(NEW_ENTRIES):
        text = f"{PEOPLE[index % 8]} found {index} keys in well {label}."
        add_entry(character, text, "conversation")


@defer.inlineCallbacks
def sleep_cycle(script):
    """Send the assistant to sleep and run a dozing and a dreaming tick."""
    script.fall_asleep("bench")
    for _ in range(2):
        yield script.at_repeat()


@defer.inlineCallbacks
def measure_changed_facts():
    """Return, per question, whether long-term memory recalls the current value first."""
    from evennia.utils import create

    from ai.semantic_memory import recall

    character = new_assistant(key="Keeper")
    script = character.assistant_script
    script._stop_task()
    script.attributes.add("max_context_tokens", 2400)  # compactions along the way
    script.set_config("compact_preserve_window", 4)
    speakers = {
        name: create.create_object(
            "evennia.objects.objects.DefaultCharacter", key=name, location=character.location
        )
        for name in PEOPLE[:4]
    }
    for number, (name, line) in enumerate(CONVERSATION + FILLER, start=1):
        speaker = speakers[name]
        event = {"type": "speech", "speaker": speaker.dbref, "speaker_name": name, "text": line}
        script.queue_event(event)
        yield script.at_repeat()
        if number % 4 == 0:
            yield sleep_cycle(script)
    for _ in range(3):
        yield sleep_cycle(script)
    answers = []
    for question, current in QUESTIONS.items():
        found = yield recall(character, question, None, 5)
        holding = [memory["text"] for memory in found if memory["invalid_at"] is None]
        answers.append(
            {
                "question": question,
                "current": current,
                "recalled": holding[0] if holding else None,
                "right": bool(holding) and current.lower() in holding[0].lower(),
                "superseded_recalled": sum(1 for m in found if m["invalid_at"]),
            }
        )
    return answers


@defer.inlineCallbacks
def measure_all():
    """Return the three measurements' results."""
    character = new_assistant(key="Sage")
    character.assistant_script._stop_task()
    search = yield measure_search(character)
    ticks = yield measure_dreaming_tick(character)
    facts = yield measure_changed_facts()
    return search, ticks, facts


def main():
    setup_evennia()
    measured = run_in_reactor(measure_all)
    if isinstance(measured, Failure):
        measured.raiseException()
    search, ticks, facts = measured
    right = sum(answer["right"] for answer in facts)
    at_10000 = next(row for row in search if row["memories"] == 10000)
    report = {
        "unit": "milliseconds",
        "search": search,
        "dreaming_tick": ticks,
        "changed_facts": facts,
        "targets": {
            "search_p50_ms_at_10000": at_10000["search_p50_ms"],
            "search_ok": at_10000["search_p50_ms"] <= TARGET_SEARCH_P50_MS,
            "tick_reactor_cpu_ms_max": max(row["reactor_cpu_ms"] for row in ticks),
            "tick_ok": all(row["reactor_cpu_ms"] <= TARGET_TICK_REACTOR_MS for row in ticks),
            "facts_current": f"{right}/{len(facts)}",
            "facts_ok": right == len(facts),
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
