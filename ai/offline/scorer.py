"""The offline engine's importance ratings of journal entries (see ``ai.importance_scoring``).

The request lists one entry a line, ``- <id>: "<content>"``. Each is rated by what it
states: a weighty fact (a promise, a secret, a debt, a number) 8, another fact 5, small
talk 2. The answer is the JSON object the request asks for.
"""

import json
import re

from ..utils.markers import SCORING_HEADER
from ..utils.message_format import unquoted
from .reading import is_fact, is_weighty, request_text

_ENTRY_LINE = re.compile(r"^- (?P<id>\S+): (?P<content>\".*\")$")


def is_scoring_request(messages):
    """Tell whether the chat asks to rate journal entries."""
    return request_text(messages, SCORING_HEADER) is not None


def rate(content):
    """Return the engine's rating of one entry, 1-10."""
    if is_weighty(content):
        return 8
    return 5 if is_fact(content) else 2


def rate_entries(messages):
    """Return the ratings of the listed entries as a JSON object ``{id: rating}``."""
    ratings = {}
    for line in request_text(messages, SCORING_HEADER).splitlines()[1:]:
        match = _ENTRY_LINE.match(line)
        content = unquoted(match["content"]) if match else None
        if content is not None:
            ratings[match["id"]] = rate(content)
    return json.dumps(ratings)
