"""Server start: what the start hooks of many assistants cost the reactor thread.

At a server start (or reload) Evennia walks every active script in one loop
(``ScriptDB.objects.update_scripts_after_server_start``): it restarts each script's timer
and calls its ``at_server_start``. Nothing else runs on the reactor until the loop ends,
so its length is a stall that every player feels. For ``SIZES`` assistants, with the
object cache emptied as in a new process, this runs that loop once inside the reactor and
reports, in reactor-thread CPU (``time.thread_time()``): the whole loop, the part spent in
``AssistantScript.at_server_start`` (the contrib's), and the database queries of each.
Work the hooks hand to threads (loading litellm and the embedder) is not the reactor's and
is waited for before the next size. Prints JSON; always exits 0.

Run from the repository root: ``python bench/startup.py`` (``make bench`` runs it).
"""

import json
import os
import sys
import time

from bench_env import new_assistant, setup_evennia
from twisted.internet import defer, threads

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_DIR, "demo"))

from play import run_in_reactor  # noqa: E402  (demo/play.py)

SIZES = (50, 200)
TARGET_STALL_MS = 200


def _counting_queries():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    return CaptureQueriesContext(connection)


@defer.inlineCallbacks
def measure(count, made):
    """Create assistants up to ``count`` (``made`` exist), then time one start loop."""
    from evennia.scripts.models import ScriptDB
    from evennia.utils.idmapper.models import flush_cache

    from ai.assistant_script import AssistantScript
    from ai.semantic_memory import WORKER

    for number in range(made, count):
        new_assistant(f"Helper{number}")
    flush_cache()
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
    # What the hooks handed to threads, finished before the next size is measured.
    yield threads.deferToThread(lambda: None)
    yield WORKER.preload()
    return {
        "assistants": count,
        "hooks_called": spent["calls"],
        "loop_ms": round(loop_cpu * 1000, 1),
        "loop_queries": len(queries.captured_queries),
        "contrib_hooks_ms": round(spent["cpu"] * 1000, 1),
        "contrib_ms_per_assistant": round(spent["cpu"] * 1000 / max(spent["calls"], 1), 2),
        "contrib_queries_per_assistant": round(spent["queries"] / max(spent["calls"], 1), 1),
        "stall_target_met": loop_cpu * 1000 <= TARGET_STALL_MS,
    }


@defer.inlineCallbacks
def run():
    results, made = [], 0
    for count in SIZES:
        results.append((yield measure(count, made)))
        made = count
    return results


def main():
    setup_evennia()
    results = run_in_reactor(run)
    if not isinstance(results, list):
        results.raiseException()
    print(json.dumps({"target_stall_ms": TARGET_STALL_MS, "starts": results}, indent=2))


if __name__ == "__main__":
    main()
