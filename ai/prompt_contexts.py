"""Context types: what each kind of LLM call sees and how it may act (seed 004).

Each context type names the prompt components it assembles, the tools it offers and its
execution limits. ``select_execution_pattern`` composes those limits in three layers (the
script's static ``execution_config``, the context, a runtime assessment), each of which
may only tighten what the layer before allowed.
"""

from copy import deepcopy
from dataclasses import dataclass, field, fields, replace

from .prompt_components import (
    COMPONENT_CHARACTER_CONTEXT,
    COMPONENT_CONTEXT_BUFFER,
    COMPONENT_CONVERSATION_HISTORY,
    COMPONENT_ENTITY_CONTEXT,
    COMPONENT_GOALS,
    COMPONENT_PENDING_EVENT,
    COMPONENT_SEMANTIC_MEMORIES,
    COMPONENT_SYSTEM_PROMPT,
    COMPONENT_TOOL_RESULT,
    MAX_COMPONENT_ID,
)
from .utils.checked_settings import read_setting
from .utils.tool_categories import TOOL_CATEGORIES
from .utils.value_checks import (
    ConfigError,
    accepts,
    boolean,
    check_named,
    int_range,
    optional,
    text,
)

CONTEXT_TICK_EVENT = "tick_event"
CONTEXT_TICK_AUTONOMOUS = "tick_autonomous"
CONTEXT_REFLECTION = "reflection"
CONTEXT_REFLECTION_CONT = "reflection_cont"
CONTEXT_SLEEP_CONSOLIDATE = "sleep_consolidate"
CONTEXT_GOAL_DECOMPOSE = "goal_decompose"
CONTEXT_PRE_COMPACTION = "pre_compaction"
# Not one of the seed's seven: the bounded context a ``delegate`` call runs its sub-task in.
CONTEXT_SUB_AGENT = "sub_agent"

# What a turn with players needs: speaking, looking, giving, and finding or keeping facts.
# Long-term memory learns from the journal while the assistant sleeps, and extraction keeps
# profiles before a compaction: store_memory and update_entity_observation stay out of the
# turn, whose tool schemas are sent with every call (see docs/context.md).
CONVERSATION_TOOLS = [
    "say",
    "noop",
    "look",
    "give",
    "add_journal_entry",
    "review_journal",
    "recall_memories",
    "search_history",
    "pin_fact",
    "delegate",
]
# A turn with players may adopt a goal (their schemas cost every call: no more than that);
# a turn of the assistant's own works on its goals, adding steps and marking them.
GOAL_ADOPTION_TOOLS = ["add_goal"]
GOAL_TOOLS = GOAL_ADOPTION_TOOLS + ["complete_goal", "block_goal"]
REFLECTION_TOOLS = ["noop", "add_journal_entry", "review_journal", "search_history"]
SLEEP_TOOLS = [
    "noop",
    "add_journal_entry",
    "review_journal",
    "search_history",
    "recall_memories",
    "store_memory",
]
PRE_COMPACTION_TOOLS = ["noop", "add_journal_entry", "update_entity_observation"]
# A sub-agent looks and reads, and may journal for its turn's audience: it never speaks,
# changes the world, pins, or delegates in turn.
SUB_AGENT_TOOLS = [
    "noop",
    "look",
    "add_journal_entry",
    "review_journal",
    "recall_memories",
    "search_history",
]

# Most restrictive first: a layer may only move a mode towards the front. The seed's third
# mode, plan_execute (a plan call, then its steps), is not built: a react_loop already runs
# a task step by step, so it is refused by name rather than run as a react_loop.
EXECUTION_MODES = ("single_action", "react_loop")
UNBUILT_MODES = ("plan_execute",)
MAX_ITERATIONS = 10

# Share of the context window in use from which token pressure is reported.
TOKEN_PRESSURE_HIGH = 0.6
TOKEN_PRESSURE_CRITICAL = 0.8

SETTINGS_OVERRIDES = "AI_CONTEXT_OVERRIDES"
SCRIPT_OVERRIDES = "context_overrides"

