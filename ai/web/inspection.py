"""What the inspector shows of an assistant, as plain data: its page renders it, its JSON
endpoint sends it as it is.

Everything is read from the database (memories from their links, never by a Mem0 search);
nothing here calls a model. Times are UTC, ``YYYY-MM-DD HH:MM:SS``; every item that may
have been whispered carries ``audience``: ``public`` or ``private to <name> (#dbref)``.
"""

from ..audience import describe_audience, message_audience
from ..commands.common import pins_held, when
from ..commands.memory import memory_counts
from ..context_usage import context_parts
from ..helpers.entity_context import entity_profiles
from ..helpers.goals import goal_tree
from ..helpers.journal import INSIGHT_SOURCE, as_entry
from ..history import row_to_message
from ..models import (
    GOAL_STATUSES,
    CompactionRecord,
    ConversationMessage,
    JournalEntry,
    MemoryLink,
)
from ..sleep.undo import last_compaction
from ..usage_history import usage_rows
from ..utils.message_format import is_summary, summary_text, tool_call_text
from ..utils.wording import percent, percent_against

# The newest items of a long list shown (journal entries, memories, compactions).
LISTED = 200
# The newest ticks whose usage the page charts and the JSON lists.
CHARTED = 500
# The compaction thresholds the context is shown against: name, configuration attribute.
THRESHOLDS = (("sleep", "compact_sleep_threshold"), ("emergency", "compact_emergency_threshold"))


class Audiences:
    """Describe audiences as builders read them, looking each distinct one up once."""

    def __init__(self):
        self.described = {}

    def __call__(self, audience):
        key = tuple(audience or ())
        if key not in self.described:
            self.described[key] = describe_audience(list(key))
        return self.described[key]


def stamp(moment):
    """Return a datetime (or None) as ``YYYY-MM-DD HH:MM:SS``, or None."""
    return when(moment.isoformat()) if moment else None


def assistant_row(assistant):
    """Return what the list of assistants shows of one: where it is, its state, how full its
    context is, its last compaction and how much it keeps."""
    script = assistant.assistant_script
    links, entries, _ = memory_counts(assistant)
    newest = CompactionRecord.objects.filter(db_script_id=script.id).last() if script else None
    return {
        "id": assistant.id,
        "name": assistant.key,
        "dbref": assistant.dbref,
        "room": assistant.location.key if assistant.location else None,
        "state": script.state if script else "no script",
        "context": context_window(script) if script else {"error": "it has no script"},
        "last_compaction": newest and compaction_row(newest),
        "journal_entries": entries["total"],
        "memories": links["remembered"],
    }


def context_window(script):
    """Return how full the next call's context is, part by part, against the thresholds.

    Each part's ``width`` and each threshold's ``at`` are percentages of a bar as long as
    ``max_tokens`` (or as the context, when it is over).
    """
    try:
        usage = script.context_usage()
    except ValueError as err:
        return {"error": f"cannot measure the context: {err}"}
    config = script.effective_config()
    limits = [config[setting] for _, setting in THRESHOLDS]
    scale = max(usage.max_tokens, usage.total_tokens) or 1
    return {
        "tokens": usage.total_tokens,
        "max_tokens": usage.max_tokens,
        "usage": usage.usage,
        "usage_text": percent_against(usage.usage, *limits),
        "history_messages": usage.message_count,
        "parts": [
            {
                "name": name.replace("_", " "),
                "tokens": tokens,
                "width": f"{tokens / scale * 100:.2f}",
            }
            for name, tokens in context_parts(script, usage)
        ],
        "thresholds": [
            {
                "name": name,
                "setting": setting,
                "share": share,
                "text": percent(share),
                "tokens": int(share * usage.max_tokens),
                "at": f"{share * usage.max_tokens / scale * 100:.2f}",
                "crossed": usage.usage >= share,
            }
            for (name, setting), share in zip(THRESHOLDS, limits)
        ],
    }


def compaction_row(record):
    """Return one compaction record's figures: when, kind, strategy, tokens, undone."""
    result = record.result or {}
    return {
        "id": record.id,
        "at": stamp(record.created_at),
        "kind": record.kind,
        "strategy": record.strategy,
        "messages": result.get("compacted_messages"),
        "tokens_before": result.get("original_tokens"),
        "tokens_after": result.get("new_tokens"),
        "undone_at": stamp(record.undone_at),
    }


def message_item(message, audiences):
    """Return a history message as the inspector lists it: its whole text (a summary's
    without its marker, tool calls as ``→ name(arguments)``) and who may hear it."""
    text = message.get("content") or ""
    if is_summary(message):
        text = summary_text(text)
    calls = [f"→ {tool_call_text(call)}" for call in message.get("tool_calls") or ()]
    return {
        "id": message["id"],
        "role": message["role"],
        "tokens": message["token_count"],
        "pinned": bool(message.get("pinned")),
        "text": "\n".join(([text] if text else []) + calls),
        "audience": audiences(message_audience(message)),
    }


