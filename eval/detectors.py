"""What the evaluation looks for in what the assistant said and kept.

Every detector here is written from the conversation alone and shares no code with the
product's own guards (``ai/``): an evaluation that used the product's checks would share
their blind spots, and could never see them fail.
"""

import re
from dataclasses import dataclass

# Words a summary may write with a capital although no player said them.
ALWAYS_ALLOWED = {"i", "i'm", "i'll", "i've", "i'd", "ok", "okay"}
# A capital after one of these starts a sentence, a list item, a quotation or what follows a
# bracketed label ("[You said] That's ...").
SENTENCE_STARTS = tuple(".!?:\"'([{]-*•>#\n")
# Words that start a sentence of a summary or a journal entry without being a name: a
# capitalized word at a sentence start is a name unless the conversation or this list has it.
COMMON_STARTS = set(
    """a about according after afterwards again all also an and another any anyone as at because before
    both but by during each earlier either every everyone everything facts first for from he
    her here hers him his how however if in instead it its later let many meanwhile more most
    much my neither next no nobody none nor not note notes nothing now of on once one only or
    other others our over player players please previously she since so some someone something
    soon still such summary than thanks that the their them then there these they this those
    though through thus to today together tomorrow too under until up upon us we what whatever
    when where whether which while who whom whose why will with within without yes yesterday
    yet you your you're you've thank thanks sure okay conversation context assistant asked told said says mentioned
    promised reminder remember request requests open pending done tasks task private public
    whispered greeting greetings small talk unknown can could would should may might must do
    does did have has had is are was were be been certainly absolutely indeed actually
    apparently unfortunately fortunately alright understood noted got great good well oh ah
    hello hi hey welcome""".split()
)
# Times and dates a contrib may stamp on its own lines (not facts).
STAMP = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?\b|\b\d{1,2}:\d{2}\b")
CAPITALIZED = re.compile(r"\b[A-Z][a-z]+(?:'[a-z]+)?\b")
NUMBER = re.compile(r"\b\d+\b")
WORD = re.compile(r"[a-z0-9']+")
CREDIT_VERBS = (
    "said", "says", "told", "tells", "mentioned", "mentions", "whispered", "whispers",
    "promised", "promises", "stated", "states", "shared", "shares", "revealed", "reveals",
    "claimed", "claims", "noted", "notes", "explained", "explains", "reported", "reports",
    "added", "adds", "hid", "owes", "owns", "has",
)  # fmt: skip
INTENTION = re.compile(
    r"\b(?:I(?:'ll| will| shall| am going to|'m going to| would like to)|let me)\s+"
    r"(?:\w+\s+){0,2}?"
    r"(?:add|record|write|note|save|store|log|journal|look\s+(?:it\s+)?up|search|check|"
    r"update|recall|call|use|make a note|put)\b",
    re.IGNORECASE,
)
MENTIONS_TOOLING = re.compile(
    r"\b(?:journal|notes?|memory|records?|list|tool|function)\b|add_\w+|\w+_entry", re.IGNORECASE
)
MARKUP = re.compile(
    r"```|<\|?/?[a-z_]+\|?>|\{\s*\"(?:name|arguments|tool|function)\"|\"arguments\"\s*:"
    r"|\b[a-z]+_[a-z_]+\s*\(|\[CONTEXT SUMMARY\]|^\s*\{.*\}\s*$",
    re.IGNORECASE | re.DOTALL,
)
STOPWORDS = set(
    "a an and are as at be but by for from has have he her his i in is it its me my no not of "
    "on or our she so that the their them they this to was we were what when where which who "
    "will with you your".split()
)
ECHO_SHARE = 0.8
ECHO_MIN_WORDS = 4