_FULL_COMPONENTS = [
    COMPONENT_SYSTEM_PROMPT,
    COMPONENT_CHARACTER_CONTEXT,
    COMPONENT_ENTITY_CONTEXT,
    COMPONENT_SEMANTIC_MEMORIES,
    COMPONENT_CONTEXT_BUFFER,
    COMPONENT_GOALS,
    COMPONENT_CONVERSATION_HISTORY,
    COMPONENT_PENDING_EVENT,
    COMPONENT_TOOL_RESULT,
]

# The conversation's system prompt tells the model to reply in a sentence; in its own turns
# Qwen2.5-Coder-1.5B did (an autonomous turn's text is never said, so nothing happened).
AUTONOMOUS_PROMPT = """You are {name}, a character in a text game. No one is talking to you \
now: you are working on your goals on your own.

You act only through your tools: make the call itself, never a description of it. The \
sections below say where you are, who is here, what you carry and what you remember; to \
speak to the room, call say."""

REFLECTION_PROMPT = """You are pausing to reflect on your own recent work.

Read the event below and reread your journal with review_journal if it helps. Ask yourself:
- Which patterns keep coming back?
- Which approaches served you well?
- Which mistakes do you keep making?
- What will you do differently from now on?

Record each insight with add_journal_entry, in cites the ids of the entries it comes from.
Call noop when you have nothing more to add."""

REFLECTION_CONT_PROMPT = """You are in the middle of a reflection.

The result of your last journal tool is below. If it prompts a further insight, record it
with add_journal_entry, in cites the ids of the entries it comes from; otherwise call noop
to finish the reflection."""

SLEEP_CONSOLIDATE_PROMPT = """You are asleep and consolidating your long-term memory.

The memories below were retrieved from storage. Merge those that repeat each other, note
those that contradict each other, and distil the lessons worth keeping. Use recall_memories
to look up related facts, store_memory to keep a consolidated fact, and add_journal_entry
for an insight about yourself. Call noop when nothing is left to consolidate."""

GOAL_DECOMPOSE_PROMPT = """Break the goal below into a short, ordered list of sub-goals.

Each sub-goal must be concrete, reachable in a few actions and have a clear sign that it
is done. Start from where you are, who is here and what you carry, as said below: nothing
you already have needs finding. Answer with the list alone; no tools are available here."""

DEFAULT_PRE_COMPACTION_PROMPT = """The older part of the conversation below will soon be \
summarised, and its details lost. You do not talk to anyone now: you only take notes.

Save every fact in it that is not saved yet: names, numbers, places, promises, decisions, \
secrets and open tasks. Save only what the conversation says, in its own words and names; \
never your own plans, remarks or what you are doing now. For each fact, call \
add_journal_entry with one full sentence that names who said it; several calls in one \
answer are fine. For a fact about one person, also call update_entity_observation. When \
every fact is saved, call noop."""


SUB_AGENT_PROMPT = """You are {name}, working alone on one task that you gave yourself.

Nobody hears you now. Use your tools to find what the task asks for; when you have it, \
answer with the result in plain text (no tool call), short and complete: it is all that \
you will remember of this work."""


