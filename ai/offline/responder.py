"""How the offline engine answers a chat: deterministic replies and tool choices.

The pending event arrives as the last user message, written as ``<speaker> says, "<words>"``
with the words one JSON-quoted unit (see ``ai.prompt_rendering.render_event``). A question
is answered from the best-matching earlier line of the conversation or of a summary; a
greeting is returned; a pose is nodded to; anything else is acknowledged. A leading
greeting ("Hello Helper! I buried...") does not hide the statement after it. An arrival
is greeted and a gift thanked for.
When a speaking tool is offered, the reply goes through it. When journal tools are offered,
a statement that carries a fact is journaled (``add_journal_entry``) in the same answer, and
a first-person fact also updates the speaker's entity profile (``update_entity_observation``);
it promises to remember a fact only then, and when the contrib held its reply back because
the entry was refused, it says that it could not note it down.
Asked "give me the <thing>" with ``give`` offered, it says so and calls ``give``; asked
to look at, read or describe something with ``look`` offered, it looks and says so (a turn
is one call), and later questions are answered from what it saw.
Once it has spoken (a ``say`` that ran), the engine ends the turn with ``noop`` (or plain
text without it).

Offered journal tools but no speaking tool (the ``pre_compaction`` context), it journals
one fact not yet journaled per call, then ``noop``. Given a compaction transcript, it
writes an extractive summary (see ``summarizer``); asked to rate journal entries, it rates
them (see ``scorer``); given journal entries to reflect on, it writes insights that join
the entries sharing a subject (see ``reflector``). Asked to break a goal down or to work
on one, it answers as ``goals`` says.
"""

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache

from ..utils.markers import (
    CONVERSATION_LINE,
    NOT_SEEN,
    SAVED_HEADER,
    SUMMARY_MARKER,
    SUMMARY_PREAMBLE,
    SUPERSEDED_MARK,
)
from ..utils.message_format import one_line, read_event, unquoted
from . import reflector, scorer, summarizer
from .goals import goal_work
from .reading import greets, is_fact, is_weighty, parse_event, parse_happening, statement
from .text_tools import is_question, keywords, words

