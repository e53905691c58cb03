"""Journal tools: write and review journal entries, and note observations about entities.

Entity profiles live in their own table (``helpers.entity_context``). What a tool writes
is kept for the turn's audience (``ai.audience``), and what it reads back is only what
that audience may hear. While the assistant reflects (``ai.reflection``), a journal entry
is an insight that cites the entries it came from (``helpers.insights``); nowhere else
may an entry cite any, so a player's words never become an insight.
"""

from ..helpers.entity_context import add_observation
from ..helpers.insights import write_insight
from ..helpers.journal import MAX_ENTRY_CHARS, add_entry, find_same, search_entries, transcript_fact
from ..prompt_contexts import CONTEXT_REFLECTION, CONTEXT_REFLECTION_CONT
from ..utils.sentences import sentences
from .base import IMPORTANCE_PARAMETER, LIMIT_PARAMETER, Tool, ToolResult
from .registry import register_tool
from .targets import resolve_entity

# The contexts of a reflection, where a journal entry is an insight.
REFLECTING = (CONTEXT_REFLECTION, CONTEXT_REFLECTION_CONT)


def add_journal_entry(ctx, content, importance=5, tags=(), cites=()):
    """Write a journal entry sourced from the turn's messages (an insight, when reflecting)."""
    if ctx.context_type in REFLECTING:
        return add_insight(ctx, content, importance, tags, cites)
    if cites:
        return ToolResult(
            ok=False,
            content="Not journaled: only an insight written while reflecting cites entries; "
            "journal what was said as a fact, naming who said it, without cites.",
        )
    source_type = "pre_compaction" if ctx.context_type == "pre_compaction" else "conversation"
    said = sentences(content or "")
    if said and all(sentence.endswith("?") for sentence in said):
        # A player's question, journaled as it was asked, tells nothing to remember.
        return ToolResult(
            ok=False, content="Not journaled: a question holds no fact; journal what was stated."
        )
    if source_type == "pre_compaction":
        # Notes taken before a compaction stand for the transcript: they tell only what it says.
        content, why = transcript_fact(content, ctx.source_messages, ctx.character.key)
        if why:
            return ToolResult(ok=False, content=f"Not journaled: {why}.")
    same = find_same(ctx.character, content, ctx.audience)
    if same:
        # Every extraction rereads the history it is given: keep one entry per fact.
        return ToolResult(ok=True, content=f"Already journaled as {same['id']}.")
    try:
        entry = add_entry(
            ctx.character,
            content,
            source_type=source_type,
            importance=importance,
            tags=tags,
            source_message_ids=ctx.sources_for(content),
            audience=ctx.audience,
        )
    except ValueError as err:
        return ToolResult(ok=False, content=f"Not journaled: {err}")
    return ToolResult(
        ok=True, content=f"Journaled {entry['id']}: {entry['content'][:80]}", data={"entry": entry}
    )


def add_insight(ctx, content, importance, tags, cites):
    """Write an insight of the reflection under way, citing entries it was shown."""
    offered = (ctx.event or {}).get("offered") or ()
    same = find_same(ctx.character, content, ctx.audience)
    if same and same["source_type"] == "reflection":
        return ToolResult(ok=True, content=f"Already journaled as {same['id']}.")
    try:
        entry, ignored, inferred = write_insight(
            ctx.character, content, cites, offered, ctx.audience, importance, tags
        )
    except ValueError as err:
        return ToolResult(ok=False, content=f"Not journaled: {err}.")
    note = f". (Not cited, not shown in this reflection: {', '.join(ignored)}.)" if ignored else "."
    if inferred:
        note = " (the entries it shares words with: name them in cites next time)."
    return ToolResult(
        ok=True,
        content=f"Journaled insight {entry['id']}, citing {', '.join(entry['cites'])}{note}",
        data={"entry": entry},
    )


def review_journal(ctx, query=None, limit=5):
    """List the most recent journal entries, newest first, optionally matching ``query``.

    While reflecting, what it lists may be cited too (``offered`` of the reflection's event).
    """
    found = search_entries(ctx.character, query, limit, audience=ctx.audience)
    if ctx.context_type in REFLECTING and ctx.event is not None:
        ctx.event.setdefault("offered", []).extend(entry["id"] for entry in found)
    if not (found or search_entries(ctx.character, None, 1, audience=ctx.audience)):
        return ToolResult(ok=True, content="The journal is empty.", data={"entries": []})
    if not found:
        return ToolResult(ok=True, content=f"No entries match {query!r}.", data={"entries": []})
    lines = [f"[{e['id']}] (importance {e['importance']}) {e['content']}" for e in found]
    return ToolResult(ok=True, content="\n".join(lines), data={"entries": found})


def update_entity_observation(ctx, entity, observation):
    """Add an observation to the profile of someone or something."""
    observation = observation.strip()
    if not observation:
        return ToolResult(ok=False, content="Not noted: the observation is empty.")
    target, error = resolve_entity(ctx.character, entity)
    if error:
        return ToolResult(ok=False, content=error)
    profile = add_observation(
        ctx.character, target, observation, ctx.sources_for(observation), ctx.audience
    )
    return ToolResult(
        ok=True,
        content=f"Noted about {target.key} ({target.dbref}): {observation[:80]}",
        data={"entity": target.dbref, "profile": profile},
    )


register_tool(
    Tool(
        name="add_journal_entry",
        description="Save one fact in your journal, as a sentence naming who said it.",
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
                "tags": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": 8,
                },
                "cites": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": 128},
                    "maxItems": 20,
                    "description": "Ids of the journal entries this insight comes from.",
                },
            },
            "required": ["content"],
            "additionalProperties": False,
        },
        categories=frozenset({"journal"}),
        handler=add_journal_entry,
        context_parameters={"cites": REFLECTING},
    )
)
register_tool(
    Tool(
        name="review_journal",
        description="Read your latest journal entries, or those matching a query.",
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for."},
                "limit": LIMIT_PARAMETER,
            },
            "additionalProperties": False,
        },
        categories=frozenset({"journal", "safe"}),
        handler=review_journal,
    )
)
register_tool(
    Tool(
        name="update_entity_observation",
        description="Note what you observed about someone or something.",
        parameters={
            "type": "object",
            "properties": {
                "entity": {
                    "type": "string",
                    "minLength": 1,
                    "description": "A name here, or a dbref.",
                },
                "observation": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 500,
                    "description": "What you observed.",
                },
            },
            "required": ["entity", "observation"],
            "additionalProperties": False,
        },
        categories=frozenset({"journal"}),
        handler=update_entity_observation,
    )
)
