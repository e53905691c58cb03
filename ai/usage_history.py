"""The history of context usage: one ``TickUsage`` row a tick, the newest few kept.

Recording must not cost the tick (see docs/benchmarks.md, "Usage history"), so the tokens
are not measured for it: rendering the prompt's frame is the costliest part of measuring
a context. A row takes the live history's tokens after the tick from the history's
counter (one indexed read) and adds the frame's tokens of the latest measure, which the
tick itself made (``measure_context`` keeps it as ``script.ndb.context_usage``): the
emergency check of every awake tick with compaction on, and the layer-3 signals of every
turn, measure the context. The tokens a model call reported were not chosen: a tick
without a call (idle, asleep) has none, and a call sends only the history its budget
holds, which is not what the thresholds are drawn against. Before the first measure since
the server started, a row holds the history's tokens alone.

The row is one plain-SQL INSERT in the reactor thread (``ai.utils.raw_rows``). Every
``usage_history_rows // 10`` ticks (and the first tick after a start) one DELETE drops
the rows older than the newest ``usage_history_rows`` of the assistant, so it never
holds more than ``usage_history_rows`` plus a tenth (at least one row) more.
"""

from django.db import connection
from django.utils import timezone

from .llm_interaction import context_window
from .models import TickUsage
from .utils.raw_rows import insert_row, select_rows

# A prune every tenth of the kept rows: the table exceeds its bound by at most that.
PRUNE_SHARE = 10


def prune_interval(rows):
    """Return the ticks between two prunes when ``rows`` rows are kept."""
    return max(1, rows // PRUNE_SHARE)


def record_tick(script, result, config):
    """Write the usage row of the tick that ended with ``result``, pruning when it is due.

    Args:
        script (AssistantScript): The assistant whose tick ended.
        result (dict): The tick's result; its ``status`` is recorded.
        config (dict): The tick's configuration (``usage_history_rows``; 0 records nothing).
    """
    rows = config["usage_history_rows"]
    if not rows:
        return
    history_tokens, _ = script.history.totals()
    measured = script.ndb.context_usage
    insert_row(
        TickUsage,
        {
            "db_script_id": script.id,
            "created_at": timezone.now(),
            "tokens": history_tokens + (measured.frame_tokens if measured else 0),
            "max_tokens": measured.max_tokens if measured else context_window(script),
            "status": str((result or {}).get("status"))[:32],
            "asleep": script.db.operating_mode == "sleep",
        },
    )
    due = script.ndb.ticks_to_usage_prune
    if due:
        script.ndb.ticks_to_usage_prune = due - 1
        return
    prune(script, rows)
    script.ndb.ticks_to_usage_prune = prune_interval(rows) - 1


def prune(script, rows):
    """Delete the usage rows of ``script`` older than its newest ``rows``, in one statement.

    Returns:
        int: The rows deleted.
    """
    table = connection.ops.quote_name(TickUsage._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {table} WHERE db_script_id = %s AND id < (SELECT id FROM {table} "
            "WHERE db_script_id = %s ORDER BY id DESC LIMIT 1 OFFSET %s)",
            [script.id, script.id, rows - 1],
        )
        return cursor.rowcount


def usage_rows(script, limit=None):
    """Return the recorded usage of ``script``, oldest first.

    Args:
        limit (int, optional): Only the newest this many rows.

    Returns:
        list: ``(created_at, tokens, max_tokens, status, asleep)`` tuples.
    """
    names = ["created_at", "tokens", "max_tokens", "status", "asleep"]
    tail, params = "ORDER BY id DESC", [script.id]
    if limit is not None:
        tail, params = f"{tail} LIMIT %s", [script.id, limit]
    return select_rows(TickUsage, names, "db_script_id = %s", params, tail)[::-1]
