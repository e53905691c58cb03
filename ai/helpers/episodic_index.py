"""The episodic prune: old, unimportant entries leave the active journal.

An entry already copied into long-term memory (``consolidated``), older than
``journal_prune_age`` days and scored at most ``journal_prune_importance`` is archived: kept
in its table, but no longer searched or recalled (see ``helpers.journal``). Compaction
syntheses are judged like any entry; written with importance 7, they stay at the default
threshold.
"""

from datetime import timedelta

from django.utils import timezone
from evennia.utils import logger

from ..models import JournalEntry
from ..utils.wording import plural

# Rows one prune archives at most, in ``memory_batch_size`` units.
BATCHES_PER_PRUNE = 5


def prune_low_importance_entries(script, character):
    """Archive a bounded batch of old, consolidated entries scored at most the threshold.

    Returns:
        dict: ``{"archived": n, "archived_entry_ids": [...], "remaining_candidates": m}``,
        or ``{"skipped": True, "reason": ...}`` when ``journal_prune_age`` is 0.
    """
    config = script.effective_config()
    if not config["journal_prune_age"]:
        return {"skipped": True, "reason": "journal_prune_age is 0"}
    cutoff = timezone.now() - timedelta(days=config["journal_prune_age"])
    # Every entry is scored as it is written (migration 0010 scored the older ones), so
    # one range scan of ``ai_entry_prune_age_idx`` finds the candidates.
    candidates = JournalEntry.objects.filter(
        db_object_id=character.id,
        consolidated=True,
        archived=False,
        score__lte=config["journal_prune_importance"],
        timestamp__lt=cutoff,
    )
    limit = config["memory_batch_size"] * BATCHES_PER_PRUNE
    low = list(candidates.order_by("id").values_list("id", "entry_id")[:limit])
    if low:
        JournalEntry.objects.filter(id__in=[row_id for row_id, _ in low]).update(archived=True)
        archived = plural(len(low), "unimportant journal entry", "unimportant journal entries")
        logger.log_info(f"AI {script.label}: archived {archived}")
    return {
        "archived": len(low),
        "archived_entry_ids": [entry_id for _, entry_id in low],
        # A batch that was not full took every candidate.
        "remaining_candidates": candidates.count() if len(low) == limit else 0,
    }
