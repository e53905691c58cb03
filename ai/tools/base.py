"""What a tool is, what it runs with, and what it gives back."""

import re
from dataclasses import dataclass, field
from typing import Callable

from jsonschema import Draft202012Validator, SchemaError

from ..helpers.journal import cited_messages
from ..utils.tool_categories import TOOL_CATEGORIES

# Parameters several tools take, in JSON schema.
IMPORTANCE_PARAMETER = {
    "type": "integer",
    "minimum": 1,
    "maximum": 10,
    "default": 5,
    "description": "1 (trivial) to 10 (vital).",
}


# A ``limit`` parameter: how many items at most (its name needs no description).
LIMIT_PARAMETER = {"type": "integer", "minimum": 1, "maximum": 20, "default": 5}


# What the schema sent to the model keeps: a small model needs names, types and meanings,
# not the limits that validation checks (a call beyond them gets an error it can correct).
SENT_KEYWORDS = frozenset({"type", "properties", "required", "items", "enum", "description"})

# The name rule of the OpenAI function-calling API.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Tool:
    """A function the LLM may call.

    Args:
        name (str): The function name the LLM calls.
        description (str): What the tool does, as the LLM reads it.
        parameters (dict): JSON schema (of type object) of the arguments.
        categories (frozenset): Names from ``TOOL_CATEGORIES``.
        handler (callable): ``handler(ctx, **arguments) -> ToolResult``.
        context_parameters (dict): Parameter name -> the context types whose calls are
            offered it; elsewhere the schema sent leaves it out (it costs every call's
            prompt), and the handler refuses it.
        check (callable, optional): ``check(ctx, **arguments) -> str | None``: why the
            call would fail if it ran now. Asked before a dangerous call is held for a
            builder, so that one which cannot run is refused at once, not held.

    Raises:
        ValueError: for a malformed name or schema, or an unknown category.
    """

    name: str
    description: str
    parameters: dict
    categories: frozenset
    handler: Callable
    context_parameters: dict = field(default_factory=dict)
    check: Callable | None = None
    _schemas: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        if not _NAME.match(self.name or ""):
            raise ValueError(f"Tool name {self.name!r} must match {_NAME.pattern}")
        object.__setattr__(self, "categories", frozenset(self.categories))
        unknown = sorted(self.categories - set(TOOL_CATEGORIES))
        if unknown:
            raise ValueError(
                f"Tool {self.name}: unknown categories {', '.join(unknown)} "
                f"(allowed: {', '.join(TOOL_CATEGORIES)})"
            )
        if self.parameters.get("type") != "object":
            raise ValueError(f"Tool {self.name}: parameters must be a JSON schema of type object")
        try:
            Draft202012Validator.check_schema(self.parameters)
        except SchemaError as err:
            raise ValueError(f"Tool {self.name}: invalid parameters schema: {err.message}") from err

    def schema(self, context_type=None):
        """Return the tool in the OpenAI ``tools`` format, as offered in ``context_type``: its
        parameters without the limits that only validation needs (see ``SENT_KEYWORDS``),
        nor those of ``context_parameters`` that this context is not offered.

        Made once a context and the same object returned after, never to be changed (the
        thread that calls the provider sends a copy), so that its count is kept too.
        """
        try:
            return self._schemas[context_type]
        except KeyError:
            pass
        parameters = _sent_schema(self.parameters)
        for name, contexts in self.context_parameters.items():
            if context_type not in contexts:
                parameters["properties"].pop(name, None)
        made = {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }
        self._schemas[context_type] = made
        return made

    @property
    def is_terminal(self):
        """True if calling this tool ends the turn."""
        return "terminal" in self.categories

    @property
    def writes(self):
        """True if this tool keeps something (a journal entry, a memory, a pin): its
        failure must be told before any reply claims it happened."""
        return (
            bool(self.categories & {"journal", "memory", "goals"}) and "safe" not in self.categories
        )

    @property
    def is_dangerous(self):
        """True if this tool may need confirmation before it runs."""
        return "dangerous" in self.categories


def _sent_schema(schema):
    """Return ``schema`` with only ``SENT_KEYWORDS``, at every level."""
    sent = {key: value for key, value in schema.items() if key in SENT_KEYWORDS}
    if "properties" in sent:
        sent["properties"] = {name: _sent_schema(sub) for name, sub in sent["properties"].items()}
    if isinstance(sent.get("items"), dict):
        sent["items"] = _sent_schema(sent["items"])
    return sent


@dataclass
class ToolContext:
    """What a tool runs with.

    Args:
        script (AssistantScript): The script running the turn.
        character (AssistantCharacter): The assistant acting.
        context_type (str): The prompt context (``tick_event``, ``pre_compaction``, ...).
        event (dict, optional): The event being handled.
        source_message_ids (list): Ids of the history messages this turn is based on.
        source_messages (list): History messages a journal entry may come from; an entry
            then cites those it shares most words with.
        audience (list, optional): Who hears this turn (``ai.audience``): ``say`` reaches
            only them, and what the tools write is kept for them.
        follow_ups (list): Messages a tool adds to the turn once the results of the
            answer's tool calls are recorded (a result must follow its call directly).
        sub_agent (callable, optional): ``sub_agent(task) -> Deferred`` firing with a
            :class:`ToolResult`: runs ``task`` in a sub-agent's bounded context. Set only
            where the execution pattern lets sub-agents run.
    """

    script: object
    character: object
    context_type: str
    event: dict | None = None
    source_message_ids: list = field(default_factory=list)
    source_messages: list = field(default_factory=list)
    audience: list | None = None
    follow_ups: list = field(default_factory=list)
    sub_agent: Callable | None = None

    def sources_for(self, text):
        """Return the ids of the history messages that ``text``, which a tool writes, came from.

        The turn's own messages when it has them, else those of ``source_messages`` that
        share most words with ``text``.
        """
        return list(self.source_message_ids) or cited_messages(text, self.source_messages)


@dataclass
class ToolResult:
    """The outcome of a tool call.

    Args:
        ok (bool): Whether the tool did what was asked.
        content (str): Text the LLM reads back as the tool message.
        data (dict): Structured details for the caller.
    """

    ok: bool
    content: str
    data: dict = field(default_factory=dict)
