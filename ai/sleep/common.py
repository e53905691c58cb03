"""What every compaction strategy shares: the split that keeps the newest messages, the
record a compaction writes with its replacements, and the result of one that did not run."""

from django.db import transaction

from ..models import CompactionRecord
from ..prompt_assembly import unit_start

PRESERVE_TOKEN_SHARE = 0.2


def split_history(history, preserve_count, max_tokens, token_share=PRESERVE_TOKEN_SHARE):
    """Split history into ``(to_compact, to_preserve)``.

    The preserved tail is the larger of the last ``preserve_count`` messages and the most
    recent messages within ``token_share`` (20%) of ``max_tokens``; its start then moves
    back to the start of a whole unit, so a tool call stays with its results.
    """
    start = preserve_start(history, preserve_count, token_share * max_tokens)
    return history[:start], history[start:]


def preserve_start(newest, preserve_count, keep_tokens):
    """Return the index in ``newest`` of the first message :func:`split_history` preserves.

    ``newest`` is the whole history or its newest part, as long as that part holds more
    than ``preserve_count`` messages and more than ``keep_tokens`` tokens and begins with a
    message that is not a tool result (see
    :meth:`~ai.history.ConversationHistory.newest_outline`): the split then falls inside
    it, where it falls in the whole history.
    """
    keep_by_tokens, used = 0, 0
    for message in reversed(newest):
        used += message["token_count"]
        if used > keep_tokens:
            break
        keep_by_tokens += 1
    boundary = max(len(newest) - max(preserve_count, keep_by_tokens), 0)
    return unit_start(newest, boundary)


def messages_to_compact(store, preserve_count, keep_tokens):
    """Return the live messages that :func:`split_history` would not preserve, and the
    history's revision when they were read.

    The split is found in an outline of the newest messages (ids, roles, tool calls and
    token counts); only the messages before it, all compacted but the pinned ones, are read
    whole. A pin holds a whole tool-call unit (see ``ConversationHistory.set_pinned``).
    """
    newest = store.newest_outline(keep_tokens, preserve_count)
    start = preserve_start(newest, preserve_count, keep_tokens)
    before = newest[start]["position"] if start < len(newest) else None
    unpinned = [message for message in store.messages(before=before) if not message.get("pinned")]
    return unpinned, newest.revision


def old_messages(script, kind, before, config):
    """Return the messages a ``kind`` compaction may replace (none when the preserve window
    holds them all) and the history's revision when they were read.

    A builder who asks for a compaction gets one: only the preserve window's messages are
    kept, not 20% of the window (all of a short history at the default 100,000 tokens).
    """
    share = 0 if kind == "manual" else PRESERVE_TOKEN_SHARE
    return messages_to_compact(
        script.history, config["compact_preserve_window"], share * before.max_tokens
    )


def within_preserve_window(before, config):
    """Return the result of a compaction that found every message in the preserve window."""
    return skipped(
        "history within preserve window",
        token_usage=before.usage,
        hint=f"the last {config['compact_preserve_window']} messages are kept; lower "
        "compact_preserve_window to compact more",
    )


def skipped(reason, **extra):
    """Return the result of a compaction that did not run."""
    return {"skipped": True, "reason": reason, **extra}


def replace_recorded(script, store, kind, strategy, now, replace):
    """Record a compaction and make its replacements in one transaction.

    Args:
        store (ConversationHistory): The history replaced in (its tokenizer is recorded,
            so that an undo knows whether to count the restored messages again).
        strategy (str): The compaction strategy that chose what to replace.
        replace (callable): ``replace(record)``: makes the replacements, returns what it
            stored; its ``HistoryChanged`` rolls the record back with them.

    Returns:
        tuple: ``(the CompactionRecord, what replace returned)``.
    """
    with transaction.atomic():
        record = CompactionRecord.objects.create(
            db_script_id=script.id,
            kind=kind,
            strategy=strategy,
            created_at=now,
            result={"counted_for": store.counted_for},
        )
        return record, replace(record)


def save_figures(record, result):
    """Keep the plain figures of a compaction's ``result`` in its record."""
    record.result.update(
        (key, value) for key, value in result.items() if isinstance(value, (str, int, float))
    )
    record.save(update_fields=["result"])