@dataclass
class ContextConfig:
    """One context type: the components it assembles, its tools and its execution limits.

    Attributes:
        context_type (str): The type's name, e.g. ``"tick_event"``.
        name (str): Display name.
        description (str): What calls of this type are for.
        enabled_components (list): IDs of the prompt components to assemble.
        component_overrides (dict): Component key -> ``{"content": str}`` replacing its text.
        tool_filter (list or None): Names of the tools offered; None offers all, [] none.
        token_budget (int or None): Token budget of one call; None uses the context window.
        execution_mode (str): One of ``EXECUTION_MODES``.
        max_iterations (int): LLM calls one run may make (1 to 10).
        allowed_tool_categories (list or None): Tool categories allowed; None allows all.
        terminal_ends_loop (bool): Whether a terminal tool ends the loop.
        dangerous_requires_confirm (bool): Whether a dangerous tool needs confirmation.
        allows_multi_tool (bool): Whether more than one tool call may run per turn.
        allows_sub_agents (bool): Whether work may be delegated to sub-agents.
        records_history (bool): Whether the loop's messages join the conversation history.
        speaks (bool): Whether a text answer is said aloud in the room. Only the contexts
            that talk to players speak; elsewhere text is the model's scratch work.
        needs_tool_call (bool): Whether only tool calls act, so an answer without one is
            asked for again, once a turn (a context that does not speak).
    """

    context_type: str
    name: str
    description: str
    enabled_components: list
    component_overrides: dict = field(default_factory=dict)
    tool_filter: list | None = None
    token_budget: int | None = None
    execution_mode: str = "react_loop"
    max_iterations: int = 5
    allowed_tool_categories: list | None = None
    terminal_ends_loop: bool = True
    dangerous_requires_confirm: bool = False
    allows_multi_tool: bool = True
    allows_sub_agents: bool = False
    records_history: bool = False
    speaks: bool = False
    needs_tool_call: bool = False

    def copy(self):
        """Return a copy the caller may change freely, its lists and dicts new too (a
        ``deepcopy`` of every field cost a tenth of a millisecond, on every call)."""
        return replace(
            self,
            enabled_components=list(self.enabled_components),
            component_overrides=deepcopy(self.component_overrides),
            tool_filter=None if self.tool_filter is None else list(self.tool_filter),
            allowed_tool_categories=(
                None if self.allowed_tool_categories is None else list(self.allowed_tool_categories)
            ),
        )

    def get_component_content_override(self, component_key):
        """Return the content replacing component ``component_key``'s text, or None."""
        override = self.component_overrides.get(component_key)
        return override.get("content") if isinstance(override, dict) else None


def system_prompt_override(content):
    """Return the ``component_overrides`` entry that makes ``content`` the system prompt."""
    return {"system_prompt": {"content": content}}