def compactions(script, audiences):
    """Return the newest compaction records, newest first, each with what it wrote (its
    summaries or placeholders) and, under each, the archived messages it replaced."""
    records = CompactionRecord.objects.filter(db_script_id=script.id).order_by("-id")[:LISTED]
    undoable = last_compaction(script)
    items = []
    for record in records:
        written = ConversationMessage.objects.filter(made_by=record).order_by("position", "id")
        item = compaction_row(record)
        item["undoable"] = undoable is not None and record.id == undoable.id
        item["written"] = [
            dict(
                message_item(row_to_message(row), audiences),
                replaced=[
                    message_item(message, audiences)
                    for message in script.history.archived_by(row.id)
                ],
            )
            for row in written
        ]
        items.append(item)
    return items


def journal(assistant, audiences):
    """Return the newest journal entries, newest first: ``(entries, insights)``, the
    insights (a reflection's entries, with the ids of those they cite) apart."""
    rows = JournalEntry.objects.filter(db_object_id=assistant.id).order_by("-id")[:LISTED]
    entries, insights = [], []
    for row in rows:
        entry = as_entry(row)
        item = {
            "id": entry["id"],
            "at": when(entry["timestamp"]),
            "source": entry["source_type"],
            "importance": entry["importance"],
            "score": row.score,
            "tags": entry["tags"],
            "consolidated": row.consolidated,
            "archived": row.archived,
            "text": entry["content"],
            "audience": audiences(entry.get("audience")),
        }
        if entry["source_type"] == INSIGHT_SOURCE:
            insights.append(dict(item, cites=entry.get("cites", [])))
        else:
            entries.append(item)
    return entries, insights


def memories(assistant, audiences):
    """Return the newest long-term memories (their links), newest first: superseded ones
    too, with when and by which memory."""
    links = (
        MemoryLink.objects.filter(db_object_id=assistant.id)
        .select_related("entry", "superseded_by")
        .order_by("-id")[:LISTED]
    )
    return [
        {
            "id": link.id,
            "memory_id": link.memory_id or None,
            "text": link.text,
            "valid_from": stamp(link.valid_from),
            "superseded_at": stamp(link.invalid_at),
            "superseded_by": (
                {"id": link.superseded_by.id, "text": link.superseded_by.text}
                if link.superseded_by
                else None
            ),
            "entry": link.entry.entry_id if link.entry else None,
            "audience": audiences(link.audience),
        }
        for link in links
    ]


def profiles(assistant, audiences):
    """Return the entity profiles: each entity's observations, oldest first, superseded ones
    with when and by what."""
    return [
        {
            "ref": ref,
            "name": profile["name"],
            "updated": when(profile["updated"]),
            "observations": [
                {
                    "text": observation["text"],
                    "at": when(observation["timestamp"]),
                    "superseded_at": (
                        when(observation["invalid_at"]) if observation.get("invalid_at") else None
                    ),
                    "superseded_by": observation.get("superseded_by"),
                    "audience": audiences(observation.get("audience")),
                }
                for observation in profile["observations"]
            ],
        }
        for ref, profile in entity_profiles(assistant).items()
    ]


def goals(assistant, audiences):
    """Return every goal, depth first, the most urgent first at every level."""
    return [
        {
            "id": goal.id,
            "depth": depth,
            "status": goal.status,
            "reason": goal.reason,
            "priority": goal.priority,
            "source": goal.source,
            "origin": goal.origin,
            "text": goal.text,
            "audience": audiences(goal.audience),
        }
        for goal, depth in goal_tree(assistant, statuses=GOAL_STATUSES)
    ]


def usage_over_time(script):
    """Return the newest ``CHARTED`` ticks' usage (``ai.usage_history``), oldest first."""
    return [
        {"at": stamp(at), "tokens": tokens, "max_tokens": limit, "status": status, "asleep": asleep}
        for at, tokens, limit, status, asleep in usage_rows(script, CHARTED)
    ]


def inspect_assistant(assistant):
    """Return everything the assistant's page shows (and its JSON endpoint sends)."""
    script = assistant.assistant_script
    audiences = Audiences()
    entries, insights = journal(assistant, audiences)
    return {
        **assistant_row(assistant),
        "compactions": compactions(script, audiences),
        "usage_over_time": usage_over_time(script),
        "pins": [message_item(m, audiences) for m in script.history.pinned_messages()],
        "pins_held": pins_held(script),
        "journal": entries,
        "reflections": insights,
        "long_term_memories": memories(assistant, audiences),
        "profiles": profiles(assistant, audiences),
        "goals": goals(assistant, audiences),
    }
