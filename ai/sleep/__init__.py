"""The sleep pipeline: the memory work an assistant does while it sleeps.

``run_sleep_tick`` runs in the dreaming phase: pre-compaction fact extraction, then
compaction at ``compact_sleep_threshold``. (Consolidation into long-term memory, entity
consolidation and pruning join the pipeline when they exist.)
"""

from evennia.utils import logger
from twisted.internet import defer

from ..context_usage import measure_context
from .compaction import (
    compact_conversation_history,
    is_stuck,
    record_outcome,
    skipped,
    what_is_too_large,
)
from .extraction import not_run, run_pre_compaction_extraction


@defer.inlineCallbacks
def run_sleep_tick(script, character):
    """Run one dreaming tick: journal facts, then compact if the context is full enough.

    Extraction runs only when compaction is due, since it calls the model. When the last
    dreaming tick's compaction left usage over the threshold (the summary failed or was
    refused, or the preserved messages alone are that large), nothing runs again until
    the history changes: sleeping must not repeat the same model calls tick after tick.

    Returns:
        Deferred: Fires with ``{"pre_compaction_extraction": ..., "context_compaction": ...}``.
    """
    config = script.effective_config()
    threshold = config["compact_sleep_threshold"]
    due = config["compact_enabled"] and measure_context(script, character).usage >= threshold
    if not due:
        compaction = yield compact_conversation_history(script, character)
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
    extraction = yield run_pre_compaction_extraction(script, character)
    compaction = yield compact_conversation_history(script, character)
    after = measure_context(script, character)
    still_over = after.usage >= threshold
    record_outcome(script, "sleep", still_over)
    if still_over:
        logger.log_warn(
            f"AI {script.label}: still over the sleep threshold after compaction "
            f"({what_is_too_large(after, threshold, compaction)}); not retrying until the "
            "history changes"
        )
    return {"pre_compaction_extraction": extraction, "context_compaction": compaction}
