"""How full the assistant's context is: the tokens the next awake call would send.

History's share comes from the store's running total (O(1)); the rest of the call (the
tick_event components and the tool schemas) is rendered and counted, without history.
"""

from dataclasses import dataclass

from .llm_interaction import context_window, resolve_model
from .prompt_assembly import assemble_prompt
from .prompt_contexts import CONTEXT_TICK_EVENT, get_context_config
from .tools import tools_for


@dataclass
class ContextUsage:
    """How full the context of the next call is.

    Attributes:
        total_tokens (int): Tokens the next call would send (all prompt parts, tools too).
        history_tokens (int): The live history's share of ``total_tokens``.
        max_tokens (int): The context limit compared against.
        message_count (int): Live messages in history.
    """

    total_tokens: int
    history_tokens: int
    max_tokens: int
    message_count: int

    @property
    def usage(self):
        """Fraction of the limit that the next call uses."""
        return self.total_tokens / self.max_tokens if self.max_tokens else 0.0

    @property
    def history_usage(self):
        """Fraction of the limit that history alone uses."""
        return self.history_tokens / self.max_tokens if self.max_tokens else 0.0


def measure_context(script, character):
    """Measure the next awake call: its frame rendered now, plus history's stored total."""
    config = get_context_config(CONTEXT_TICK_EVENT, script)
    schemas = [
        tool.schema() for tool in tools_for(config.tool_filter, config.allowed_tool_categories)
    ]
    history_tokens, message_count = script.history.totals()
    frame = assemble_prompt(
        script, character, config, resolve_model(script), budget=10**9, history=[], tools=schemas
    )
    # The frame already counts the reply priming once; history adds only its messages.
    return ContextUsage(
        total_tokens=frame.total_tokens + history_tokens,
        history_tokens=history_tokens,
        max_tokens=context_window(script),
        message_count=message_count,
    )
