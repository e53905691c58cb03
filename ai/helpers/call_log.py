"""The recent model runs of an assistant: the context each call ran in, and how it ended.

The calls of a context that records history leave their messages there, marked with the
context (``metadata["context"]``); those of the others (``pre_compaction``, ``reflection``,
``sleep_consolidate``, a sub-agent...) leave nothing in it. This log keeps the last
``RUNS_KEPT`` loop runs of each assistant for ``aihistory``: a ``ModelRun`` row per run
that called the model, inserted in plain SQL; the older rows are pruned every
``RUNS_KEPT`` runs, so a script holds at most twice that many.
"""

from django.utils import timezone

from ..models import ModelRun
from ..utils.raw_rows import insert_row

RUNS_KEPT = 20
FIELDS = ("created_at", "context", "calls", "stop_reason", "audience")


def note_run(script, context_type, calls, stop_reason, audience=None):
    """Keep one run of the loop: when, its context, its model calls and why it stopped.

    A run that made no call (its prompt did not fit) is not kept: it called nothing.
    """
    if not calls:
        return
    insert_row(
        ModelRun,
        {
            "db_script_id": script.id,
            "created_at": timezone.now(),
            "context": context_type,
            "calls": calls,
            "stop_reason": stop_reason,
            "audience": audience,
        },
    )
    noted = (script.ndb.model_runs_noted or 0) + 1
    script.ndb.model_runs_noted = noted % RUNS_KEPT
    if noted == 1:  # the first of this process, then every RUNS_KEPT
        rows = ModelRun.objects.filter(db_script_id=script.id).order_by("-id")
        newest = list(rows.values_list("id", flat=True)[:RUNS_KEPT])
        if len(newest) == RUNS_KEPT:
            rows.filter(id__lt=newest[-1]).delete()


def recent_runs(script):
    """Return the last ``RUNS_KEPT`` runs of ``script``, oldest first, each a dict: ``at``
    (ISO time), ``context``, ``calls``, ``stop_reason`` and ``audience``."""
    rows = ModelRun.objects.filter(db_script_id=script.id).order_by("-id")[:RUNS_KEPT]
    return [
        {
            "at": run["created_at"].isoformat(),
            "context": run["context"],
            "calls": run["calls"],
            "stop_reason": run["stop_reason"],
            "audience": run["audience"],
        }
        for run in reversed(rows.values(*FIELDS))
    ]
