"""The record of one whole sleep, kept over its dreaming ticks (``aimemory`` shows it).

A sleep runs the pipeline on every dreaming tick until the assistant wakes; most of the work
happens in its first ticks, and the last ones often find nothing left to do. So the record
adds up what each step did in every tick of the sleep (memories added, observations
merged, links pruned, compactions...), keeps the state the last tick left (entries still
waiting), and counts the ticks in which a step failed. A sleep is told apart from the next
by when the assistant fell asleep (``script.db.asleep_since``).

The record of the sleep under way is held on the script (``ndb``) and saved to
``script.db.last_sleep`` every ``SAVE_EVERY_TICKS`` dreaming ticks, when the assistant wakes
and when the server reloads or stops: pickling and saving the attribute was a
millisecond of every dreaming tick. A crash loses at most the counts of the ticks since the
last save (until the first save, the attribute still holds the sleep before), never the work
they did.
"""

from django.utils import timezone

from ..utils.wording import plural

# Dreaming ticks between two saves of the record (see the module's docstring).
SAVE_EVERY_TICKS = 30


def amount(key):
    """Return a reader of a step result's ``key``: a list's length, else the number."""

    def read(result):
        value = result.get(key) or 0
        return len(value) if isinstance(value, list) else value

    return read


def compacted(key):
    """Return a reader of a compaction's ``key`` that counts only a compaction that ran."""

    def read(result):
        return result.get(key) or 0 if result.get("success") else 0

    return read


def tokens_freed(result):
    """Return the history tokens a compaction freed (0 when it did not run)."""
    if not result.get("success"):
        return 0
    return max((result.get("original_tokens") or 0) - (result.get("new_tokens") or 0), 0)


# What each step did, added up over the sleep: (record key, reader, one, many).
SUMMED = {
    "memory_consolidation": (
        ("entries", amount("consolidated_entry_ids"), "entry consolidated", "entries consolidated"),
        ("memories", amount("memories_added"), "memory added", "memories added"),
        ("superseded", amount("superseded"), "memory superseded", "memories superseded"),
    ),
    "sleep_consolidate": (
        ("runs", amount("runs"), "review run", "review runs"),
        ("calls", amount("iterations"), "model call", "model calls"),
        ("tools", amount("tools_called"), "tool call", "tool calls"),
    ),
    "importance_scoring": (("scored", amount("scored"), "entry scored", "entries scored"),),
    "entity_consolidation": (
        (
            "observations",
            amount("consolidated"),
            "observation consolidated into profiles",
            "observations consolidated into profiles",
        ),
        ("superseded", amount("superseded"), "superseded", "superseded"),
        ("merged", amount("merged"), "repeat merged", "repeats merged"),
    ),
    "orphaned_link_cleanup": (
        ("checked", amount("checked"), "link checked", "links checked"),
        ("pruned", amount("pruned_link_ids"), "pruned", "pruned"),
        ("restored", amount("restored_link_ids"), "memory restored", "memories restored"),
    ),
    "episodic_prune": (("archived", amount("archived"), "entry archived", "entries archived"),),
    "stale_conversation_cleanup": (
        ("cleared", amount("cleared"), "conversation cleared", "conversations cleared"),
    ),
    "pre_compaction_extraction": (
        ("facts", amount("facts_recorded"), "fact journaled", "facts journaled"),
        ("calls", amount("iterations"), "model call", "model calls"),
    ),
    "context_compaction": (
        ("compactions", lambda result: 1 if result.get("success") else 0, "compaction", None),
        ("messages", compacted("compacted_messages"), "message compacted", "messages compacted"),
        ("tokens", tokens_freed, "token freed", "tokens freed"),
    ),
}
# The state the last tick that reported it left: (result key, one, many).
LATEST = {
    "memory_consolidation": (("remaining", "entry still waiting", "entries still waiting"),),
    "episodic_prune": (
        ("remaining_candidates", "entry left to archive", "entries left to archive"),
    ),
}


def record_dream_tick(script, results):
    """Add one dreaming tick's ``results`` to the record of the sleep it belongs to.

    Args:
        results (dict): Each step's result, by step name (see ``run_sleep_tick``).
    """
    began = script.db.asleep_since
    record = dict(sleep_record(script))
    if record.get("began", "") != began:
        record = {"began": began, "ticks": 0, "steps": {}}
    steps = dict(record["steps"])
    for step, result in results.items():
        steps[step] = fold(step, dict(steps.get(step) or {}), result or {})
    record.update(at=timezone.now().isoformat(), ticks=record["ticks"] + 1, steps=steps)
    script.ndb.sleep_record = record
    # A tick that ended after a wake (it waited on the memory worker) is saved at once.
    if record["ticks"] % SAVE_EVERY_TICKS == 0 or script.db.operating_mode != "sleep":
        save_sleep_record(script)


def sleep_record(script):
    """Return the record of the last sleep, or of the one under way: a dict, maybe empty
    (the one held on the script if it holds one, else the one saved)."""
    record = script.ndb.sleep_record
    return record if record is not None else script.db.last_sleep or {}


def save_sleep_record(script):
    """Save the record held on the script to ``script.db.last_sleep``, if one is held; the
    script then holds none until the next dreaming tick (nothing to save at a reload)."""
    record = script.ndb.sleep_record
    if record is not None:
        script.db.last_sleep = record
        script.ndb.sleep_record = None


def fold(step, kept, result):
    """Return ``kept`` (what ``step`` did so far in this sleep) with ``result`` added."""
    if result.get("error"):
        kept["failed"] = kept.get("failed", 0) + 1
        kept["error"] = str(result["error"])
    elif result.get("skipped") or (result.get("success") is False and "reason" in result):
        # Why it did not run (extraction's "compaction not due" is such a reason).
        kept["reason"] = str(result.get("reason") or "?")
        return kept
    kept["ran"] = kept.get("ran", 0) + 1
    for key, read, _, _ in SUMMED.get(step, ()):
        kept[key] = kept.get(key, 0) + read(result)
    for key, _, _ in LATEST.get(step, ()):
        if key in result:
            kept[key] = result[key]
    return kept


def step_line(step, kept):
    """Return what ``step`` did in the whole sleep, in words."""
    if not kept.get("ran"):
        return f"{step}: skipped: {kept.get('reason', '?')}"
    done = [plural(kept.get(key, 0), one, many) for key, _, one, many in SUMMED.get(step, ())] or [
        f"ran in {plural(kept['ran'], 'tick')}"
    ]
    done += [plural(kept[key], one, many) for key, one, many in LATEST.get(step, ()) if key in kept]
    text = f"{step}: {', '.join(done)}"
    if kept.get("failed"):
        text += f"; failed in {plural(kept['failed'], 'tick')}: {kept['error']}"
    return text
