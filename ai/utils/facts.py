"""Telling when a newer fact replaces an older one, from their words alone.

A fact reads as a subject, a relation and a value: "the gate password | is | swordfish",
"Dana | owes | Bob five coins", "Dana | lives | in Oakvale". A newer fact replaces an older
one when both speak of the same subject through the same kind of relation and say
something else of it: "the gate password is now marmalade", "Dana paid Bob back", "Dana
moved to Rivertown". Who told it ("Dana told me that ...") and words of change ("now",
"new") are not part of the subject or the value.
"""

import re
from functools import lru_cache

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
    r"claimed)(?:\s+(?:me|us|them|him|her))?[:,]?(?:\s+that)?\s+|^according to [^,]+,\s*",
    re.IGNORECASE,
)
# A short lead-in before a colon says how a fact is told, not what it is ("Correction:",
# "Things have changed:", "Remember this:").
# What follows it is a fact of three words or more ("The code is: <word>" keeps its colon).
_LEAD_IN = re.compile(r"^\s*(?:[\w']+\s+){0,3}[\w']+:\s+(?=(?:\S+\s+){2}\S)")
# Who a fact is credited to, when it says so ("Dana says, ...", "Dana told me that ...").
_TELLER = re.compile(
    r"^\W*(?P<who>[A-Z][\w'-]*)\s+(?:told|tells|said|says|whispered|whispers|mentioned|"
    r"explained|claims|claimed)\b"
)
# Words by which a speaker tells of themself: "my falcon" of two speakers is two falcons.
_FIRST_PERSON = {"i", "i'm", "i've", "i'd", "i'll", "my", "me", "mine", "myself"}
# A word: letters and digits, joined by inner apostrophes ("don't"); a quotation mark around
# words ("'my") is not part of them.
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")
# Quotation marks around a fact as it was told.
_QUOTES = "\"'“”‘’"
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


# Words that say a fact is new: with them, any shared verb can carry a change.
CHANGE_WORDS = {
    "now",
    "longer",
    "anymore",
    "instead",
    "new",
    "changed",
    "moved",
    "paid",
    "repaid",
    "became",
    "correction",
    "corrected",
    "update",
    "updated",
}
# Words that open an exclamation, not a statement of fact.
_EXCLAIMING = {"what", "how", "such"}
# A value longer than this is a remark, not a fact's value ("harder than a cobblestone").
MAX_VALUE_WORDS = 3
# Relations that hold one value at a time: someone lives in one place, owes one debt.
SINGLE_VALUED = {"place", "work", "debt"}


def without_attribution(text):
    """Return a fact as it was told, who told it and how left out ("Dana told me that ...",
    "Correction: ...", both and the quotes around the words: "Dana says, 'Correction: ...'")."""
    told = (text or "").strip()
    for _ in range(2):  # a lead-in may come before or after who told it
        told = _ATTRIBUTION.sub("", _LEAD_IN.sub("", told)).strip()
        if told[:1] in _QUOTES:
            told = told.strip(_QUOTES).strip()
    return told


def plain_words(text):
    """Return the words of ``text``, lower case, possessives as the owner."""
    return [word.removesuffix("'s") for word in _WORD.findall((text or "").lower())]


def fact_words(text):
    """Return a fact's words, lower case, who told it left out, possessives as the owner."""
    return plain_words(without_attribution(text))


def telling_words(words):
    """Return the words that tell what a fact is about: words of change and filler left out."""
    return [word for word in words if word not in _FILLER]


def split_at(words, index):
    """Return ``(subject, value)``: the telling words before and after ``words[index]``."""
    return set(telling_words(words[:index])), set(telling_words(words[index + 1 :]))


def parse_fact(words):
    """Return ``(subject, relation kind, value)`` at the first known relation, or None."""
    for index, word in enumerate(words):
        kind = RELATION_KINDS.get(word)
        if kind and index:
            subject, value = split_at(words, index)
            return subject, kind, value
    return None


