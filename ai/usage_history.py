"""The history of context usage: one ``TickUsage`` row a tick, the newest few kept.

Recording must not cost the tick (see docs/benchmarks.md, "Usage history"), so nothing is
measured or read for it. A row holds the context usage the tick itself measured last,
which ``measure_context`` keeps as ``script.ndb.context_usage``: the emergency check of
every awake tick with compaction on (a turn's layer-3 signals reuse its frame, with the
history read again after the player's line), the check after an emergency compaction and
the sleep pipeline's checks each measure the context, so the row holds what the thresholds
were compared with (on a turn, before its reply was appended). A tick that measured
nothing (compaction off and no turn, or dozing) changed no history and keeps the previous
measure. Before the first measure since the server started, the rows hold the history's
tokens alone, read once from its counter. The tokens a model call reported were not
chosen: a tick without a call (idle, asleep) has none, and a call sends only the history
its budget holds, which is not what the thresholds are drawn against.

A write and its commit cost as much as a whole idle tick, so rows wait in memory
(``script.ndb.usage_buffer``) and ``FLUSH_TICKS`` of them are written together, in the
reactor thread, in one transaction; a reload or shutdown writes those waiting
(``AssistantScript.at_server_reload``). Every ``prune_interval`` ticks the same
transaction deletes the rows older than the newest ``usage_history_rows`` of the
assistant, in one statement (and the first flush after a start does), so it never holds,
table and memory together, more than ``usage_history_rows + prune_interval + FLUSH_TICKS``
rows: at the default 2,000, 2,230.
"""

from django.db import connection, transaction
from django.utils import timezone

from .llm_interaction import context_window
from .models import TickUsage
from .utils.raw_rows import insert_rows, select_rows

# Rows written together: a crash (not a reload) loses at most these.
FLUSH_TICKS = 30
# A prune every tenth of the kept rows (or every flush, if more often): the table exceeds
# its bound by at most that.
PRUNE_SHARE = 10
COLUMNS = ("created_at", "tokens", "max_tokens", "status", "asleep")


def prune_interval(rows):
    """Return the ticks between two prunes when ``rows`` rows are kept."""
    return max(FLUSH_TICKS, rows // PRUNE_SHARE)


def record_tick(script, result, config):
    """Keep the usage row of the tick that ended with ``result``; write those kept when
    ``FLUSH_TICKS`` wait.

    Args:
        script (AssistantScript): The assistant whose tick ended.
        result (dict): The tick's result; its ``status`` is recorded.
        config (dict): The tick's configuration (``usage_history_rows``; 0 records nothing,
            and drops the rows still waiting).
    """
    rows = config["usage_history_rows"]
    if not rows:
        script.ndb.usage_buffer = None
        return
    measured = script.ndb.context_usage
    if measured is not None:
        tokens, max_tokens = measured.total_tokens, measured.max_tokens
    else:  # nothing measured since the server started: the history, read once
        if script.ndb.unmeasured_usage is None:
            script.ndb.unmeasured_usage = (script.history.totals()[0], context_window(script))
        tokens, max_tokens = script.ndb.unmeasured_usage
    waiting = script.ndb.usage_buffer
    if waiting is None:
        waiting = script.ndb.usage_buffer = []
    status = str((result or {}).get("status"))[:32]
    waiting.append(
        (timezone.now(), tokens, max_tokens, status, script.db.operating_mode == "sleep")
    )
    if len(waiting) >= FLUSH_TICKS:
        flush_usage(script, rows)


def flush_usage(script, rows=None):
    """Write the rows waiting in memory, and prune when it is due, in one transaction.

    Args:
        rows (int, optional): The rows to keep; the configured ``usage_history_rows`` by
            default.
    """
    waiting = script.ndb.usage_buffer
    rows = rows or script.get_config("usage_history_rows")
    if not (waiting and rows):  # nothing waits, or recording was turned off meanwhile
        return
    # Emptied first: a chart read meanwhile misses these rows for a moment, never doubles.
    script.ndb.usage_buffer = []
    since = script.ndb.ticks_since_usage_prune  # None: no prune since the server started
    due = since is None or since + len(waiting) >= prune_interval(rows)
    with transaction.atomic():
        insert_rows(TickUsage, [dict(zip(COLUMNS, row), db_script_id=script.id) for row in waiting])
        if due:
            prune(script, rows)
    script.ndb.ticks_since_usage_prune = 0 if due else since + len(waiting)


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
    """Return the recorded usage of ``script``, oldest first: the rows written, then those
    waiting in memory.

    Args:
        limit (int, optional): Only the newest this many rows.

    Returns:
        list: ``(created_at, tokens, max_tokens, status, asleep)`` tuples.
    """
    waiting = list(script.ndb.usage_buffer or ())
    if limit is not None:
        waiting = waiting[-limit:] if limit else []
        limit -= len(waiting)
    tail, params = "ORDER BY id DESC", [script.id]
    if limit is not None:
        tail, params = f"{tail} LIMIT %s", [script.id, limit]
    written = select_rows(TickUsage, COLUMNS, "db_script_id = %s", params, tail)[::-1]
    return written + waiting
