"""Telling whether a reply only announces a tool use instead of making it or answering.

Small models offered tools they do not call well say what they would do ("I will add the
<thing> to my journal.", "Let me check my notes.") and stop there; said to the room, that
is no answer. A sentence announces when the speaker, in the first person, is about to do
(``I will``, ``I'll``, ``I'm going to``, ``let me``...) something a tool does: note,
record, remember, journal, look, check, search, or add, write, save something to a journal,
notes or memory; so does one telling anyone to use a tool it names in code ("You can use
the "<tool_name>" tool"). A reply that also says something else (an answer, a fact, a
number) is an answer: only replies whose sentences are announcements and acknowledgements
count; said, it loses its announcements (no call was made).

A leaf module: the standard library and the sentence splitter only.
"""

import re

from .sentences import QUOTED, sentences

_WORD = re.compile(r"[\w']+")

_INTENT = (
    r"(?:\bI\s*(?:will|'ll|’ll|shall|am\s+going\s+to|'m\s+going\s+to|am\s+gonna|'m\s+gonna|"
    r"am\s+about\s+to|'m\s+about\s+to|would\s+like\s+to|'d\s+like\s+to|want\s+to|need\s+to|"
    r"must|should)|\blet(?:'s|\s+me|\s+us)|\ballow\s+me\s+to)"
)
# Words that may stand between the intention and its verb ("I will now quickly note...").
_FILLER = (
    r"(?:\s+(?:now|just|also|then|first|quickly|right\s+away|immediately|go\s+ahead\s+and|"
    r"make\s+sure\s+to|be\s+sure\s+to|definitely|certainly|gladly|happily|try\s+to|go|and))*"
)
# Verbs that are a tool's work by themselves.
_TOOL_VERB = (
    r"(?:note|jot|journal|record|log|memori[sz]e|remember|"
    r"look\s+(?:at|up|in|into|around|for|through)|"
    r"look(?!\s+(?:forward|after|like|good|great|well))|"
    r"check|search|examine|inspect|consult|browse|review|pin|"
    r"make\s+(?:a\s+)?note|take\s+(?:a\s+)?note|write\s+(?:\w+\s+){0,4}?down|"
    r"keep\s+(?:\w+\s+){0,3}?(?:in\s+mind|on\s+record|track))\b"
)
# Verbs that are a tool's work when they put something in a journal, notes or memory.
_STORE_VERB = r"(?:add|put|write|save|store|enter|file|keep|place|include|update)"
_STORE_PLACE = r"(?:journal|notes?|notebook|memory|memories|records?|log|diary|list|context)"
# What it is kept as ("... as a journal entry").
_STORE_FORM = r"(?:journal\s+)?(?:entry|note|record|memory)"
# Naming a tool or a function to call ("I'll use the add_journal_entry tool").
_TOOL_NAMED = r"(?:use|call|run|invoke)\s+(?:\w+\s+){0,3}?(?:tool|function|\w+_\w+)"
# Telling anyone, themselves included, to use a tool named in code ("You can use the
# "recall_memories" tool to ..."): the model reading its instructions aloud; no player has
# tools, so it is never an answer.
_TOOL_ADVICE = re.compile(
    r"\b(?:(?:you|we|i|one)\s+(?:\w+\s+){0,2}?)?(?:use|call|run|invoke)\s+(?:the\s+|my\s+|"
    r"your\s+)?(?:[\"“'`]\w+_\w+[\"”'`]|\w+_\w+\s+(?:tool|function)\b)",
    re.I,
)

# Saying it was done ("I have added a journal entry with ...", "I've noted that.", "I have
# already used the tool."): true only of a turn that made the call.
_CLAIMS = re.compile(
    rf"\bI\s*(?:(?:have|'ve|had|'d|just|already)\s*)*(?:noted|jotted|journal(?:l)?ed|"
    rf"recorded|logged|memori[sz]ed|pinned|(?:added|put|written|wrote|saved|stored|entered|"
    rf"filed|kept|placed|included)\b[^.!?]{{0,120}}?\b(?:to|in|into|on|onto)\s+"
    rf"(?:my|the|our|your)\s+(?:\w+\s+)?{_STORE_PLACE}|(?:added|made|created|written|wrote|"
    rf"saved|stored)\s+(?:a|an|the)\s+(?:new\s+)?{_STORE_FORM}|(?:used|called|ran|run|"
    rf"invoked)\s+(?:the|a|that|this|my)\s+(?:\w+\s+)?(?:tool|function))\b",
    re.I,
)

