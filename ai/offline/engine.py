"""The litellm custom provider that serves ``offline/...`` models in-process."""

import time

from litellm import CustomLLM
from litellm.types.utils import ChatCompletionMessageToolCall, Function, Message, Usage

from ..utils.token_counter import count_message_tokens, count_tools_tokens, kept_message_tokens
from . import PROVIDER
from .responder import respond


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
        prompt_tokens = sum(kept_message_tokens(m, counted_as) for m in messages)
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
