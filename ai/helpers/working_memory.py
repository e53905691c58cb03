"""Working memory: one :class:`~ai.models.WorkingMemory` row per ongoing conversation.

A row holds who is talking with the assistant, since when, for how many turns, and the
last lines heard from them (``{"type", "text", "audience"}``: the event's kind and words,
and who may hear them, see ``ai.audience``): a whisper is only shown back to the whisperer.
A conversation quiet for ``working_memory_ttl`` seconds is over: the next line starts a
new one, and sleep clears the row.
"""

from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from ..audience import event_audience, may_hear
from ..models import WorkingMemory
from ..utils.raw_rows import db_value, insert_row, select_rows, update_row

RECENT_LINES = 5
MAX_LINE_CHARS = 300
# Rows one clean-up deletes at most.
CLEAR_BATCH = 100


def note_conversation(character, event, ttl=None):
    """Note a line heard from the event's speaker in their conversation with ``character``.

    One row read and one written, in plain SQL (``ai.utils.raw_rows``): it runs on every
    tick with a player's line.

    Args:
        character (AssistantCharacter): The assistant.
        event (dict): A heard event; one without a speaker or words is no conversation.
        ttl (int, optional): Seconds of quiet that end a conversation; a line after that
            starts a new one.
    """
    if not (event.get("speaker") and event.get("text")):
        return
    now = timezone.now()
    line = {
        "type": event.get("type"),
        "text": event["text"][:MAX_LINE_CHARS],
        "audience": event_audience(event),
    }
    locking = connection.ops.for_update_sql() if connection.features.has_select_for_update else ""
    with transaction.atomic(savepoint=False):  # inside a turn's, no savepoint of its own
        found = select_rows(
            WorkingMemory,
            ["id", "speaker_name", "turns", "started_at", "last_active", "recent"],
            "db_object_id = %s AND speaker = %s",
            [character.id, event["speaker"]],
            locking,
        )
        if not found:
            insert_row(
                WorkingMemory,
                {
                    "db_object_id": character.id,
                    "speaker": event["speaker"],
                    "speaker_name": event.get("speaker_name") or "",
                    "started_at": now,
                    "last_active": now,
                    "turns": 1,
                    "recent": [line],
                },
            )
            return
        number, name, turns, started_at, last_active, recent = found[0]
        if ttl and turns and now - last_active > timedelta(seconds=ttl):
            started_at, turns, recent = now, 0, []
        update_row(
            WorkingMemory,
            number,
            {
                "speaker_name": event.get("speaker_name") or name,
                "started_at": started_at,
                "last_active": now,
                "turns": turns + 1,
                "recent": [*(recent or []), line][-RECENT_LINES:],
            },
        )


def conversations(character, audience, ttl=None):
    """Return the conversations of which ``audience`` may hear a line, quietest last.

    Args:
        character (AssistantCharacter): The assistant.
        audience (list or None): Who will hear what the model says.
        ttl (int, optional): Seconds of quiet after which a conversation is over and left out.

    Returns:
        list: ``{"speaker", "speaker_name", "turns", "started_at", "last_active", "heard"}``
        dicts; ``heard`` holds the recent lines ``audience`` may hear only.
    """
    where, params = "db_object_id = %s", [character.id]
    if ttl:
        cutoff = timezone.now() - timedelta(seconds=ttl)
        where += " AND last_active >= %s"
        params.append(db_value(WorkingMemory, "last_active", cutoff))
    names = ["speaker", "speaker_name", "turns", "started_at", "last_active"]
    found = []
    for *values, recent in select_rows(
        WorkingMemory, [*names, "recent"], where, params, "ORDER BY last_active DESC"
    ):
        heard = [line for line in recent if may_hear(line["audience"], audience)]
        if heard:
            found.append({**dict(zip(names, values)), "heard": heard})
    return found


def clear_stale_conversations(script, character):
    """Delete the conversations quiet for more than ``working_memory_ttl`` seconds.

    Returns:
        dict: ``{"cleared": n, "speakers": [names]}``; at most ``CLEAR_BATCH`` a call.
    """
    cutoff = timezone.now() - timedelta(seconds=script.get_config("working_memory_ttl"))
    stale = WorkingMemory.objects.filter(db_object_id=character.id, last_active__lt=cutoff)
    rows = list(stale.order_by("last_active").values_list("id", "speaker_name")[:CLEAR_BATCH])
    WorkingMemory.objects.filter(id__in=[row_id for row_id, _ in rows]).delete()
    return {"cleared": len(rows), "speakers": [name for _, name in rows]}
