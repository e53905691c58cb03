"""Long-term memory tools: recall facts from Mem0 and store a consolidated fact.

Both wait on the memory worker (``ai.semantic_memory``) and answer with a Deferred. What
they read is only what the turn's audience may hear; what they store is kept for it.
"""

from twisted.internet import defer

from ..helpers.journal import (
    MAX_ENTRY_CHARS,
    add_entry,
    credited,
    find_same,
    recent_entries,
)
from ..helpers.memory_links import describe_memory
from ..history import row_to_message
from ..models import ConversationMessage, JournalEntry
from ..semantic_memory import recall, remember
from ..utils.facts import plain_words
from ..utils.faithfulness import check_summary, read_transcript
from ..utils.grounding import unfounded
from ..utils.wording import plural
from .base import IMPORTANCE_PARAMETER, LIMIT_PARAMETER, Tool, ToolResult
from .registry import register_tool

# The journal entries a stored memory must be told by: what the assistant remembers comes
# from its journal (Qwen2.5-Coder-1.5B stored "The tailor charges $100 for a cloak." from
# a question, the journal saying 9 copper).
GROUNDING_ENTRIES = 200


@defer.inlineCallbacks
def recall_memories(ctx, query, limit=5):
    """Search long-term memory; superseded facts come last, marked with when they changed."""
    if not ctx.script.get_config("memory_enabled"):
        return ToolResult(ok=False, content="Long-term memory is off for this assistant.")
    found = yield recall(ctx.character, query, ctx.audience, limit)
    if not found:
        return ToolResult(ok=True, content=f"No memories about {query!r}.", data={"memories": []})
    lines = [f"- {describe_memory(memory)}" for memory in found]
    return ToolResult(ok=True, content="\n".join(lines), data={"memories": found})


@defer.inlineCallbacks
def store_memory(ctx, content, importance=5):
    """Keep one fact in long-term memory now (journaled, then consolidated at once): a fact
    the journal entries its audience may hear tell."""
    if not ctx.script.get_config("memory_enabled"):
        return ToolResult(ok=False, content="Long-term memory is off for this assistant.")
    same = find_same(ctx.character, content, ctx.audience)
    if same:
        return ToolResult(ok=True, content=f"Already remembered as {same['id']}.")
    entries = recent_entries(ctx.character, ctx.audience, GROUNDING_ENTRIES)
    journaled = set()
    for known in entries:
        journaled.update(plain_words(known["content"]))
    why = unfounded(content, journaled, "your journal")
    if why:
        return ToolResult(ok=False, content=f"Not stored: {why}.")
    content = credited_as_told(ctx, content, entries)
    try:
        entry = add_entry(
            ctx.character,
            content,
            source_type="memory",
            importance=importance,
            source_message_ids=ctx.sources_for(content),
            audience=ctx.audience,
        )
    except ValueError as err:
        return ToolResult(ok=False, content=f"Not stored: {err}")
    row = JournalEntry.objects.get(db_object_id=ctx.character.id, entry_id=entry["id"])
    outcome = yield remember(ctx.character, [row])
    replaced = len(outcome["superseded"])
    note = f" It replaces {plural(replaced, 'older fact')}." if replaced else ""
    return ToolResult(
        ok=True, content=f"Stored {entry['id']}: {content[:80]}{note}", data={"entry": entry}
    )


def credited_as_told(ctx, content, entries):
    """Return ``content`` with words it credits to someone who did not say them credited to
    the player who did, in the messages ``entries`` (journal entries) came from
    (Qwen2.5-Coder-1.5B stored "Wynn promised to bring me turnips" from Edda's promise), and
    first-person words credited to the one player they repeat (:func:`credited`). Unchanged
    when those messages are gone; a check that would leave nothing changes nothing."""
    ids = {message_id for entry in entries for message_id in entry["source_message_ids"]}
    rows = ConversationMessage.objects.filter(db_script_id=ctx.script.id, id__in=ids)
    messages = [row_to_message(row) for row in rows]
    if not messages:
        return content
    transcript = read_transcript(messages, ctx.character.key)
    fact, _ = check_summary(content, transcript)
    return credited(fact or content, messages)


register_tool(
    Tool(
        name="recall_memories",
        description="Search your long-term memory for facts about something.",
        parameters={
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "description": "A few words.",
                },
                "limit": LIMIT_PARAMETER,
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        categories=frozenset({"memory", "safe"}),
        handler=recall_memories,
    )
)
register_tool(
    Tool(
        name="store_memory",
        description="Keep one fact in long-term memory; it replaces an older one on the same thing.",
        parameters={
            "type": "object",
            "properties": {
                "content": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_ENTRY_CHARS,
                    "description": "The fact.",
                },
                "importance": IMPORTANCE_PARAMETER,
            },
            "required": ["content"],
            "additionalProperties": False,
        },
        categories=frozenset({"memory"}),
        handler=store_memory,
    )
)
