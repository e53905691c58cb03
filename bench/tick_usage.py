"""Usage history: what writing one ``TickUsage`` row a tick costs the reactor thread.

The same assistant ticks with ``usage_history_rows`` 0 (nothing recorded) and 2000 (the
default) in alternating blocks of ``TICKS`` ticks, ``ROUNDS`` times, the order of the two
swapped every round, so that both see the same machine. Each tick's reactor-thread CPU
time is measured as in ``tick_cost.py`` (``time.thread_time()``; model calls run on a
worker thread and do not count). Three ticks, on the assistants of ``tick_cost.py``
(2,000 messages of history, compaction off):

- ``idle``: no event, no goal, nothing due: the cheapest tick, which measures no context,
  so its row takes the context limit from the configuration;
- ``idle_compaction_on``: the same with ``compact_enabled`` on (the default), whose
  emergency check measures the context every awake tick;
- ``conversation``: one player's line a tick, answered by the offline engine.

Reported per tick: the median and 90th percentile with and without recording, the ratio
of the medians, the ratio of each round's medians, and the rows the table held at the end.
Beside them, in reactor-thread CPU: ``record_tick`` alone (``RECORDS`` calls), apart from
and with the flush that writes ``FLUSH_TICKS`` rows (the first, which prunes, left out),
and one prune of ``PRUNED`` rows beyond the 2,000 kept. Prints JSON; always exits 0.
Run from the repository root: ``python bench/tick_usage.py`` (from a checkout other than
the installed one, put it first on ``PYTHONPATH``).
"""

import json
import os
import statistics
import sys
import time

from bench_env import setup_evennia
from tick_cost import IDLE_HISTORY, WARM_UP, event, prepared_assistant, timed_tick
from twisted.internet import defer
from twisted.python.failure import Failure

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_DIR, "demo"))

from play import run_in_reactor  # noqa: E402  (demo/play.py)

TICKS = 20
ROUNDS = 5
KEPT = 2000  # the default usage_history_rows
RECORDS = 200
PRUNED = 200  # the rows one prune deletes at the default: a tenth of those kept


def percentile_90(values):
    ordered = sorted(values)
    return ordered[int(len(ordered) * 0.9) - 1]


@defer.inlineCallbacks
def measure(kind):
    """Return the reactor CPU of ``kind`` ticks with and without recording."""
    from ai.models import TickUsage

    script, player = prepared_assistant(IDLE_HISTORY)
    script.set_config("sleep_after_idle_ticks", 0)
    if kind == "idle_compaction_on":
        script.set_config("compact_enabled", True)
    times = {0: [], KEPT: []}
    rounds = []
    index = 0
    for round_ in range(ROUNDS):
        order = (0, KEPT) if round_ % 2 == 0 else (KEPT, 0)
        block = {}
        for rows in order:
            script.set_config("usage_history_rows", rows)
            block[rows] = []
            for tick in range(WARM_UP + TICKS):
                if kind == "conversation":
                    script.queue_event(event(player, index))
                    index += 1
                result, took = yield timed_tick(script)
                if tick >= WARM_UP:
                    block[rows].append(took)
            times[rows] += block[rows]
        rounds.append(round(statistics.median(block[KEPT]) / statistics.median(block[0]), 3))
    off, on = statistics.median(times[0]), statistics.median(times[KEPT])
    return {
        "status": result["status"],
        "without_ms_median": round(off, 3),
        "without_ms_p90": round(percentile_90(times[0]), 3),
        "with_ms_median": round(on, 3),
        "with_ms_p90": round(percentile_90(times[KEPT]), 3),
        "ratio_of_medians": round(on / off, 3),
        "ratio_per_round": rounds,
        "ticks_each": len(times[0]),
        "rows_kept": TickUsage.objects.filter(db_script_id=script.id).count(),
    }


def measure_parts():
    """Return the reactor CPU of ``record_tick`` alone, of one flush (``FLUSH_TICKS`` rows,
    no prune) and of one prune, each in a tick's resolved configuration."""
    from ai.models import TickUsage
    from ai.usage_history import FLUSH_TICKS, flush_usage, prune, record_tick

    script, _ = prepared_assistant(IDLE_HISTORY)
    script.set_config("usage_history_rows", KEPT)
    config = script.ndb.tick_config = script.effective_config()
    result = {"status": "idle"}
    kept, flushes = [], []
    for _ in range(RECORDS):
        started = time.thread_time()
        record_tick(script, result, config)
        took = (time.thread_time() - started) * 1000
        if script.ndb.usage_buffer:
            kept.append(took)
        else:
            flushes.append(took)
    TickUsage.objects.bulk_create(
        TickUsage(db_script_id=script.id, tokens=1, max_tokens=1, status="idle")
        for _ in range(KEPT + PRUNED - RECORDS)
    )
    started = time.thread_time()
    deleted = prune(script, KEPT)
    pruning = (time.thread_time() - started) * 1000
    flush_usage(script)
    script.ndb.tick_config = None
    return {
        "record_tick_ms_median": round(statistics.median(kept), 3),
        "record_tick_ms_p90": round(percentile_90(kept), 3),
        f"with_flush_of_{FLUSH_TICKS}_ms_median": round(statistics.median(flushes[1:]), 3),
        "prune_ms": round(pruning, 3),
        "pruned_rows": deleted,
    }


@defer.inlineCallbacks
def measure_all():
    report = {}
    for kind in ("idle", "idle_compaction_on", "conversation"):
        report[kind] = yield measure(kind)
    report["parts"] = measure_parts()
    return report


def main():
    setup_evennia()
    measured = run_in_reactor(measure_all)
    if isinstance(measured, Failure):
        measured.raiseException()
    report = {
        "unit": "milliseconds of reactor-thread CPU per tick, model calls excluded",
        "history": IDLE_HISTORY,
        "usage_history_rows": {"without": 0, "with": KEPT},
        "rounds": ROUNDS,
        **measured,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
