"""Pre-compaction fact extraction: journal what matters while the full context is there.

A short ReAct loop in the ``pre_compaction`` context, whose tools only journal. It runs
before every compaction, so facts survive in the journal whatever the summary keeps.
"""

from evennia.utils import logger
from twisted.internet import defer

from ..helpers.journal import journal_entries
from ..prompt_contexts import CONTEXT_PRE_COMPACTION
from ..tool_execution import run_react_loop

MIN_MESSAGES = 5
EXTRACTION_INSTRUCTION = (
    "Before the older conversation above is condensed, journal each important fact in it "
    "that is not journaled yet: one add_journal_entry call per fact, naming who said it. "
    "Call noop when nothing is left."
)


def _set_signal(script, value):
    signals = dict(script.db.context_signals or {})
    signals["pre_compaction"] = value
    script.db.context_signals = signals


@defer.inlineCallbacks
def run_pre_compaction_extraction(script, character, max_iterations=None):
    """Let the assistant journal the facts of its history before it is compacted.

    Args:
        script (AssistantScript): The assistant's script.
        character (AssistantCharacter): The assistant, whose journal receives the facts.
        max_iterations (int, optional): Loop limit; ``pre_compact_max_iterations`` by
            default (emergencies pass 3).

    Returns:
        Deferred: Fires with ``{"success", "facts_recorded", "iterations", ...}``; when an
        entry condition is not met, ``success`` is False with a ``reason``.
    """
    config = script.effective_config()
    if not config["pre_compact_extraction_enabled"]:
        return {
            "success": False,
            "reason": "extraction disabled",
            "facts_recorded": 0,
            "iterations": 0,
        }
    history = script.conversation_history
    if len(history) < MIN_MESSAGES:
        return {
            "success": False,
            "reason": f"fewer than {MIN_MESSAGES} messages",
            "facts_recorded": 0,
            "iterations": 0,
        }
    if script.ndb.extracting:
        return {
            "success": False,
            "reason": "an extraction is already running",
            "facts_recorded": 0,
            "iterations": 0,
        }
    limit = max_iterations or config["pre_compact_max_iterations"]
    instruction = config["pre_compact_prompt"] or EXTRACTION_INSTRUCTION
    entries_before = len(journal_entries(character))
    _set_signal(script, True)
    script.ndb.extracting = True
    try:
        loop = yield run_react_loop(
            script,
            character,
            CONTEXT_PRE_COMPACTION,
            event={"type": "pre_compaction", "instruction": instruction},
            max_iterations=limit,
            source_messages=[m for m in history if m["role"] in ("user", "assistant", "system")],
        )
    except Exception as err:
        logger.log_trace(f"AI {script.key}: pre-compaction extraction failed")
        return {
            "success": False,
            "reason": f"extraction failed: {err}",
            "facts_recorded": 0,
            "iterations": 0,
        }
    finally:
        _set_signal(script, False)
        script.ndb.extracting = False
    facts = len(journal_entries(character)) - entries_before
    return {
        "success": loop.stop_reason != "llm_error",
        "facts_recorded": facts,
        "iterations": loop.iterations,
        "stop_reason": loop.stop_reason,
    }