SPEAK_TOOL_NAMES = ("say", "speak", "say_to_room")
# Lines that describe the assistant, or repeat what history holds, not what it was told.
_SELF_LINES = (
    "You are ",
    "You said",
    "Your description:",
    CONVERSATION_LINE,
    NOT_SEEN,
    SUMMARY_PREAMBLE,
)
# A line of a summary: ``Bob: I buried...`` (``You said: ...`` is the assistant), or one the
# quality gate kept, ``- Bob said: ... (journal <id>)`` or ``- Bob: "<his words>"``.
_SUMMARY_LINE = re.compile(
    r"^(?:[-*] )?(?P<speaker>(?!You said)[^:]{1,40}?)(?: said)?: (?P<text>.+?)"
    r"(?: \(journal [^()]+\))?$"
)
_FIRST_PERSON = {"i", "my", "i'm", "i've", "mine"}
# "Please give me the lantern." (the offline engine hands over what it is asked for).
_GIVE_REQUEST = re.compile(r"\bgive me (?:the |your |a |an )?(?P<item>[\w' -]+)", re.IGNORECASE)
# "Could you read the notice board?" (the engine looks, and says so; a conversation turn is
# one call, so what it saw answers later questions).
_LOOK_REQUEST = re.compile(
    r"\b(?:look at|read|examine|describe) (?:the |your |a |an |that |this )?"
    r"(?P<thing>[^?.!,]{1,40})",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n")
_LOOK_TAIL = re.compile(r"\s+(?:for me|please|now|again)\s*$", re.IGNORECASE)
_GESTURES = {"waves", "bows", "greets", "smiles", "nods", "salutes", "hugs", "winks"}
# Earlier lines whose reading is kept: a prompt sends the same history call after call, and
# reading every line of it again was most of a call (22 ms at 2,000 messages, issue 23).
LINES_READ = 20000


@dataclass
class Reply:
    """What the engine answers: text, or tool calls in OpenAI's format."""

    content: str | None = None
    tool_calls: list = field(default_factory=list)


def tool_names(tools):
    """Return the names of the offered tool schemas."""
    return [tool.get("function", {}).get("name") for tool in tools or ()]


def make_tool_call(name, arguments, salt):
    """Build one OpenAI-style tool call with a deterministic id."""
    payload = json.dumps(arguments, sort_keys=True)
    digest = hashlib.sha1(f"{salt}|{name}|{payload}".encode()).hexdigest()[:12]
    return {
        "id": f"call_{digest}",
        "type": "function",
        "function": {"name": name, "arguments": payload},
    }


def _look_call_ids(messages):
    """Return the ids of the ``look`` calls among ``messages``."""
    return {
        call["id"]
        for message in messages
        for call in message.get("tool_calls") or ()
        if call["function"]["name"] == "look"
    }


def _earlier_lines(messages, role):
    """Yield ``(speaker, text)`` for the lines of ``role`` before the pending event.

    System lines (summaries, profiles) are read line by line; the first system message,
    the instructions, is skipped, and so are the lines about the assistant itself ("You
    are Helper..."). A summary's ``Bob: ...`` line is Bob's.
    """
    looks = _look_call_ids(messages) if role == "tool" else set()
    for message in messages[:-1]:
        if message.get("role") != role:
            continue
        if role == "tool" and message.get("tool_call_id") not in looks:
            continue  # only what the assistant looked at tells about the world
        if role == "user":
            speaker, verb, text = _event_of(message.get("content"))
            if verb != "emotes":  # a pose tells nothing
                yield speaker, text
        elif message is not messages[0]:  # tool results, and system lines after the first
            content = message.get("content") or ""
            summary = content.startswith(SUMMARY_MARKER)
            # What a tool saw is prose: a sentence of it answers a question, not all of it.
            lines = _SENTENCE_END.split(content) if role == "tool" else content.splitlines()
            for line in lines:
                match = _SUMMARY_LINE.match(line.strip()) if summary else None
                if match:
                    yield match["speaker"], unquoted(match["text"]) or match["text"]
                elif line.strip() and not line.startswith(_SELF_LINES):
                    if SUPERSEDED_MARK not in line:  # a fact since replaced
                        yield None, line.strip().removeprefix("- ")


def best_recollection(question, messages):
    """Return ``(speaker, text)`` of the earlier line sharing most words with ``question``.

    What was said in the conversation wins over what tools returned (what the assistant
    looked at), and those over system lines, which are the fallback.
    """
    wanted = keywords(statement(question))
    for role in ("user", "tool", "system"):
        best, best_score = None, 0
        for speaker, text in _earlier_lines(messages, role):
            asks, terms = _line_terms(text)
            if asks:
                continue
            score = len(wanted & terms)
            if score >= best_score and score > 0:
                best, best_score = (speaker, text), score
        if best:
            return best
    return None


@lru_cache(maxsize=LINES_READ)
def _line_terms(text):
    """Return whether an earlier line asks a question, and its content words; read without
    its greeting: "Hello Helper!" shares "helper" with any question that names the
    assistant."""
    return is_question(text), frozenset(keywords(statement(text)))


def _kept(function):
    """Return ``function`` of a message's content, its results kept for text contents."""
    cached = lru_cache(maxsize=LINES_READ)(function)
    return lambda content: cached(content) if isinstance(content, str) else function(content)


def _reads_as_event(content):
    return parse_event(content)[0] is not None or bool(parse_happening(content))


_event_of = _kept(read_event)
_is_event = _kept(_reads_as_event)


def compose_reply(speaker, text, messages, verb="says", can_note=True):
    """Return the words the assistant says back to ``speaker``; a fact stated is promised
    to be remembered only when it ``can_note`` it (a journal tool is offered)."""
    who = speaker or "friend"
    if verb == "emotes":
        return f"Hello, {who}!" if _GESTURES & set(words(text)) else f"Yes, {who}?"
    if is_question(text):
        found = best_recollection(text, messages)
        if found is None:
            return f"I don't know that yet, {who}. Tell me and I will remember it."
        source, fact = found
        fact = statement(fact)
        if source == speaker:
            return f"You told me: {fact}"
        if source:
            return f"{source} told me: {fact}"
        return f"From what I recall: {fact}"
    if is_fact(text) and can_note:
        return f"Understood, {who}. I'll remember that."
    if greets(text):
        return f"Hello, {who}! How can I help?"
    return f"Understood, {who}."


def fact_calls(speaker, text, names, salt):
    """Return the journaling tool calls for a fact ``speaker`` stated, as far as offered."""
    calls = []
    fact = statement(text)  # without the greeting that may open it
    if "add_journal_entry" in names:
        importance = 7 if is_weighty(text) else 5
        tags = [speaker.lower()] if speaker else []
        tags += sorted(keywords(fact) - {speaker.lower() if speaker else ""})[:3]
        entry = {
            "content": f"{speaker or 'Someone'} said: {one_line(fact)}",
            "importance": importance,
            "tags": tags,
        }
        calls.append(make_tool_call("add_journal_entry", entry, salt))
    first_word = (words(fact) or [""])[0]
    if "update_entity_observation" in names and speaker and first_word in _FIRST_PERSON:
        observation = {"entity": speaker, "observation": one_line(fact)}
        calls.append(make_tool_call("update_entity_observation", observation, salt))
    return calls


def journaled_contents(messages):
    """Return the contents journaled already: called for in the chat, or listed as saved."""
    contents = set()
    for message in messages:
        listing = (message.get("content") or "").partition(SAVED_HEADER)[2]
        contents.update(line[2:] for line in listing.splitlines() if line.startswith("- "))
        for call in message.get("tool_calls") or ():
            if call["function"]["name"] == "add_journal_entry":
                contents.add(json.loads(call["function"]["arguments"] or "{}").get("content"))
    return contents


def _results(turn):
    """Return ``{tool call id: its result}`` for the tool results among ``turn``."""
    return {m.get("tool_call_id"): m.get("content") or "" for m in turn if m.get("role") == "tool"}


def _calls(turn, name):
    """Return the calls of tool ``name`` among ``turn``, with their results ("" for none)."""
    results = _results(turn)
    return [
        (call, results.get(call["id"], ""))
        for message in turn
        for call in message.get("tool_calls") or ()
        if call["function"]["name"] == name
    ]


def _ran(turn, name):
    """Tell whether a call of tool ``name`` among ``turn`` ran (the contrib may hold one)."""
    return any(not result.startswith("Not run") for _, result in _calls(turn, name))


def _failed(turn, name):
    """Tell whether a call of tool ``name`` among ``turn`` did not do what it was asked."""
    done = ("Journaled", "Already journaled")
    return any(not result.startswith(done) for _, result in _calls(turn, name))


def extract_next_fact(messages, names):
    """Journal the first fact of the conversation not journaled yet, else end with noop."""
    done = journaled_contents(messages)
    for index, message in enumerate(messages):
        if message.get("role") != "user":
            continue
        speaker, text = parse_event(message.get("content"))
        if speaker is None or not is_fact(text):
            continue
        calls = fact_calls(speaker, text, ["add_journal_entry"], index)
        if calls and json.loads(calls[0]["function"]["arguments"])["content"] not in done:
            return Reply(tool_calls=calls)
    if "noop" in names:
        return Reply(tool_calls=[make_tool_call("noop", {}, len(messages))])
    return Reply(content="Nothing left to journal.")


def _welcome(happening, names, turn, salt):
    """Greet an arrival, thank for a gift: said once, then ``noop``."""
    speaker, kind, item = happening
    words = f"Hello, {speaker}!" if kind == "arrival" else f"Thank you for the {item}, {speaker}."
    speak_tool = next((name for name in SPEAK_TOOL_NAMES if name in names), None)
    if speak_tool is None:
        return Reply(content=words)
    if _ran(turn, speak_tool):
        return Reply(tool_calls=[make_tool_call("noop", {}, salt)] if "noop" in names else [])
    return Reply(tool_calls=[make_tool_call(speak_tool, {"message": words}, salt)])


def _reflect(messages, names):
    """Write the next insight of a reflection, else end it with ``noop``."""
    insight = reflector.next_insight(messages) if "add_journal_entry" in names else None
    if insight:
        return Reply(tool_calls=[make_tool_call("add_journal_entry", insight, len(messages))])
    if "noop" in names:
        return Reply(tool_calls=[make_tool_call("noop", {}, len(messages))])
    return Reply(content="Nothing more to add.")


def _last_user_index(messages):
    """Return the index of the last event line, else of the last user message, or None.

    A user message after the event that is no event (the contrib asking again after an
    echo) leaves the event the one to answer.
    """
    users = [i for i, message in enumerate(messages) if message.get("role") == "user"]
    events = [i for i in users if _is_event(messages[i].get("content"))]
    return (events or users or [None])[-1]


def _known_at(messages, last_user):
    """Return the chat before the event at ``last_user``, the system lines after it, the event.

    The ``cache_friendly`` prompt layout sends memories and profiles after the history.
    """
    after = [message for message in messages[last_user + 1 :] if message.get("role") == "system"]
    return messages[:last_user] + after + [messages[last_user]]


def respond(messages, tools=None):
    """Decide the engine's answer to a chat.

    Args:
        messages (list): The chat messages sent, oldest first.
        tools (list, optional): OpenAI-style tool schemas offered.

    Returns:
        Reply: Text or tool calls.
    """
    names = tool_names(tools)
    if summarizer.is_summary_request(messages):
        return Reply(content=summarizer.summarize(messages))
    if scorer.is_scoring_request(messages):
        return Reply(content=scorer.rate_entries(messages))
    if reflector.is_reflection_request(messages):
        return _reflect(messages, names)
    work = goal_work(messages, names)
    if work is not None:
        text, call = work
        if call is None:
            return Reply(content=text)
        return Reply(tool_calls=[make_tool_call(*call, len(messages))])
    if "add_journal_entry" in names and not any(n in names for n in SPEAK_TOOL_NAMES):
        return extract_next_fact(messages, names)
    last_user = _last_user_index(messages)
    if last_user is None:
        return Reply(content="I am here.")
    turn = messages[last_user + 1 :]
    happening = parse_happening(messages[last_user].get("content"))
    if happening:
        return _welcome(happening, names, turn, len(messages))
    speaker, verb, text = read_event(messages[last_user].get("content"))
    known = _known_at(messages, last_user)
    reply_text = compose_reply(speaker, text, known, verb, "add_journal_entry" in names)
    speak_tool = next((name for name in SPEAK_TOOL_NAMES if name in names), None)
    if speak_tool is None:
        return Reply(content=reply_text)
    if not _ran(turn, speak_tool) and _failed(turn, "add_journal_entry"):
        # Its reply was held back: the note it promised was refused.
        sorry = f"I'm sorry, {speaker or 'friend'}: I could not note that down."
        return Reply(tool_calls=[make_tool_call(speak_tool, {"message": sorry}, len(messages))])
    if not _ran(turn, speak_tool):
        wanted_look = _LOOK_REQUEST.search(text) if "look" in names and speaker else None
        if wanted_look:
            thing = _LOOK_TAIL.sub("", wanted_look["thing"].strip())
            return Reply(
                tool_calls=[
                    make_tool_call("look", {"target": thing}, last_user),
                    make_tool_call(speak_tool, {"message": f"Let me look at the {thing}."}, 0),
                ]
            )
        wanted = _GIVE_REQUEST.search(text) if "give" in names and speaker else None
        if wanted:
            item = wanted["item"].strip()
            return Reply(
                tool_calls=[
                    make_tool_call(speak_tool, {"message": f"The {item}? Here, {speaker}."}, 0),
                    make_tool_call("give", {"item": item, "recipient": speaker}, last_user),
                ]
            )
        facts = verb != "emotes" and is_fact(text)
        calls = fact_calls(speaker, text, names, last_user) if facts else []
        calls.append(make_tool_call(speak_tool, {"message": reply_text}, last_user))
        return Reply(tool_calls=calls)
    if "noop" in names:
        return Reply(tool_calls=[make_tool_call("noop", {}, len(messages))])
    return Reply(content="")
