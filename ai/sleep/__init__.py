"""The sleep pipeline: the memory work an assistant does while it sleeps.

``run_sleep_tick`` runs in the dreaming phase: pre-compaction fact extraction, then
compaction at ``compact_sleep_threshold``. (Consolidation into long-term memory, entity
consolidation and pruning join the pipeline when they exist.)
"""

from twisted.internet import defer

from ..context_usage import measure_context
from .compaction import compact_conversation_history
from .extraction import run_pre_compaction_extraction


@defer.inlineCallbacks
def run_sleep_tick(script, character):
    """Run one dreaming tick: journal facts, then compact if the context is full enough.

    Extraction runs only when compaction is due, since it calls the model.

    Returns:
        Deferred: Fires with ``{"pre_compaction_extraction": ..., "context_compaction": ...}``.
    """
    results = {}
    config = script.effective_config()
    usage = measure_context(script, character).usage
    due = config["compact_enabled"] and usage >= config["compact_sleep_threshold"]
    if due:
        results["pre_compaction_extraction"] = yield run_pre_compaction_extraction(
            script, character
        )
    else:
        results["pre_compaction_extraction"] = {
            "success": False,
            "reason": "compaction not due",
            "facts_recorded": 0,
            "iterations": 0,
        }
    results["context_compaction"] = yield compact_conversation_history(script, character)
    return results
