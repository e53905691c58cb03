"""The compaction's quality gate: a summary tells only what its messages show, and keeps
what they and the journal told.

In order, for each audience's summary (``gate_summary``):

1. Invented sentences are repaired (``ai.utils.faithfulness``): a copied example, a stranger's
   name or an action no tool call made is dropped; words credited to the wrong speaker go to
   the one who said them. A summary with nothing left is refused.
2. The lines of an earlier ``[CONTEXT SUMMARY]`` among the messages that the new summary lost
   are appended, so that a summary of a summary keeps what the first one told.
3. The journal entries that cite a message being compacted (the pre-compaction extraction's
   among them), each checked against the summary of its own audience (a summary is only
   checked against, and only receives, what its readers may hear), are appended when it
   dropped them, naming the entry they came from.
4. A player's statement among the messages that names someone or something or holds a
   number, and that neither the summary nor the journal kept, is appended in the player's
   own words, credited to them, oldest first, while the summary stays within
   ``STATEMENTS_SHARE`` of the messages' words: what a small model left out of both is kept
   as far as the compaction still makes room. When that leaves statements out, the
   summary's lines of small talk go first to make room for them.

A line or fact survives when its exact names and numbers are all in the summary, with at
least half of its other telling words (``ai.utils.grounding.survives``). The gate reads words
only, so it is deterministic. Once the journal entries citing the messages are read (in the
reactor), it reads no database: it runs in a thread, as its work grows with the messages
compacted (seconds of CPU for an emergency compaction of ten thousand messages).
"""

from ..helpers.journal import entries_citing
from ..utils.facts import (
    LaterStatements,
    plain_words,
    relates_specific_subject,
    replaced_value,
    telling_words,
)
from ..utils.faithfulness import Repairs, check_summary, examples_of, read_transcript
from ..utils.grounding import key_terms, survives
from ..utils.markers import (
    ARCHIVE_MARKER,
    EARLIER_HEADER,
    GATE_HEADERS,
    RESTORED_HEADER,
    SAID_HEADER,
)
from ..utils.message_format import (
    is_summary,
    one_line,
    quoted,
    read_event,
    summary_items,
    summary_text,
)
from ..utils.sentences import LIST_MARK, sentences
from .common import WORD_READING

# An earlier summary's line shorter than this tells no fact worth restoring.
MIN_RESTORED_WORDS = 3
# Statements are restored while the summary holds at most this share of the words of the
# messages it replaces: beyond it, the compaction would no longer make room.
STATEMENTS_SHARE = 0.7


def empty_report():
    """Return the gate's counts before any summary is checked."""
    return {
        "facts_checked": 0,
        "facts_appended": 0,
        "appended_entries": [],
        "summary_lines_restored": 0,
        "statements_restored": 0,
        "small_talk_dropped": 0,
        **Repairs().as_result(),
    }


def describe_report(written, report):
    """Return ``written`` (what the messages became) with what the gate did, for the log."""
    counts = [
        (report.get("facts_appended", 0), "facts restored from the journal"),
        (report.get("summary_lines_restored", 0), "lines restored from the earlier summary"),
        (report.get("statements_restored", 0), "statements kept in the players' words"),
        (report.get("small_talk_dropped", 0), "lines of small talk dropped for them"),
        (report["speakers_corrected"], "speakers corrected"),
        (
            sum(report[key] for key in Repairs().as_result() if key != "speakers_corrected"),
            "invented lines dropped",
        ),
    ]
    return ", ".join([written, *(f"{count} {what}" for count, what in counts if count)])


def gate_summary(character, audience, members, summary, instructions, report):
    """Check and repair one audience's summary in a thread; add what the gate did to
    ``report``.

    Args:
        character (AssistantCharacter): The assistant, whose journal and name count.
        audience (list or None): Who reads the summary.
        members (list): The messages the summary stands for.
        summary (str): The summary's text.
        instructions (tuple): The texts the summary call was given (for their examples).
        report (dict): The counts of :func:`empty_report`, updated in place once the
            Deferred fires.

    Returns:
        Deferred: Fires with the repaired summary, or "" when none of its sentences was
        kept.
    """
    cited = entries_citing(character, [m["id"] for m in members], audience)
    checked = WORD_READING.run(
        repaired_summary, character.key, cited, members, summary, instructions
    )

    def counted(outcome):
        repaired, counts = outcome
        for key, count in counts.items():
            report[key] += count
        return repaired

    return checked.addCallback(counted)


