"""Pre-compaction fact extraction: journal what matters while the full context is there.

A short ReAct loop in the ``pre_compaction`` context, whose tools only journal. It runs
before every compaction, so facts survive in the journal whatever the summary keeps.
"""

import re

from evennia.utils import logger
from twisted.internet import defer

from ..audience import PUBLIC, audience_groups
from ..helpers.journal import (
    MAX_ENTRY_CHARS,
    add_entry,
    cited_messages,
    count_entries,
    entries_citing,
    find_same,
    transcript_fact,
)
from ..prompt_contexts import (
    CONTEXT_PRE_COMPACTION,
    get_context_config,
    system_prompt_override,
)
from ..tool_execution import run_react_loop
from ..utils.markers import SAVED_HEADER
from ..utils.message_format import one_line
from ..utils.sentences import stated_lines

MIN_MESSAGES = 5
# A line of a text answer is journaled when it reads as a statement of at least this many
# words and does not talk about the extraction itself.
MIN_FACT_WORDS = 4
_ABOUT_THE_TASK = re.compile(
    r"\b(journal\w*|noop|tool|nothing (?:left|more|else)|no (?:more|other|new) facts?)\b",
    re.IGNORECASE,
)
# Facts journaled from this history are listed in the instruction, up to this many.
MAX_LISTED_ENTRIES = 30
EXTRACTION_INSTRUCTION = (
    "Save the facts of the conversation above that are not saved yet: one add_journal_entry "
    "call per fact, naming who said it. Call noop when nothing is left."
)


def not_run(reason):
    """Return the result of an extraction that did not run, saying why."""
    return {"success": False, "reason": reason, "facts_recorded": 0, "iterations": 0}


@defer.inlineCallbacks
def run_pre_compaction_extraction(script, character, max_iterations=None):
    """Let the assistant journal the facts of its history before it is compacted.

    Args:
        script (AssistantScript): The assistant's script.
        character (AssistantCharacter): The assistant, whose journal receives the facts.
        max_iterations (int, optional): Loop limit; ``pre_compact_max_iterations`` by
            default (emergencies pass 3). It takes the place of ``execution_config``'s
            per-tick limit, which governs conversation.

    Returns:
        Deferred: Fires with ``{"success", "facts_recorded", "iterations", ...}``; when an
        entry condition is not met, ``success`` is False with a ``reason``.
    """
    config = script.effective_config()
    if not config["pre_compact_extraction_enabled"]:
        return not_run("extraction disabled")
    history = script.conversation_history
    if len(history) < MIN_MESSAGES:
        return not_run(f"fewer than {MIN_MESSAGES} messages")
    if script.ndb.extracting:
        return not_run("an extraction is already running")
    limit = max_iterations or config["pre_compact_max_iterations"]
    context = get_context_config(CONTEXT_PRE_COMPACTION, script)
    # The dedicated attributes govern this context's run: its limit and its prompt.
    context.max_iterations = limit
    if config["pre_compact_prompt"]:
        context.component_overrides.update(system_prompt_override(config["pre_compact_prompt"]))
    entries_before = count_entries(character)
    script.ndb.extracting = True  # the pre_compaction signal (AssistantScript.context_signals)
    loops = []
    try:
        # One run per audience, each shown only its own messages: what was whispered is
        # extracted apart and kept private, and the room's facts are never kept private.
        for audience, visible in audience_groups(history):
            loop = yield run_react_loop(
                script,
                character,
                CONTEXT_PRE_COMPACTION,
                event={
                    "type": "pre_compaction",
                    "instruction": instruction(character, visible, audience),
                },
                iteration_limit=limit,
                source_messages=[
                    m for m in visible if m["role"] in ("user", "assistant", "system")
                ],
                context_config=context,
                audience=audience,
                audience_only=True,
            )
            journal_stated_facts(character, loop.unspoken, visible, audience)
            loops.append(loop)
    except Exception as err:
        logger.log_trace(f"AI {script.label}: pre-compaction extraction failed")
        return not_run(f"extraction failed: {err}")
    finally:
        script.ndb.extracting = False
    facts = count_entries(character) - entries_before
    return {
        "success": all(loop.stop_reason != "llm_error" for loop in loops),
        "facts_recorded": facts,
        "iterations": sum(loop.iterations for loop in loops),
        "stop_reason": loops[-1].stop_reason,
        "text_tool_calls": sum(loop.text_tool_calls for loop in loops),
        "malformed_tool_calls": [call for loop in loops for call in loop.malformed_tool_calls],
        "tools_called": [name for loop in loops for name in loop.tools_called],
        "audiences": len(loops),
    }


def instruction(character, history, audience=PUBLIC):
    """Return the extraction's instruction, listing the facts already journaled from history.

    Its own calls stay out of the history, so a later extraction learns from this list
    what an earlier one saved. Only entries ``audience`` may hear are listed, one a line.
    """
    live = [message["id"] for message in history]
    saved = [entry["content"] for entry in entries_citing(character, live, audience)]
    saved = saved[-MAX_LISTED_ENTRIES:]
    if not saved:
        return EXTRACTION_INSTRUCTION
    listed = (f"- {one_line(fact)}" for fact in saved)
    return "\n".join([EXTRACTION_INSTRUCTION, SAVED_HEADER, *listed])


def stated_facts(text):
    """Return the lines of a text answer that state facts (``utils.sentences.stated_lines``),
    none about the task itself."""
    return [
        line[:MAX_ENTRY_CHARS]
        for line in stated_lines(text, MIN_FACT_WORDS)
        if not _ABOUT_THE_TASK.search(line)
    ]


def journal_stated_facts(character, texts, history, audience=PUBLIC):
    """Journal the facts a model wrote as text instead of calling ``add_journal_entry``.

    A model that answers the extraction in prose ("1. <name> said <fact>.") still stated
    facts worth keeping; each line that the transcript tells (``ai.utils.grounding``: no
    narration of its own work, no name or number the history lacks), credited to whoever said
    its words, becomes an entry citing the messages it came from, kept for the ``audience``
    of the run that stated it.
    """
    for text in texts:
        for fact in stated_facts(text):
            fact, why = transcript_fact(fact, history, character.key)
            if why or find_same(character, fact, audience):
                continue
            add_entry(
                character,
                fact,
                source_type="pre_compaction",
                source_message_ids=cited_messages(fact, history),
                audience=audience,
            )


class ExtractionBeforeSummary:
    """Pre-compaction extraction as a compaction runs it: just before a summary is made.

    Passed as ``extract`` to ``compact_conversation_history``: a strategy that makes no
    summary (masking) never calls it, and neither does one that finds nothing to compact.
    An escalation that archives messages whole runs it first, unless it ran already.

    Attributes:
        result (dict): The extraction's result; until it runs, a result saying it did not.
        ran (bool): Whether it ran in this compaction.
    """

    def __init__(self, script, character, max_iterations=None):
        self.script = script
        self.character = character
        self.max_iterations = max_iterations
        self.result = not_run("nothing was summarized")
        self.ran = False

    @defer.inlineCallbacks
    def __call__(self):
        self.ran = True
        self.result = yield run_pre_compaction_extraction(
            self.script, self.character, max_iterations=self.max_iterations
        )