_ANNOUNCES = re.compile(
    rf"{_INTENT}{_FILLER}\s+(?:{_TOOL_VERB}|{_TOOL_NAMED}|"
    rf"{_STORE_VERB}\b[^.!?]{{0,120}}?\b(?:(?:to|in|into|on|onto)\s+(?:my|the|our|your)\s+"
    rf"(?:\w+\s+)?{_STORE_PLACE}|as\s+an?\s+{_STORE_FORM})\b)",
    re.I,
)
# Words of a sentence that only acknowledges ("Sure!", "Understood, <name>.", "Got it.").
_ACKNOWLEDGING = frozenset(
    """sure okay ok alright all right understood got it noted of course certainly thanks
    thank you great good sounds yes yeah absolutely gladly will do no problem hello hi hey
    there welcome nice fine perfect excellent wonderful indeed right away i see understand
    ah oh""".split()
)


# What makes an announcement a promise for later ("If you tell me, I'll note it.").
_CONDITION = re.compile(r"\b(?:if|when|whenever|once|tell\s+me)\b", re.I)
# What joins a sentence's opening to an announcement that follows it.
_LEAD_OUT = re.compile(r"(?:[\s,;:!.-]|\b(?:and|so|but|then)\b)*$", re.I)


def announcement(sentence, claims=True):
    """Return where ``sentence`` starts to announce a tool use in the first person, or None.

    With ``claims`` (a turn that made no call), saying it was done ("I have added ... to my
    journal") announces too. Quoted text is never read as the announcement (it may quote
    anyone).
    """
    blanked = QUOTED.sub(lambda match: '"' + "_" * (len(match.group(0)) - 2) + '"', sentence)
    found = (
        _ANNOUNCES.search(blanked)
        or _TOOL_ADVICE.search(sentence)
        or (claims and _CLAIMS.search(blanked))
    )
    return found.start() if found else None


def acknowledges(sentence):
    """Tell whether ``sentence`` only acknowledges: stock words and at most one name."""
    if QUOTED.search(sentence) or re.search(r"\d", sentence) or sentence.endswith("?"):
        return False
    words = _WORD.findall(sentence)
    others = [word for word in words if word.lower() not in _ACKNOWLEDGING]
    return len(others) <= 1 and all(word[:1].isupper() for word in others)


def without_announcements(text, claims=True):
    """Return ``text`` without its announcements of a tool use, what comes before one in its
    sentence kept ("It is 12, Char, and I'll note it." -> "It is 12, Char."): said with
    no call made, an announcement claims a deed not done. ``text`` itself when it
    announces nothing."""
    kept, cut = [], False
    for sentence in sentences(text):
        start = announcement(sentence, claims)
        before = "" if start is None else _LEAD_OUT.sub("", sentence[:start])
        if start is None or _CONDITION.search(before):
            kept.append(sentence)  # a promise for later, no claim: "Tell me and I'll note it."
            continue
        cut = True
        if before:
            kept.append(before if before[-1] in ".!?" else f"{before}.")
    return " ".join(kept) if cut else text


def only_announces(text, claims=True):
    """Tell whether ``text`` announces a tool use and says nothing else worth hearing.

    An answer that also says it will note something ("It is 12. I'll note that.") is an
    answer; so is an announcement of something no tool does ("I will meet you at the gate.").
    """
    said, announced = [], False
    for sentence in sentences(text):
        start = announcement(sentence, claims)
        if start is None:
            said.append(sentence)
            continue
        announced = True
        # What comes before the announcement in its sentence ("It is 12, and I'll note it.").
        before = _LEAD_OUT.sub("", sentence[:start])
        if before:
            said.append(before)
    return announced and all(acknowledges(sentence) for sentence in said)
