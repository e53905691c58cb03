"""Token counting with a tiered fallback, never touching the network.

Tiers, best first:

1. ``tiktoken``: the model's own encoding, read from the encodings that litellm ships
   (cl100k, o200k, p50k). The offline engine is declared to tokenize as cl100k.
2. ``toksum``: used when it is installed and the model has no bundled encoding.
3. ``heuristic``: about four characters per token.

The last two are estimates: for a model counted by them, a calibration factor (learned
from the prompt tokens its provider reports, see ``ai.token_calibration``) scales each
count, so that thresholds hold for any model.

``count_message_tokens`` adds what a chat API really sends around the text: a per-message
overhead, the name, and each tool call's id, function name and JSON arguments.
"""

import importlib.util
import json
import math
import os
from functools import lru_cache
from operator import is_

# Overheads of OpenAI's chat format (the cookbook's figures for current models).
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOKENS_PER_TOOL_CALL = 3
REPLY_PRIMING_TOKENS = 3

BUNDLED_ENCODINGS = ("cl100k_base", "o200k_base", "p50k_base")
OFFLINE_ENGINE_ENCODING = "cl100k_base"
CHARS_PER_TOKEN = 4
# Plain messages whose counts ``kept_message_tokens`` keeps.
KEPT_MESSAGES = 20000

# Model -> factor applied to the estimating tiers' counts (set by ai.token_calibration).
_calibration = {}
# The JSON texts of the tool sets offered lately (a set a context, about), by their objects.
_TOOL_SETS_KEPT = 64
_TOOLS_TEXTS = {}


def _bundled_tokenizer_dir():
    """Return the folder of tiktoken encodings shipped inside the litellm package."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(spec.submodule_search_locations[0], "litellm_core_utils", "tokenizers")
    return path if os.path.isdir(path) else None


@lru_cache(maxsize=1)
def _tiktoken():
    """Import tiktoken pointed at the bundled encodings, or return None if impossible."""
    folder = _bundled_tokenizer_dir()
    if folder is None:
        return None
    # tiktoken downloads encodings missing from its cache dir; the bundled folder holds ours.
    os.environ["TIKTOKEN_CACHE_DIR"] = folder
    try:
        import tiktoken
    except ImportError:
        return None
    return tiktoken


def _bare_model_name(model):
    """Strip a litellm provider prefix: ``openai/gpt-4o`` -> ``gpt-4o``."""
    return (model or "").split("/", 1)[-1]


@lru_cache(maxsize=128)
def _encoding_for(model):
    """Return a tiktoken encoding for ``model`` if one is bundled, else None."""
    tiktoken = _tiktoken()
    if tiktoken is None:
        return None
    if (model or "").startswith("offline/"):
        name = OFFLINE_ENGINE_ENCODING
    else:
        try:
            name = tiktoken.encoding_name_for_model(_bare_model_name(model))
        except KeyError:
            return None
    if name not in BUNDLED_ENCODINGS:
        return None
    return tiktoken.get_encoding(name)


@lru_cache(maxsize=1)
def _toksum():
    """Return toksum's counter function when toksum is installed, else None."""
    try:
        from toksum import count_tokens as toksum_count
    except ImportError:
        return None
    return toksum_count


def tokenizer_tier(model):
    """Name the tier that counts tokens for ``model``: tiktoken, toksum or heuristic."""
    if _encoding_for(model) is not None:
        return "tiktoken"
    if _toksum() is not None:
        return "toksum"
    return "heuristic"


def load_tokenizer(model):
    """Load what counts ``model``'s tokens, so that its first count does not (tiktoken's
    encoding takes a few hundred ms of CPU to load). Safe from any thread."""
    tokenizer_tier(model)


def set_calibration(model, factor):
    """Scale the estimated counts of ``model`` by ``factor`` (1.0 removes the calibration)."""
    if factor == 1.0:
        _calibration.pop(model, None)
    else:
        _calibration[model] = factor


def calibration(model):
    """Return the factor scaling the estimated counts of ``model`` (1.0 when exact)."""
    if _encoding_for(model) is not None:
        return 1.0
    return _calibration.get(model, 1.0)


def counting_key(model):
    """Name how counts for ``model`` are made: the model, and its calibration if any.

    Stored counts made under another key are stale and must be recounted.
    """
    factor = calibration(model)
    return model if factor == 1.0 else f"{model} x{factor:.2f}"


