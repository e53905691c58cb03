"""What a summary may claim, read from the messages it stands for, and the repair of what
it invents.

A summary's sentences are checked, each against the compacted messages, with words only
(deterministic, no model call). A sentence is dropped when it copies an example of its
instructions (a placeholder such as ``<name>``, or a quoted example the transcript does not
tell), names someone who never appeared (neither in the messages nor a participant: the
assistant, the players who spoke), or says the assistant did what no tool call did ("You
added X to your journal" without an ``add_journal_entry`` call about X). A sentence that
credits words to one who did not say them is given to the speaker they came from when that
is clearly one other speaker, else dropped when the one credited said nothing at all.
"""

import re
from dataclasses import dataclass, field

from .facts import plain_words, telling_words
from .grounding import PLACEHOLDER, key_terms, survives
from .message_format import is_summary, read_event, summary_text
from .sentences import LIST_MARK

# A speaker's share of a sentence's telling words that makes the words theirs.
OWN_WORDS_SHARE = 0.5
# Of an example's telling words, the share a sentence that copies it holds.
EXAMPLE_WORD_SHARE = 0.6
# An example in instructions: a quoted passage of three words or more.
_QUOTED_EXAMPLE = re.compile(r"\"([^\"]{12,})\"")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[\"'(<A-Z-])")
_SPEECH_VERBS = (
    "said|says|say|asked|asks|told|tells|mentioned|mentions|greeted|greets|remarked|explained|"
    "replied|answered|whispered|whispers|claimed|stated|promised|agreed|warned|reported|shared|"
    "suggested|confirmed|revealed|announced|admitted|thanked|welcomed|wondered|requested|"
    "added that|noted that|informed"
)
_CREDIT = re.compile(
    rf"(?:^|(?<=[\s,;(]))(?P<who>[A-Z][\w']*|you|I)(?:\s+(?:also|then|later|first|again|"
    rf"has|had|just|once))?\s+(?:{_SPEECH_VERBS})\b|^(?P<named>[A-Z][\w']*):",
)
_GREETING_VERBS = {"greeted", "greets", "welcomed", "thanked", "hello", "hi", "hey"}
_GREETING_WORDS = {"hello", "hi", "hey", "greetings", "welcome", "morning", "evening", "thanks"}
GREETING = "<greeting>"
# What the assistant does only through a tool: the verbs that claim it, the place words that
# must come with them (empty: none needed), and the tools that do it (None: any tool).
ACTIONS = (
    (
        r"added|wrote|noted|recorded|saved|journal(?:l)?ed|logged|put|entered|made a note",
        {"journal", "notes", "note", "notebook"},
        {"add_journal_entry", "update_entity_observation"},
    ),
    (r"stored|memori[sz]ed|saved|remembered", {"memory", "memories"}, {"store_memory"}),
    (r"gave|handed", set(), {"give"}),
    (r"pinned", set(), {"pin_fact"}),
    (r"looked at|looked around|examined|inspected", set(), {"look"}),
    (r"searched", set(), {"search_history", "recall_memories", "review_journal"}),
    # "You used the "search_history" tool to ...": any tool, named or not (None: any call).
    (r"used|called|ran|invoked", {"tool", "tools", "function"}, None),
)
# Capitalized words that name no one: they open sentences.
_STARTERS = set(
    """a an the this that these those there then later earlier after before when while once
    also and but so yet or no not nothing none someone somebody everyone everybody anyone
    each both all some several many most few players player they he she it we you i his her
    their its our your my one two three first second next last finally meanwhile today
    tomorrow yesterday tonight now still again only if as at by for from in into of on to
    with without about over under between during since until upon what which who whom whose
    why how where here yes okay ok please thanks sure nobody another other others every
    someone's""".split()
)
# Words that, before a letter or a number, stand for someone unnamed ("Player A", "User 2"):
# a model that writes them tells of people it made up.
_STAND_INS = {
    "player", "user", "person", "speaker", "character", "customer", "guest", "visitor",
    "traveler", "traveller", "participant", "npc", "stranger",
}  # fmt: skip
# Verbs after a sentence's first word that make it a name ("<name> is ...").
_VERBS = {"is", "was", "has", "had", "will", "can", "did", "does", "owes", "runs", "keeps"}
_CREDIT_WORDS = set(plain_words(_SPEECH_VERBS.replace("|", " "))) | {"that", "you", "your"}


