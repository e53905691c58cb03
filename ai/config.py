"""The assistant's configuration: every ``script.db`` attribute and ``AI_*`` setting.

``SCRIPT_CONFIG`` is the single source of the per-assistant attributes (their defaults,
allowed values and meaning); the README's configuration table mirrors it and a test
keeps the two in step. ``AI_*`` Django settings are server-wide defaults, read and checked
with ``ai_setting()`` when used, never at import. Every value is checked by its type before
its range; a refused one is named, and a stored one falls back to its default.
"""

import os
import re
from ast import literal_eval
from copy import deepcopy
from dataclasses import dataclass
from typing import Any, Callable

from .prompt_contexts import (
    EXECUTION_CONFIG_DEFAULTS,
    check_context_overrides,
    check_settings_overrides,
    execution_config,
)
from .prompt_layout import LAYOUTS, SEED
from .utils.checked_settings import read_setting
from .utils.value_checks import (
    ConfigError,
    accepts,
    boolean,
    check_named,
    fraction,
    int_range,
    is_int,
    is_number,
    number_range,
    one_of,
    optional,
    refusal,
    text,
)

# Where long-term memory keeps its vectors (see ``ai.semantic_memory.memory_config``).
VECTOR_STORES = ("faiss", "pgvector")

# What a compaction does to old history (see ``ai.sleep.compaction`` and docs/compaction.md).
COMPACT_STRATEGIES = ("summary", "masking", "assistant_runs", "hybrid")


# The one field an emote shown to the room may hold; the room's own formatting would fail
# on any other text in braces.
EMOTE_FIELD = "{name}"


