"""Reading a list of sub-goals out of a model's reply, however it wrote it.

A small model answers "break this goal down" in many shapes: numbered or bulleted lines
(with a sentence before them), a JSON list of strings or of objects, a JSON object holding
such a list, a fenced code block around any of those, or plain prose ("First ..., then
..."). Each shape is tried in turn; what a real model writes must not be lost.

A leaf module: standard library and ``ai.utils`` only.
"""

import json
import re

from .sentences import sentences

# "1. ", "1) ", "(1) ", "#1. ", "#1 ", "2.1. ", "#21.1 ", "Step 1: ", "Sub-goal 1 - ", a
# number also after a bullet ("- #2. " under a "#1. " line, "- #21.1 " under goal #21, as
# Qwen2.5-Coder-1.5B wrote them); "- ", "* ", "+ ", "• ".
_NUMBERED = re.compile(
    r"^\s*(?:(?:[-*+\u2022]\s*)?(?:#\d{1,3}(?:\.\d{1,3})+[.):]?|\(?#?\d{1,3}(?:\.\d{1,3})*[.):]"
    r"|#\d{1,3}\b)"
    r"|(?:step|sub-?goal|goal|task)\s*#?\d{1,3}\s*[.):\-]?)\s*(?=\S)",
    re.I,
)
_BULLETED = re.compile(r"^\s*[-*+\u2022]\s+(?=\S)")
# A goal number opening an item, the goal's own or one made up ("- #16a Tell Bram").
_GOAL_NUMBER = re.compile(r"^#\d{1,4}(?:\.\d{1,3})*[a-z]?[.):]?\s+(?=\S)")
# A few words before a colon that open a sentence of prose: not a step.
_LEAD_IN = re.compile(r"^[^:.!?]{0,40}:\s*")
_FENCE = re.compile(r"```[a-zA-Z]*\n?(.*?)```", re.S)
# Keys under which a JSON object holds the list, or an item its text.
_LIST_KEYS = ("sub_goals", "subgoals", "sub-goals", "goals", "steps", "tasks", "items", "list")
_TEXT_KEYS = ("goal", "sub_goal", "subgoal", "text", "description", "step", "task", "title", "name")
# Words that open a step in prose ("First, ...", "Then ...") and say nothing of it. In a
# list they are left out only before a comma or colon: "1. First step" keeps its words.
_SEQUENCE = (
    r"^(?:first(?:ly)?|second(?:ly)?|third(?:ly)?|then|next|after that|afterwards|finally|"
    r"lastly|and then|and)\b"
)
_SEQUENCE_WORDS = re.compile(_SEQUENCE + r"[,:]?\s*", re.I)
_PUNCTUATED_SEQUENCE_WORDS = re.compile(_SEQUENCE + r"[,:]\s*", re.I)


def sub_goal_items(reply):
    """Return the sub-goals ``reply`` lists, in order, each on one line.

    Args:
        reply (str): The model's answer.

    Returns:
        list: The items' texts (markdown emphasis, list marks and sequence words removed,
        repeats left out); [] when nothing could be read.
    """
    text = (reply or "").strip()
    fenced = _FENCE.search(text)
    candidates = [fenced.group(1), text] if fenced else [text]
    for candidate in candidates:
        items = _json_items(candidate)
        if items is not None:
            return _cleaned(items)
    items = _listed_lines(text)
    if items:
        return _cleaned(items, _PUNCTUATED_SEQUENCE_WORDS)
    return _cleaned(_prose_steps(text))


def usable_sub_goals(reply, least=2, most=6, max_chars=None):
    """Return ``(items, why)``: the sub-goals of ``reply`` when there are ``least`` to
    ``most`` of them, else ``([], why)`` saying why the reply is unusable.

    A list of up to twice ``most`` items gives its first ``most`` (Qwen2.5-Coder-1.5B listed
    seven steps, the last a farewell; the assistant adds a step when those are done); a
    longer one is no plan. An item longer than ``max_chars`` is left out (it is no short,
    concrete step).
    """
    items = sub_goal_items(reply)
    if len(items) > 2 * most:
        return [], f"{len(items)} sub-goals, more than {2 * most}"
    if max_chars is not None:
        items = [item for item in items if len(item) <= max_chars]
    items = items[:most]
    if len(items) < least:
        return (
            [],
            f"{len(items)} usable sub-goal{'s' if len(items) != 1 else ''}, fewer than {least}",
        )
    return items, ""


def _json_items(text):
    """Return the items of the first JSON list or object in ``text``, or None."""
    starts = [index for index in (text.find("["), text.find("{")) if index >= 0]
    if not starts:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text[min(starts) :])
    except ValueError:
        return None
    if isinstance(value, dict):
        value = next((value[key] for key in _LIST_KEYS if isinstance(value.get(key), list)), None)
    if not isinstance(value, list):
        return None
    items = []
    for item in value:
        if isinstance(item, dict):
            item = next((item[key] for key in _TEXT_KEYS if isinstance(item.get(key), str)), None)
        if isinstance(item, str):
            items.append(item)
    return items


def _listed_lines(text):
    """Return the texts of the list items of ``text``: its numbered lines when it has any
    (bullets under them are details), else its least indented bullets."""
    lines = text.splitlines()
    numbered = [_NUMBERED.sub("", line) for line in lines if _NUMBERED.match(line)]
    if numbered:
        return numbered
    bulleted = [line for line in lines if _BULLETED.match(line)]
    if not bulleted:
        return []
    margin = min(len(line) - len(line.lstrip()) for line in bulleted)
    return [
        _BULLETED.sub("", line) for line in bulleted if len(line) - len(line.lstrip()) == margin
    ]


def _prose_steps(text):
    """Return the sentences of prose, without a lead-in that ends with a colon ("Here is
    my plan:", "To do this: first, ...")."""
    steps = [_LEAD_IN.sub("", sentence) for sentence in sentences(text)]
    return [step for step in steps if step.strip()]


def _cleaned(items, sequence_words=_SEQUENCE_WORDS):
    cleaned, seen = [], set()
    for item in items:
        item = " ".join(item.replace("**", "").replace("__", "").split())
        item = sequence_words.sub("", _GOAL_NUMBER.sub("", item)).strip(" -:")
        if item and item[0].islower():
            item = item[0].upper() + item[1:]
        if item and item.lower() not in seen:
            seen.add(item.lower())
            cleaned.append(item)
    return cleaned
