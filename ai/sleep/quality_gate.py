"""The compaction's quality gate: a fact journaled from the compacted messages survives it.

The facts checked are the journal entries that cite a message being compacted (the
pre-compaction extraction's among them), each against the summary of its own audience:
a summary is only checked against, and only receives, what its readers may hear. A fact
survives when its exact names and numbers are all in the summary, with at least half of
its other telling words; one that does not is appended to the summary from the journal,
naming the entry it came from. The check reads words only, so it is deterministic.
"""

import re

from ..helpers.journal import entries_citing
from ..utils.facts import plain_words, telling_words, without_attribution
from ..utils.markers import RESTORED_HEADER
from ..utils.message_format import one_line

# Of a fact's telling words other than names and numbers, the share a summary must keep.
KEPT_WORD_SHARE = 0.5
# Shorter words ("is", "by", "who") tell little of a fact.
MIN_TELLING_LENGTH = 4
_CAPITALIZED = re.compile(r"\b[A-Z][\w']*")


def key_terms(fact):
    """Return ``(exact, telling)``: a fact's names and numbers, and its other telling words.

    A name is a capitalized word that is not filler ("The", "She"); a number is a word
    with a digit. Who told the fact ("Dana told me that ...") is not part of it.
    """
    told = without_attribution(fact)
    words = set(telling_words(plain_words(told)))
    names = set(telling_words(plain_words(" ".join(_CAPITALIZED.findall(told)))))
    exact = {word for word in words if word in names or any(c.isdigit() for c in word)}
    telling = {word for word in words - exact if len(word) >= MIN_TELLING_LENGTH}
    return exact, telling


def survives(fact, summary_words):
    """Return whether ``fact`` is still told by a summary made of ``summary_words``."""
    exact, telling = key_terms(fact)
    kept = len(telling & summary_words)
    return exact <= summary_words and kept >= KEPT_WORD_SHARE * len(telling)


def restore_dropped(character, audience, members, summary):
    """Append to ``summary`` the journaled facts of ``members`` that it dropped.

    Args:
        character (AssistantCharacter): Whose journal.
        audience (list or None): Who reads the summary; only entries they may hear count.
        members (list): The messages the summary stands for.
        summary (str): The summary's text.

    Returns:
        tuple: ``(summary, facts checked, ids of the entries appended)``.
    """
    facts = [
        entry
        for entry in entries_citing(character, [m["id"] for m in members], audience)
        if entry["source_type"] != "compaction"  # a synthesis is an earlier summary
    ]
    summary_words = set(plain_words(summary))
    dropped = [entry for entry in facts if not survives(entry["content"], summary_words)]
    if not dropped:
        return summary, len(facts), []
    lines = [f"- {one_line(entry['content'])} (journal {entry['id']})" for entry in dropped]
    return "\n".join([summary, RESTORED_HEADER, *lines]), len(facts), [e["id"] for e in dropped]