@accepts(str, f"text in which {EMOTE_FIELD} (the assistant's name) is the only field in braces")
def emote_template(value):
    """Accept non-empty text whose only ``{...}`` is ``{name}``."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be {emote_template.allowed}")
    stray = re.search(r"\{[^{}]*\}?|\}", value.replace(EMOTE_FIELD, ""))
    if stray:
        raise ValueError(f"must be {emote_template.allowed}, not {stray.group()}")


# Beyond any model's input window (the largest announced hold ten million tokens).
MAX_CONTEXT_TOKENS = 10_000_000
# The smallest max_context_tokens a fresh assistant accepts at the defaults: its prompt's
# frame plus the room history needs (``ai.sleep.escalation.smallest_window``). Measured
# with bench/frame.py; a test keeps it, the README and docs/context.md true.
SMALLEST_WINDOW_AT_DEFAULTS = 1_600


@accepts(
    int,
    f"a whole number up to {MAX_CONTEXT_TOKENS:,}, and at least the prompt's frame plus room "
    f"for history ({SMALLEST_WINDOW_AT_DEFAULTS:,} at the defaults; a refusal names the least "
    "for this assistant)",
)
def context_limit(value):
    """Accept a context limit up to ``MAX_CONTEXT_TOKENS``; its least depends on the prompt's
    frame, which ``AssistantScript.set_config`` measures."""
    if not is_int(value) or not 0 < value <= MAX_CONTEXT_TOKENS:
        raise refusal(context_limit, value)


@accepts(str, "a litellm model string such as 'openai/gpt-4o-mini'")
def model_string(value):
    """Accept a litellm model string that litellm can route."""
    from .litellm_loader import check_model

    check_model(value)


@accepts(dict, "a dict of context type -> {field: value} (see docs/context.md)")
def context_overrides(value):
    """Accept per-context overrides: context type -> {ContextConfig field: value}.

    Raises:
        ConfigError: naming the attribute, the context and the field refused.
    """
    check_context_overrides(value)


def _is_json_value(value):
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_json_value(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json_value(v) for k, v in value.items())
    return False


def api_base(value):
    """Accept an http(s) URL of a model server."""
    if not isinstance(value, str) or not re.match(r"^https?://[^\s/]+", value):
        raise ValueError("must be an http:// or https:// URL such as 'http://127.0.0.1:8080/v1'")


def env_var_name(value):
    """Accept the name of an environment variable (the key itself never goes here)."""
    if not isinstance(value, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", value):
        raise ValueError("must be the name of an environment variable, such as 'OPENAI_API_KEY'")


# The model options with a meaning of their own; any other key goes to litellm as it is.
MODEL_OPTION_CHECKS = {
    "api_base": api_base,
    "api_key_env": env_var_name,
    "temperature": number_range(0, 2),
    "max_tokens": int_range(1, 1_000_000),
    "timeout": number_range(0, 86400, low_open=True),
    "tools_as_text": boolean,
}
# Keys the gateway sets itself, and why a builder may not.
RESERVED_MODEL_OPTIONS = {
    "api_key": "a key never sits in an attribute: put it in an environment variable and "
    "name that variable with 'api_key_env'",
    "model": "set llm_model or compact_model instead",
    "messages": "the gateway builds the messages",
    "tools": "the context type chooses the tools",
    "stream": "the gateway reads whole answers",
    "num_retries": "retries are AI_LLM_MAX_RETRIES",
}


@accepts(
    dict,
    "a dict of litellm options such as {'api_base': 'http://127.0.0.1:11434', 'temperature': 0.3}",
)
def model_options(value):
    """Accept litellm keyword arguments for a model: known options checked, others passed on."""
    if not isinstance(value, dict):
        raise ValueError(f"must be {model_options.allowed}")
    for key, item in value.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"has key {key!r}, which is not a litellm keyword argument name")
        if key in RESERVED_MODEL_OPTIONS:
            raise ValueError(f"may not set {key!r}: {RESERVED_MODEL_OPTIONS[key]}")
        check = MODEL_OPTION_CHECKS.get(key)
        try:
            if check:
                check(item)
            elif not _is_json_value(item):
                raise ValueError("must be a plain value (text, number, True/False, list, dict)")
        except ValueError as err:
            raise ValueError(f"[{key!r}] {err}") from err


# The words a builder may type for True and False, in any case.
BOOLEAN_WORDS = {"yes": True, "true": True, "on": True, "no": False, "false": False, "off": False}


@dataclass(frozen=True)
class Option:
    """One configuration attribute: its default, its check and what it means."""

    default: Any
    check: Callable[[Any], None]
    description: str

    @property
    def allowed(self):
        """What the attribute accepts, as a builder types it (see ``read``)."""
        return (
            "yes or no (or true/false, on/off)" if self.check.kind is bool else self.check.allowed
        )

    def read(self, text):
        """Return a builder's text as a value of this attribute's kind, not yet checked.

        True/false attributes take yes/no, true/false or on/off in any case; text attributes
        take the text as it is (a quoted string is unquoted, None is None); the others take
        a Python literal.

        Raises:
            ValueError: the text is no value of this attribute's kind.
        """
        text = text.strip()
        if self.check.kind is bool:
            if text.lower() not in BOOLEAN_WORDS:
                raise ValueError(f"must be {self.allowed}")
            return BOOLEAN_WORDS[text.lower()]
        try:
            value = literal_eval(text)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            if self.check.kind is not str:
                raise ValueError(f"must be {self.allowed}") from None
            return text
        if self.check.kind is str and not (value is None or isinstance(value, str)):
            return text
        return value


SCRIPT_CONFIG = {
    "llm_model": Option(
        None, optional(model_string), "litellm model string; None uses the AI_LLM_MODEL setting"
    ),
    "llm_options": Option(
        {},
        model_options,
        "litellm options of every call of the main model: api_base, api_key_env, temperature, "
        "max_tokens (of replies), timeout, tools_as_text and any other litellm keyword",
    ),
    "max_context_tokens": Option(
        100000,
        optional(context_limit),
        "Context limit for usage calculations; None asks litellm for the model's input window "
        "(refused when litellm does not know it)",
    ),
    "compact_enabled": Option(True, boolean, "Master switch for compaction"),
    "compact_sleep_threshold": Option(0.7, fraction, "Compact during sleep at this usage"),
    "compact_emergency_threshold": Option(
        0.8, fraction, "Compact at the start of an awake tick at this usage (not below sleep)"
    ),
    "compact_preserve_window": Option(20, int_range(1, 10_000), "Recent messages kept verbatim"),
    "compact_strategy": Option(
        None,
        optional(one_of(*COMPACT_STRATEGIES)),
        "How old history is compacted: summary, masking, assistant_runs or hybrid (see "
        "docs/compaction.md); None uses the AI_COMPACT_STRATEGY setting",
    ),
    "compact_mask_threshold": Option(
        0.5,
        fraction,
        "Mask old tool outputs during sleep at this usage (masking and hybrid); the sleep "
        "threshold when that is lower",
    ),
    "compact_pin_max_share": Option(
        0.1,
        fraction,
        "Share of the context window that pinned messages may hold (see aicompact/pin)",
    ),
    "compact_model": Option(
        None, optional(model_string), "Model for summaries; None uses the main model"
    ),
    "compact_options": Option(
        {},
        model_options,
        "Options of the summary calls: over llm_options when compact_model is None, alone "
        "otherwise",
    ),
    "compact_prompt": Option(None, optional(text), "Summary prompt; None uses the default"),
    "pre_compact_extraction_enabled": Option(True, boolean, "Journal facts before compacting"),
    "pre_compact_max_iterations": Option(
        5, int_range(1, 10), "Extraction loop cycles during sleep (emergency uses 3)"
    ),
    "pre_compact_prompt": Option(
        None, optional(text), "Extraction system prompt; None uses the default"
    ),
    "execution_config": Option(
        EXECUTION_CONFIG_DEFAULTS,
        execution_config,
        "Layer-1 execution limits of the ReAct loop; sub_agents_enabled offers the delegate "
        "tool where the context allows it, sub_agent_budget caps the sub-agents running at once",
    ),
    "sub_agent_max_iterations": Option(
        4, int_range(1, 10), "Model calls one sub-agent (a delegate call) may make"
    ),
    "compact_notify_room": Option(
        False, boolean, "Show the room a short emote when the assistant compacts"
    ),
    "context_overrides": Option(
        {}, context_overrides, "Per-context changes to the context types (see docs/context.md)"
    ),
    "thinking_emote": Option(
        "{name} pauses, deep in thought.",
        optional(emote_template),
        "Shown to the room once when an answer takes longer than thinking_delay; None: never",
    ),
    "thinking_delay": Option(
        4.0, number_range(0, 600), "Seconds a reply may take before the thinking emote"
    ),
    "arrival_cooldown": Option(
        600,
        optional(int_range(0, 86_400)),
        "Seconds before the same player's arrival is noticed again (needs an AssistantRoomMixin "
        "room; None: arrivals are never noticed)",
    ),
    "sleep_after_idle_ticks": Option(
        60, int_range(0, 1_000_000), "Fall asleep after this many ticks without events (0: never)"
    ),
    "sleep_emote": Option(
        "{name} drifts off to sleep.",
        optional(emote_template),
        "Shown to the room when the assistant falls asleep; None: never",
    ),
    "wake_emote": Option(
        "{name} wakes up.",
        optional(emote_template),
        "Shown to the room when the assistant wakes up; None: never",
    ),
    "memory_enabled": Option(
        True,
        boolean,
        "Consolidate the journal into long-term memory (Mem0) while asleep and recall from it",
    ),
    "memory_batch_size": Option(
        20, int_range(1, 500), "Journal entries (and entities) one dreaming tick consolidates"
    ),
    "memory_recall_limit": Option(
        5, int_range(0, 20), "Long-term memories recalled into each prompt (0: none)"
    ),
    "sleep_consolidate_enabled": Option(
        True,
        boolean,
        "Let the model review new memories in a sleep_consolidate run after consolidation",
    ),
    "journal_prune_age": Option(
        7,
        number_range(0, 3650),
        "Days before a consolidated, unimportant entry leaves the active journal (0: never)",
    ),
    "journal_prune_importance": Option(
        4.0, number_range(0, 10), "Entries scored at most this may leave the active journal"
    ),
    "importance_model_scoring": Option(
        False, boolean, "Ask the model to score new journal entries while asleep"
    ),
    "reflection_threshold": Option(
        150,
        int_range(0, 100_000),
        "Reflect when the importance (0-10 each) of the journal entries since the last "
        "reflection adds up to this, at the next idle tick or on falling asleep (0: never; see "
        "docs/context.md)",
    ),
    "working_memory_ttl": Option(
        1800, int_range(60, 31_536_000), "Seconds of quiet after which a conversation is over"
    ),
    "prompt_layout": Option(
        SEED,
        one_of(*LAYOUTS),
        "Order of the prompt: seed (component ID order) or cache_friendly (history right after "
        "the character context, what changes every call after it; see docs/context.md)",
    ),
    "autonomy_enabled": Option(
        True,
        boolean,
        "Pursue active goals on idle awake ticks (decompose, then autonomous turns); without "
        "goals a quiet tick costs what it did before goals existed",
    ),
    "autonomous_interval": Option(
        6,
        int_range(1, 10_000),
        "Idle awake ticks between two autonomous turns (doubled after each turn that achieves "
        "nothing, up to 16 times)",
    ),
    "goal_max_active": Option(20, int_range(1, 1000), "Active goals an assistant may hold"),
    "goal_max_depth": Option(3, int_range(1, 10), "Levels of the goal tree (1: no sub-goals)"),
    "goal_max_chars": Option(300, int_range(10, 5000), "Characters of one goal's text"),
    "goal_turn_limit": Option(
        4,
        int_range(0, 1000),
        "Autonomous turns on one goal (a step, or a goal worked on whole) after which a goal "
        "still active is marked blocked (0: no limit; aigoal/resume makes it active again)",
    ),
    "prompt_cache_hints": Option(
        True,
        boolean,
        "Tell the provider which prefix of the prompt to cache: Anthropic's cache_control, "
        "OpenAI's prompt_cache_key (see docs/context.md)",
    ),
    "usage_history_rows": Option(
        2000,
        int_range(0, 1_000_000),
        "Ticks whose context usage is kept for the usage chart (one row a tick, the oldest "
        "pruned; 0: none recorded)",
    ),
}


@accepts(str, "None or a directory (text or a path)")
def directory(value):
    """Accept None or the path of a directory, as text or an ``os.PathLike``."""
    if value is not None and not (
        isinstance(value, os.PathLike) or (isinstance(value, str) and value.strip())
    ):
        raise ValueError(f"must be {directory.allowed}")


@accepts(dict, "None or a Mem0 configuration dict (see docs/memory.md)")
def memory_configuration(value):
    """Accept None or a dict (Mem0 checks the rest when it builds the store)."""
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"must be {memory_configuration.allowed}")


@dataclass(frozen=True)
class Setting:
    """One ``AI_*`` Django setting: its default, its check and what it means."""

    default: Any
    check: Callable[[Any], None]
    description: str


# Server-wide settings, read at call time with ai_setting().
AI_SETTINGS = {
    "AI_LLM_MODEL": Setting(
        "offline/assistant",
        model_string,
        "Default model of every assistant whose llm_model is None",
    ),
    "AI_LLM_OPTIONS": Setting(
        {}, model_options, "Server-wide llm_options, under each assistant's own"
    ),
    "AI_COMPACT_OPTIONS": Setting(
        {}, model_options, "Server-wide compact_options, under each assistant's own"
    ),
    "AI_COMPACT_STRATEGY": Setting(
        "summary",
        one_of(*COMPACT_STRATEGIES),
        "Compaction strategy of every assistant whose compact_strategy is None",
    ),
    "AI_TICK_INTERVAL": Setting(
        5, int_range(1, 86400), "Seconds between two ticks of an assistant script"
    ),
    "AI_LLM_TIMEOUT": Setting(
        60,
        MODEL_OPTION_CHECKS["timeout"],
        "Seconds before a call to a hosted model is abandoned as a timeout (a model's own "
        "timeout option wins)",
    ),
    "AI_LLM_LOCAL_TIMEOUT": Setting(
        600,
        MODEL_OPTION_CHECKS["timeout"],
        "Seconds before a call to a model served locally (api_base on loopback or a private "
        "network, or ollama, lm_studio, llamafile) is abandoned (its own timeout option wins)",
    ),
    "AI_LLM_MAX_RETRIES": Setting(
        2, int_range(0, 10), "Retries of a model call after a rate limit or transient error"
    ),
    "AI_LLM_THREADS": Setting(
        20,
        int_range(1, 1000),
        "Threads running model calls at once, for all assistants (a pool of the contrib's "
        "own; read at the first call)",
    ),
    "AI_LLM_RETRY_DELAY": Setting(
        1.0,
        number_range(0, 600),
        "Seconds before the first retry; doubled for each further one",
    ),
    "AI_GC_FREEZE": Setting(
        True,
        boolean,
        "Leave the objects loaded at server start, and those surviving each full garbage "
        "collection, out of later ones: full passes over them stalled the server for "
        "seconds at start, and a quarter of a second every few seconds with 200 assistants",
    ),
    "AI_GC_THAW_SECONDS": Setting(
        3600,
        int_range(60, 7 * 86400),
        "With AI_GC_FREEZE: seconds between the collections of every object, frozen ones too "
        "(what died since is freed then; that one collection stalls the server as long as a "
        "full one without freezing)",
    ),
    "AI_MAX_PENDING_EVENTS": Setting(
        50, int_range(1, 10_000), "Events an assistant queues before dropping the oldest"
    ),
    "AI_LOG_CHANNEL": Setting(
        "AIlog",
        text,
        "Channel told of compactions; created with the first assistant, Builders subscribed "
        "at every server start",
    ),
    "AI_CONTEXT_OVERRIDES": Setting(
        {},
        check_settings_overrides,
        "Server-wide changes to the context types (see docs/context.md)",
    ),
    "AI_MEMORY_DIR": Setting(
        None,
        directory,
        "Directory of the local long-term memory store; None: server/ai_memory in the game",
    ),
    "AI_MEMORY_CONFIG": Setting(
        None,
        memory_configuration,
        "A whole Mem0 configuration dict replacing the local default (see docs/memory.md)",
    ),
    "AI_MEMORY_VECTOR_STORE": Setting(
        None,
        optional(one_of(*VECTOR_STORES)),
        "Where long-term memory keeps its vectors: a FAISS index in AI_MEMORY_DIR, or pgvector "
        "in the game's PostgreSQL database; None: pgvector when the game's database is "
        "PostgreSQL, else faiss (see docs/memory.md)",
    ),
}


def ai_setting(name):
    """Return the ``AI_*`` setting ``name`` from Django settings, checked: a refused value
    is logged once, naming the setting and what it allows, and its default used."""
    setting = AI_SETTINGS[name]
    return read_setting(name, setting.default, setting.check)


def parse_value(name, text):
    """Return a builder's text as a value of the attribute ``name`` (see ``Option.read``).

    Raises:
        ConfigError: naming the attribute, the text and what is allowed.
    """
    try:
        return SCRIPT_CONFIG[name].read(text)
    except ValueError as err:
        raise ConfigError(f"{name}={text.strip()!r} refused: {err}") from err


def check_value(name, value):
    """Check one attribute's value on its own.

    Raises:
        ConfigError: naming the attribute, the value and what is allowed.
    """
    if name not in SCRIPT_CONFIG:
        raise ConfigError(f"unknown configuration attribute {name!r}")
    check_named(name, value, SCRIPT_CONFIG[name].check)


def check_thresholds(sleep, emergency):
    """Refuse an emergency threshold below the sleep threshold."""
    if is_number(sleep) and is_number(emergency) and emergency < sleep:
        raise ConfigError(
            f"compact_emergency_threshold={emergency!r} refused: must be at least "
            f"compact_sleep_threshold ({sleep!r}) and at most 1"
        )


def compact_strategy(config):
    """Return the strategy ``config`` compacts with: its own, else the server's."""
    return config["compact_strategy"] or ai_setting("AI_COMPACT_STRATEGY")


