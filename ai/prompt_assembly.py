"""Assembling a context type's components into the messages of one call, within a budget.

Non-history components are rendered first. If they alone exceed the budget, the
lowest-priority ones shrink first (pluggable components, then the context buffer, memories,
entity context, goals, character context, tool result); the system prompt and the pending
event never shrink. History then fills what is left, newest first, in whole units: an
assistant message that calls tools always travels with the tool results that answer it.
Everything cut is recorded in the result.
"""

import re
from dataclasses import dataclass, field

from .prompt_components import (
    COMPONENT_CONVERSATION_HISTORY,
    STATIC_IDS,
    all_components,
    pluggable_renderer,
)
from .prompt_layout import arrange
from .prompt_rendering import RENDERERS, PromptState
from .replaced_statements import without_replaced
from .utils.message_format import SendableMessages, sendable_messages
from .utils.token_counter import (
    REPLY_PRIMING_TOKENS,
    count_message_tokens,
    count_tokens,
    count_tools_tokens,
    kept_message_tokens,
    stored_tokens,
)

# Shrunk first to last; keys not listed (system_prompt, pending_event) never shrink.
SHRINK_ORDER = (
    "context_buffer",
    "semantic_memories",
    "entity_context",
    "goals",
    "character_context",
    "tool_result",
)
TRUNCATION_MARK = " [...]"
# Components rendered once for all the calls of one run (see ``assemble_prompt``'s
# ``kept``): their reads cost the most (the journal recall, the profiles of those present),
# and the prompt's prefix stays the same from call to call. What a run's own tools change
# there reaches the model through their results.
RENDERED_ONCE_A_RUN = ("semantic_memories", "entity_context")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass
class AssembledPrompt:
    """The messages of one call and how they were fitted into the budget.

    Attributes:
        messages (SendableMessages): What to send, in the order of the assistant's
            ``prompt_layout``.
        total_tokens (int): Tokens of the messages and the tool schemas.
        budget (int): The token budget of the call.
        components (dict): Component key -> tokens it contributed.
        tool_tokens (int): Tokens of the tool schemas (part of ``total_tokens``).
        history_included (int): Live history messages sent.
        history_omitted (int): Live history messages left out (oldest first).
        cuts (list): One dict per shrunk or dropped part: ``component``, ``how``, ``tokens``.
    """

    messages: list
    total_tokens: int
    budget: int
    components: dict = field(default_factory=dict)
    tool_tokens: int = 0
    history_included: int = 0
    history_omitted: int = 0
    cuts: list = field(default_factory=list)


def history_units(history):
    """Group history into units that must stay whole: a tool-calling message and its results."""
    units, index = [], 0
    while index < len(history):
        end = unit_end(history, index)
        units.append(history[index:end])
        index = end
    return units


def unit_end(history, index):
    """Return where the unit of :func:`history_units` that starts at ``history[index]`` ends."""
    call_ids = {call["id"] for call in history[index].get("tool_calls") or ()}
    end = index + 1
    while call_ids and end < len(history) and history[end].get("role") == "tool":
        if history[end].get("tool_call_id") not in call_ids:
            break
        end += 1
    return end


def unit_start(history, index):
    """Return where the unit of ``history`` holding ``history[index]`` starts (see
    :func:`history_units`), or ``len(history)`` for an index past the end.

    Only the messages back to the last one that is not a tool result are read: such a
    message always starts a unit.
    """
    if index >= len(history):
        return len(history)
    head = index
    while head > 0 and history[head].get("role") == "tool":
        head -= 1
    start = head
    while True:
        end = unit_end(history, start)
        if end > index:
            return start
        start = end


def select_history(history, budget, model):
    """Return the newest whole units of ``history`` that fit ``budget`` tokens, in order.

    Only the messages the budget reaches are read, from the newest back; none when the
    history's tokens are known to fit (a ``RecentHistory``'s).
    """
    known = getattr(history, "tokens", None)
    if known is not None and known <= budget:
        return list(history), known
    start, used = len(history), 0
    while start:
        cost = stored_tokens(history[start - 1], model)
        if used + cost > budget:
            break
        start, used = start - 1, used + cost
    head = unit_start(history, start)
    if head < start:  # the oldest message that fits belongs to a unit that does not
        end = unit_end(history, head)
        used -= sum(stored_tokens(message, model) for message in history[start:end])
        start = end
    return list(history[start:]), used


def _component_text(component, state, config):
    """The context's override, else the component's renderer, else its template."""
    template = config.get_component_content_override(component.key)
    if template is None:
        if component.is_static:
            renderer = RENDERERS.get(component.key)
        else:
            renderer = pluggable_renderer(component.id)
        if renderer is not None:
            return renderer(state)
        template = component.content
    return fill_placeholders(template, state.fields())


def fill_placeholders(template, values):
    """Replace the ``{name}``-style placeholders of ``values`` in ``template``.

    Every other brace is left as written: a prompt may show JSON, and a builder's override
    must never break a tick.
    """
    return _PLACEHOLDER.sub(lambda match: str(values.get(match[1], match[0])), template)


def includes(config, component_id):
    """Tell whether the prompts of the context type ``config`` include ``component_id``."""
    component = next((c for c in all_components() if c.id == component_id), None)
    return component is not None and _included(component, set(config.enabled_components))


