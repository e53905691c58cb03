"""The execution pattern's third layer: the model's own assessment of a task before its turn.

With ``execution_config["task_assessment_enabled"]`` (off by default: then nothing here
runs), a turn that is not plain conversation (an arrival, an object given, a builder's
request) is preceded by one cheap call: no tools, no history, the event alone. Its answer
recommends how many iterations the task needs, the mode and whether dangerous tools need a
builder's confirmation; ``select_execution_pattern`` lets it only restrict. A reply that
does not parse, or a failed call, is logged and ignored: the turn runs as if it were off.
"""

import json
import re

from evennia.utils import logger
from twisted.internet import defer

from .llm_interaction import call_llm
from .prompt_contexts import EXECUTION_MODES
from .prompt_rendering import render_event

ASSESSMENT_PROMPT = """You are about to handle the task below in a game. Do not handle it \
now: only judge how much work it is. Answer with these three lines and nothing else:
iterations: <the number of steps it needs, from 1 to {limit}>
mode: <single_action if one answer does it, else react_loop>
confirm: <yes if a builder should approve any change you make to the world, else no>"""

# A few words are all the answer needs: a cap keeps a small model from rambling on.
ASSESSMENT_MAX_TOKENS = 60
# How the three fields may be named: the seed's names, and the prompt's short ones.
FIELD_NAMES = {
    "recommended_iterations": ("recommended_iterations", "iterations", "steps"),
    "recommended_mode": ("recommended_mode", "mode"),
    "recommend_confirm_dangerous": ("recommend_confirm_dangerous", "confirm", "confirmation"),
}
YES = {"yes", "true", "y", "1"}
NO = {"no", "false", "n", "0"}
_PAIR = re.compile(r"([a-z_ ]+?)\s*[:=]\s*([^,;\n]+)")
_JSON_OBJECT = re.compile(r"\{.*?\}", re.S)


@defer.inlineCallbacks
def assess_task(script, event, limit):
    """Ask the model to assess ``event`` before its turn.

    Args:
        script (AssistantScript): The assistant.
        event (dict): The pending event.
        limit (int): The most iterations the turn may have (said in the prompt; a larger
            recommendation would change nothing anyway).

    Returns:
        Deferred: Fires with the layer-3 dict (``recommended_iterations``,
        ``recommended_mode``, ``recommend_confirm_dangerous``, as far as the reply gave
        them), or None when the call failed or its reply did not parse (logged).
    """
    messages = [
        {"role": "system", "content": ASSESSMENT_PROMPT.format(limit=limit)},
        {"role": "user", "content": f"The task: {render_event(event)}"},
    ]
    answer = yield call_llm(script, messages, purpose="task", max_tokens=ASSESSMENT_MAX_TOKENS)
    if not answer.ok:
        logger.log_warn(
            f"AI {script.label}: task assessment ignored, the call failed: {answer.error}"
        )
        return None
    assessment = parse_assessment(answer.content)
    if assessment is None:
        logger.log_warn(
            f"AI {script.label}: task assessment ignored, its reply did not parse: "
            f"{(answer.content or '')[:120]!r}"
        )
    return assessment


def parse_assessment(text):
    """Read an assessment from a model's reply: a JSON object, or ``name: value`` pairs on
    lines or separated by commas (``iterations: 3, mode: react_loop, confirm: yes``).

    Returns:
        dict or None: The fields that parsed; None when none did. A value that does not
        parse (``iterations: many``, ``mode: plan_execute``) is left out.
    """
    raw = _json_fields(text or "") or _pairs(text or "")
    assessment = {}
    for name, value in raw.items():
        field = _field(name)
        parsed = _READERS[field](value) if field else None
        if parsed is not None:
            assessment.setdefault(field, parsed)
    return assessment or None


def _json_fields(text):
    for candidate in _JSON_OBJECT.findall(text):
        try:
            found = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(found, dict):
            return {str(key): value for key, value in found.items()}
    return {}


def _pairs(text):
    return {name: value for name, value in _PAIR.findall(text.lower())}


def _field(name):
    name = re.sub(r"[\s-]+", "_", str(name).strip().lower())
    return next((field for field, names in FIELD_NAMES.items() if name in names), None)


def _iterations(value):
    if isinstance(value, bool):
        return None
    found = re.match(r"\s*(\d+)\b", str(value))
    number = int(found.group(1)) if found else 0
    return number if number >= 1 else None


def _first_words(value):
    """Return the words a value opens with, lower case: ``react loop (a few steps)`` ->
    ``react_loop``."""
    found = re.match(r"[\s\"'`]*([a-z0-9]+(?:[_ -][a-z]+)?)", str(value).lower())
    return re.sub(r"[ -]", "_", found.group(1)) if found else ""


def _mode(value):
    mode = _first_words(value)
    return mode if mode in EXECUTION_MODES else None


def _confirm(value):
    if isinstance(value, bool):
        return value
    word = _first_words(value).split("_")[0]
    return True if word in YES else False if word in NO else None


_READERS = {
    "recommended_iterations": _iterations,
    "recommended_mode": _mode,
    "recommend_confirm_dangerous": _confirm,
}