@lru_cache(maxsize=16384)
def fact_shape(text):
    """Return ``(relation kind or None, whether it says it changed, subject words, value
    words)`` of the fact ``text`` (the words as frozensets, empty without a relation).

    A fact replaces another (:func:`replaced_value`) only when it says it changed, or when
    both relate the same subject (one's words held in the other's) by the same kind to
    another value: comparing shapes first spares the full comparison of most pairs.
    """
    parsed = parse_fact(fact_words(text))
    changed = bool(CHANGE_WORDS & set(plain_words(text)))
    if not parsed:
        return None, changed, frozenset(), frozenset()
    subject, kind, value = parsed
    return kind, changed, frozenset(subject), frozenset(value)


class LaterStatements:
    """``(speaker, sentence)`` statements made after some point, filed by their shape
    (:func:`fact_shape`), so that an earlier statement is compared only with those that
    could replace it: those that say they changed, and those of the same relation whose
    subject holds its subject or is held in it, with another value. Comparing every pair
    made a compaction of 1,000 messages take two seconds (the quality gate's statements).

    A subject is found among those holding another through the postings of each of its
    words, and among those held in another under the one word it was filed by: the word
    of it that the fewest subjects of its relation had then, so that the subjects read
    for a long subject are few even when all of them share some words.

    Args:
        compare (callable, optional): ``compare(newer, older)`` of two statements, by
            default :func:`statement_replaces`.
    """

    def __init__(self, compare=None):
        self.changed = []
        self.facts = {}  # kind -> subject words -> value words -> statements
        self.subjects_with = {}  # (kind, word) -> the subjects holding the word
        self.filed_by = {}  # (kind, word) -> the subjects filed by that word of theirs
        self.compare = compare or statement_replaces

    def add(self, statements):
        """File ``statements`` among the later ones."""
        for statement in statements:
            kind, changed, subject, value = fact_shape(statement[1])
            if changed:
                self.changed.append(statement)
            elif kind:
                by_subject = self.facts.setdefault(kind, {})
                if subject not in by_subject:
                    self._file(kind, subject)
                by_subject.setdefault(subject, {}).setdefault(value, []).append(statement)

    def replace(self, statement):
        """Tell whether one of these statements replaces ``statement``."""
        kind, _, subject, value = fact_shape(statement[1])
        candidates = list(self.changed)
        by_subject = self.facts.get(kind, {}) if kind else {}
        for other in self._nested(kind, subject, by_subject):
            for other_value, said in by_subject[other].items():
                if other_value != value:
                    candidates += said
        return any(self.compare(newer, statement) for newer in candidates)

    def _file(self, kind, subject):
        """File a new ``subject`` of relation ``kind`` under each of its words' postings,
        and under its rarest word for the subjects held in another."""
        if subject:
            rarest = min(
                subject, key=lambda word: (len(self.subjects_with.get((kind, word), ())), word)
            )
            self.filed_by.setdefault((kind, rarest), []).append(subject)
        for word in subject:
            self.subjects_with.setdefault((kind, word), set()).add(subject)

    def _nested(self, kind, subject, by_subject):
        """Return the subjects filed under ``kind`` that hold ``subject`` or are held in it
        (the empty subject only when ``subject`` is empty)."""
        if not subject:
            return {subject} if subject in by_subject else set()
        postings = sorted((self.subjects_with.get((kind, w), set()) for w in subject), key=len)
        holding = set(postings[0]).intersection(*postings[1:])
        held = {
            other
            for word in subject
            for other in self.filed_by.get((kind, word), ())
            if other <= subject
        }
        return holding | held


def statement_replaces(newer, older):
    """Tell whether the statement ``newer`` replaces ``older``, each ``(speaker,
    sentence)`` (:func:`replaces`, told by its speakers)."""
    (new_speaker, new_sentence), (old_speaker, old_sentence) = newer, older
    return replaces(new_sentence, old_sentence, (new_speaker, old_speaker))