@dataclass
class Transcript:
    """What the compacted messages show: who said which words, who appeared, which tools
    were called, and the earlier summaries' text.

    Attributes:
        assistant (str): The assistant's name, lower case.
        words (set): Every word of the messages (tool calls and earlier summaries included).
        said (dict): Speaker name (lower case; ``"you"`` for the assistant) -> their words.
        names (dict): A participant's words (lower case) -> the name as written.
        calls (list): ``(tool name, words of its arguments and result)``.
        summaries (set): The words of earlier summaries among the messages.
    """

    assistant: str = ""
    words: set = field(default_factory=set)
    said: dict = field(default_factory=dict)
    names: dict = field(default_factory=dict)
    calls: list = field(default_factory=list)
    summaries: set = field(default_factory=set)

    def credit(self, speaker, text):
        words = set(plain_words(text))
        if _GREETING_WORDS & words:
            words.add(GREETING)
        self.said.setdefault(speaker, set()).update(words)
        self.words |= words


def read_transcript(messages, assistant_name, participants=(), calls_from=None):
    """Return the :class:`Transcript` of ``messages``.

    Args:
        messages (list): The compacted messages.
        assistant_name (str): The assistant's name, a participant who speaks as "you".
        participants (iterable): Further names that may appear (players who spoke nearby).
        calls_from (list, optional): The messages whose tool calls count (``messages``).
    """
    transcript = Transcript(assistant=assistant_name.lower())
    for name in [assistant_name, *participants]:
        transcript.names[name.lower()] = name
    for message in messages:
        speaker = message["role"] == "user" and read_event(message.get("content"))[0]
        if speaker:
            transcript.names[speaker.lower()] = speaker
        elif is_summary(message):
            transcript.names.update(_credited_in(summary_text(message.get("content"))))
    results = {m.get("tool_call_id"): m.get("content") or "" for m in messages}
    for message in messages:
        content = message.get("content") or ""
        if is_summary(message):
            text = summary_text(content)
            transcript.summaries |= set(plain_words(text))
            for line in text.splitlines():
                for name in _speakers_of(line, transcript):
                    transcript.credit(name, line)
            transcript.words |= set(plain_words(text))
        elif message["role"] == "assistant":
            transcript.credit("you", content)
            for call in message.get("tool_calls") or ():
                transcript.credit("you", call["function"].get("arguments") or "")
        elif message["role"] == "user":
            speaker, _, words = read_event(content)
            if speaker:
                transcript.credit(speaker.lower(), words)
            transcript.words |= set(plain_words(content))
        else:
            transcript.words |= set(plain_words(content))
    for message in messages if calls_from is None else calls_from:
        for call in message.get("tool_calls") or ():
            told = (call["function"].get("arguments") or "") + " " + results.get(call["id"], "")
            transcript.calls.append((call["function"]["name"], set(plain_words(told))))
    for name in transcript.names:
        transcript.words |= set(plain_words(name))
    return transcript


def _opening_speaker(line):
    """Return the name a summary line opens with as its speaker ("<name> said ...", "-
    <name>: ..."), as written, or None."""
    opening = _CREDIT.match(LIST_MARK.sub("", line).strip())
    return opening and (opening.group("who") or opening.group("named"))


def credits_speaker(text):
    """Return whether ``text`` says which participant spoke ("<Name> said ...", "<Name>:
    ..."), someone other than "you" or "I"."""
    return any(
        (match.group("who") or match.group("named")) not in ("you", "I")
        for match in _CREDIT.finditer(text or "")
    )


def _credited_in(text):
    """Return ``{name lower case: name}`` of the speakers an earlier summary's lines open
    with: a player who spoke only before it is a participant still, whose words its lines
    hold."""
    found = {}
    for line in text.splitlines():
        name = _opening_speaker(line)
        if name and name[0].isupper() and name.lower() not in _STARTERS:
            found[name.lower()] = name
    return found


def _speakers_of(line, transcript):
    """Return who an earlier summary's line credits, lower case: the participant it opens
    with as the speaker ("<name> said ...", "<name>: ..."), else :func:`_names_in`.
    ("Char said "I promised Char2 ..."" holds Char's words, not Char2's.)"""
    who = (_opening_speaker(line) or "").lower()
    if who in ("you", "i", transcript.assistant):
        return ["you"]
    if who in transcript.names:
        return [who]
    return _names_in(line, transcript)


