"""The tool registry: register tools, pick those a context offers, run a tool call."""

import json

from evennia.utils import logger
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from twisted.internet import defer

from .base import ToolResult

_TOOLS = {}  # name -> Tool; dicts keep registration order


def register_tool(tool, replace=False):
    """Add a tool to the registry.

    Args:
        tool (Tool): The tool.
        replace (bool): Replace a registered tool of the same name (keeping its place).

    Raises:
        ValueError: if the name is taken and ``replace`` is False.
    """
    if tool.name in _TOOLS and not replace:
        raise ValueError(f"A tool named {tool.name!r} is already registered")
    _TOOLS[tool.name] = tool


def unregister_tool(name):
    """Remove a tool from the registry (no error if it is not there)."""
    _TOOLS.pop(name, None)


def get_tool(name):
    """Return the registered tool called ``name``, or None."""
    return _TOOLS.get(name)


def all_tools():
    """Return every registered tool, in registration order."""
    return list(_TOOLS.values())


def tools_for(tool_filter=None, allowed_categories=None):
    """Return the tools a context offers, in registration order.

    Args:
        tool_filter (list, optional): Allowed tool names (None: all).
        allowed_categories (list, optional): Allowed categories (None: all); a tool passes
            if any of its categories is allowed.
    """
    return [
        tool
        for tool in _TOOLS.values()
        if (tool_filter is None or tool.name in tool_filter)
        and (allowed_categories is None or tool.categories & set(allowed_categories))
    ]


def validate_arguments(tool, arguments):
    """Parse and check the JSON arguments of a call to ``tool``.

    Args:
        tool (Tool): The tool called.
        arguments (str): The call's arguments, a JSON object (empty means no arguments).

    Returns:
        tuple: ``(dict, None)`` if valid, else ``(None, error)`` with an error the LLM can
        read and correct.
    """
    prefix = f"Invalid arguments for {tool.name}"
    try:
        parsed = json.loads(arguments or "{}")
    except (TypeError, ValueError) as err:
        return None, f"{prefix}: not valid JSON ({err})"
    if not isinstance(parsed, dict):
        return None, f"{prefix}: must be a JSON object, got {type(parsed).__name__}"
    error = best_match(Draft202012Validator(tool.parameters).iter_errors(parsed))
    if error is None:
        return parsed, None
    path = "/".join(str(part) for part in error.absolute_path)
    return None, f"{prefix}: {path + ': ' if path else ''}{error.message}"


def execute_tool(tool_call, ctx):
    """Run one OpenAI-style tool call; never raises.

    Args:
        tool_call (dict): ``{"id", "type": "function", "function": {"name", "arguments"}}``.
        ctx (ToolContext): What the tool runs with.

    Returns:
        ToolResult: The handler's result, or ``ok=False`` with an error for the LLM (a
        Deferred firing with one, for a tool that waits on a worker).
    """
    function = tool_call.get("function") or {}
    name = function.get("name")
    tool = get_tool(name)
    if tool is None:
        available = ", ".join(tool.name for tool in all_tools())
        return ToolResult(ok=False, content=f"Unknown tool {name!r}. Available: {available}")
    arguments, error = validate_arguments(tool, function.get("arguments"))
    if error:
        return ToolResult(ok=False, content=error)
    try:
        outcome = tool.handler(ctx, **arguments)
    except Exception as err:
        logger.log_trace(f"AI {ctx.script.label}: tool {name} failed")
        return _failed(name, err)
    if isinstance(outcome, defer.Deferred):
        # A tool that waits on a worker (long-term memory) answers later.
        return outcome.addErrback(lambda failure: _logged_failure(ctx, name, failure))
    return outcome


def _logged_failure(ctx, name, failure):
    logger.log_err(f"AI {ctx.script.label}: tool {name} failed: {failure.getTraceback()}")
    return _failed(name, failure.value)


def _failed(name, err):
    return ToolResult(ok=False, content=f"Tool {name} failed: {err}")
