"""How full the assistant's context is: the tokens the next awake call would send.

History's share comes from the store's running total (O(1)); the rest of the call (the
tick_event components and the tool schemas), its frame, is rendered and counted without
history and event, or taken from the last event call's prompt (``keep_call_frame``) less
what its event alone brought: one render a tick instead of two.
"""

from dataclasses import dataclass, field, replace

from .helpers import config_writes
from .llm_interaction import context_window, resolve_model
from .prompt_assembly import assemble_prompt
from .prompt_contexts import CONTEXT_TICK_EVENT, get_context_config, select_execution_pattern
from .tools import tools_for
from .utils.message_format import is_summary
from .utils.token_counter import counting_key

# What an event call's frame holds for its event alone: the line itself and the memories
# it recalled (bounded, and shrunk first when the window is short).
EVENT_PARTS = ("pending_event", "semantic_memories")


@dataclass
class ContextUsage:
    """How full the context of the next call is.

    Attributes:
        total_tokens (int): Tokens the next call would send (all prompt parts, tools too).
        history_tokens (int): The live history's share of ``total_tokens``.
        max_tokens (int): The context limit compared against.
        message_count (int): Live messages in history.
        frame_parts (dict): What the call sends besides history, part -> tokens (each
            prompt component, and ``tool schemas``).
    """

    total_tokens: int
    history_tokens: int
    max_tokens: int
    message_count: int
    frame_parts: dict = field(default_factory=dict)

    @property
    def frame_tokens(self):
        """Tokens of the call without history: the prompt's frame."""
        return self.total_tokens - self.history_tokens

    @property
    def usage(self):
        """Fraction of the limit that the next call uses."""
        return self.total_tokens / self.max_tokens if self.max_tokens else 0.0

    @property
    def history_usage(self):
        """Fraction of the limit that history alone uses."""
        return self.history_tokens / self.max_tokens if self.max_tokens else 0.0


def measure_frame(script, character, context_type=CONTEXT_TICK_EVENT):
    """Measure what a call of ``context_type`` sends besides history: its frame.

    Returns:
        tuple: ``(tokens, parts)``: the frame's tokens (reply priming included) and part ->
        tokens (each prompt component that renders, and ``tool schemas``).
    """
    config = get_context_config(context_type, script)
    sub_agents = select_execution_pattern(
        script.get_config("execution_config"), config
    ).sub_agents_enabled
    offered = tools_for(config.tool_filter, config.allowed_tool_categories, sub_agents)
    schemas = [tool.schema(config.context_type) for tool in offered]
    model = resolve_model(script)
    frame = assemble_prompt(
        script, character, config, model, budget=10**9, history=[], tools=schemas
    )
    return frame.total_tokens, _frame_parts(frame.components, frame.tool_tokens)


def _frame_parts(components, tool_tokens):
    """Return part -> tokens: each component (key -> tokens) that rendered, and the tools."""
    parts = {key: tokens for key, tokens in components.items() if tokens}
    parts["tool schemas"] = tool_tokens
    return parts


def keep_call_frame(script, prompt, model):
    """Keep the frame of an event call's prompt just assembled (``AssembledPrompt``) for
    the measures that follow (``measure_context``), less what its event alone brought
    (``EVENT_PARTS``, which a frame rendered without an event lacks too); a frame shrunk
    to fit is not kept."""
    if any(cut["component"] != "conversation_history" for cut in prompt.cuts):
        script.ndb.kept_frame = None
        return
    components = dict(prompt.components)
    tokens = prompt.total_tokens - components.pop("conversation_history", 0)
    tokens -= sum(components.pop(key, 0) for key in EVENT_PARTS)
    _keep_frame(script, model, tokens, _frame_parts(components, prompt.tool_tokens))


def _keep_frame(script, model, tokens, parts):
    script.ndb.kept_frame = (_frame_key(model), tokens, parts)


def _frame_key(model):
    """What a kept frame's count holds for: the counting (model and calibration) and the
    configuration."""
    return counting_key(model), config_writes.generation()


def measure_context(script, character, keep_rendered=False):
    """Measure the next awake call: its frame, plus history's stored total.

    The frame is the one kept in this process for the same counting (model and
    calibration) and configuration: the last event call's (``keep_call_frame``), or one
    rendered by an earlier measure that kept it. With none, it is rendered now, without an
    event (a tick measures before it takes one). The measure is also kept as
    ``script.ndb.context_usage``, the latest one, so that what records usage after a tick
    (``ai.usage_history``) need not render the frame again.

    Args:
        keep_rendered (bool): Keep a frame rendered now for the measures that follow, until
            an event call replaces it (a sleep's: nothing it does changes its frame much).
    """
    model = resolve_model(script)
    kept = script.ndb.kept_frame
    if kept and kept[0] == _frame_key(model):
        frame_tokens, parts = kept[1], dict(kept[2])
    else:
        frame_tokens, parts = measure_frame(script, character)
        if keep_rendered:
            _keep_frame(script, model, frame_tokens, dict(parts))
    history_tokens, message_count = script.history.totals()
    # The frame already counts the reply priming once; history adds only its messages.
    usage = script.ndb.context_usage = ContextUsage(
        total_tokens=frame_tokens + history_tokens,
        history_tokens=history_tokens,
        max_tokens=context_window(script),
        message_count=message_count,
        frame_parts=parts,
    )
    return usage


def with_history_now(script, usage):
    """Return ``usage`` with history's stored total read again (O(1)) and its frame as
    measured, kept as ``script.ndb.context_usage``: a turn that measured its context before
    appending the player's line need not render the frame a second time."""
    history_tokens, message_count = script.history.totals()
    usage = script.ndb.context_usage = replace(
        usage,
        total_tokens=usage.frame_tokens + history_tokens,
        history_tokens=history_tokens,
        message_count=message_count,
    )
    return usage


def describe_frame(usage):
    """Return the frame's size and its largest parts, e.g. ``731 tokens (tool schemas 430...)``."""
    largest = sorted(usage.frame_parts.items(), key=lambda item: -item[1])[:3]
    parts = ", ".join(f"{name.replace('_', ' ')} {tokens}" for name, tokens in largest)
    return f"{usage.frame_tokens} tokens ({parts})"


def context_parts(script, usage):
    """Return what the next call's context holds, part by part, and the room left.

    Args:
        script (AssistantScript): Whose context.
        usage (ContextUsage): Its measure (``measure_context``).

    Returns:
        list: ``(part, tokens)`` pairs: each part of the frame (prompt components, ``tool
        schemas``), ``reply priming`` (the rest of the frame), ``summaries`` (the live
        compaction summaries), ``history`` (the rest of the live history), then ``free``
        (what is left of ``usage.max_tokens``; 0 when over it).
    """
    rows = script.history.live_rows().filter(role="system").only("token_count", "metadata")
    summaries = sum(row.token_count for row in rows if is_summary({"metadata": row.metadata}))
    parts = list(usage.frame_parts.items())
    parts.append(("reply priming", usage.frame_tokens - sum(usage.frame_parts.values())))
    parts += [("summaries", summaries), ("history", usage.history_tokens - summaries)]
    return parts + [("free", max(usage.max_tokens - usage.total_tokens, 0))]