DEFAULT_CONTEXT_CONFIGS = {
    CONTEXT_TICK_EVENT: ContextConfig(
        context_type=CONTEXT_TICK_EVENT,
        name="Event tick",
        description="Respond to the pending event with the full context",
        enabled_components=list(_FULL_COMPONENTS),
        tool_filter=CONVERSATION_TOOLS + GOAL_ADOPTION_TOOLS,
        allows_sub_agents=True,
        records_history=True,
        speaks=True,
    ),
    CONTEXT_TICK_AUTONOMOUS: ContextConfig(
        context_type=CONTEXT_TICK_AUTONOMOUS,
        name="Autonomous tick",
        description="Pursue the active goals when no event is waiting",
        enabled_components=list(_FULL_COMPONENTS),
        component_overrides=system_prompt_override(AUTONOMOUS_PROMPT),
        tool_filter=CONVERSATION_TOOLS + GOAL_TOOLS,
        dangerous_requires_confirm=True,
        allows_sub_agents=True,
        records_history=True,
        # No one asked: its text would be its notes. It speaks through the say tool.
        needs_tool_call=True,
    ),
    CONTEXT_REFLECTION: ContextConfig(
        context_type=CONTEXT_REFLECTION,
        name="Reflection",
        description="Review recent work and journal the insights",
        enabled_components=[
            COMPONENT_SYSTEM_PROMPT,
            COMPONENT_PENDING_EVENT,
            COMPONENT_TOOL_RESULT,
        ],
        component_overrides=system_prompt_override(REFLECTION_PROMPT),
        tool_filter=list(REFLECTION_TOOLS),
        max_iterations=3,
        allowed_tool_categories=["journal", "safe", "terminal"],
    ),
    CONTEXT_REFLECTION_CONT: ContextConfig(
        context_type=CONTEXT_REFLECTION_CONT,
        name="Reflection, continued",
        description="Act on the result of a reflection tool",
        enabled_components=[COMPONENT_SYSTEM_PROMPT, COMPONENT_TOOL_RESULT],
        component_overrides=system_prompt_override(REFLECTION_CONT_PROMPT),
        tool_filter=list(REFLECTION_TOOLS),
        max_iterations=2,
        allowed_tool_categories=["journal", "safe", "terminal"],
    ),
    CONTEXT_SLEEP_CONSOLIDATE: ContextConfig(
        context_type=CONTEXT_SLEEP_CONSOLIDATE,
        name="Sleep consolidation",
        description="Merge and distil long-term memories during sleep",
        # The tool result too: without it the model would not see what recall_memories
        # found and would ask again each iteration.
        enabled_components=[
            COMPONENT_SYSTEM_PROMPT,
            COMPONENT_SEMANTIC_MEMORIES,
            COMPONENT_TOOL_RESULT,
        ],
        component_overrides=system_prompt_override(SLEEP_CONSOLIDATE_PROMPT),
        tool_filter=list(SLEEP_TOOLS),
        max_iterations=10,
        allowed_tool_categories=["memory", "journal", "safe", "terminal"],
    ),
    CONTEXT_GOAL_DECOMPOSE: ContextConfig(
        context_type=CONTEXT_GOAL_DECOMPOSE,
        name="Goal decomposition",
        description="Break a goal into concrete sub-goals",
        # The character context too (the seed has 0, 4000, 6000): without where it is,
        # who is there and what it carries, Qwen2.5-Coder-1.5B's first step of "Return
        # the lantern to Bram" was "Check if the lantern is in the current room".
        enabled_components=[
            COMPONENT_SYSTEM_PROMPT,
            COMPONENT_CHARACTER_CONTEXT,
            COMPONENT_GOALS,
            COMPONENT_PENDING_EVENT,
        ],
        component_overrides=system_prompt_override(GOAL_DECOMPOSE_PROMPT),
        tool_filter=[],
        execution_mode="single_action",
        max_iterations=1,
        allows_multi_tool=False,
    ),
    CONTEXT_PRE_COMPACTION: ContextConfig(
        context_type=CONTEXT_PRE_COMPACTION,
        name="Pre-compaction extraction",
        description="Journal the facts of the conversation before it is summarised",
        enabled_components=[
            COMPONENT_SYSTEM_PROMPT,
            COMPONENT_CONVERSATION_HISTORY,
            COMPONENT_PENDING_EVENT,
            COMPONENT_TOOL_RESULT,
        ],
        component_overrides=system_prompt_override(DEFAULT_PRE_COMPACTION_PROMPT),
        tool_filter=list(PRE_COMPACTION_TOOLS),
        allowed_tool_categories=["journal", "safe", "terminal"],
        # Its calls stay out of the live history: journaling forty facts would otherwise
        # add eighty messages that the compaction right after it must preserve whole.
        records_history=False,
    ),
}

# Outside DEFAULT_CONTEXT_CONFIGS (the seed's seven, which overrides address): its limit is
# the sub_agent_max_iterations attribute (see ai.sub_agents).
SUB_AGENT_CONFIG = ContextConfig(
    context_type=CONTEXT_SUB_AGENT,
    name="Sub-agent",
    description="Carry out one delegated task in a fresh context and return its result",
    enabled_components=[COMPONENT_SYSTEM_PROMPT, COMPONENT_PENDING_EVENT, COMPONENT_TOOL_RESULT],
    component_overrides=system_prompt_override(SUB_AGENT_PROMPT),
    tool_filter=list(SUB_AGENT_TOOLS),
    max_iterations=MAX_ITERATIONS,
    allowed_tool_categories=["safe", "journal", "terminal"],
    dangerous_requires_confirm=True,
)


# overrides --------------------------------------------------------------------------------


@accepts(list, "a list of non-empty strings")
def _string_list(value):
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ValueError(f"must be {_string_list.allowed}")


def _component_ids(value):
    if not isinstance(value, list) or not all(
        isinstance(item, int) and not isinstance(item, bool) and 0 <= item <= MAX_COMPONENT_ID
        for item in value
    ):
        raise ValueError(f"must be a list of component IDs from 0 to {MAX_COMPONENT_ID}")


@accepts(list, "a list of tool categories")
def _tool_categories(value):
    if not isinstance(value, list) or not set(value) <= set(TOOL_CATEGORIES):
        raise ValueError(f"must be a list of tool categories from {', '.join(TOOL_CATEGORIES)}")


