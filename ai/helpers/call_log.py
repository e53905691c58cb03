"""The recent model runs of an assistant: the context each call ran in, and how it ended.

The calls of a context that records history leave their messages there, marked with the
context (``metadata["context"]``); those of the others (``pre_compaction``, ``reflection``,
``sleep_consolidate``, a sub-agent...) leave nothing in it. This log keeps the last
``RUNS_KEPT`` loop runs of every context for ``aihistory``: small state on the script,
bounded, written once per run that called the model.
"""

from django.utils import timezone

RUNS_KEPT = 20


def note_run(script, context_type, calls, stop_reason, audience=None):
    """Keep one run of the loop: when, its context, its model calls and why it stopped.

    A run that made no call (its prompt did not fit) is not kept: it called nothing.
    """
    if not calls:
        return
    runs = list(script.db.model_runs or [])[-(RUNS_KEPT - 1) :]
    runs.append(
        {
            "at": timezone.now().isoformat(),
            "context": context_type,
            "calls": calls,
            "stop_reason": stop_reason,
            "audience": audience,
        }
    )
    script.db.model_runs = runs


def recent_runs(script):
    """Return the kept runs of ``script``, oldest first (see ``note_run``)."""
    return list(script.db.model_runs or [])
