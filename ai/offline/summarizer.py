"""The offline engine's summaries: extractive, keeping who said which fact.

From a compaction transcript it keeps the players' statements that carry facts (names,
numbers, places, promises, decisions, open tasks), prefixed with the speaker, what the
assistant itself promised or agreed to ("You said: ..."), and the lines of any earlier
summary; it drops greetings, questions, the assistant's other replies and tool details. If
the result is over the word limit, the least weighty lines go first.

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


def weight(line):
    """Rank a line: numbers and promises first, then by length of content."""
    said = words(line)
    return (any(w.isdigit() for w in said), "promised" in said or "promise" in said, len(said))


def summarize(messages):
    """Return the extractive summary of a compaction call's transcript."""
    lines = summary_lines(request_text(messages, TRANSCRIPT_HEADER))
    limit = word_limit(messages)
    while lines and sum(len(line.split()) for line in lines) > limit:
        lines.remove(min(lines, key=weight))
    return "\n".join(lines)