def mentions(text, word):
    """Tell whether ``text`` holds ``word`` as a whole word or phrase (case-insensitive)."""
    return bool(re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", text or "", re.IGNORECASE))


def answer_right(question, reply):
    """Tell whether ``reply`` answers ``question``: a right word and no wrong one.

    A question with no right words (a private fact asked for by someone else) is answered
    right by any reply that does not give the fact away.
    """
    if not reply or any(mentions(reply, word) for word in question.wrong):
        return False
    return not question.right or any(mentions(reply, word) for word in question.right)


def vocabulary(conversation):
    """Return the lowercased words of everything said in ``conversation``, and its names."""
    words = set()
    for text in conversation.said_texts():
        words.update(WORD.findall(text.lower()))
    for name in (conversation.assistant, conversation.room, *conversation.players):
        words.update(WORD.findall(name.lower()))
    return words


def _starts_sentence(text, start):
    before = text[:start].rstrip(" \t")
    if not before or before.endswith(SENTENCE_STARTS) or re.search(r"\d\.?$", before):
        return True
    # Words quoted without quotation marks: "You said, Yes, I can ...", "You said Yes, ...".
    return bool(re.search(r"\b(?:said|says|asked|asks|whispered|whispers),?$", before))


@dataclass(frozen=True)
class Finding:
    """One thing a detector found: the word or line, and the text it was found in."""

    what: str
    text: str


def invented(texts, conversation):
    """Return the names and numbers in ``texts`` that nobody in ``conversation`` said.

    A name is a capitalized word nobody said, unless it starts a sentence or a list item
    and is a common word (``COMMON_STARTS``); a number is any run of digits outside a time
    or date stamp.
    """
    said = vocabulary(conversation)
    found = []
    for text in texts:
        for match in CAPITALIZED.finditer(text):
            word = match.group().lower()
            stem = word.split("'")[0]  # "Ada's" is Ada
            if stem in said or word in said or word in ALWAYS_ALLOWED:
                continue
            # "Let's", "Thank", "Hiding the map...": a contraction, a verb or a verb's -ing
            # form at a sentence start is no name.
            common = word in COMMON_STARTS or stem in COMMON_STARTS or word.endswith("ing")
            if common and _starts_sentence(text, match.start()):
                continue
            found.append(Finding(match.group(), text))
        for number in NUMBER.findall(STAMP.sub(" ", text)):
            if number not in said:
                found.append(Finding(number, text))
    return found


def _credits(sentence, players):
    """Return ``(position, player)`` for each place ``sentence`` credits words to a player."""
    names = "|".join(re.escape(player) for player in players)
    verbs = "|".join(CREDIT_VERBS)
    pattern = rf"\b({names})\b(?:'s)?\s*(?::|\s(?:\w+\s)?(?:{verbs})\b)"
    return [(match.start(), match.group(1)) for match in re.finditer(pattern, sentence)]


def _sayers(conversation):
    """Return, per fact value, the players who said a line holding it."""
    sayers = {}
    values = {v for fact in conversation.facts.values() for v in _values(fact)}
    for line in conversation.opening:
        for value in values:
            if mentions(line.text, value):
                sayers.setdefault(value.lower(), set()).add(line.speaker)
    return sayers


def _values(fact):
    return (fact.value, *fact.old_values, *fact.distractor_values)


def swapped(texts, conversation):
    """Return the sentences of ``texts`` that credit a fact's value to someone who never said it.

    A sentence credits a value to the player named last before it with a verb of saying
    ("Ada said", "Ada:", "Ada promised"); a player who only asked about it did not say it.
    """
    sayers = _sayers(conversation)
    found = []
    for text in texts:
        for sentence in re.split(r"(?<=[.!?])\s+|\n", text):
            credits = _credits(sentence, conversation.players)
            for value, speakers in sayers.items():
                match = re.search(rf"(?<![\w]){re.escape(value)}(?![\w])", sentence, re.I)
                before = [player for start, player in credits if match and start < match.start()]
                if before and before[-1] not in speakers:
                    found.append(Finding(f"{value} credited to {before[-1]}", sentence))
    return found


def intentions(replies):
    """Return the replies that announce using a tool ("I will add X to my journal")."""
    return [
        Finding("intention", reply)
        for reply in replies
        if INTENTION.search(reply) and MENTIONS_TOOLING.search(reply)
    ]


def markup(replies):
    """Return the replies that carry tool-call or prompt markup (JSON calls, tags, fences)."""
    return [Finding("markup", reply) for reply in replies if MARKUP.search(reply)]


def _content_words(text):
    return {word for word in WORD.findall(text.lower()) if word not in STOPWORDS}


def is_echo(reply, line):
    """Tell whether ``reply`` repeats ``line`` rather than answering it.

    The reply holds at least 80% of the line's content words (a line of four or more) and
    adds no more than as many words of its own.
    """
    said, replied = _content_words(line), _content_words(reply or "")
    if len(said) < ECHO_MIN_WORDS:
        return False
    shared = said & replied
    return len(shared) >= ECHO_SHARE * len(said) and len(replied - said) <= len(said)


def leaks(heard, conversation):
    """Return what a player heard of a fact whispered by someone else.

    Args:
        heard: ``(listener, text)`` pairs: every line a player received from the assistant.
        conversation: The conversation, whose whispered facts are private to their speaker.
    """
    found = []
    for fact in conversation.facts.values():
        if not fact.whisper:
            continue
        for listener, text in heard:
            if listener != fact.speaker and any(mentions(text, v) for v in _values(fact)):
                found.append(Finding(f"{fact.id} heard by {listener}", text))
    return found
