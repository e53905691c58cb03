"""The categories a tool belongs to: each tool declares its own (``ai.tools.base.Tool``),
and a context type allows some of them (``ai.prompt_contexts.ContextConfig``)."""

TOOL_CATEGORIES = ("safe", "terminal", "dangerous", "journal", "memory", "communication")