def check_window(llm_model, max_context_tokens):
    """Refuse ``max_context_tokens`` None when litellm does not know the model's window.

    Args:
        llm_model (str or None): The script's model; None uses the ``AI_LLM_MODEL`` setting.
        max_context_tokens (int or None): The configured context limit.
    """
    from .litellm_loader import model_input_window

    model = llm_model or ai_setting("AI_LLM_MODEL")
    if max_context_tokens is None and model_input_window(model) is None:
        raise ConfigError(
            f"max_context_tokens=None refused: litellm does not know the input window of "
            f"{model!r}; set max_context_tokens"
        )


# Checks of two attributes together: the attributes, in the check's argument order, the
# check, and those that fall back to their defaults when a stored pair fails it.
CROSS_CHECKS = (
    (
        ("compact_sleep_threshold", "compact_emergency_threshold"),
        check_thresholds,
        ("compact_sleep_threshold", "compact_emergency_threshold"),
    ),
    (("llm_model", "max_context_tokens"), check_window, ("max_context_tokens",)),
)


def default_value(name):
    """Return a fresh copy of the default of ``name``."""
    return deepcopy(SCRIPT_CONFIG[name].default)


def resolve_config(values):
    """Check stored values and fall back to the default for each invalid one.

    Args:
        values (dict): Attribute name -> stored value (missing names use defaults).

    Returns:
        tuple: ``(config, problems)``: the usable configuration and the list of messages
        naming each refused value.
    """
    config, problems = {}, []
    for name in SCRIPT_CONFIG:
        value = values[name] if name in values else default_value(name)
        try:
            check_value(name, value)
        except ConfigError as err:
            problems.append(f"{err}; using the default {SCRIPT_CONFIG[name].default!r}")
            value = default_value(name)
        config[name] = value
    for names, check, fallback in CROSS_CHECKS:
        try:
            check(*(config[name] for name in names))
        except ConfigError as err:
            defaults = ", ".join(f"{name}={SCRIPT_CONFIG[name].default!r}" for name in fallback)
            problems.append(f"{err}; using the default {defaults}")
            for name in fallback:
                config[name] = default_value(name)
    return config, problems