def _names_in(line, transcript):
    """Return who a summary line credits, lower case: the participants it names, else the
    assistant (``"you"``) when it speaks of it."""
    words = set(plain_words(line))
    named = [name for name in transcript.names if name != transcript.assistant and name in words]
    return named or (["you"] if words & {"you", transcript.assistant} else [])


def examples_of(instructions):
    """Return the examples that ``instructions`` (texts) quote, three words or more: passages
    a summary must not repeat as facts (their placeholders match nothing)."""
    found = []
    for text in instructions:
        for match in _QUOTED_EXAMPLE.finditer(text or ""):
            if len(match.group(1).split()) >= 3:
                found.append(match.group(1))
    return found


@dataclass
class Repairs:
    """What the check did to a summary's sentences, counted."""

    examples_dropped: int = 0
    strangers_dropped: int = 0
    actions_dropped: int = 0
    speakers_corrected: int = 0
    speakers_dropped: int = 0

    def as_result(self):
        """Return the counts as a dict, for a compaction's result."""
        return dict(self.__dict__)

    def add_to(self, counts):
        """Add these counts to ``counts`` (a dict of :meth:`as_result`'s keys), in place."""
        for key, count in self.__dict__.items():
            counts[key] = counts.get(key, 0) + count


def check_summary(summary, transcript, examples=(), self_word="you"):
    """Return ``(summary, repairs)``: ``summary`` with its invented sentences dropped or
    corrected (a line left empty is removed), and the :class:`Repairs` counts.

    Args:
        summary (str): The summary's text, one fact a line as a rule.
        transcript (Transcript): What the compacted messages show.
        examples (list): The examples of the summary's instructions (:func:`examples_of`).
        self_word (str): How the summary calls the assistant: ``you``, or ``I`` for a run
            summary in its own voice.
    """
    repairs = Repairs()
    kept = []
    for line in summary.splitlines():
        mark = (LIST_MARK.match(line) or [""])[0]
        sentences = [s for s in _SENTENCE.split(line[len(mark) :].strip()) if s]
        checked = [_checked(s, transcript, examples, self_word.lower(), repairs) for s in sentences]
        checked = [s for s in checked if s]
        if checked or not sentences:
            kept.append(mark + " ".join(checked) if checked else line)
    return "\n".join(kept).strip(), repairs


def _checked(sentence, transcript, examples, self_word, repairs):
    """Return ``sentence``, corrected, or None when it must go (counted in ``repairs``)."""
    if PLACEHOLDER.search(sentence) or _copies_example(sentence, transcript, examples):
        repairs.examples_dropped += 1
        return None
    if _strangers(sentence, transcript):
        repairs.strangers_dropped += 1
        return None
    if _invented_action(sentence, transcript, self_word):
        repairs.actions_dropped += 1
        return None
    credited = _CREDIT.search(sentence)
    if not credited:
        return sentence
    who = (credited.group("who") or credited.group("named")).lower()
    if who in ("you", "i") and who != self_word:
        return sentence  # a quoted "I" or "you": no one in particular
    if (credited.group("named") and who not in transcript.names) or (
        who in _STARTERS and who not in ("you", "i")
    ):
        return sentence  # "Note: ...", "They said ...": no one in particular
    speaker = "you" if who in (self_word, transcript.assistant) else who
    right = _speaker_of(sentence, speaker, transcript)
    if right == speaker:
        return sentence
    if right:
        repairs.speakers_corrected += 1
        name = self_word.capitalize() if right == "you" else transcript.names[right]
        start, end = credited.span("who" if credited.group("who") else "named")
        return sentence[:start] + name + sentence[end:]
    if speaker not in transcript.said:
        repairs.speakers_dropped += 1
        return None
    return sentence


def _copies_example(sentence, transcript, examples):
    """Tell whether ``sentence`` repeats an example that the transcript does not tell."""
    words = set(plain_words(sentence))
    for example in examples:
        told = plain_words(PLACEHOLDER.sub(" ", example))
        telling = {w for w in telling_words(told) if len(w) >= 3}
        if len(telling) >= 2 and len(telling & words) >= EXAMPLE_WORD_SHARE * len(telling):
            if not survives(sentence, transcript.words):
                return True
    return False


