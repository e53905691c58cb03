"""Telling when a newer fact replaces an older one, from their words alone.

A fact reads as a subject, a relation and a value: "the gate password | is | swordfish",
"Dana | owes | Bob five coins", "Dana | lives | in Oakvale". A newer fact replaces an older
one when both speak of the same subject through the same kind of relation and say
something else of it: "the gate password is now marmalade", "Dana paid Bob back", "Dana
moved to Rivertown". Who told it ("Dana told me that ...") and words of change ("now",
"new") are not part of the subject or the value.
"""

import re

# Relations of one kind: a later fact through any of them replaces an earlier one.
RELATION_KINDS = {
    "is": "state",
    "are": "state",
    "was": "state",
    "were": "state",
    "became": "state",
    "changed": "state",
    "lives": "place",
    "live": "place",
    "lived": "place",
    "moved": "place",
    "stays": "place",
    "resides": "place",
    "works": "work",
    "worked": "work",
    "owes": "debt",
    "owed": "debt",
    "paid": "debt",
    "repaid": "debt",
    "has": "having",
    "have": "having",
    "had": "having",
    "holds": "having",
    "keeps": "having",
    "lost": "having",
    "likes": "liking",
    "loves": "liking",
    "prefers": "liking",
    "hates": "liking",
    "wants": "wanting",
}
_ATTRIBUTION = re.compile(
    r"^(?:\w+\s+){0,3}?(?:told|tells|said|says|mentioned|whispered|explained|claims|"
    r"claimed)(?:\s+(?:me|us|them|him|her))?(?:\s+that)?\s+|^according to [^,]+,\s*",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9']+")
# Words that say a fact changed, or that tell nothing of what it is about.
_FILLER = {
    "now",
    "new",
    "newly",
    "currently",
    "no",
    "longer",
    "anymore",
    "still",
    "the",
    "a",
    "an",
    "his",
    "her",
    "their",
    "its",
    "my",
    "our",
    "your",
    "he",
    "she",
    "they",
    "it",
    "i",
    "you",
    "we",
    "has",
    "have",
    "been",
    "just",
    "back",
}


def parse_fact(text):
    """Return ``(subject words, relation kind, value words)`` of a fact, or None.

    The relation is the first word of ``RELATION_KINDS`` after the subject; possessives
    count as their owner ("Dana's" is "dana").
    """
    stripped = _ATTRIBUTION.sub("", (text or "").strip())
    words = [word.removesuffix("'s") for word in _WORD.findall(stripped.lower())]
    for index, word in enumerate(words):
        kind = RELATION_KINDS.get(word)
        if kind and index:
            subject = {w for w in words[:index] if w not in _FILLER}
            value = {w for w in words[index + 1 :] if w not in _FILLER}
            return subject, kind, value
    return None


def replaces(newer, older):
    """Return True when the fact ``newer`` supersedes the fact ``older``.

    Same kind of relation, a subject that one of them holds whole in the other (or both
    empty: "She moved" of an entity's own profile), and a different value.
    """
    new, old = parse_fact(newer), parse_fact(older)
    if not new or not old or new[1] != old[1]:
        return False
    (new_subject, _, new_value), (old_subject, _, old_value) = new, old
    if new_subject or old_subject:
        small, large = sorted((new_subject, old_subject), key=len)
        if not small or not small <= large:
            return False
    return new_value != old_value
