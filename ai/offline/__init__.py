"""The offline engine: a deterministic, in-process stand-in for an LLM.

It is registered as a litellm custom provider (``offline/...`` model strings), so the
assistant's code path is exactly the one a real model uses. It needs no network and no
key. It is not a language model: it answers by matching words against what was said.
"""

PROVIDER = "offline"
DEFAULT_MODEL = "offline/assistant"
# The window the engine declares, used when max_context_tokens is None.
CONTEXT_WINDOW = 32768