def replaces(newer, older, tellers=(None, None)):
    """Return True when the fact ``newer`` supersedes the fact ``older``.

    Both must relate the same subject (one's subject words held whole in the other's, or
    both empty, as in "She moved" of an entity's own profile) through the same kind of
    relation, to a different value. The relation is a known verb ("is", "lives",
    "owes"...) or, when the newer fact says it changed ("now", "instead"...), the words
    both begin with ("The ferry now leaves at dusk" after "The ferry leaves at noon"). A
    relation that can hold several values at once ("Bob is tall", "Bob is a smith") needs
    that word of change, unless its subject is a specific attribute of two words or more
    ("the gate password"). Facts told by two people in the first person ("my falcon is
    called ...") are about two subjects, and never replace each other.

    Args:
        newer (str): The later fact.
        older (str): The earlier fact.
        tellers (tuple): Who told ``newer`` and ``older``, when the texts do not say it
            ("<name> says, ...").
    """
    return replaced_value(newer, older, tellers) is not None


def replaced_value(newer, older, tellers=(None, None)):
    """Return the telling words of the value ``newer`` gives in place of ``older``'s ("the
    gate password is now marmalade" after "the gate password is swordfish": {"marmalade"}),
    or None when ``newer`` does not supersede ``older`` (see :func:`replaces`)."""
    if _told_by_two_of_themselves(newer, older, tellers):
        return None
    new_words, old_words = fact_words(newer), fact_words(older)
    changed = bool(CHANGE_WORDS & set(plain_words(newer)))
    new, old = parse_fact(new_words), parse_fact(old_words)
    if not (new and old and new[1] == old[1]) and changed:
        new, old = _shared_pivot(new_words, old_words)
    if not (new and old and new[1] == old[1]):
        return None
    (new_subject, kind, new_value), (old_subject, _, old_value) = new, old
    small, large = sorted((new_subject, old_subject), key=len)
    if (small or large) and not (small and small <= large):
        return None
    specific = kind in SINGLE_VALUED or len(large) >= 2
    return new_value if new_value != old_value and (changed or specific) else None


def teller(text):
    """Return who ``text`` credits a fact to ("Dana says, ..." -> "dana"), or None."""
    match = _TELLER.match(text or "")
    return match["who"].lower() if match else None


def _told_by_two_of_themselves(newer, older, tellers):
    """Tell whether two different people told ``newer`` and ``older``, one of them in the
    first person."""
    new_teller, old_teller = (
        (told or teller(text) or "").lower() for told, text in zip(tellers, (newer, older))
    )
    if not (new_teller and old_teller) or new_teller == old_teller:
        return False
    return bool(_FIRST_PERSON & set(fact_words(newer) + fact_words(older)))


def relates_specific_subject(text):
    """Return whether ``text`` relates a subject of two telling words or more to a short
    value (three telling words at most) through a known relation ("the password for the
    loft is <word>"): a fact even when no word of it is a name or a number. An exclamation
    ("What a fine evening it is") is none."""
    words = fact_words(text)
    fact = parse_fact(words)
    if not fact or words[0] in _EXCLAIMING:
        return False
    subject, _, value = fact
    return len(subject) >= 2 and 1 <= len(value) <= MAX_VALUE_WORDS


def _shared_pivot(new_words, old_words):
    """Split both facts after the telling words they begin with alike (a subject and a
    verb: two words at least); ``(None, None)`` when they share fewer."""
    new_telling, old_telling = telling_words(new_words), telling_words(old_words)
    shared = 0
    for new_word, old_word in zip(new_telling, old_telling):
        if new_word != old_word:
            break
        shared += 1
    if shared < 2:
        return None, None
    subject, verb = set(new_telling[: shared - 1]), new_telling[shared - 1]
    return (
        (subject, verb, set(new_telling[shared:])),
        (subject, verb, set(old_telling[shared:])),
    )