def heuristic_count(text):
    """Estimate tokens as one per four characters, at least one for non-empty text."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def count_tokens(text, model):
    """Count the tokens of ``text`` for ``model`` with the best tier available offline.

    Args:
        text (str): The text to count. ``None`` counts as empty.
        model (str): A litellm model string such as ``gpt-4o-mini`` or ``offline/assistant``.

    Returns:
        int: The number of tokens.
    """
    if not text:
        return 0
    encoding = _encoding_for(model)
    if encoding is not None:
        return len(encoding.encode(text, disallowed_special=()))
    return math.ceil(_estimate(text, model) * _calibration.get(model, 1.0))


def _estimate(text, model):
    """Count ``text`` with toksum if it knows ``model``, else with the heuristic."""
    toksum_count = _toksum()
    if toksum_count is not None:
        try:
            return toksum_count(text, _bare_model_name(model))
        except Exception:  # toksum raises for models it does not know
            pass
    return heuristic_count(text)


def count_tool_call_tokens(tool_call, model):
    """Count one OpenAI-style tool call: its id, function name and JSON arguments."""
    function = tool_call.get("function") or {}
    arguments = function.get("arguments") or ""
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return (
        TOKENS_PER_TOOL_CALL
        + count_tokens(tool_call.get("id") or "", model)
        + count_tokens(function.get("name") or "", model)
        + count_tokens(arguments, model)
    )


def count_message_tokens(message, model):
    """Count everything of one chat message that is sent to the model.

    Args:
        message (dict): A message in the ``{role, content, ...}`` format.
        model (str): The litellm model string.

    Returns:
        int: Tokens of the role, content, name, tool calls and tool call id, plus overhead.
    """
    total = TOKENS_PER_MESSAGE + count_tokens(message.get("role") or "", model)
    total += count_tokens(message.get("content") or "", model)
    if message.get("name"):
        total += TOKENS_PER_NAME + count_tokens(message["name"], model)
    if message.get("tool_call_id"):
        total += count_tokens(message["tool_call_id"], model)
    for tool_call in message.get("tool_calls") or ():
        total += count_tool_call_tokens(tool_call, model)
    return total


def kept_message_tokens(message, model):
    """Return ``count_message_tokens(message, model)``, kept for a text message (with its
    tool calls, if any).

    A prompt sends its instructions, and a conversation its history, again call after
    call; counting them anew with tiktoken took a third of the offline engine's thread at
    50 assistants (issue 23). ``KEPT_MESSAGES`` counts are kept, per calibration.
    """
    content = message.get("content")
    calls = _calls_key(message.get("tool_calls"))
    if calls is None or not isinstance(content, (str, type(None))):
        return count_message_tokens(message, model)
    return _kept_tokens(
        message.get("role"),
        content,
        message.get("name"),
        message.get("tool_call_id"),
        calls,
        model,
        calibration(model),
    )


def _calls_key(tool_calls):
    """Return what is counted of ``tool_calls`` as ``((id, name, arguments), ...)``, or None
    when a call's arguments are not text."""
    key = []
    for call in tool_calls or ():
        function = call.get("function") or {}
        arguments = function.get("arguments") or ""
        if not isinstance(arguments, str):
            return None
        key.append((call.get("id") or "", function.get("name") or "", arguments))
    return tuple(key)


@lru_cache(maxsize=KEPT_MESSAGES)
def _kept_tokens(role, content, name, tool_call_id, calls, model, factor):
    # ``factor`` only keys the count: a new calibration counts again.
    message = {"role": role, "content": content, "name": name, "tool_call_id": tool_call_id}
    message["tool_calls"] = [
        {"id": call_id, "function": {"name": function, "arguments": arguments}}
        for call_id, function, arguments in calls
    ]
    return count_message_tokens(message, model)


def stored_tokens(message, model):
    """Return the ``token_count`` stored with ``message``, or count it now if it has none."""
    stored = message.get("token_count")
    return stored if stored is not None else count_message_tokens(message, model)


def count_tools_tokens(tools, model):
    """Count the JSON tool schemas offered to the model (they are sent with every call).

    The same schemas are offered call after call: their count is kept per text and model
    (the calibration, which may change, is applied after), and their text as long as the
    same schema objects are offered (a tool's, never changed: ``Tool.schema``).
    """
    if not tools:
        return 0
    text = _tools_text(tools)
    if _encoding_for(model) is not None:
        return _exact_count(text, model)
    return count_tokens(text, model)


def _tools_text(tools):
    """Return the JSON text of ``tools``, kept while the very same schema objects come."""
    key = tuple(map(id, tools))
    kept = _TOOLS_TEXTS.get(key)
    if kept is not None and all(map(is_, kept[0], tools)):
        return kept[1]
    text = json.dumps(tools, sort_keys=True)
    if len(_TOOLS_TEXTS) >= _TOOL_SETS_KEPT:
        _TOOLS_TEXTS.clear()  # one step, whichever thread counts (model calls count too)
    _TOOLS_TEXTS[key] = (list(tools), text)  # the objects held, so that no other takes an id
    return text


@lru_cache(maxsize=64)
def _exact_count(text, model):
    """Count ``text`` with ``model``'s bundled encoding (for texts counted again and again)."""
    return count_tokens(text, model)
