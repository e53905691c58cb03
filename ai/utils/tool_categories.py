"""The categories a tool belongs to: each tool declares its own (``ai.tools.base.Tool``),
and a context type allows some of them (``ai.prompt_contexts.ContextConfig``). A tool of the
``delegation`` category is offered only where the execution pattern lets sub-agents run. A
tool of the ``world`` category acts on or reads the game world (``look``, ``give``): an
autonomous turn names them, with ``communication``'s, as its ways to act."""

TOOL_CATEGORIES = (
    "safe",
    "terminal",
    "dangerous",
    "journal",
    "memory",
    "communication",
    "world",
    "delegation",
    "goals",
)
