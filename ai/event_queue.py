"""The events waiting for an assistant's tick, oldest first: one ``PendingEvent`` row each.

Queuing an event inserts its row and taking one deletes it, in plain SQL
(``ai.utils.raw_rows``): a tick takes one, and a player's line queues one, without
rewriting the rest (a list held in an attribute was pickled whole each time). How many
wait is kept on the script (``ndb``) once counted, so a tick with none asks nothing of
the database; like ``helpers.idle_checks`` it is this process's memory, and a reload
counts again.
"""

from django.db import OperationalError, connection, transaction
from evennia.utils import logger

from .models import PendingEvent
from .utils.raw_rows import insert_row, select_rows


def _waiting(script):
    """Return how many events wait for ``script`` (counted once, then kept)."""
    count = script.ndb.pending_event_count
    if count is None:
        count = PendingEvent.objects.filter(db_script_id=script.id).count()
        script.ndb.pending_event_count = count
    return count


def queue_event(script, event, limit):
    """Queue ``event`` (a dict with at least ``type``), dropping the oldest beyond ``limit``.

    Returns:
        int: How many of the oldest were dropped (logged).
    """
    count = _waiting(script) + 1
    insert_row(PendingEvent, {"db_script_id": script.id, "event": event})
    dropped = max(0, count - limit)
    if dropped:
        oldest = PendingEvent.objects.filter(db_script_id=script.id).order_by("id")
        ids = list(oldest.values_list("id", flat=True)[:dropped])
        PendingEvent.objects.filter(id__in=ids).delete()
        logger.log_warn(f"AI {script.label}: event queue full, dropped {dropped} oldest")
    script.ndb.pending_event_count = count - dropped
    return dropped


def pop_event(script, handle=None):
    """Remove the oldest event waiting for ``script`` and return it, or None.

    Args:
        handle (callable, optional): Called with the event in the transaction that removes
            it, so that its writes and the removal commit together (a line is not lost
            between the queue and what the tick makes of it); its result is returned in
            place of the event. If it raises, the transaction rolls back and the event is
            removed on its own, logged: one that cannot be handled does not come back on
            every tick. A database that failed to operate (a lock held too long) drops
            nothing: the event waits for the next tick.
    """
    if not _waiting(script):
        return None
    rows = select_rows(
        PendingEvent, ["id", "event"], "db_script_id = %s", [script.id], "ORDER BY id LIMIT 1"
    )
    if not rows:
        script.ndb.pending_event_count = 0
        return None
    number, event = rows[0]
    try:
        # The removal first: on SQLite a transaction that read before it wrote could not
        # wait for another writer's lock, and would fail at once.
        with transaction.atomic():
            if not _delete(number):
                script.ndb.pending_event_count = None  # taken meanwhile: counted again
                return None
            result = event if handle is None else handle(event)
    except OperationalError:
        script.ndb.pending_event_count = None
        raise
    except Exception:
        script.ndb.pending_event_count = None
        _delete(number)
        logger.log_warn(f"AI {script.label}: dropped event #{number}, which failed")
        raise
    script.ndb.pending_event_count -= 1
    return result


def _delete(number):
    """Delete the pending event row ``number``; return whether it was there."""
    table = connection.ops.quote_name(PendingEvent._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [number])
        return cursor.rowcount > 0


def has_pending_events(script):
    """Tell whether an event waits for ``script``."""
    return _waiting(script) > 0


def pending_events(script):
    """Return the events waiting for ``script``, oldest first."""
    return list(
        PendingEvent.objects.filter(db_script_id=script.id)
        .order_by("id")
        .values_list("event", flat=True)
    )
