"""Prompt components: the ordered building blocks of every LLM call (seed 004).

Static components sit at 1000-point IDs; the 999 IDs between two static components are
free for pluggable components that a game registers by key. Assembly is in ID order.
"""

from dataclasses import dataclass

COMPONENT_SYSTEM_PROMPT = 0
COMPONENT_CHARACTER_CONTEXT = 1000
COMPONENT_ENTITY_CONTEXT = 1500
COMPONENT_SEMANTIC_MEMORIES = 2000
COMPONENT_CONTEXT_BUFFER = 3000
COMPONENT_GOALS = 4000
COMPONENT_CONVERSATION_HISTORY = 5000
COMPONENT_PENDING_EVENT = 6000
COMPONENT_TOOL_RESULT = 7000
# The last ID any component may take.
MAX_COMPONENT_ID = 7999


@dataclass
class PromptComponent:
    """One building block of a prompt.

    Attributes:
        id (int): Position in the assembly order.
        key (str): Unique identifier, e.g. ``"system_prompt"``.
        name (str): Display name.
        description (str): What the component provides.
        content (str): A template with ``{placeholders}``, or "" when rendered from state.
        is_static (bool): True for the nine built-in components.
        enabled (bool): Whether assembly includes it.
        role (str): ``system``, ``user``, ``assistant``, ``tool`` or ``mixed``.
    """

    id: int
    key: str
    name: str
    description: str
    content: str = ""
    is_static: bool = False
    enabled: bool = True
    role: str = "system"


# Measured with make eval-local: an example exchange kept a small local model from
# repeating players' lines back to them; an instruction to journal in the same breath did
# not (facts are journaled before every compaction anyway). The example is placeholders: one
# with names and facts gave a model those facts to repeat as if someone had said them.
DEFAULT_SYSTEM_PROMPT = """You are {name}, a friendly character in a text game. Several \
players talk to you.

Reply to the newest message in one short sentence of your own, speaking to that player by \
name. Answer questions from what was said earlier and from what you remember; if you do \
not know, say so. Never repeat or restate what the player just said.

Example (<...> stands for what the players actually say):
<player> says, "My <thing> is <value>."
You: Good to know, <player>!
<other player> says, "What is <player>'s <thing>?"
You: It is <value>, <other player>."""

STATIC_COMPONENTS = [
    PromptComponent(
        COMPONENT_SYSTEM_PROMPT,
        "system_prompt",
        "System prompt",
        "Core instructions",
        DEFAULT_SYSTEM_PROMPT,
        is_static=True,
    ),
    PromptComponent(
        COMPONENT_CHARACTER_CONTEXT,
        "character_context",
        "Character context",
        "The assistant's persona, place, company and mode",
        is_static=True,
    ),
    PromptComponent(
        COMPONENT_ENTITY_CONTEXT,
        "entity_context",
        "Entity context",
        "What the assistant has observed about those present",
        is_static=True,
    ),
    PromptComponent(
        COMPONENT_SEMANTIC_MEMORIES,
        "semantic_memories",
        "Semantic memories",
        "Long-term facts recalled for this moment",
        is_static=True,
    ),
    PromptComponent(
        COMPONENT_CONTEXT_BUFFER,
        "context_buffer",
        "Context buffer",
        "Recent ambient messages of the room",
        is_static=True,
    ),
    PromptComponent(
        COMPONENT_GOALS,
        "goals",
        "Goals",
        "Active goals",
        is_static=True,
    ),
    PromptComponent(
        COMPONENT_CONVERSATION_HISTORY,
        "conversation_history",
        "Conversation history",
        "Recent conversation, newest kept first within the budget",
        is_static=True,
        role="mixed",
    ),
    PromptComponent(
        COMPONENT_PENDING_EVENT,
        "pending_event",
        "Pending event",
        "What this call must handle",
        is_static=True,
        role="user",
    ),
    PromptComponent(
        COMPONENT_TOOL_RESULT,
        "tool_result",
        "Tool result",
        "The previous tool's outcome",
        is_static=True,
    ),
]
STATIC_IDS = sorted(component.id for component in STATIC_COMPONENTS)

_pluggable = {}


class ComponentSlotError(ValueError):
    """A pluggable component asked for an ID that is taken, static or out of range."""


def free_slot_after(static_key):
    """Return the first free pluggable ID after the static component ``static_key``."""
    static = next((c for c in STATIC_COMPONENTS if c.key == static_key), None)
    if static is None:
        raise ComponentSlotError(f"no static component {static_key!r}")
    following = [i for i in STATIC_IDS if i > static.id]
    end = following[0] if following else MAX_COMPONENT_ID + 1
    for candidate in range(static.id + 1, end):
        if candidate not in _pluggable:
            return candidate
    raise ComponentSlotError(f"no free slot left after {static_key!r}")


def register_component(component, render=None):
    """Register a pluggable component, rendered by ``render(state)`` or its template.

    Args:
        component (PromptComponent): Its ``id`` must be a free ID between two static IDs
            (see ``free_slot_after``); its ``key`` must be unused.
        render (callable, optional): ``render(state) -> str`` from live state; without
            it, ``component.content`` is formatted with the state's fields.

    Raises:
        ComponentSlotError: naming the ID or key and why it is refused.
    """
    if component.id in STATIC_IDS:
        raise ComponentSlotError(f"ID {component.id} belongs to a static component")
    if not 0 < component.id <= MAX_COMPONENT_ID:
        raise ComponentSlotError(f"ID {component.id} is outside 1-{MAX_COMPONENT_ID}")
    if component.id in _pluggable:
        raise ComponentSlotError(
            f"ID {component.id} is taken by {_pluggable[component.id][0].key!r}"
        )
    if any(c.key == component.key for c in all_components()):
        raise ComponentSlotError(f"key {component.key!r} is already registered")
    component.is_static = False
    _pluggable[component.id] = (component, render)


def unregister_component(key):
    """Remove the pluggable component ``key`` (static ones cannot be removed)."""
    for component_id, (component, _) in list(_pluggable.items()):
        if component.key == key:
            del _pluggable[component_id]
            return
    raise ComponentSlotError(f"no pluggable component {key!r}")


def pluggable_renderer(component_id):
    """Return the renderer of a pluggable component (None when it uses its template)."""
    return _pluggable[component_id][1]


def all_components():
    """Return every component, static and pluggable, in assembly (ID) order."""
    return sorted(STATIC_COMPONENTS + [c for c, _ in _pluggable.values()], key=lambda c: c.id)
