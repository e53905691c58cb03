"""Reactor lag: does the reactor keep turning with 50, 100 and 200 assistants?

In one process, with Twisted's real reactor as in the server: ``N`` assistants of 2,000
messages each, their scripts ticking at the default interval on their own timers, each
hearing one player's line per interval (at a random phase). A probe scheduled every 10 ms
records how late it fires: the time every player's command would wait. Run once with
the offline engine and once with a remote-model stand-in (each model call sleeps
``REMOTE_SECONDS`` in its thread and answers with a ``say``: the latency of a provider,
without the network).

Reported per run: the probe's lag p50 / p99 / max, each stall over ``TARGET_MAX_MS`` (when
it began, in seconds after the warm-up, and how long it was), the ticks that were skipped
because the previous one was still running, the probe fires lost (a timer that could not
fire on time for a whole period), the ticks started and the main thread's CPU per tick.
Each run is its own process (a reactor runs once per process). Prints JSON; always exits 0
(a report, not a test). Run from the repository root: ``make bench`` (it takes about
fifteen minutes), or one run: ``.venv/bin/python bench/reactor_lag.py --run 100 offline``
(``--run 200 remote 60`` runs it with a model pool of 60 threads, ``AI_LLM_THREADS``).
"""

import json
import random
import statistics
import subprocess
import sys
import time

from bench_env import new_assistant, setup_evennia
from compaction import fill_history, history_rows
from twisted.internet import defer, reactor, task

RUNS = ((50, "offline"), (50, "remote"), (100, "offline"), (200, "offline"), (200, "remote"))
HISTORY = 2000
DURATION_S = 60
WARM_UP_S = 10
PROBE_S = 0.01
REMOTE_SECONDS = 0.8
# The model the stand-in answers for: a remote provider's name, so that the call takes the
# path of a remote model (its thread pool, its tokenizer); the network is never reached.
REMOTE_MODEL = "openai/gpt-4o-mini"
TARGET_P99_MS = 50
TARGET_MAX_MS = 200


def remote_stand_in(model, messages, tools, *args, **kwargs):
    """Stand in for a remote model: wait as a provider would, then say one line."""
    from ai.llm_interaction import LLMResult

    time.sleep(REMOTE_SECONDS)
    call = {
        "id": f"call_{random.randrange(10**9)}",
        "type": "function",
        "function": {"name": "say", "arguments": '{"message": "The lantern? Still lit."}'},
    }
    return LLMResult(ok=True, content="", tool_calls=[call], model=model)


def build(count, model):
    """Return ``count`` assistants of ``model`` with ``HISTORY`` messages each, and a player
    beside each."""
    from evennia.utils import create

    rows = history_rows(HISTORY)
    pairs = []
    for index in range(count):
        character = new_assistant(key=f"Sage{index}")
        script = character.assistant_script
        script._stop_task()
        script.set_config("llm_model", model)
        fill_history(script, rows)
        script.history.totals()  # recounted now for ``model``'s tokenizer, not in a tick
        script.set_config("compact_enabled", False)
        player = create.create_object(
            "evennia.objects.objects.DefaultCharacter",
            key=f"Alice{index}",
            location=character.location,
        )
        pairs.append((script, player))
    return pairs


def talk(script, player):
    """Queue one line from ``player`` for the script's next tick."""
    script.queue_event(
        {
            "type": "speech",
            "speaker": player.dbref,
            "speaker_name": player.key,
            "text": "Sage, did the lantern by the north gate flicker again tonight?",
        }
    )