def repaired_summary(assistant, cited, members, summary, instructions):
    """Return ``(summary, counts)``: ``summary`` checked and repaired by the steps of this
    module's description, and what each step did (the keys of :func:`empty_report`). Reads
    no database.

    Args:
        assistant (str): The assistant's name.
        cited (list): The journal entries its readers may hear that cite one of ``members``.
        members (list): The messages the summary stands for.
        summary (str): The summary's text.
        instructions (tuple): The texts the summary call was given (for their examples).
    """
    counts = empty_report()
    transcript = read_transcript(members, assistant)
    summary, repairs = check_summary(summary, transcript, examples_of(instructions))
    repairs.add_to(counts)
    if not summary:
        return "", counts
    summary, counts["summary_lines_restored"] = restore_earlier(members, summary)
    summary, counts["facts_checked"], counts["appended_entries"] = restore_dropped(cited, summary)
    counts["facts_appended"] = len(counts["appended_entries"])
    summary, said, pruned = restore_statements(assistant, cited, members, summary)
    counts["statements_restored"], counts["small_talk_dropped"] = said, pruned
    return summary, counts


def statements(members, assistant):
    """Return ``(speaker, sentence)`` for each sentence a player stated among ``members``
    that names someone or something or holds a number (not counting the speaker and the
    assistant), or relates a specific subject to a value ("the password for the loft is
    <word>"): questions, greetings and small talk tell no fact to keep; nor does one that
    a later statement among them replaces ("... is now ...", "Correction: ...")."""
    found, seen = [], set()
    for message in members:
        if message["role"] != "user":
            continue
        speaker, verb, words = read_event(message.get("content"))
        if speaker is None or verb == "emotes":
            continue
        for sentence in sentences(words):
            if (speaker, sentence) not in seen and tells_fact(sentence, (speaker, assistant)):
                found.append((speaker, sentence))
                seen.add((speaker, sentence))
    kept, later = [], LaterStatements()
    for statement in reversed(found):
        if not later.replace(statement):
            kept.append(statement)
        later.add([statement])
    return kept[::-1]


def tells_fact(sentence, ignored=()):
    """Return whether a player's ``sentence`` states a fact worth keeping: it names someone
    or something or holds a number (the ``ignored`` names, the speaker's and the
    assistant's, not counted), or relates a specific subject to a value; a question never
    does."""
    # Its first word is capitalized as any sentence's is ("Hello", "Remember").
    exact, _ = key_terms(sentence.split(None, 1)[-1])
    ignored = {name.lower() for name in ignored}
    telling = exact - ignored or relates_specific_subject(sentence)
    return bool(telling) and not sentence.rstrip().endswith("?")


def restore_statements(assistant, cited, members, summary, share=STATEMENTS_SHARE, said=None):
    """Return ``(summary, count, pruned)``: ``summary`` with the statements of ``members``
    that neither it (with what the gate appended) nor one of the ``cited`` journal entries
    kept, appended in the speaker's words, quoted as every player's words are, oldest first
    while the whole holds at most ``share`` of the words of ``members``. When that leaves
    some out, the summary's lines of small talk (:func:`small_talk`, ``pruned`` of them)
    make room for them first: a player's stated fact is worth more than a greeting retold.
    ``assistant`` is the assistant's name; ``said``, the statements of ``members`` when
    they were read (:func:`statements`)."""
    said = statements(members, assistant) if said is None else said
    lines, lost = _lost_statements(summary, cited, said, members, share)
    pruned = small_talk(summary, members, assistant) if len(lost) < len(lines) else set()
    if pruned:
        kept = "\n".join(line for line in summary.splitlines() if line not in pruned)
        _, kept_lost = _lost_statements(kept, cited, said, members, share)
        if len(kept_lost) > len(lost):
            summary, lost = kept, kept_lost
        else:
            pruned = set()
    if not lost:
        return summary, 0, len(pruned)
    return "\n".join([summary, SAID_HEADER, *lost]), len(lost), len(pruned)


def _lost_statements(summary, cited, said, members, share):
    """Return ``(lines, fitting)``: the lines of the statements ``said`` that neither
    ``summary`` nor the ``cited`` journal entries keep, and the first of them it has room
    for."""
    told = [item for item, _ in summary_items(summary)] + [entry["content"] for entry in cited]
    kept = set(plain_words(summary)).union(*(plain_words(line) for line in told))
    lines = [
        f"- {speaker}: {quoted(sentence)}"
        for speaker, sentence in said
        if not still_told(sentence, told, kept)
    ]
    return lines, within_share(lines, members, summary, share)


