"""The sleep pipeline: the memory work an assistant does while it dreams.

``run_sleep_tick`` runs seed 000's six memory operations in order, then compaction:

1. ``consolidate_memories_to_semantic``: new journal entries into long-term memory (Mem0);
2. ``run_entity_consolidation_batch``: new observations merged into entity profiles;
3. ``repair_memory_links``: links whose entry is gone pruned, lost memories restored;
4. ``prune_low_importance_entries``: old, unimportant, consolidated entries archived;
5. ``clear_stale_conversations``: working memory of conversations that ended;
6. ``compact_conversation_history`` with the assistant's ``compact_strategy``, when the
   context is over its threshold; ``run_pre_compaction_extraction`` just before a summary.

After the first step, a ``sleep_consolidate`` run lets the model review what was just
remembered, and new entries may get a model importance score. Each step takes one bounded
batch, so a dreaming tick never holds the reactor for long; a step that fails is logged
and reported, and the next steps still run. What every tick of a sleep did is added up in
the record of that sleep (``ai.sleep.record``).
"""

from evennia.utils import logger
from twisted.internet import defer

from ..context_usage import measure_context
from ..helpers.entity_context import run_entity_consolidation_batch
from ..helpers.episodic_index import prune_low_importance_entries
from ..helpers.working_memory import clear_stale_conversations
from ..importance_scoring import score_entries_with_model
from ..utils.wording import percent
from .common import is_stuck, record_outcome, skipped, start_threshold
from .compaction import compact_conversation_history
from .consolidation import (
    consolidate_memories_to_semantic,
    repair_memory_links,
    review_new_memories,
)
from .escalation import what_is_too_large
from .extraction import ExtractionBeforeSummary, not_run
from .record import record_dream_tick


@defer.inlineCallbacks
def run_sleep_tick(script, character):
    """Run one dreaming tick: the memory operations, then extraction and compaction.

    Returns:
        Deferred: Fires with one result per step: ``memory_consolidation``,
        ``sleep_consolidate``, ``importance_scoring``, ``entity_consolidation``,
        ``orphaned_link_cleanup``, ``episodic_prune``, ``stale_conversation_cleanup``,
        ``pre_compaction_extraction`` and ``context_compaction``. A step that failed
        reports ``{"error": ...}``.
    """
    config = script.effective_config()
    batch = config["memory_batch_size"]
    memory_off = None if config["memory_enabled"] else "memory_enabled is False"
    scoring_off = (
        None if config["importance_model_scoring"] else "importance_model_scoring is False"
    )
    results = {}
    steps = (
        (
            "memory_consolidation",
            memory_off,
            lambda: consolidate_memories_to_semantic(script, character, batch),
        ),
        ("sleep_consolidate", memory_off, lambda: review_new_memories(script, character, results)),
        (
            "importance_scoring",
            scoring_off,
            lambda: score_entries_with_model(script, character, batch),
        ),
        (
            "entity_consolidation",
            None,
            lambda: run_entity_consolidation_batch(script, character, batch),
        ),
        (
            "orphaned_link_cleanup",
            memory_off,
            lambda: repair_memory_links(script, character, batch),
        ),
        ("episodic_prune", None, lambda: prune_low_importance_entries(script, character)),
        ("stale_conversation_cleanup", None, lambda: clear_stale_conversations(script, character)),
    )
    for name, off, step in steps:
        results[name] = skipped(off) if off else (yield run_step(script, name, step))
    results.update((yield compact_if_due(script, character, config)))
    record_dream_tick(script, results)
    return results


@defer.inlineCallbacks
def run_step(script, name, step):
    """Run one step; return its result, or ``{"error": ...}`` after logging a failure."""
    try:
        result = yield defer.maybeDeferred(step)
    except Exception as err:
        logger.log_trace(f"AI {script.label}: sleep step {name} failed")
        return {"error": f"{type(err).__name__}: {err}"}
    return result


@defer.inlineCallbacks
def compact_if_due(script, character, config):
    """Compact, journaling facts first when a summary is made, if the context is over the
    threshold of the assistant's strategy (see ``start_threshold``).

    Extraction runs only just before a summary call, since it calls the model; masking
    alone needs none. When the last dreaming tick's compaction left usage over the
    threshold (the summary failed or was refused, nothing was worth masking, or the
    preserved messages alone are that large), nothing runs again until the history
    changes: sleeping must not repeat the same work tick after tick.

    Returns:
        Deferred: Fires with ``{"pre_compaction_extraction": ..., "context_compaction": ...}``.
    """
    threshold = start_threshold(config)
    usage = (
        measure_context(script, character, keep_rendered=True)
        if config["compact_enabled"]
        else None
    )
    due = usage is not None and usage.usage >= threshold
    if not due:
        compaction = yield compact_conversation_history(script, character, usage=usage)
        return {
            "pre_compaction_extraction": not_run("compaction not due"),
            "context_compaction": compaction,
        }
    if is_stuck(script, "sleep"):
        reason = "the last sleep compaction left usage over the threshold; history unchanged"
        return {
            "pre_compaction_extraction": not_run(reason),
            "context_compaction": skipped(reason),
        }
    extraction = ExtractionBeforeSummary(script, character)
    compaction = yield compact_conversation_history(
        script, character, extract=extraction, usage=usage
    )
    after = measure_context(script, character)
    still_over = after.usage >= threshold
    record_outcome(script, "sleep", still_over)
    if still_over:
        logger.log_warn(
            f"AI {script.label}: still over the sleep compaction's threshold "
            f"({percent(threshold)}) after compaction "
            f"({what_is_too_large(after, threshold, compaction)}); not "
            "retrying until the history changes"
        )
    return {"pre_compaction_extraction": extraction.result, "context_compaction": compaction}
