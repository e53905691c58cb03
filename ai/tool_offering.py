"""How each model is offered tools: through the API (natively) or listed in the prompt.

A model's ``tools_as_text`` option decides when it is set. Otherwise tools go natively until
the model shows it cannot use them so: it writes its calls as text (the gateway recovered
them), or it answers in prose that it will use a tool without calling one. Then that model
is switched to the text listing (``ai.utils.tool_prompt``), once, with one log line; the
choice is stored per model, like the token calibration, and loaded at server start.
"""

from evennia.utils import logger

from .models import ToolOffering

# Models switched to the text listing -> why (what the model did).
_as_text = {}
REASON_LENGTH = 200


def offers_as_text(model, option=None):
    """Return whether ``model``'s tools go as text, and whether its option decided it.

    Args:
        model (str): The model called.
        option (bool or None): Its ``tools_as_text`` option; None leaves it to the contrib.

    Returns:
        tuple: ``(as_text, forced)``.
    """
    if option is not None:
        return bool(option), True
    return model in _as_text, False


def switch_to_text(model, reason):
    """List ``model``'s tools as text from now on, because of ``reason``; remember it.

    Runs in the reactor thread (it writes the database).

    Returns:
        bool: True when this switched the model, False when it was switched already.
    """
    if model in _as_text:
        return False
    reason = reason[:REASON_LENGTH]
    ToolOffering.objects.update_or_create(model=model, defaults={"reason": reason})
    _as_text[model] = reason
    logger.log_info(f"AI: tools of {model} are now listed in the prompt as text: it {reason}")
    return True


def tool_offering(model, option=None):
    """Return how ``model`` is offered tools, as a sentence for builders."""
    as_text, forced = offers_as_text(model, option)
    if forced:
        how = "listed as text" if as_text else "offered natively"
        return f"Tools: {how} (its tools_as_text option)."
    if as_text:
        return f"Tools: listed as text (chosen automatically: it {_as_text[model]})."
    return "Tools: offered natively (chosen automatically; switched to text if it shows a need)."


def load_tool_offerings():
    """Apply every stored choice (at server start)."""
    _as_text.clear()
    _as_text.update(ToolOffering.objects.values_list("model", "reason"))
