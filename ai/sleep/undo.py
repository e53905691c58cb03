"""Undoing the last compaction: the messages it replaced come back live (``aicompact/undo``).

The journal's synthesis entries of the undone summaries go with them: one not yet
consolidated into long-term memory is deleted (the restored messages say all it said, and
the next compaction writes a new one); a consolidated one is archived, and the memories
made from it stay, for what they hold is still true.
"""

from django.db import transaction
from django.db.models import Sum

from ..context_usage import measure_context
from ..history import HistoryChanged
from ..log_channel import post_to_log_channel
from ..models import CompactionRecord, ConversationMessage, JournalEntry
from ..utils.message_format import is_summary
from ..utils.wording import percent, percent_against, plural


class UndoRefused(Exception):
    """The compaction cannot be undone, or undoing it would compact again at once.

    Attributes:
        forceable (bool): Whether ``force`` would undo it anyway.
    """

    def __init__(self, reason, forceable=False):
        super().__init__(reason)
        self.forceable = forceable


def last_compaction(script):
    """Return the newest compaction record of ``script`` not undone yet, or None."""
    return CompactionRecord.objects.filter(db_script_id=script.id, undone_at__isnull=True).last()


def nothing_to_undo(script):
    """Say why there is no compaction to undo, naming summaries made before records."""
    older = [
        row.id
        for row in script.history.live_rows().filter(role="system", made_by__isnull=True)
        if is_summary({"metadata": row.metadata})
    ]
    if older:
        ids = ", ".join(map(str, older))
        return (
            f"no compaction to undo: summary {ids} was made before compactions were "
            "recorded and cannot be undone"
        )
    return "no compaction to undo"


def usage_after_undo(script, character, record):
    """Return ``(tokens, max tokens, usage)`` of the next awake call once ``record`` is undone."""
    written = ConversationMessage.objects.filter(made_by=record)
    restored = ConversationMessage.objects.filter(replaced_by__in=written)
    change = (restored.aggregate(total=Sum("token_count"))["total"] or 0) - (
        written.aggregate(total=Sum("token_count"))["total"] or 0
    )
    now = measure_context(script, character)
    total = now.total_tokens + change
    return total, now.max_tokens, total / now.max_tokens


def undo_last_compaction(script, character, force=False, by=None):
    """Undo the newest compaction of ``script`` that is not undone yet, atomically.

    Args:
        script (AssistantScript): The assistant's script.
        character (AssistantCharacter): The assistant (for its journal).
        force (bool): Undo even when usage would then be at or over the emergency
            threshold (the next awake tick compacts again).
        by (str, optional): Who asked, for the log channel.

    Returns:
        dict: ``record`` (the CompactionRecord), ``restored`` (messages back), ``tokens``,
        ``max_tokens`` and ``usage`` afterwards, ``deleted`` and ``archived`` (synthesis
        entries).

    Raises:
        UndoRefused: saying why nothing changed.
    """
    record = last_compaction(script)
    if record is None:
        raise UndoRefused(nothing_to_undo(script))
    tokens, max_tokens, usage = usage_after_undo(script, character, record)
    threshold = script.get_config("compact_emergency_threshold")
    if usage >= threshold and not force:
        raise UndoRefused(
            f"undoing compaction #{record.id} would bring the context to {tokens:,} of "
            f"{max_tokens:,} tokens ({percent_against(usage, threshold)}), at or over "
            f"compact_emergency_threshold {percent(threshold)}: the next awake tick would "
            "compact again",
            forceable=True,
        )
    summaries = list(
        ConversationMessage.objects.filter(made_by=record).values_list("id", flat=True)
    )
    try:
        with transaction.atomic():
            restored = script.history.undo(record)
            deleted, archived = _drop_syntheses(character, summaries)
    except HistoryChanged as err:
        raise UndoRefused(str(err)) from err
    # The last compaction is now the one before it, if any is still in effect.
    previous = last_compaction(script)
    script.db.last_compaction = previous.created_at.isoformat() if previous else None
    post_to_log_channel(
        script,
        f"{by or 'Someone'} undid {character.key}'s {record.kind} compaction #{record.id}: "
        f"{plural(restored, 'message')} restored, context at {usage:.0%}",
    )
    return {
        "record": record,
        "restored": restored,
        "tokens": tokens,
        "max_tokens": max_tokens,
        "usage": usage,
        "deleted": deleted,
        "archived": archived,
    }


def _drop_syntheses(character, summary_ids):
    """Delete the unconsolidated synthesis entries of ``summary_ids``; archive the others.

    Returns:
        tuple: How many were deleted and how many archived.
    """
    entries = JournalEntry.objects.filter(db_object_id=character.id, source_type="compaction")
    ids = set(summary_ids)
    theirs = [entry for entry in entries if ids & set(entry.source_message_ids or ())]
    pending = [entry.pk for entry in theirs if not entry.consolidated]
    kept = [entry.pk for entry in theirs if entry.consolidated]
    JournalEntry.objects.filter(pk__in=pending).delete()
    JournalEntry.objects.filter(pk__in=kept).update(archived=True)
    return len(pending), len(kept)
