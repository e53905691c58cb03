"""The order in which a prompt's assembled parts are sent, and where its reusable prefix ends.

Providers and local servers reuse the part of a prompt that is identical to the start of
the previous one (Anthropic and OpenAI bill it at a fraction, llama.cpp skips evaluating
it). ``prompt_layout`` chooses the order:

- ``seed``: the seeds' component ID order. The entity context, memories and context buffer
  change from call to call and come before the history, so the next call repeats only the
  tool schemas, the system prompt and the character context.
- ``cache_friendly``: the history moves up to follow the character context (and the
  pluggable components after it); every other part keeps its ID order, after it. The next
  call repeats the history too. A context type without history is sent the same way
  under both.
"""

from .prompt_components import COMPONENT_CONVERSATION_HISTORY, COMPONENT_ENTITY_CONTEXT

SEED = "seed"
CACHE_FRIENDLY = "cache_friendly"
LAYOUTS = (SEED, CACHE_FRIENDLY)
# Where history sorts: under cache_friendly, after every ID below the entity context's.
_HISTORY_POSITION = {
    SEED: COMPONENT_CONVERSATION_HISTORY,
    CACHE_FRIENDLY: COMPONENT_ENTITY_CONTEXT - 0.5,
}
# The key of the newest message when it is sent apart from the rest of the history.
NEWEST_MESSAGE = "newest_message"
# Components whose text changes with the game (a mode, an arrival), not from call to call.
STABLE_KEYS = ("system_prompt", "character_context")


def arrange(parts, layout):
    """Return assembled parts (dicts with the ``id`` of their component) in ``layout``'s order.

    Under ``cache_friendly``, a history that ends with what a player just said is split:
    that newest message is sent last, after the parts that change, so the model answers
    it rather than the last note it read (a small model answered "Oswin is awake." to a
    question followed by the status). The prefix a later call repeats is the same.
    """
    history = _HISTORY_POSITION[layout]
    ordered = sorted(
        parts, key=lambda p: history if p["id"] == COMPONENT_CONVERSATION_HISTORY else p["id"]
    )
    if layout != CACHE_FRIENDLY:
        return ordered
    for at, part in enumerate(ordered):
        sent = part.get("messages") if part["key"] == "conversation_history" else None
        if sent and sent[-1].get("role") == "user" and at < len(ordered) - 1:
            newest = {"id": None, "key": NEWEST_MESSAGE, "messages": sent[-1:], "tokens": 0}
            ordered[at] = {**part, "messages": sent[:-1]}
            ordered.append(newest)
            break
    return ordered


def cache_points(prompt, another_call):
    """Return the indices of the messages of ``prompt`` that end a prefix a later call repeats.

    The stable components at its start (system prompt, character context) end one. The
    history ends another when a later call will start with it too: when only stable
    components precede it (as under ``cache_friendly``), or when the same loop may call
    the model again. A pluggable component counts as one that changes.

    Args:
        prompt (AssembledPrompt): The assembled prompt.
        another_call (bool): Whether the loop may call the model again after this call.
    """
    points, end, stable = [], 0, True
    for key in prompt.components:
        history = key == "conversation_history"
        apart = NEWEST_MESSAGE in prompt.components
        end += prompt.history_included - apart if history else 1
        if history and (stable or another_call):
            points.append(end - 1)
        elif stable and key in STABLE_KEYS:
            points = [end - 1]
        stable = stable and key in STABLE_KEYS
    return points
