"""Whether a text is told by another, from words alone: a fact's names, numbers and telling
words found in a source (a summary, a transcript).

Also what is never a fact: a prompt's placeholder copied out (``<name>``), and a model's
narration of its own work ("I will add ...", "I have noted ...", "Saved the fact that ...").
A leaf module: it imports only ``ai.utils``.
"""

import re

from .facts import plain_words, telling_words, without_attribution
from .message_format import is_summary
from .text_tool_calls import looks_like_markup

# Of a fact's telling words other than names and numbers, the share a summary must keep.
KEPT_WORD_SHARE = 0.5
# ...and the share of them a journal entry must find in the transcript it came from.
GROUNDED_WORD_SHARE = 0.6
# Shorter words ("is", "by", "who") tell little of a fact.
MIN_TELLING_LENGTH = 4
_CAPITALIZED = re.compile(r"\b[A-Z][\w']*")
# A summary's line that tells what the assistant said or did ("- You said ...").
_OWN_LINE = re.compile(r"^\W*(?:you|i)\b", re.IGNORECASE)
# A prompt's placeholder: <name>, <thing>, <what they said>.
PLACEHOLDER = re.compile(r"<[a-z][a-z' ]{0,30}>", re.IGNORECASE)
# The model speaking of its own work: what it will do, has done, or did to its notes.
_NARRATION = re.compile(
    r"^\W*(?:(?:I|we)\s*(?:will|'ll|shall|am|'m|have|'ve|had|'d|would|should|must|can|need|"
    r"just|now|also|then)\b|(?:I|we)\s+(?:added|noted|saved|recorded|stored|journal(?:l)?ed|"
    r"wrote|logged|made|took|put|kept)\b|let\s+(?:me|us)\b|(?:saved|saving|noted|noting|"
    r"recorded|recording|added|adding|stored|storing|journal(?:l)?ed|logged|logging)\b)",
    re.IGNORECASE,
)


def key_terms(fact):
    """Return ``(exact, telling)``: a fact's names and numbers, and its other telling words.

    A name is a capitalized word that is not filler ("The", "She"); a number is a word
    with a digit. Who told the fact ("Dana told me that ...") is not part of it.
    """
    told = without_attribution(fact)
    words = set(telling_words(plain_words(told)))
    names = set(telling_words(plain_words(" ".join(_CAPITALIZED.findall(told)))))
    exact = {word for word in words if word in names or any(c.isdigit() for c in word)}
    telling = {word for word in words - exact if len(word) >= MIN_TELLING_LENGTH}
    return exact, telling


def survives(fact, source_words, share=KEPT_WORD_SHARE):
    """Return whether ``fact`` is still told by a text made of ``source_words``: all its
    names and numbers, and at least ``share`` of its other telling words."""
    exact, telling = key_terms(fact)
    kept = len(telling & source_words)
    return exact <= source_words and kept >= share * len(telling)


def is_narration(text):
    """Return whether ``text`` is the model speaking of its own work, not a fact."""
    return bool(_NARRATION.match(text or ""))


def transcript_words(messages):
    """Return the words that can ground a fact in ``messages``: what players said, tool
    results and the contrib's own messages, never the assistant's replies or calls (a small
    model's replies invent: "<name>'s uncle is called <made-up name>"), nor an earlier
    summary's lines that retell them ("You said ...": a small model journaled its own "I'll
    do my best to give you everything I carry" from one)."""
    words = set()
    for message in messages:
        if message.get("role") == "assistant":
            continue
        content = message.get("content")
        if is_summary(message) and isinstance(content, str):
            content = "\n".join(line for line in content.splitlines() if not _OWN_LINE.match(line))
        words.update(plain_words(content))
    return words


def unfounded(fact, source_words, source="the conversation"):
    """Return why ``fact`` may not be kept from ``source`` (its words ``source_words``), or
    None when it may: it must be no placeholder, no narration, and be told by the source.
    """
    if looks_like_markup(fact or ""):
        return "it is markup or code, not a sentence; write the fact itself in plain words"
    if PLACEHOLDER.search(fact or ""):
        return f"it copies a placeholder of the instructions (<...>), not {source}"
    if is_narration(fact):
        return (
            f"it tells what you do or will do, not a fact of {source}; write the fact "
            "itself, naming who said it"
        )
    exact, telling = key_terms(fact)
    missing = sorted(exact - source_words)
    if missing:
        return f"{source} never mentions {', '.join(missing)}"
    if len(telling & source_words) < GROUNDED_WORD_SHARE * len(telling):
        return f"most of its words are not in {source}; save only what was said there"
    return None
