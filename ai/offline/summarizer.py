"""The offline engine's summaries: extractive, keeping who said which fact.

From a compaction transcript it keeps the players' statements that carry facts (names,
numbers, places, promises, decisions, open tasks), prefixed with the speaker, what the
assistant itself promised or agreed to ("You said: ..."), and the lines of any earlier
summary; it drops greetings, questions, the assistant's other replies and tool details. If
the result is over the word limit, the least weighty lines go first.
"""

import re

from ..utils.markers import SUMMARY_MARKER, TRANSCRIPT_END, TRANSCRIPT_HEADER
from .text_tools import words

DEFAULT_WORD_LIMIT = 400
_LIMIT = re.compile(r"at most (\d+) words")
_SKIPPED_PREFIXES = ("[you used tools]", "[tool result]")
_OWN_LINE = "[you said]"


def is_summary_request(messages):
    """Tell whether the chat is a compaction summary call."""
    return any(
        m.get("role") == "user" and (m.get("content") or "").startswith(TRANSCRIPT_HEADER)
        for m in messages
    )


def word_limit(messages):
    """Read the word limit from the summary prompt, or use the default."""
    for message in messages:
        if message.get("role") == "system":
            match = _LIMIT.search(message.get("content") or "")
            if match:
                return int(match[1])
    return DEFAULT_WORD_LIMIT


def summary_lines(transcript, parse_event, is_fact, is_commitment):
    """Return the fact lines of a transcript, in order, without duplicates."""
    kept, seen = [], set()
    for raw in transcript.partition(TRANSCRIPT_END)[0].splitlines()[1:]:
        line = raw.strip()
        if not line or line == SUMMARY_MARKER or line.startswith(_SKIPPED_PREFIXES):
            continue
        if line.startswith(_OWN_LINE):
            own = line.removeprefix(_OWN_LINE).strip()
            if not is_commitment(own):
                continue
            line = f"You said: {own}"
        speaker, text = parse_event(line)
        if speaker is not None:
            if not is_fact(text):
                continue
            line = f"{speaker}: {text}"
        if line not in seen:
            seen.add(line)
            kept.append(line)
    return kept


def weight(line):
    """Rank a line: numbers and promises first, then by length of content."""
    said = words(line)
    return (any(w.isdigit() for w in said), "promised" in said or "promise" in said, len(said))


def summarize(messages, parse_event, is_fact, is_commitment):
    """Return the extractive summary of a compaction call's transcript."""
    transcript = next(
        m["content"] for m in messages if (m.get("content") or "").startswith(TRANSCRIPT_HEADER)
    )
    lines = summary_lines(transcript, parse_event, is_fact, is_commitment)
    limit = word_limit(messages)
    while lines and sum(len(line.split()) for line in lines) > limit:
        lines.remove(min(lines, key=weight))
    return "\n".join(lines)