@defer.inlineCallbacks
def measure(count, engine):
    """Run the scenario and return its figures."""
    from ai import llm_interaction
    from ai.config import ai_setting
    from ai.offline import DEFAULT_MODEL
    from ai.semantic_memory import WORKER
    from ai.utils.gc_freeze import freeze_when_loaded

    model = DEFAULT_MODEL
    if engine == "remote":
        llm_interaction._complete, model = remote_stand_in, REMOTE_MODEL
    interval = ai_setting("AI_TICK_INTERVAL")
    pairs = build(count, model)
    # As the server does at start: Mem0 loads before any tick, then what is loaded is
    # left out of garbage collection.
    yield freeze_when_loaded(WORKER.preload())
    ticks, lags, lost, loops, late = [0], [], [0], [], []

    def counted(tick):
        def run():
            ticks[0] += 1
            return tick()

        return run

    for script, player in pairs:
        script.at_repeat = counted(script.at_repeat)
        talking = task.LoopingCall(talk, script, player)
        phase = random.uniform(0, interval)
        reactor.callLater(phase, talking.start, interval, now=True)
        # The script's own timer, as in the server: it ticks whether or not the last tick
        # has finished (a tick still running is skipped by ``at_repeat``).
        reactor.callLater(phase + interval / 2, script._start_task, start_delay=False)
        loops.append(talking)
    started, last = time.monotonic(), [time.monotonic()]

    def probe(missed):
        now = time.monotonic()
        if now - started > WARM_UP_S:
            lags.append(max(0.0, now - last[0] - PROBE_S))
            if lags[-1] > TARGET_MAX_MS / 1000:
                late.append((round(last[0] - started - WARM_UP_S, 1), round(lags[-1] * 1000)))
            lost[0] += missed - 1
        last[0] = now

    probing = task.LoopingCall.withCount(probe)
    probing.start(PROBE_S, now=False)
    cpu = time.thread_time()
    ticks_before = [0]
    reactor.callLater(WARM_UP_S, lambda: ticks_before.__setitem__(0, ticks[0]))
    yield task.deferLater(reactor, WARM_UP_S + DURATION_S, lambda: None)
    cpu = time.thread_time() - cpu
    probing.stop()
    for loop in loops:
        loop.stop()
    for script, _ in pairs:
        script._stop_task()
    ordered = sorted(lags)
    run_ticks = ticks[0] - ticks_before[0]
    skipped = sum(script.ndb.skipped_ticks or 0 for script, _ in pairs)
    return {
        "assistants": count,
        "engine": engine,
        "history_per_assistant": HISTORY,
        "interval_s": interval,
        "measured_s": DURATION_S,
        "lag_p50_ms": round(statistics.median(ordered) * 1000, 1),
        "lag_p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 1),
        "lag_max_ms": round(ordered[-1] * 1000, 1),
        "ticks_started": run_ticks,
        "ticks_skipped": skipped,
        "probe_fires_lost": lost[0],
        "main_thread_cpu_ms_per_tick": round(cpu * 1000 / max(ticks[0], 1), 1),
        "stalls_over_max": late,
    }


def run_one(count, engine, threads=None):
    """Measure one run in this process and print its JSON; ``threads`` sets
    ``AI_LLM_THREADS`` (the model pool) instead of the default."""
    setup_evennia()
    from django.conf import settings
    from play import run_in_reactor

    if threads:
        settings.AI_LLM_THREADS = threads
    result = run_in_reactor(measure, count, engine)
    if not isinstance(result, dict):
        result.raiseException()
    print(json.dumps(dict(result, model_threads=threads or "default")))


def main():
    if sys.argv[1:2] == ["--run"]:
        run_one(*map(int, sys.argv[2:3]), sys.argv[3], *map(int, sys.argv[4:5]))
        return
    rows = []
    for count, engine in RUNS:
        done = subprocess.run(
            [sys.executable, __file__, "--run", str(count), engine],
            capture_output=True,
            text=True,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        rows.append(
            json.loads(lines[-1])
            if lines
            else {"assistants": count, "engine": engine, "error": done.stderr[-2000:]}
        )
    fifty = [row for row in rows if row["assistants"] == 50 and "lag_p99_ms" in row]
    report = {
        "unit": "milliseconds",
        "runs": rows,
        "targets": {
            "p99_ms_at_50": max((row["lag_p99_ms"] for row in fifty), default=None),
            "max_ms_at_50": max((row["lag_max_ms"] for row in fifty), default=None),
            "ok": bool(fifty)
            and all(
                row["lag_p99_ms"] < TARGET_P99_MS and row["lag_max_ms"] < TARGET_MAX_MS
                for row in fifty
            ),
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
