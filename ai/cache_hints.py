"""Cache hints: what tells a provider which prefix of a prompt to keep for the next call.

- Claude (Anthropic, and on Bedrock, Vertex AI or Azure AI) caches a prefix only up to a
  breakpoint: litellm puts ``cache_control`` on each message that
  ``cache_control_injection_points`` names (at most four), for the models it knows to
  cache.
- OpenAI caches every prompt's prefix by itself (from 1,024 tokens); ``prompt_cache_key``
  sends an assistant's calls to the machines that hold its prefix, and the models that
  take breakpoints (GPT-5.6 and later) get the same injection points, which litellm writes
  as ``prompt_cache_breakpoint``. Only for OpenAI's own API: an OpenAI-compatible server
  could refuse a field it does not know.
- llama.cpp's server reuses the previous prompt's prefix by itself (``cache_prompt`` is
  on by default; an older build takes ``{"cache_prompt": True}`` in ``llm_options``).
- Any other provider gets no hint.

Reading litellm's model map, this runs in the worker thread of the call.
"""

from .litellm_loader import load_litellm


def cache_hints(model, api_base, points, cache_key):
    """Return the litellm keyword arguments that mark a reusable prefix for ``model``.

    Args:
        model (str): The litellm model string.
        api_base (str or None): The call's server, if not the provider's own.
        points (list): Indices of the messages that end a prefix a later call repeats.
        cache_key (str): What names this assistant's prompts (OpenAI's ``prompt_cache_key``).

    Returns:
        dict: Nothing for a provider that takes no hint.
    """
    from litellm.integrations.anthropic_cache_control_hook import (
        supports_openai_prompt_cache_breakpoint,
        targets_openai_api,
    )
    from litellm.llms.anthropic.common_utils import supports_anthropic_cache_control

    try:
        provider = load_litellm().get_llm_provider(model)[1]
    except Exception:
        return {}
    marks = {}
    if points:
        indices = [{"location": "message", "index": index} for index in points]
        marks = {"cache_control_injection_points": indices}
    if supports_anthropic_cache_control(model, provider):
        return marks
    if provider == "openai" and targets_openai_api(api_base):
        breakpoints = marks if supports_openai_prompt_cache_breakpoint(model) else {}
        return {"prompt_cache_key": cache_key, **breakpoints}
    return {}
