"""The offline engine's summaries: extractive, keeping who said which fact.

From a compaction transcript it keeps the players' statements that carry facts (names,
numbers, places, promises, decisions, open tasks), prefixed with the speaker, what the
assistant itself promised or agreed to ("You said: ..."), and the lines of any earlier
summary; it drops greetings, questions, the assistant's other replies and tool details. A
transcript in which no player speaks (a run of the assistant's own messages) with nothing
of that kind is told in the first person instead: the tools used, what was said, what the
tools showed. If the result is over the word limit, the least weighty lines go first.

The transcript is read entry by entry (an entry starts at the margin; its further lines
are indented): only an entry headed ``[CONTEXT SUMMARY]``, which the contrib writes, is
an earlier summary, and a player's entry is their quoted words, whatever they contain.
"""

import re

from ..utils.markers import SUMMARY_MARKER, TRANSCRIPT_END, TRANSCRIPT_HEADER
from ..utils.message_format import one_line
from .reading import is_commitment, is_fact, parse_event, request_text, statement
from .text_tools import words

DEFAULT_WORD_LIMIT = 400
_LIMIT = re.compile(r"at most (\d+) words")
_OWN_LINE = "[you said]"
_TOOLS_LINE = "[you used tools]"
_RESULT_LINE = "[tool result]"
_CALLED = re.compile(r"(\w+)\(")
_SAID = re.compile(r'"message": "((?:[^"\\]|\\.)*)"')
# What a line of the assistant's own account keeps of a tool's result.
_SHOWN_WORDS = 25


def is_summary_request(messages):
    """Tell whether the chat is a compaction summary call."""
    return request_text(messages, TRANSCRIPT_HEADER) is not None


def word_limit(messages):
    """Read the word limit from the summary prompt, or use the default."""
    for message in messages:
        if message.get("role") == "system":
            match = _LIMIT.search(message.get("content") or "")
            if match:
                return int(match[1])
    return DEFAULT_WORD_LIMIT


def transcript_entries(transcript):
    """Return the transcript's entries as lists of lines (header and end marker left out)."""
    entries = []
    for line in transcript.partition(TRANSCRIPT_END)[0].splitlines()[1:]:
        if line.startswith("  ") and entries:
            entries[-1].append(line.strip())
        elif line.strip():
            entries.append([line.strip()])
    return entries


def summary_lines(transcript):
    """Return the fact lines of a transcript, in order, without duplicates."""
    kept, seen = [], set()
    for head, *rest in transcript_entries(transcript):
        if head == SUMMARY_MARKER:
            lines = rest
        elif head.startswith(_OWN_LINE):
            own = " ".join([head.removeprefix(_OWN_LINE).strip(), *rest])
            lines = [f"You said: {own}"] if is_commitment(own) else []
        else:
            speaker, text = parse_event(head)
            fact = speaker is not None and is_fact(text)
            lines = [f"{speaker}: {one_line(statement(text))}"] if fact else []
        for line in lines:
            if line not in seen:
                seen.add(line)
                kept.append(line)
    return kept


def own_account(transcript):
    """Return first-person lines of what the assistant did in a transcript where no player
    speaks (a run of its own messages): the tools it used, what it said, what they showed."""
    lines = []
    for head, *rest in transcript_entries(transcript):
        text = " ".join([head, *rest])
        if head.startswith(_TOOLS_LINE):
            lines.append(f"I used {', '.join(dict.fromkeys(_CALLED.findall(head)))}.")
            lines += [f"I said: {said}" for said in _SAID.findall(text)]
        elif head.startswith(_OWN_LINE):
            lines.append(f"I said: {text.removeprefix(_OWN_LINE).strip()}")
        elif head.startswith(_RESULT_LINE):
            shown = " ".join(text.removeprefix(_RESULT_LINE).split()[:_SHOWN_WORDS])
            lines.append(f"It showed: {shown}")
    return lines


def weight(line):
    """Rank a line: numbers and promises first, then by length of content."""
    said = words(line)
    return (any(w.isdigit() for w in said), "promised" in said or "promise" in said, len(said))


def summarize(messages):
    """Return the extractive summary of a compaction call's transcript."""
    transcript = request_text(messages, TRANSCRIPT_HEADER)
    lines = summary_lines(transcript)
    if not any(parse_event(head)[0] for head, *_ in transcript_entries(transcript)):
        lines = lines or own_account(transcript)
    limit = word_limit(messages)
    while lines and sum(len(line.split()) for line in lines) > limit:
        lines.remove(min(lines, key=weight))
    return "\n".join(lines)
