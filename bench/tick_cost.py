"""Tick cost: what one awake tick costs the reactor thread as history grows.

An assistant on the offline engine with 100, 2,000, 10,000 and 100,000 messages of history
(compaction off, the default 100,000-token window, so the longest histories send only
their newest messages) hears one player's line per tick. For each tick the reactor
thread's CPU time is measured (``time.thread_time()`` in that thread): the model call runs
in a worker thread and does not count, so this is everything else a tick does (reading
history, assembling the prompt, appending, checking the context, running the tools).
Reported per size: the median and the 90th percentile over ``TICKS`` ticks after
``WARM_UP`` untimed ones, and the messages the calls sent.

Everything runs inside Twisted's real reactor, as in the server. Prints JSON; always exits
0 (a report, not a test). Run from the repository root: ``make bench``.
"""

import json
import statistics
import time

from bench_env import new_assistant, setup_evennia
from compaction import MODEL, fill_history, history_rows
from play import run_in_reactor
from twisted.internet import defer
from twisted.python.failure import Failure

SIZES = (100, 2000, 10000, 100000)
TICKS = 20
WARM_UP = 3
TARGET_MS_AT_2000 = 10
TARGET_SCALING = 1.5


def prepared_assistant(size):
    """Return an assistant with ``size`` messages of history and a player beside it."""
    from evennia.utils import create

    character = new_assistant(key=f"Sage{size}")
    script = character.assistant_script
    script._stop_task()
    fill_history(script, history_rows(size))
    script.set_config("compact_enabled", False)
    player = create.create_object(
        "evennia.objects.objects.DefaultCharacter", key="Alice", location=character.location
    )
    return script, player


def event(player, index):
    """Return the ``index``-th line the player says to the assistant."""
    text = f"Sage, tick {index}: did the lantern by the north gate flicker again?"
    return {"type": "speech", "speaker": player.dbref, "speaker_name": player.key, "text": text}


@defer.inlineCallbacks
def measure(size):
    """Return the reactor CPU milliseconds of ``TICKS`` awake ticks at ``size`` messages."""
    from ai import llm_interaction

    script, player = prepared_assistant(size)
    sent = []
    original = llm_interaction._complete

    def counting(model, messages, *args, **kwargs):
        sent.append(len(messages))
        return original(model, messages, *args, **kwargs)

    llm_interaction._complete = counting
    try:
        times = []
        for index in range(WARM_UP + TICKS):
            script.queue_event(event(player, index))
            started = time.thread_time()
            yield script.at_repeat()
            times.append((time.thread_time() - started) * 1000)
    finally:
        llm_interaction._complete = original
    measured = sorted(times[WARM_UP:])
    return {
        "history": size,
        "tick_ms_median": round(statistics.median(measured), 1),
        "tick_ms_p90": round(measured[int(len(measured) * 0.9) - 1], 1),
        "messages_sent_median": statistics.median(sent),
    }


@defer.inlineCallbacks
def measure_all():
    """Return one row per size."""
    rows = []
    for size in SIZES:
        rows.append((yield measure(size)))
    return rows


def main():
    setup_evennia()
    rows = run_in_reactor(measure_all)
    if isinstance(rows, Failure):
        rows.raiseException()
    at = {row["history"]: row["tick_ms_median"] for row in rows}
    report = {
        "unit": "milliseconds of reactor-thread CPU per awake tick, model call excluded",
        "model": MODEL,
        "ticks": rows,
        "targets": {
            "at_2000_ms": at[2000],
            "at_2000_ok": at[2000] <= TARGET_MS_AT_2000,
            "scaling_100000_over_2000": round(at[100000] / at[2000], 2),
            "scaling_ok": at[100000] <= TARGET_SCALING * at[2000],
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