def _execution_mode(value):
    if value in UNBUILT_MODES:
        raise ValueError(
            f"is not built (react_loop runs a task step by step); must be one of "
            f"{', '.join(EXECUTION_MODES)}"
        )
    if value not in EXECUTION_MODES:
        raise ValueError(f"must be one of {', '.join(EXECUTION_MODES)}")


def _content_override(key, override):
    return (
        isinstance(key, str)
        and key
        and isinstance(override, dict)
        and set(override) == {"content"}
        and isinstance(override["content"], str)
        and override["content"].strip()
    )


def _content_overrides(value):
    if not isinstance(value, dict) or not all(_content_override(*item) for item in value.items()):
        raise ValueError("must map component keys to {'content': <non-empty string>}")


# Every field but context_type, which names the entry being overridden.
OVERRIDE_CHECKS = {
    "name": text,
    "description": text,
    "enabled_components": _component_ids,
    "component_overrides": _content_overrides,
    "tool_filter": optional(_string_list),
    "token_budget": optional(int_range(1)),
    "execution_mode": _execution_mode,
    "max_iterations": int_range(1, MAX_ITERATIONS),
    "allowed_tool_categories": optional(_tool_categories),
    "terminal_ends_loop": boolean,
    "dangerous_requires_confirm": boolean,
    "allows_multi_tool": boolean,
    "allows_sub_agents": boolean,
    "records_history": boolean,
    "speaks": boolean,
    "needs_tool_call": boolean,
}


def check_context_overrides(overrides, source=SCRIPT_OVERRIDES):
    """Check a whole overrides mapping: context type -> {field: value}.

    Args:
        overrides (dict): The overrides, already deserialized.
        source (str): Where they come from, named in refusals.

    Raises:
        ConfigError: naming the source, the context, the field and what is allowed.
    """
    known = ", ".join(DEFAULT_CONTEXT_CONFIGS)
    if not isinstance(overrides, dict):
        raise ConfigError(f"{source} must be a dict of context type -> {{field: value}}")
    for context_type, values in overrides.items():
        if context_type not in DEFAULT_CONTEXT_CONFIGS:
            raise ConfigError(f"{source}: unknown context type {context_type!r}; known: {known}")
        if not isinstance(values, dict):
            raise ConfigError(f"{source}[{context_type!r}] must be a dict of field -> value")
        for name, value in values.items():
            if name not in OVERRIDE_CHECKS:
                raise ConfigError(
                    f"{source}[{context_type!r}]: unknown field {name!r}; "
                    f"allowed: {', '.join(OVERRIDE_CHECKS)}"
                )
            try:
                OVERRIDE_CHECKS[name](value)
            except ValueError as err:
                raise ConfigError(
                    f"{source}[{context_type!r}][{name!r}]={value!r} refused: {err}"
                ) from err


def check_settings_overrides(overrides):
    """Check the ``AI_CONTEXT_OVERRIDES`` setting (see :func:`check_context_overrides`)."""
    check_context_overrides(overrides, SETTINGS_OVERRIDES)


def _apply(config, values):
    for name, value in deepcopy(values).items():
        if name == "component_overrides":
            value = {**config.component_overrides, **value}
        setattr(config, name, value)


def get_context_config(context_type, script=None):
    """Return a fresh copy of a context type's configuration, with overrides applied.

    The ``AI_CONTEXT_OVERRIDES`` setting applies first, then the script's
    ``context_overrides`` attribute; both map context type -> {field: value}. A
    ``component_overrides`` value merges per component key into the current ones. Both are
    checked where they are read: a refused one is logged once and left out.

    Args:
        context_type (str): One of the ``CONTEXT_*`` names.
        script (AssistantScript, optional): The assistant whose overrides apply.

    Returns:
        ContextConfig: A copy the caller may change freely.

    Raises:
        ConfigError: for an unknown context type.
    """
    if context_type not in DEFAULT_CONTEXT_CONFIGS:
        raise ConfigError(
            f"unknown context type {context_type!r}; known: {', '.join(DEFAULT_CONTEXT_CONFIGS)}"
        )
    config = DEFAULT_CONTEXT_CONFIGS[context_type].copy()
    layers = [read_setting(SETTINGS_OVERRIDES, {}, check_settings_overrides)]
    if script is not None:
        layers.append(script.get_config(SCRIPT_OVERRIDES))
    for overrides in layers:
        _apply(config, overrides.get(context_type, {}))
    return config