def _included(component, enabled_ids):
    """Tell whether ``component`` joins a context listing ``enabled_ids``: never when it is
    switched off (``PromptComponent.enabled``); a pluggable one joins the contexts that
    list it or the static one before it."""
    if not component.enabled:
        return False
    if component.id in enabled_ids or component.is_static:
        return component.id in enabled_ids
    preceding_static = max(i for i in STATIC_IDS if i < component.id)
    return preceding_static in enabled_ids


def _shrink(parts, excess, model, cuts):
    """Shrink parts (lowest priority first) until ``excess`` tokens are gone; return the rest."""
    order = [p for p in parts if not p["static"]] + sorted(
        (p for p in parts if p["static"] and p["key"] in SHRINK_ORDER),
        key=lambda p: SHRINK_ORDER.index(p["key"]),
    )
    for part in order:
        if excess <= 0:
            break
        before = part["tokens"]
        target = before - excess
        text = part["message"]["content"]
        # Cut by characters in proportion, again if that fell short (the characters a token
        # stands for vary along a text); a part left with almost nothing is dropped.
        for _ in range(3):
            text_tokens = count_tokens(text, model)
            keep = text_tokens - (part["tokens"] - target)
            if keep <= 20:
                break
            text = text[: max(1, len(text) * keep // text_tokens)]
            part["message"]["content"] = text + TRUNCATION_MARK
            part["tokens"] = count_message_tokens(part["message"], model)
            if part["tokens"] <= target:
                break
        how = "truncated"
        if part["tokens"] > target:
            part["message"], part["tokens"], how = None, 0, "dropped"
        excess -= before - part["tokens"]
        cuts.append({"component": part["key"], "how": how, "tokens": before - part["tokens"]})
    return excess


def assemble_prompt(
    script,
    character,
    config,
    model,
    budget,
    history,
    event=None,
    tool_result=None,
    tools=None,
    memories=(),
    audience=None,
    kept=None,
):
    """Build the messages of one call of context type ``config`` within ``budget`` tokens.

    Args:
        script (AssistantScript): The assistant's script.
        character (AssistantCharacter): The assistant.
        config (ContextConfig): The context type.
        model (str): The model whose tokenizer counts.
        budget (int): Tokens the whole call may use.
        history (list): The live history (stored messages with their token counts), or
            its newest part as a ``RecentHistory``, whose older messages count as omitted.
        event (dict, optional): The pending event.
        tool_result (str, optional): The previous tool's outcome.
        tools (list, optional): Tool schemas that will be sent with the call.
        memories (iterable): Recalled long-term facts.
        audience (list, optional): Who hears the answer; what is kept for others is not
            rendered (``history`` must already be filtered, see ``ai.audience``).
        kept (dict, optional): The renders of ``RENDERED_ONCE_A_RUN`` of this run's earlier
            calls, filled by the first; None renders every component anew.

    Returns:
        AssembledPrompt: The messages and what was cut to fit.
    """
    state = PromptState(
        script, character, config, event, tool_result, list(memories), history, audience
    )
    enabled = set(config.enabled_components)
    with_history = includes(config, COMPONENT_CONVERSATION_HISTORY)
    parts, cuts = [], []
    for component in all_components():
        if component.id == COMPONENT_CONVERSATION_HISTORY or not _included(component, enabled):
            continue
        if component.key == "tool_result" and with_history:
            continue  # the result is already in history as a tool message
        if kept is not None and component.key in RENDERED_ONCE_A_RUN:
            if component.key not in kept:
                kept[component.key] = _component_text(component, state, config)
            text = kept[component.key]
        else:
            text = _component_text(component, state, config)
        if not text:
            continue
        role = "system" if component.role in ("system", "mixed") else component.role
        if component.key == "pending_event" and event and event.get("in_history"):
            role = "system"
        message = {"role": role, "content": text}
        parts.append(
            {
                "id": component.id,
                "key": component.key,
                "static": component.is_static,
                "message": message,
                "tokens": kept_message_tokens(message, model),
            }
        )
    tool_tokens = count_tools_tokens(tools, model)
    fixed = sum(p["tokens"] for p in parts) + tool_tokens + REPLY_PRIMING_TOKENS
    if fixed > budget:
        excess = _shrink(parts, fixed - budget, model, cuts)
        fixed = budget + max(excess, 0)
    chosen, history_tokens, omitted = [], 0, 0
    if with_history:
        chosen, history_tokens = select_history(history, max(budget - fixed, 0), model)
        left = len(history) - len(chosen)
        omitted = left + getattr(history, "older_count", 0)
        if omitted:
            left_tokens = sum(m.get("token_count") or 0 for m in history[:left])
            cuts.append(
                {
                    "component": "conversation_history",
                    "how": f"oldest {omitted} messages omitted",
                    "tokens": left_tokens + getattr(history, "older_tokens", 0),
                }
            )
        parts.append(
            {
                "id": COMPONENT_CONVERSATION_HISTORY,
                "key": "conversation_history",
                "messages": sendable_messages(without_replaced(chosen)),
                "tokens": history_tokens,
            }
        )
    messages, components = SendableMessages(), {}
    for part in arrange(parts, script.get_config("prompt_layout")):
        if "messages" in part:  # the history's, each a message
            if part["messages"]:
                messages.extend(part["messages"])
                components[part["key"]] = part["tokens"]
        elif part["message"]:
            messages.append(part["message"])
            components[part["key"]] = part["tokens"]
    return AssembledPrompt(
        messages=messages,
        total_tokens=fixed + history_tokens,
        budget=budget,
        components=components,
        tool_tokens=tool_tokens,
        history_included=len(chosen),
        history_omitted=omitted,
        cuts=cuts,
    )