def _strangers(sentence, transcript):
    """Return the names in ``sentence`` that neither the messages nor a participant have.

    A capitalized word inside a sentence is a name; one that opens it ("Talk.", "Keep
    calm") only when what follows makes it one: a possessive, a colon, "and", or a verb
    ("<name> runs ...", "<name> asked ..."). A stand-in ("Player A", "user 2") is a name
    unless a participant bears it.
    """
    tokens = re.findall(r"[\w']+|[^\w\s]", sentence)
    strangers = []
    for index, token in enumerate(tokens):
        word = token.lower().removesuffix("'s")
        label = tokens[index + 1] if index + 1 < len(tokens) else ""
        if word in _STAND_INS and (len(label) == 1 and label.isupper() or label.isdigit()):
            if f"{word} {label.lower()}" not in transcript.names:
                strangers.append(f"{token} {label}")
            continue
        if not (token[0].isupper() and not token.isupper()) or word in _STARTERS:
            continue
        if word in transcript.words:
            continue
        opening = index == 0 or tokens[index - 1] in '.!?:;"(-*'
        following = tokens[index + 1].lower() if index + 1 < len(tokens) else ""
        if not opening or token.endswith("'s") or _names_what_follows(following):
            strangers.append(token)
    return strangers


def _names_what_follows(word):
    """Tell whether ``word``, after a sentence's first word, makes that word a name."""
    return word in (":", ",", "and", *_VERBS) or (
        len(word) > 3 and (word.endswith("ed") or word.endswith("s") and not word.endswith("ss"))
    )


def _invented_action(sentence, transcript, self_word):
    """Tell whether ``sentence`` says the assistant did what no tool call in the messages
    did, nor an earlier summary told."""
    words = set(plain_words(sentence))
    selves = [re.escape(name) for name in (self_word, transcript.assistant) if name]
    subject = rf"\b(?:{'|'.join(selves)})"
    for verbs, places, tools in ACTIONS:
        claim = re.search(rf"{subject}\s+(?:\w+\s+)?(?:{verbs})\b", sentence, re.IGNORECASE)
        if not claim or (places and not places & words):
            continue
        objects = set(telling_words(plain_words(sentence[claim.end() :]))) - places
        objects = {w for w in objects if len(w) >= 3} - _CREDIT_WORDS
        if any(
            (tools is None or name in tools) and (not objects or objects & told)
            for name, told in transcript.calls
        ):
            return False
        return not survives(sentence, transcript.summaries)
    return False


def _speaker_of(sentence, credited, transcript):
    """Return the speaker whose words ``sentence`` tells: ``credited`` when they are theirs,
    else the one other speaker they clearly are, else None."""
    names = set(transcript.names) | {"you", "i"}
    words = set(telling_words(plain_words(sentence))) - names - _CREDIT_WORDS
    words = {w for w in words if len(w) >= 3}
    if _GREETING_VERBS & set(plain_words(sentence)):
        words = (words - _GREETING_VERBS) | {GREETING}
    exact, _ = key_terms(sentence)
    words |= exact - names
    if not words:
        return credited

    def share(speaker):
        return len(words & transcript.said.get(speaker, set())) / len(words)

    others = [s for s in transcript.said if s not in (credited, "you")]
    if share(credited) >= OWN_WORDS_SHARE:
        # An asker holds most words of the answer ("What is the password for the <place>?"):
        # the value goes to the one other player who said every word of it. So do words of
        # one player given another's name or number ("<a> says, 'My falcon is called <b's
        # falcon>.'"): the name or number tells whose they are.
        whole = [s for s in others if share(s) == 1]
        if share(credited) < 1 and len(whole) == 1:
            return whole[0]
        values = exact - names
        if values - transcript.said.get(credited, set()):
            owners = [s for s in others if values <= transcript.said[s]]
            owners = [s for s in owners if share(s) >= share(credited)]
            return owners[0] if len(owners) == 1 else credited
        return credited
    ranked = sorted(transcript.said, key=share, reverse=True)
    best = [s for s in ranked if share(s) >= OWN_WORDS_SHARE and share(s) > share(credited)]
    if best and (len(best) == 1 or share(best[0]) > share(best[1])):
        return best[0]
    return None
