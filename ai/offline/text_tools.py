"""Small text helpers of the offline engine: words, keywords and sentence splitting."""

import re

STOPWORDS = frozenset(
    """a about above after again all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is
    it its itself just me more most my myself no nor not now of off on once only or other our
    ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves tell know remember said say says asked ask please thanks thank hello hi hey
    again anything something ok okay yes oh well also still going get got let""".split()
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'_-]*")
# Words that open a question even without its question mark ("Do you know the way").
_QUESTION_WORDS = frozenset(
    """what where who when how which why do does did can could would will is are was were
    have has should shall may might""".split()
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\s*\n\s*")


def words(text):
    """Return the lower-cased words of ``text``."""
    return [word.lower().strip("'") for word in _WORD.findall(text or "")]


def keywords(text):
    """Return the set of content words of ``text`` (stopwords and short words removed)."""
    return {word for word in words(text) if word not in STOPWORDS and len(word) > 1}


def sentences(text):
    """Split ``text`` into trimmed, non-empty sentences."""
    return [part.strip() for part in _SENTENCE_END.split(text or "") if part.strip()]


def is_question(text):
    """Tell whether ``text`` reads as a question."""
    stripped = (text or "").strip()
    if stripped.endswith("?"):
        return True
    first = words(stripped)[:1]
    return bool(first) and first[0] in _QUESTION_WORDS
