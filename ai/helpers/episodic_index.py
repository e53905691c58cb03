"""The episodic prune: old, unimportant entries leave the active journal.

An entry already copied into long-term memory (``consolidated``), older than
``journal_prune_age`` days and scored at most ``journal_prune_importance`` is archived: kept
in its table, but no longer searched or recalled (see ``helpers.journal``). Compaction
syntheses are judged like any entry; written with importance 7, they stay at the default
threshold.
"""

from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from evennia.utils import logger

from ..importance_scoring import heuristic_importance
from ..models import JournalEntry

# Rows one prune archives at most, in ``memory_batch_size`` units.
BATCHES_PER_PRUNE = 5


def prune_low_importance_entries(script, character):
    """Archive a bounded batch of old, consolidated entries scored at most the threshold.

    An entry written before scores existed is scored by the heuristic here, and keeps that
    score, so it is judged once.

    Returns:
        dict: ``{"archived": n, "archived_entry_ids": [...], "remaining_candidates": m}``,
        or ``{"skipped": True, "reason": ...}`` when ``journal_prune_age`` is 0.
    """
    config = script.effective_config()
    if not config["journal_prune_age"]:
        return {"skipped": True, "reason": "journal_prune_age is 0"}
    threshold = config["journal_prune_importance"]
    cutoff = timezone.now() - timedelta(days=config["journal_prune_age"])
    old = JournalEntry.objects.filter(
        db_object_id=character.id, consolidated=True, archived=False, timestamp__lt=cutoff
    )
    # Two queries rather than one with OR: each can range-scan ``ai_entry_prune_idx`` by
    # score; with OR, SQLite read every consolidated entry on each dreaming tick.
    scored, unscored = old.filter(score__lte=threshold), old.filter(score__isnull=True)
    limit = config["memory_batch_size"] * BATCHES_PER_PRUNE
    with transaction.atomic():
        rows = list(unscored.order_by("id")[:limit])
        rows += list(scored.order_by("id")[: limit - len(rows)])
        judged = [row for row in rows if row.score is None]
        for row in judged:
            row.score = heuristic_importance(row.content, row.source_type, row.importance, row.tags)
        JournalEntry.objects.bulk_update(judged, ["score"])
        low = [row for row in rows if row.score <= threshold]
        JournalEntry.objects.filter(id__in=[row.id for row in low]).update(archived=True)
    if low:
        logger.log_info(f"AI {script.label}: archived {len(low)} unimportant journal entries")
    return {
        "archived": len(low),
        "archived_entry_ids": [row.entry_id for row in low],
        "remaining_candidates": scored.count() + unscored.count(),
    }
