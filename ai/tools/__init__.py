"""Tools the assistant's LLM can call. Importing this package registers the built-in tools."""

from . import (  # noqa: F401 (registers them)
    communication,
    control,
    delegation,
    goals,
    history,
    journal,
    memory,
    objects,
    pins,
)
from .base import TOOL_CATEGORIES, Tool, ToolContext, ToolResult
from .registry import (
    all_tools,
    check_call,
    execute_tool,
    get_tool,
    register_tool,
    tools_for,
    unregister_tool,
    validate_arguments,
)

__all__ = [
    "TOOL_CATEGORIES",
    "Tool",
    "ToolContext",
    "ToolResult",
    "all_tools",
    "check_call",
    "execute_tool",
    "get_tool",
    "register_tool",
    "tools_for",
    "unregister_tool",
    "validate_arguments",
]
