"""Tools described in the prompt, for models whose own tool calling serves them badly.

With ``tools_as_text`` a model is not sent the API's ``tools`` parameter; the system
prompt lists the tools instead, and the gateway reads the calls from the answer's text
(``text_tool_calls``). Measured on Qwen2.5-Coder-1.5B behind llama.cpp: offered natively
(its chat template's tool block), it repeated players' lines; listed in the prompt, it
answered them.
"""

USAGE = 'Tools: to use one, write one line of JSON such as {"name": "noop", "arguments": {}}.'


def describe_tools(tools):
    """Return the prompt text that lists ``tools`` (OpenAI schemas), one line each."""
    lines = [USAGE]
    for tool in tools or ():
        function = tool.get("function") or {}
        parameters = list(((function.get("parameters") or {}).get("properties") or {}))
        description = (function.get("description") or "").strip()
        lines.append(f"- {function.get('name')}({', '.join(parameters)}): {description}")
    return "\n".join(lines)


def with_tools_described(messages, tools):
    """Return ``messages`` with ``tools`` described at the end of the first system message."""
    section = describe_tools(tools)
    messages = [dict(message) for message in messages]
    if messages and messages[0].get("role") == "system":
        messages[0]["content"] = f"{messages[0].get('content') or ''}\n\n{section}".strip()
    else:
        messages.insert(0, {"role": "system", "content": section})
    return messages