# execution pattern ------------------------------------------------------------------------

# Layer 1: the script's execution_config attribute (``ai.config`` registers it).
EXECUTION_CONFIG_DEFAULTS = {
    "multi_action_enabled": True,
    "max_iterations_per_tick": 5,
    "task_assessment_enabled": False,
    "sub_agents_enabled": False,
    "sub_agent_budget": 3,
}
EXECUTION_CONFIG_CHECKS = {
    "multi_action_enabled": boolean,
    "max_iterations_per_tick": int_range(1, 10),
    "task_assessment_enabled": boolean,
    "sub_agents_enabled": boolean,
    "sub_agent_budget": int_range(0, 10),
}


@accepts(dict, f"a dict with keys {', '.join(EXECUTION_CONFIG_CHECKS)}")
def execution_config(value):
    """Accept the layer-1 execution limits of seed 004 (a dict of known keys)."""
    if not isinstance(value, dict):
        raise ValueError(f"must be {execution_config.allowed}")
    for key, item in value.items():
        if key not in EXECUTION_CONFIG_CHECKS:
            raise ValueError(
                f"has unknown key {key!r}; known: {', '.join(EXECUTION_CONFIG_CHECKS)}"
            )
        try:
            EXECUTION_CONFIG_CHECKS[key](item)
        except ValueError as err:
            raise ValueError(f"[{key!r}] {err}") from err


@dataclass
class ExecutionPattern:
    """The execution limits of one run, composed from three layers.

    Attributes:
        mode (str): One of ``EXECUTION_MODES``.
        max_iterations (int): LLM calls the run may make.
        allowed_categories (list or None): Tool categories allowed; None allows all.
        terminal_ends_loop (bool): Whether a terminal tool ends the loop.
        dangerous_requires_confirm (bool): Whether a dangerous tool needs confirmation.
        multi_tool_enabled (bool): Whether more than one tool call may run per turn.
        sub_agents_enabled (bool): Whether work may be delegated to sub-agents.
        source_layers (dict): Field -> the layer that last tightened it: ``"static"``,
            ``"context"``, ``"assessment"`` or ``"signal:<name>"``.
    """

    mode: str
    max_iterations: int
    allowed_categories: list | None
    terminal_ends_loop: bool
    dangerous_requires_confirm: bool
    multi_tool_enabled: bool
    sub_agents_enabled: bool
    source_layers: dict = field(default_factory=dict)

    def _set(self, name, value, layer):
        setattr(self, name, value)
        self.source_layers[name] = layer

    def _cap_iterations(self, limit, layer):
        if limit < self.max_iterations:
            self._set("max_iterations", limit, layer)

    def _restrict_mode(self, mode, layer):
        if EXECUTION_MODES.index(mode) < EXECUTION_MODES.index(self.mode):
            self._set("mode", mode, layer)
            # single_action is one LLM call, whatever the other layers allowed.
            if mode == "single_action":
                self._cap_iterations(1, layer)

    def _require_confirm(self, layer):
        if not self.dangerous_requires_confirm:
            self._set("dangerous_requires_confirm", True, layer)

    def _disable(self, name, layer):
        if getattr(self, name):
            self._set(name, False, layer)


def _positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _apply_signals(pattern, signals):
    pressure = signals.get("token_pressure")
    if pressure == "critical":
        pattern._restrict_mode("single_action", "signal:token_pressure")
    elif pressure == "high":
        pattern._cap_iterations(2, "signal:token_pressure")
    errors = signals.get("recent_errors")
    if isinstance(errors, int) and not isinstance(errors, bool):
        if errors >= 3:
            pattern._restrict_mode("single_action", "signal:recent_errors")
            pattern._require_confirm("signal:recent_errors")
        elif errors >= 2:
            pattern._cap_iterations(2, "signal:recent_errors")
    if signals.get("goal_urgency") == "low":
        # A goal of low priority gets a short turn; an urgent one no more than its context.
        pattern._cap_iterations(2, "signal:goal_urgency")
    event_class = signals.get("event_class")
    if event_class == "communication":
        pattern._restrict_mode("single_action", "signal:event_class")
    elif event_class == "building":
        pattern._require_confirm("signal:event_class")


