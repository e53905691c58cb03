"""Journal -> long-term memory: consolidation into Mem0, its review, the links' repair.

Each step takes one bounded batch per dreaming tick: a few database reads and one
transaction in the reactor thread, every Mem0 call in one call to the memory worker. A
reload anywhere in between loses and duplicates nothing: a link row is written before its
memory is added and names the memory's ``link`` in Mem0, so the next batch finds a memory
added just before the reload instead of adding it again.
"""

from django.db import transaction
from twisted.internet import defer

from ..helpers.memory_links import (
    count_unconsolidated,
    entries_to_consolidate,
    links_to_check,
    memory_metadata,
    memory_namespace,
    remembered_texts,
    set_memory_ids,
)
from ..models import MemoryLink
from ..prompt_contexts import CONTEXT_SLEEP_CONSOLIDATE, get_context_config
from ..semantic_memory import (
    WORKER,
    delete_memories,
    missing_memories,
    remember,
    restore_memories,
)
from ..tool_execution import run_react_loop

# New memories one sleep_consolidate run is shown at most.
MAX_REVIEWED = 20
# Links checked per dreaming tick, per link it may prune or restore: checking is cheap,
# deleting and embedding anew are not.
CHECKED_PER_REPAIRED = 5


@defer.inlineCallbacks
def consolidate_memories_to_semantic(script, character, batch_size):
    """Move up to ``batch_size`` unconsolidated journal entries into long-term memory.

    Each fact becomes one Mem0 memory linked to its entry (see ``semantic_memory.remember``);
    a memory it replaces ("the password is now ...") is marked superseded.

    Returns:
        Deferred: Fires with ``consolidated_entry_ids``, ``memories_added``,
        ``superseded`` (link ids) and ``remaining``.
    """
    waiting = entries_to_consolidate(character, batch_size + 1)
    entries = waiting[:batch_size]
    if not entries:
        return {"skipped": True, "reason": "no new journal entries", "consolidated_entry_ids": []}
    outcome = yield remember(character, entries)
    # Counted only when more waited than the batch took (as the batch was read).
    remaining = count_unconsolidated(character) if len(waiting) > batch_size else 0
    return dict(outcome, remaining=remaining)


@defer.inlineCallbacks
def repair_memory_links(script, character, batch_size):
    """Prune or restore up to ``batch_size`` links whose entry or memory is gone.

    A link whose journal entry was deleted is pruned with its memory (the fact was
    withdrawn). A link whose memory the store no longer holds (its files were lost, or the
    game switched ``AI_MEMORY_VECTOR_STORE``) gets its memory again from its own text: the
    contrib's tables are the source of truth, so nothing is forgotten. Links are checked in
    turn, five times ``batch_size`` per tick, from where the last tick stopped
    (``script.ndb.memory_link_cursor``: this process's, since saving an attribute each tick
    cost more than the check; after a reload the check starts again at the first link).

    Returns:
        Deferred: Fires with ``checked``, ``pruned_link_ids`` and ``restored_link_ids``.
    """
    cursor = script.ndb.memory_link_cursor or 0
    batch = links_to_check(character, cursor, batch_size * CHECKED_PER_REPAIRED)
    if not batch:
        script.ndb.memory_link_cursor = 0
        return {"checked": 0, "pruned_link_ids": [], "restored_link_ids": []}
    checked = [memory_id for _, memory_id, entry_id in batch if entry_id is not None]
    missing = set((yield WORKER.call(missing_memories, checked)) if checked else ())
    broken = [link for link in batch if link[2] is None or link[1] in missing]
    if len(broken) > batch_size:  # the rest wait for the next tick
        broken = broken[:batch_size]
        batch = [link for link in batch if link[0] <= broken[-1][0]]
    pruned = [(link_id, memory_id) for link_id, memory_id, entry_id in broken if not entry_id]
    if pruned:
        yield WORKER.call(delete_memories, [memory_id for _, memory_id in pruned])
        MemoryLink.objects.filter(id__in=[link_id for link_id, _ in pruned]).delete()
    lost = MemoryLink.objects.filter(id__in=[link[0] for link in broken if link[2]])
    lost = list(lost.select_related("entry").order_by("id"))
    if lost:
        items = [(link.text, memory_metadata(link)) for link in lost]
        restored = yield WORKER.call(restore_memories, memory_namespace(character), items)
        for link, memory_id in zip(lost, restored):
            link.memory_id = memory_id
        with transaction.atomic():
            set_memory_ids(lost)
    script.ndb.memory_link_cursor = batch[-1][0]
    return {
        "checked": len(batch),
        "pruned_link_ids": [link_id for link_id, _ in pruned],
        "restored_link_ids": [link.id for link in lost],
    }


@defer.inlineCallbacks
def review_new_memories(script, character, results):
    """Let the model review what the consolidation just remembered (``sleep_consolidate``).

    One run per audience: a run sees, and stores for, only what its listeners may hear,
    so a whispered fact never turns into a public memory.

    Returns:
        Deferred: Fires with the runs' ``iterations`` and ``tools_called``, or skipped.
    """
    if not script.get_config("sleep_consolidate_enabled"):
        return {"skipped": True, "reason": "sleep_consolidate_enabled is False"}
    entry_ids = (results.get("memory_consolidation") or {}).get("consolidated_entry_ids") or []
    remembered = remembered_texts(character, entry_ids)
    if not remembered:
        return {"skipped": True, "reason": "no new memories"}
    groups = {}
    for audience, text in remembered:
        groups.setdefault(tuple(audience or ()), []).append(text)
    # The review owns its limit, the context type's max_iterations (10 unless overridden),
    # as extraction does: execution_config's per-tick cap (5) governs conversation.
    context = get_context_config(CONTEXT_SLEEP_CONSOLIDATE, script)
    iterations, tools_called = 0, []
    for audience, texts in sorted(groups.items()):
        loop = yield run_react_loop(
            script,
            character,
            CONTEXT_SLEEP_CONSOLIDATE,
            iteration_limit=context.max_iterations,
            context_config=context,
            audience=list(audience) or None,
            memories=texts[:MAX_REVIEWED],
        )
        iterations += loop.iterations
        tools_called += loop.tools_called
    return {"runs": len(groups), "iterations": iterations, "tools_called": tools_called}