def small_talk(summary, members, assistant):
    """Return the lines of ``summary`` that tell only small talk: each of their sentences
    retells, sharing the most words with it (two at least), a sentence of ``members`` that
    states no fact (:func:`tells_fact`) or the assistant's own words (which ground nothing).
    A line of an earlier summary, a journal entry the gate restored or a statement it kept
    is never one."""
    told = []  # (words, whether the sentence tells a fact)
    for message in members:
        content = message.get("content") or ""
        if message["role"] == "assistant" and isinstance(content, str):
            told += [(set(_telling(sentence)), False) for sentence in sentences(content)]
        elif message["role"] == "user":
            speaker, verb, words = read_event(content)
            if speaker and verb != "emotes":
                told += [
                    (set(_telling(sentence)), tells_fact(sentence, (speaker, assistant)))
                    for sentence in sentences(words)
                ]
    found = set()
    for line in _model_lines(summary):
        parts = [set(_telling(sentence)) for sentence in sentences(LIST_MARK.sub("", line))]
        if parts and all(_retells_small_talk(words, told) for words in parts):
            found.add(line)
    return found


def _telling(text):
    return [word for word in telling_words(plain_words(text)) if len(word) >= 3]


def _retells_small_talk(words, told):
    best = max((len(words & source) for source, _ in told), default=0)
    matches = [fact for source, fact in told if len(words & source) == best]
    return best >= 2 and not any(matches)


def _model_lines(summary):
    """Yield the lines of ``summary`` the model wrote: those before the gate's first
    header."""
    for line in summary.splitlines():
        if line.strip() in GATE_HEADERS:
            return
        if line.strip():
            yield line


def still_told(statement, told, kept):
    """Return whether ``statement`` survives in the words ``kept`` of the lines ``told``: a
    line it replaces there ("the <thing> is <old value>" for "the <thing> is now <value>")
    shares most of its words, so its new value must be kept too."""
    if not survives(statement, kept):
        return False
    values = (replaced_value(statement, line) for line in told)
    return all(value <= kept for value in values if value is not None)


def within_share(lines, members, summary, share):
    """Return the first of ``lines`` that ``summary`` can take while it holds at most
    ``share`` of the words of ``members`` (beyond it, a compaction makes too little room)."""
    budget = share * sum(len(plain_words(m.get("content"))) for m in members)
    used, kept = len(plain_words(summary)), []
    for line in lines:
        used += len(plain_words(line))
        if used > budget:
            break
        kept.append(line)
    return kept


def earlier_lines(members):
    """Return the fact lines of the earlier compaction messages among ``members`` (a
    ``[CONTEXT SUMMARY]`` or an ``[ARCHIVED HISTORY]`` marker; their notes, headers and the
    marker's own sentence left out), list marks removed, each once."""
    lines = []
    for message in members:
        if not (is_summary(message) and message["role"] == "system"):
            continue
        for line, _ in summary_items(summary_text(message["content"])):
            own = line.startswith(ARCHIVE_MARKER)
            if not own and line not in lines and len(line.split()) >= MIN_RESTORED_WORDS:
                lines.append(line)
    return lines


def restore_earlier(members, summary, share=None):
    """Return ``(summary, count)``: ``summary`` with the lines of the earlier summaries and
    archive markers among ``members`` that it lost appended, and how many; oldest first
    while the whole holds at most ``share`` of the words of ``members`` when it is given."""
    summary_words = set(plain_words(summary))
    lost = [f"- {line}" for line in earlier_lines(members) if not survives(line, summary_words)]
    if share is not None:
        lost = within_share(lost, members, summary, share)
    if not lost:
        return summary, 0
    return "\n".join([summary, EARLIER_HEADER, *lost]), len(lost)


def restore_dropped(cited, summary):
    """Append to ``summary`` the journaled facts among the ``cited`` entries that it
    dropped (a synthesis is an earlier summary, not a fact).

    Returns:
        tuple: ``(summary, facts checked, ids of the entries appended)``.
    """
    facts = [entry for entry in cited if entry["source_type"] != "compaction"]
    summary_words = set(plain_words(summary))
    dropped = [entry for entry in facts if not survives(entry["content"], summary_words)]
    if not dropped:
        return summary, len(facts), []
    lines = [f"- {one_line(entry['content'])} (journal {entry['id']})" for entry in dropped]
    return "\n".join([summary, RESTORED_HEADER, *lines]), len(facts), [e["id"] for e in dropped]
