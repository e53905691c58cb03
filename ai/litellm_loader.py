"""Import litellm the offline way, once, with the offline engine registered.

litellm fetches a model cost map from the internet at import unless told not to, and
sends nothing anywhere once telemetry is off. Importing it costs about three seconds, so
it is imported lazily, on the first model call or model check, and makes its first call
then (see ``_warm_up``).
"""

import os
import threading
from functools import lru_cache

_loading = threading.Lock()
_warmed = False


def load_litellm():
    """Return the litellm module, configured for offline use with ``offline/`` registered.

    Safe from any thread: the server preloads it in a worker thread at start while a tick
    may already ask for it. The first load also makes a first call (``_warm_up``), outside
    the lock: that call loads litellm again.
    """
    global _warmed
    with _loading:
        litellm = _import_litellm()
        warm, _warmed = not _warmed, True
    if warm:
        _warm_up(litellm)
    return litellm


@lru_cache(maxsize=1)
def _import_litellm():
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm
    from litellm.utils import custom_llm_setup

    from .offline import PROVIDER
    from .offline.engine import OfflineEngine

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    litellm.custom_provider_map = [
        entry for entry in litellm.custom_provider_map if entry.get("provider") != PROVIDER
    ] + [{"provider": PROVIDER, "custom_handler": OfflineEngine()}]
    custom_llm_setup()
    return litellm


def _warm_up(litellm):
    """Make one call to the offline engine, so that the modules litellm imports on its
    first completion (about a second; twenty on a busy machine) are imported here, where
    the server preloads litellm, and not inside the first tick's timeout."""
    from .offline import PROVIDER

    try:
        litellm.completion(
            model=f"{PROVIDER}/warm-up", messages=[{"role": "user", "content": "warm-up"}]
        )
    except Exception as err:  # only a slower first call is lost
        from evennia.utils import logger

        logger.log_warn(f"AI: litellm's first call could not be made in advance: {err!r}")


def check_model(model):
    """Raise ValueError unless litellm can route ``model`` to a known provider.

    The offline engine's models are known without importing litellm: checking the default
    model must not cost the reactor the seconds of that import.
    """
    from .offline import PROVIDER

    if not isinstance(model, str) or not model.strip():
        raise ValueError("must be a non-empty litellm model string such as 'openai/gpt-4o-mini'")
    if model.startswith(f"{PROVIDER}/"):
        return
    litellm = load_litellm()
    try:
        litellm.get_llm_provider(model)
    except Exception as err:
        raise ValueError(
            f"litellm knows no provider for {model!r}; use e.g. 'offline/assistant', "
            "'openai/gpt-4o-mini', 'anthropic/claude-3-5-haiku-latest' or 'ollama/llama3'"
        ) from err


def model_input_window(model):
    """Return the input window of ``model`` in tokens, or None when litellm does not know it."""
    from .offline import CONTEXT_WINDOW, PROVIDER

    if model.startswith(f"{PROVIDER}/"):
        return CONTEXT_WINDOW
    try:
        return load_litellm().get_model_info(model).get("max_input_tokens") or None
    except Exception:
        return None
