"""Journal cost: one ``add_entry`` and one search as the journal grows to 100,000 entries.

The journal is rows of ``ai.models.JournalEntry`` with a word index (``JournalWord``); an
entry costs one INSERT and one bulk INSERT of its words, and a search reads the entries
that share a word with the query. Each size is filled with bulk inserts of entries like
the ones the assistant writes, then ``add_entry`` and ``search_entries`` are timed in thread
CPU time (``time.thread_time``), which the machine's other load inflates less than wall
time. Prints JSON with the median CPU milliseconds at each size and whether the targets are
met; it always exits 0, since it is a report rather than a test.

Run from the repository root: ``make bench``, or ``PYTHONPATH=. .venv/bin/python
bench/journal.py`` to measure this checkout rather than the installed ``ai``.
"""

import json

from bench_env import median_cpu_ms, new_assistant, setup_evennia

SIZES = (100, 1000, 20000, 100000)
REPS = 30
TARGET_ADD_MS = 2
TARGET_SEARCH_MS_AT_20000 = 10
PEOPLE = ("Alice", "Bob", "Carol", "Dana", "Eli", "Finn", "Gus", "Hana")
THINGS = ("forge", "ferry", "oak", "cellar", "horse", "map", "bees", "silver", "lantern")


def fact(index):
    """Return the ``index``-th planted fact: varied people, things and numbers."""
    who, what = PEOPLE[index % len(PEOPLE)], THINGS[(index // 8) % len(THINGS)]
    return f"{who} said the {what} number {index} is kept by the north gate of ward {index % 97}."


def fill(character, start, stop):
    """Bulk-insert entries ``start`` to ``stop`` with their words, as ``add_entry`` writes."""
    from django.db import transaction
    from django.utils import timezone

    from ai.helpers.journal import digest, indexed_words
    from ai.importance_scoring import heuristic_importance
    from ai.models import JournalEntry, JournalWord

    for chunk in range(start, stop, 5000):
        indices = range(chunk, min(chunk + 5000, stop))
        with transaction.atomic():
            rows = JournalEntry.objects.bulk_create(
                JournalEntry(
                    db_object_id=character.id,
                    entry_id=f"bench_{index}",
                    timestamp=timezone.now(),
                    content=fact(index),
                    normalized=digest(fact(index)),
                    source_type="conversation",
                    importance=1 + index % 10,
                    tags=[PEOPLE[index % len(PEOPLE)].lower()],
                    score=heuristic_importance(fact(index), "conversation", 1 + index % 10),
                )
                for index in indices
            )
            JournalWord.objects.bulk_create(
                JournalWord(entry_id=row.id, db_object_id=character.id, word=word)
                for row in rows
                for word in indexed_words(row.content, row.tags)
            )


def main():
    setup_evennia()
    from ai.helpers.journal import add_entry, search_entries

    character = new_assistant()
    results, filled = [], 0
    for size in SIZES:
        fill(character, filled, size)
        filled = size
        add_ms = median_cpu_ms(
            lambda rep: add_entry(character, f"Ivo said the kiln {rep} heats at dawn.", "bench"),
            REPS,
        )
        filled += REPS
        search_ms = median_cpu_ms(
            lambda rep: search_entries(character, f"Where is the ferry number {rep * 7}?", 3),
            REPS,
        )
        results.append({"entries": size, "add_entry_ms": add_ms, "search_ms": search_ms})
    at_20000 = next(row for row in results if row["entries"] == 20000)
    print(
        json.dumps(
            {
                "unit": "median thread CPU milliseconds per call",
                "reps": REPS,
                "sizes": results,
                "targets": {
                    "add_entry_ms_at_most": TARGET_ADD_MS,
                    "add_entry_ok": all(row["add_entry_ms"] <= TARGET_ADD_MS for row in results),
                    "search_ms_at_20000_at_most": TARGET_SEARCH_MS_AT_20000,
                    "search_ok": at_20000["search_ms"] <= TARGET_SEARCH_MS_AT_20000,
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