def select_execution_pattern(static_config, context_config, llm_assessment=None):
    """Compose the execution pattern of one run; each layer may only tighten the last.

    Args:
        static_config (dict): Layer 1, the script's ``execution_config``; missing keys
            take their defaults.
        context_config (ContextConfig): Layer 2, the context type's limits.
        llm_assessment (dict, optional): Layer 3: ``recommended_iterations``,
            ``recommended_mode``, ``recommend_confirm_dangerous`` and ``context_signals``
            (``token_pressure``, ``recent_errors``, ``event_class``, ``goal_urgency``). Values
            it cannot use are ignored, so a bad assessment never widens anything.

    Returns:
        ExecutionPattern: The effective limits and the layer that set each.

    Raises:
        ConfigError: if ``static_config`` is not a valid ``execution_config``, or the
            context's ``execution_mode`` is not one of ``EXECUTION_MODES``.
    """
    check_named("execution_config", static_config, execution_config)
    check_named(
        f"{context_config.context_type}.execution_mode",
        context_config.execution_mode,
        _execution_mode,
    )
    static = {**EXECUTION_CONFIG_DEFAULTS, **static_config}
    pattern = ExecutionPattern(
        mode=EXECUTION_MODES[-1],
        max_iterations=static["max_iterations_per_tick"],
        allowed_categories=None,
        terminal_ends_loop=context_config.terminal_ends_loop,
        dangerous_requires_confirm=False,
        multi_tool_enabled=True,
        sub_agents_enabled=static["sub_agents_enabled"],
    )
    pattern.source_layers = {f.name: "static" for f in fields(pattern) if f.name != "source_layers"}
    # Only the context says what a terminal tool does; it restricts nothing.
    pattern.source_layers["terminal_ends_loop"] = "context"
    if not static["multi_action_enabled"]:
        pattern._restrict_mode("single_action", "static")
    else:
        # The static layer has a switch, not a mode: with it on, the context names the mode
        # (the seed's example credits reflection's react_loop to the context).
        pattern.source_layers["mode"] = "context"
    pattern._restrict_mode(context_config.execution_mode, "context")
    pattern._cap_iterations(context_config.max_iterations, "context")
    # The static layer allows every category, so the context's list is the restriction.
    if context_config.allowed_tool_categories is not None:
        pattern._set("allowed_categories", list(context_config.allowed_tool_categories), "context")
    if context_config.dangerous_requires_confirm:
        pattern._require_confirm("context")
    if not context_config.allows_multi_tool:
        pattern._disable("multi_tool_enabled", "context")
    if not context_config.allows_sub_agents:
        pattern._disable("sub_agents_enabled", "context")

    assessment = llm_assessment if isinstance(llm_assessment, dict) else {}
    if _positive_int(assessment.get("recommended_iterations")):
        pattern._cap_iterations(assessment["recommended_iterations"], "assessment")
    if assessment.get("recommended_mode") in EXECUTION_MODES:
        pattern._restrict_mode(assessment["recommended_mode"], "assessment")
    if assessment.get("recommend_confirm_dangerous") is True:
        pattern._require_confirm("assessment")
    signals = assessment.get("context_signals")
    if isinstance(signals, dict):
        _apply_signals(pattern, signals)
    return pattern


def token_pressure_level(usage_fraction):
    """Return the ``token_pressure`` signal for a context usage fraction.

    Returns:
        str or None: ``"critical"`` from 0.8, ``"high"`` from 0.6, else None.
    """
    if usage_fraction >= TOKEN_PRESSURE_CRITICAL:
        return "critical"
    if usage_fraction >= TOKEN_PRESSURE_HIGH:
        return "high"
    return None
