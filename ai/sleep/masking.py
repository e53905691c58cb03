"""Observation masking: old tool outputs become placeholders; the originals stay archived.

A tool output older than the preserve window (the split of ``ai.sleep.common``) is
replaced by a tool message of the same ``tool_call_id`` whose content is
``[TOOL OUTPUT ARCHIVED - search history for details]``, so every call keeps its result
and the history stays valid for the model's API. The original is archived, linked to its
placeholder, and the ``search_history`` tool reads it back. Everything else (what players
said, the assistant's answers and calls, pinned units, earlier summaries) stays as it is.
No model is called.
"""

from django.utils import timezone

from ..audience import message_audience, with_audience
from ..utils.markers import MASKED_OUTPUT
from ..utils.message_format import is_masked
from ..utils.token_counter import count_message_tokens
from .common import CompactionRefused, finish, replace_recorded, skipped

# An output is masked only when it is at least this many times its placeholder's size:
# masking a short one saves nothing worth a search to read it back.
MIN_SAVING_FACTOR = 2


def mask_tool_outputs(script, character, plan, before, config, extract=None):
    """The ``masking`` strategy: replace the old tool outputs worth it with placeholders.

    Args:
        script (AssistantScript): The assistant's script.
        character (AssistantCharacter): The assistant.
        plan (CompactionPlan): The messages older than the preserve window (``ai.signals``).
        before (ContextUsage): The context's usage when the compaction started.
        config (dict): The script's effective configuration.
        extract (callable, optional): Not run: masking makes no summary, and what it hides
            stays searchable, so nothing needs journaling first.

    Returns:
        dict: The result, shaped as a summary compaction's (``compacted_messages`` counts
        the masked outputs); ``skipped`` when no old output is worth masking; a failure
        when masking would remove too little of the history (a stall).
    """
    store = script.history
    now = timezone.now()
    replacements = placeholders(plan.messages, store.model, now)
    if not replacements:
        return skipped("no old tool output worth masking", token_usage=before.usage)
    masked = sum(replaced[0]["token_count"] for _, replaced in replacements)
    saved = masked - sum(count_message_tokens(new, store.model) for new, _ in replacements)
    try:
        record, stored = replace_recorded(
            script,
            store,
            plan.kind,
            "masking",
            now,
            lambda record: store.replace_each(replacements, record),
            saved,
            before.history_tokens,
        )
    except CompactionRefused as refused:
        return refused.result
    result = {
        "compacted_messages": len(stored),
        "masked_tokens": masked,
        "placeholder_tokens": sum(message["token_count"] for message in stored),
        "placeholder_ids": [message["id"] for message in stored],
    }
    return finish(script, character, record, before, result, "placeholders")


def placeholders(messages, model, now):
    """Return ``(placeholder, [tool output])`` for each tool output among ``messages`` worth
    masking: not masked already and at least ``MIN_SAVING_FACTOR`` times its placeholder.

    A placeholder keeps the output's ``tool_call_id`` and audience (a whispered turn's
    result stays with the whisperer) and names the tool that made it, read from the call.
    """
    tools = {
        call["id"]: call["function"]["name"]
        for message in messages
        for call in message.get("tool_calls") or ()
    }
    found = []
    for message in messages:
        if message["role"] != "tool" or is_masked(message):
            continue
        placeholder = {
            "role": "tool",
            "tool_call_id": message["tool_call_id"],
            "content": MASKED_OUTPUT,
            "metadata": with_audience(
                {
                    "type": "masked",
                    "original_tool": tools.get(message["tool_call_id"]) or message.get("name"),
                    "archived_at": now.isoformat(),
                    "original_token_count": message["token_count"],
                },
                message_audience(message),
            ),
        }
        if message.get("name"):
            placeholder["name"] = message["name"]
        if message["token_count"] >= MIN_SAVING_FACTOR * count_message_tokens(placeholder, model):
            found.append((placeholder, [message]))
    return found
