"""How the offline engine reads lines: events, statements of fact, and commitments.

An event line is the contrib's own format, ``<speaker> says, "<words>"``, the words one
JSON-quoted unit (see ``ai.prompt_rendering.render_event``); anything else has no speaker.
"""

import re

from ..utils.message_format import read_event, unquoted
from .text_tools import is_question, keywords, sentences, words

_GREETINGS = {"hello", "hi", "hey", "greetings", "morning", "evening"}
_WEIGHTY = {"promise", "promised", "password", "owe", "owes", "secret", "deadline", "must", "never"}
_COMMITTING = {"promise", "promised", "i'll", "will", "agree", "agreed", "deal", "owe", "shall"}
# The replies the responder makes: acknowledgements and recollections, never commitments.
_STOCK_REPLY = re.compile(
    r"^(Understood, .+?\. I'll (?:keep that in mind|remember that)|(You|.+?) told me:"
    r"|From what I recall:"
    r"|I don't know that yet|Hello, )"
)


def request_text(messages, header):
    """Return the user message that opens with ``header`` (a task's marker), or None."""
    return next(
        (
            m["content"]
            for m in messages
            if m.get("role") == "user" and (m.get("content") or "").startswith(header)
        ),
        None,
    )


# What ``render_event`` writes for events without words: an arrival, an object given.
_ARRIVAL = re.compile(r"^(?P<speaker>.+?) arrives\.$")
_GIFT = re.compile(r"^(?P<speaker>.+?) gives you (?P<item>\".*\")\.$")


def parse_happening(content):
    """Split an arrival or gift line into ``(speaker, kind, item)``; None if it is neither."""
    content = (content or "").strip()
    arrival = _ARRIVAL.match(content)
    if arrival:
        return arrival["speaker"], "arrival", None
    gift = _GIFT.match(content)
    if gift:
        return gift["speaker"], "given", unquoted(gift["item"])
    return None


def parse_event(content):
    """Split an event line into ``(speaker, words)``; the speaker is None if it is none."""
    speaker, _, text = read_event(content)
    return speaker, text


def is_commitment(text):
    """Tell whether the assistant's own line commits it to something (not a stock reply)."""
    if _STOCK_REPLY.match(text or ""):
        return False
    return bool(_COMMITTING & set(words(text))) and is_fact(text)


def greets(text):
    """Tell whether a sentence opens with a greeting ("Hello Helper!")."""
    return bool(set(words(text)[:2]) & _GREETINGS)


def statement(text):
    """Return ``text`` without the greetings that open it ("Hello Helper! I buried...")."""
    parts = sentences(text)
    while len(parts) > 1 and greets(parts[0]) and len(words(parts[0])) <= 3:
        parts.pop(0)
    return " ".join(parts)


def is_weighty(text):
    """Tell whether a line binds or matters: a promise, a secret, a debt or a number."""
    said = words(text)
    return bool(_WEIGHTY & set(said)) or any(word.isdigit() for word in said)


def is_fact(text):
    """Tell whether a line states something worth journaling (not a question or a greeting)."""
    said = statement(text)
    if is_question(said) or greets(said):
        return False
    return len(keywords(said)) >= 3
