"""Sub-agents: what a ``delegate`` call runs, within which limits, and what it leaves.

A sub-agent works on one task in a fresh context (``SUB_AGENT_CONFIG``): its own system
prompt, the task as its pending event, tools that look and read (and journal), no
conversation history, and the audience of the turn that started it, so that it sees and
writes only what that turn's listeners may hear. At most ``sub_agent_budget`` run at once
and each makes at most ``sub_agent_max_iterations`` model calls. The turn reads back only
its result; what it said is archived under that result (``ConversationHistory.archive_under``),
for builders to read in ``aihistory/subagents``, never sent to the model again.
"""

from copy import deepcopy

from .audience import with_audience
from .prompt_contexts import CONTEXT_SUB_AGENT, EXECUTION_CONFIG_DEFAULTS, SUB_AGENT_CONFIG
from .tools import ToolResult
from .utils.markers import SUB_AGENT_KEY
from .utils.message_format import quoted
from .utils.wording import plural

# What a result may hold at most: the live history grows by it.
MAX_RESULT_CHARS = 2000

# Why a sub-agent stopped without a result, as the turn that started it reads it.
STOPS = {
    "noop": "ended its work without a result",
    "terminal_tool": "ended its work without a result",
    "tool_not_allowed": "called a tool it does not have",
    "awaiting_confirmation": "asked for a tool that needs a builder's confirmation",
    "over_window": "had a prompt too large for the context window",
}


def sub_agent_config(limit):
    """Return a copy of the sub-agent's context, limited to ``limit`` model calls."""
    config = deepcopy(SUB_AGENT_CONFIG)
    config.max_iterations = limit
    return config


def task_event(task):
    """Return the pending event of a sub-agent: its task, quoted as one unit (the model
    wrote it, perhaps from a player's words)."""
    return {"type": "task", "text": task, "instruction": f"Your task: {quoted(task)}"}


def claim_slot(script):
    """Count one more sub-agent running for ``script``, or say why none may start.

    Returns:
        str or None: The refusal, naming ``sub_agent_budget``; None when one was counted.
    """
    budget = {**EXECUTION_CONFIG_DEFAULTS, **script.get_config("execution_config")}[
        "sub_agent_budget"
    ]
    running = script.ndb.sub_agents_running or 0
    if running >= budget:
        return (
            f"Not run: {plural(running, 'sub-agent')} running, and execution_config's "
            f"sub_agent_budget allows {budget} at once. Do the task yourself, or later."
        )
    script.ndb.sub_agents_running = running + 1
    return None


def release_slot(script):
    """Count one sub-agent of ``script`` as finished."""
    script.ndb.sub_agents_running = max((script.ndb.sub_agents_running or 1) - 1, 0)


def sub_agent_outcome(task, loop, limit, audience):
    """Return the result a ``delegate`` call answers for the sub-agent run ``loop``.

    Its last plain-text answer is the result; a failed model call, a run that used its
    ``limit`` calls or stopped otherwise without one says so. ``data["transcript"]``
    carries what the sub-agent said (its calls, their results and that answer, kept for
    ``audience``), to archive (see ``archive_transcript``).
    """
    text = loop.unspoken[-1].strip() if loop.unspoken else ""
    summary = {
        "task": task,
        "calls": loop.iterations,
        "stop_reason": loop.stop_reason,
        "tools_called": list(loop.tools_called),
    }
    transcript = list(loop.kept)
    if text:  # a text answer of a context that does not speak stays out of its messages
        metadata = with_audience({"context": CONTEXT_SUB_AGENT}, audience)
        transcript.append({"role": "assistant", "content": text, "metadata": metadata})
    data = {"transcript": transcript, SUB_AGENT_KEY: summary}
    if loop.stop_reason == "llm_error":
        answer = loop.last_answer
        why = f"{answer.error_kind}: {answer.error}" if answer else "no answer"
        content = f"The sub-task failed: its model call failed ({why}). Nothing came of it."
        return ToolResult(ok=False, content=content, data=data)
    if text:
        if len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS] + " [...]"
        return ToolResult(ok=True, content=f"Result of the sub-task: {text}", data=data)
    if loop.stop_reason == "max_iterations":
        content = (
            f"The sub-task used its {plural(limit, 'model call')} (sub_agent_max_iterations) "
            "without a result."
        )
    else:
        content = f"The sub-task {STOPS.get(loop.stop_reason, 'ended without a result')}."
    return ToolResult(ok=False, content=content, data=data)


def archive_transcript(script, result_message, outcome_data):
    """Archive a sub-agent's messages under the recorded result of its ``delegate`` call.

    Args:
        script (AssistantScript): The assistant.
        result_message (dict): The stored tool result (with its ``id`` and ``position``).
        outcome_data (dict): The result's ``data`` (see ``sub_agent_outcome``).

    Returns:
        list: The archived rows' ids.
    """
    summary = outcome_data[SUB_AGENT_KEY]
    messages = [
        {**message, "metadata": {**(message.get("metadata") or {}), SUB_AGENT_KEY: summary}}
        for message in outcome_data["transcript"]
    ]
    return script.history.archive_under(result_message, messages)
