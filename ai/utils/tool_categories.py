"""The categories a tool belongs to: each tool declares its own (``ai.tools.base.Tool``),
and a context type allows some of them (``ai.prompt_contexts.ContextConfig``). A tool of the
``delegation`` category is offered only where the execution pattern lets sub-agents run."""

TOOL_CATEGORIES = (
    "safe",
    "terminal",
    "dangerous",
    "journal",
    "memory",
    "communication",
    "delegation",
    "goals",
)
