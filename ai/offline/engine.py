"""The litellm custom provider that serves ``offline/...`` models in-process."""

import time
from functools import lru_cache

from litellm import CustomLLM
from litellm.types.utils import ChatCompletionMessageToolCall, Function, Message, Usage

from ..utils.token_counter import count_message_tokens, count_tools_tokens
from . import PROVIDER
from .responder import respond

# Plain messages whose token counts are kept: a prompt sends the history's messages again
# call after call, and counting them anew with tiktoken took a third of the engine's thread
# at 50 assistants (issue 23).
COUNTED_MESSAGES = 20000


@lru_cache(maxsize=COUNTED_MESSAGES)
def _plain_message_tokens(role, content, name, tool_call_id, model):
    message = {"role": role, "content": content, "name": name, "tool_call_id": tool_call_id}
    return count_message_tokens(message, model)


def prompt_message_tokens(message, model):
    """Return the tokens of one prompt message, kept for plain text messages."""
    content = message.get("content")
    if message.get("tool_calls") or not isinstance(content, (str, type(None))):
        return count_message_tokens(message, model)
    return _plain_message_tokens(
        message.get("role"), content, message.get("name"), message.get("tool_call_id"), model
    )


class OfflineEngine(CustomLLM):
    """Answers chat completions deterministically, without network or key."""

    def completion(
        self, model, messages, api_base, custom_prompt_dict, model_response, *args, **kwargs
    ):
        """Fill ``model_response`` with the engine's reply to ``messages``."""
        tools = (kwargs.get("optional_params") or {}).get("tools")
        reply = respond(messages, tools)
        message = Message(content=reply.content, role="assistant")
        if reply.tool_calls:
            message.tool_calls = [
                ChatCompletionMessageToolCall(
                    id=call["id"], type="function", function=Function(**call["function"])
                )
                for call in reply.tool_calls
            ]
        choice = model_response.choices[0]
        choice.message = message
        choice.finish_reason = "tool_calls" if reply.tool_calls else "stop"
        counted_as = f"{PROVIDER}/{model}"
        prompt_tokens = sum(prompt_message_tokens(m, counted_as) for m in messages)
        prompt_tokens += count_tools_tokens(tools, counted_as)
        completion_tokens = count_message_tokens(
            {"role": "assistant", "content": reply.content, "tool_calls": reply.tool_calls},
            counted_as,
        )
        model_response.usage = Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
        )
        model_response.model = counted_as
        model_response.created = int(time.time())
        return model_response
