"""Server start: what a start (or reload) with many assistants costs the reactor thread.

A reload or shutdown pauses every script's timer (``_pause_task``) and calls its
``at_server_reload``; the next start walks every active script in one loop
(``ScriptDB.objects.update_scripts_after_server_start``): it restarts each script's timer
and calls its ``at_server_start``. Nothing else runs on the reactor until the loop ends,
so its length is a stall that every player feels. For ``SIZES`` assistants, paused as a
reload pauses them and with the object cache emptied as in a new process, this runs that
loop once inside the reactor and reports, in reactor-thread CPU (``time.thread_time()``):
the whole loop, the part spent in ``AssistantScript.at_server_start`` (the contrib's), the
database queries of each; then, from the loop's end until every timer runs again and what
the hooks handed to threads (litellm, a tokenizer, the embedder) is loaded, with what its
end runs in the reactor (freezing what was loaded), the longest reactor turn (and the
longest wall-clock gap between turns); and the reactor's CPU from the loop's start until
every timer runs (the restarts the contrib moves out of the loop run in later turns,
beside the first ticks). Prints JSON; always exits 0.

Before each loop it calls the server plugin hook a game installs (``ai.server_services``:
Evennia calls it before its reactor runs, so its CPU, ``before_serving_ms``, is no stall);
``--without-before-serving`` leaves it out, as a game without it in
``SERVER_SERVICES_PLUGIN_MODULES`` starts. One process imports the embedder's libraries
once: only the first size shows what the hook changes.

Run from the repository root: ``python bench/startup.py`` (``make bench`` runs it).
"""

import json
import os
import sys
import time

from bench_env import new_assistant, setup_evennia
from twisted.internet import defer, reactor, task, threads

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_DIR, "demo"))

from play import run_in_reactor  # noqa: E402  (demo/play.py)

SIZES = (50, 200)
TARGET_STALL_MS = 200


def _paused_as_by_a_reload():
    """Pause every active script and call its ``at_server_reload``, as a reload does."""
    from evennia.scripts.models import ScriptDB

    for script in ScriptDB.objects.filter(db_is_active=True):
        script._pause_task(auto_pause=True)
        script.at_server_reload()


class _TurnProbe:
    """Keeps, while it runs, the most reactor-thread CPU spent between two reactor turns and
    the longest wall-clock gap between them (which also holds other threads' turns with
    the GIL: a garbage collection in a loading thread, and the machine's other load)."""

    def __init__(self):
        self.longest_cpu, self.longest_gap, self.running = 0.0, 0.0, True
        reactor.callLater(0, self._probe, time.thread_time(), time.monotonic())

    def _probe(self, cpu, wall):
        self.longest_cpu = max(self.longest_cpu, time.thread_time() - cpu)
        self.longest_gap = max(self.longest_gap, time.monotonic() - wall)
        if self.running:
            reactor.callLater(0, self._probe, time.thread_time(), time.monotonic())

    def stop(self):
        """Stop probing; return the longest turn's CPU and the longest gap, in ms."""
        self.running = False
        return round(self.longest_cpu * 1000, 1), round(self.longest_gap * 1000, 1)


@defer.inlineCallbacks
def _until(done, at_most_s=300):
    """Fire once ``done()`` is true (checked every 10 ms), or after ``at_most_s`` seconds:
    a timer that never restarts shows in the report (``timers_running``), not as a hang."""
    gives_up = time.monotonic() + at_most_s
    while not done() and time.monotonic() < gives_up:
        yield task.deferLater(reactor, 0.01, lambda: None)


def _counting_queries():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    return CaptureQueriesContext(connection)


@defer.inlineCallbacks
def measure(count, made, before_serving):
    """Create assistants up to ``count`` (``made`` exist), then time one start loop, after
    the server plugin hook if ``before_serving``."""
    from evennia.scripts.models import ScriptDB
    from evennia.utils.idmapper.models import flush_cache

    from ai.assistant_script import AssistantScript
    from ai.semantic_memory import WORKER
    from ai.server_services import start_plugin_services

    for number in range(made, count):
        new_assistant(f"Helper{number}")
    _paused_as_by_a_reload()
    flush_cache()
    before_serving_cpu = None
    if before_serving:
        started = time.thread_time()
        start_plugin_services(None)
        before_serving_cpu = time.thread_time() - started
    hook = AssistantScript.at_server_start
    spent = {"cpu": 0.0, "queries": 0, "calls": 0}

    def timed_hook(script):
        with _counting_queries() as queries:
            started = time.thread_time()
            hook(script)
            spent["cpu"] += time.thread_time() - started
        spent["queries"] += len(queries.captured_queries)
        spent["calls"] += 1

    AssistantScript.at_server_start = timed_hook
    try:
        with _counting_queries() as queries:
            started = time.thread_time()
            ScriptDB.objects.update_scripts_after_server_start()
            loop_cpu = time.thread_time() - started
    finally:
        AssistantScript.at_server_start = hook
    # Until every timer runs again and what the hooks handed to threads (loading litellm and
    # the embedder) is done, with what its end runs in the reactor.
    probe = _TurnProbe()
    scripts = list(ScriptDB.objects.filter(db_is_active=True))
    yield _until(lambda: all(script.ndb._task and script.ndb._task.running for script in scripts))
    until_running_cpu = time.thread_time() - started
    yield threads.deferToThread(lambda: None)
    yield WORKER.preload()
    yield task.deferLater(reactor, 0.1, lambda: None)
    longest_turn, longest_gap = probe.stop()
    return {
        "assistants": count,
        "before_serving_ms": before_serving_cpu and round(before_serving_cpu * 1000, 1),
        "hooks_called": spent["calls"],
        "loop_ms": round(loop_cpu * 1000, 1),
        "loop_queries": len(queries.captured_queries),
        "contrib_hooks_ms": round(spent["cpu"] * 1000, 1),
        "contrib_ms_per_assistant": round(spent["cpu"] * 1000 / max(spent["calls"], 1), 2),
        "contrib_queries_per_assistant": round(spent["queries"] / max(spent["calls"], 1), 1),
        "longest_turn_after_ms": longest_turn,
        "longest_gap_after_ms": longest_gap,
        "until_timers_run_ms": round(until_running_cpu * 1000, 1),
        "timers_running": sum(
            bool(script.ndb._task and script.ndb._task.running) for script in scripts
        ),
        "stall_target_met": max(loop_cpu * 1000, longest_turn) <= TARGET_STALL_MS,
    }


@defer.inlineCallbacks
def run(before_serving):
    results, made = [], 0
    for count in SIZES:
        results.append((yield measure(count, made, before_serving)))
        made = count
    return results


def main():
    before_serving = "--without-before-serving" not in sys.argv[1:]
    setup_evennia()
    results = run_in_reactor(run, before_serving)
    if not isinstance(results, list):
        results.raiseException()
    print(json.dumps({"target_stall_ms": TARGET_STALL_MS, "starts": results}, indent=2))


if __name__ == "__main__":
    main()
