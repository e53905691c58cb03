"""Telling whether a reply only repeats the line it answers, or an earlier reply of its own.

Small models do both: they restate the player's line, and once a stock reply is in their
history they give it to every later message ("I'm glad you're doing well, Bob!"), or the
same sentence around a new noun each time.
"""

import re
from difflib import SequenceMatcher

from .grounding import key_terms

_WORD = re.compile(r"\w+")
# A line this short ("Hello there!") may well be answered with the same words.
MIN_WORDS = 4
# An echo holds this share of the line's words at least...
COVERED = 0.7
# ...and adds this share of new words at most ("Bob runs the forge by the north gate."
# for "I run the forge by the north gate.").
NEW_AT_MOST = 0.3


def is_echo(reply, line):
    """Tell whether ``reply`` only repeats ``line``, the line it answers.

    An answer to a question holds most of the question's words ("The password for the
    cellar door is swordfish."), so for a question only the question asked back counts.
    """
    said = {_stem(word) for word in _WORD.findall((line or "").lower())}
    got = {_stem(word) for word in _WORD.findall((reply or "").lower())}
    if len(said) < MIN_WORDS or not got:
        return False
    covered = len(said & got) / len(said)
    if (line or "").strip().endswith("?"):
        # Asked back, reworded: "Ilse, can you remind me what the weaver in <place>
        # charges for a bolt of cloth?" (Qwen2.5-Coder-1.5B) holds 0.71 of the question.
        return (reply or "").strip().endswith("?") and covered >= COVERED
    return covered >= COVERED and len(got - said) / len(got) <= NEW_AT_MOST


def _stem(word):
    """Return ``word`` without a plural or third-person "s" ("charges": "charge")."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


# A reply sharing this share of its words with an earlier one (a name aside) is a repeat...
SAME_AS_BEFORE = 0.8
# ...and so is one whose runs of two words or more, in order, shared with an earlier reply
# make this share of both: a template said again around new nouns ("I will add the
# <thing> to my journal." shares 0.7 of its words in order with each other filling).
SAME_FRAME = 0.6
# ...when it is this long at least: a short stock reply ("Understood, Bob.") may recur.
MIN_REPEAT_WORDS = 8
# Quoted text and numbers: the values a reply states.
_VALUE = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”|\d+(?:[.,:]\d+)*")


def repeats_itself(reply, earlier):
    """Tell whether ``reply`` says again what one of the ``earlier`` replies said.

    A reply that states a value (a number, a quotation) that the earlier one did not is
    never its repeat: the same frame may carry a new answer ("It costs <n> copper").
    """
    words = _WORD.findall((reply or "").lower())
    if len(set(words)) < MIN_REPEAT_WORDS:
        return False
    values = set(_VALUE.findall(reply or ""))
    for before in earlier:
        if values - set(_VALUE.findall(before or "")):
            continue
        seen = _WORD.findall((before or "").lower())
        if seen and (_shared_words(words, seen) >= SAME_AS_BEFORE or _frame(words, seen)):
            return True
    return False


def _shared_words(words, seen):
    got, seen = set(words), set(seen)
    return len(got & seen) / len(got | seen)


def _frame(words, seen):
    """Tell whether ``words`` and ``seen`` share a frame: runs of words, in order, that make
    ``SAME_FRAME`` of both at least (single words in common do not count)."""
    matcher = SequenceMatcher(None, words, seen, autojunk=False)
    shared = sum(block.size for block in matcher.get_matching_blocks() if block.size >= 2)
    return 2 * shared / (len(words) + len(seen)) >= SAME_FRAME


# A reply saying it does not know: honest to any question, however often it is said.
_NOT_KNOWING = re.compile(
    r"\b(?:don't|do not|doesn't|does not|didn't|did not)\s+(?:yet\s+)?know\b|\bnot sure\b|"
    r"\bno idea\b|\b(?:can't|cannot) say\b|\b(?:haven't|have not) (?:been told|heard)\b",
    re.IGNORECASE,
)


# A question asking for something ("what", "where") rather than for a yes or a no.
_ASKS_FOR = re.compile(r"\b(?:what|who|whom|whose|where|when|which|why|how)\b", re.IGNORECASE)


def off_topic_repeat(reply, earlier, line, names=()):
    """Tell whether ``reply`` says one of the ``earlier`` replies word for word and shares
    no telling word with ``line``, the question it answers: the stock reply a stuck model
    gives to every line, questions too ("You can thank <name> for sharing this.", "I
    remember that."). The same answer to the same question shares the question's words;
    ``names`` (the assistant's, the speaker's) count for neither. A statement may get the
    same acknowledgement each time ("Understood, <name>. I'll remember that."), any question
    the same "I don't know that yet", and a question of yes or no the same short "Yes, it
    is." (the word floor holds for those only).
    """
    words = _WORD.findall((reply or "").lower())
    if "?" not in (line or "") or not words or _NOT_KNOWING.search(reply or ""):
        return False
    if len(words) < MIN_WORDS and not _ASKS_FOR.search(line):
        return False
    if not any(_WORD.findall((before or "").lower()) == words for before in earlier):
        return False
    ignored = {name.lower() for name in names if name}
    return not (_terms(reply) & _terms(line)) - ignored


def _terms(text):
    exact, telling = key_terms(text or "")
    return exact | telling
