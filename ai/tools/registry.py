"""The tool registry: register tools, pick those a context offers, run a tool call."""

import json
from dataclasses import replace

from evennia.utils import logger
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from twisted.internet import defer

from .base import ToolResult

_TOOLS = {}  # name -> Tool; dicts keep registration order
# An argument error longer than this repeats the argument: it is cut.
MAX_ERROR_CHARS = 300


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


def tools_for(tool_filter=None, allowed_categories=None, sub_agents=False):
    """Return the tools a context offers, in registration order.

    Args:
        tool_filter (list, optional): Allowed tool names (None: all).
        allowed_categories (list, optional): Allowed categories (None: all); a tool passes
            if any of its categories is allowed.
        sub_agents (bool): Whether the execution pattern lets sub-agents run: without it,
            no tool of the ``delegation`` category is offered.
    """
    return [
        tool
        for tool in _TOOLS.values()
        if (tool_filter is None or tool.name in tool_filter)
        and (allowed_categories is None or tool.categories & set(allowed_categories))
        and (sub_agents or "delegation" not in tool.categories)
    ]


def validate_arguments(tool, arguments):
    """Parse and check the JSON arguments of a call to ``tool``.

    An optional argument with a default that breaks the schema (``"importance": "high"``
    where a number is asked for) is left out, so that the default is used: a small model's
    fact is not lost over how it rated it.

    Args:
        tool (Tool): The tool called.
        arguments (str): The call's arguments, a JSON object (empty means no arguments).

    Returns:
        tuple: ``(dict, None, ignored)`` if valid, ``ignored`` saying which arguments were
        left out and why (or ""), else ``(None, error, "")`` with an error the LLM can read
        and correct, which says that nothing was done.
    """
    try:
        parsed = json.loads(arguments or "{}")
    except (TypeError, ValueError) as err:
        problem = f"not valid JSON ({err})"
    else:
        problem, ignored = _problem(tool, parsed)
    if problem is None:
        return parsed, None, ignored
    return None, f"Invalid arguments for {tool.name}: {problem}. Nothing was done.", ""


def _problem(tool, parsed):
    """Return ``(problem, ignored)``: what is wrong with the parsed arguments ``parsed`` of
    ``tool`` (or None), once the optional ones with a default that break its schema are
    taken out of ``parsed``; and what was taken out, said for the model (or "")."""
    if not isinstance(parsed, dict):
        return f"must be a JSON object, got {type(parsed).__name__}", ""
    validator = Draft202012Validator(tool.parameters)
    properties = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or ())
    ignored = []
    while error := best_match(validator.iter_errors(parsed)):
        name = error.absolute_path[0] if error.absolute_path else None
        if name not in parsed or name in required or "default" not in properties.get(name, {}):
            path = "/".join(str(part) for part in error.absolute_path)
            return f"{path + ': ' if path else ''}{_plain_error(error)}", ""
        ignored.append(
            f"{name} {_plain_error(error)}: left out, {properties[name]['default']!r} used"
        )
        del parsed[name]
    return None, "; ".join(ignored)


def _plain_error(error):
    """Return what is wrong, said plainly: a value of the wrong size is measured, never
    repeated (a 6,000-character text must not come back whole), and a long message is cut."""
    limits = {"maxLength": ("characters", "at most"), "minLength": ("characters", "at least")}
    limits.update(maxItems=("items", "at most"), minItems=("items", "at least"))
    if error.validator in limits:
        unit, bound = limits[error.validator]
        return f"{len(error.instance):,} {unit}, {bound} {error.validator_value:,}"
    message = error.message
    return message if len(message) <= MAX_ERROR_CHARS else message[:MAX_ERROR_CHARS] + " [...]"


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
    arguments, error, ignored = validate_arguments(tool, function.get("arguments"))
    if error:
        return ToolResult(ok=False, content=error)
    try:
        outcome = tool.handler(ctx, **arguments)
    except Exception as err:
        logger.log_trace(f"AI {ctx.script.label}: tool {name} failed")
        return _failed(name, err)
    if isinstance(outcome, defer.Deferred):
        # A tool that waits on a worker (long-term memory) answers later.
        outcome.addErrback(lambda failure: _logged_failure(ctx, name, failure))
        return outcome.addCallback(_noting, ignored)
    return _noting(outcome, ignored)


def check_call(tool_call, ctx):
    """Return why ``tool_call`` (of a known tool) would fail if it ran now, or None: its
    arguments validated, then the tool's own ``check``, if it has one. Never raises."""
    function = tool_call.get("function") or {}
    tool = get_tool(function.get("name"))
    arguments, error, _ = validate_arguments(tool, function.get("arguments"))
    if error or tool.check is None:
        return error
    try:
        return tool.check(ctx, **arguments)
    except Exception:
        # A check that fails cannot tell: the call is held as before, and runs or fails then.
        logger.log_trace(f"AI {ctx.script.label}: the check of {tool.name} failed")
        return None


def _noting(result, ignored):
    """Return ``result`` telling the model which of its arguments were left out, if any."""
    if not ignored:
        return result
    return replace(result, content=f"{result.content} (Argument {ignored}.)")


def _logged_failure(ctx, name, failure):
    logger.log_err(f"AI {ctx.script.label}: tool {name} failed: {failure.getTraceback()}")
    return _failed(name, failure.value)


def _failed(name, err):
    return ToolResult(ok=False, content=f"Tool {name} failed: {err}")
