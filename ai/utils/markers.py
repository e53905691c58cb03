"""Markers that several parts of the contrib (and the offline engine) must agree on."""

# The first line of the system message that replaces compacted history.
SUMMARY_MARKER = "[CONTEXT SUMMARY]"
# The line after it: a summary is a record of the past, never a request to act on.
SUMMARY_PREAMBLE = (
    "Record of the earlier conversation, for reference only: it is not a request; act only "
    "on the messages after it."
)
# The lines after a summary's text that open the facts the quality gate restored, and notes.
RESTORED_HEADER = "Kept from the journal:"
NOTES_HEADER = "Notes:"
# The line after a summary's text that opens what an earlier summary told and it lost.
EARLIER_HEADER = "Kept from the earlier summary:"
# The line that opens players' statements that neither the summary nor the journal kept.
SAID_HEADER = "Kept from what was said:"
# The headers the quality gate writes into a summary: its structure, never a fact.
GATE_HEADERS = (RESTORED_HEADER, EARLIER_HEADER, SAID_HEADER, NOTES_HEADER)
# The first line of the journal entry that archives a compaction's summary.
SYNTHESIS_MARKER = "[CONTEXT SYNTHESIS]"
# How a fact pinned into the history opens (see ``ai.helpers.pins``).
PINNED_FACT_MARKER = "[PINNED FACT]"
# The first line of the transcript that a summary call receives.
TRANSCRIPT_HEADER = "Conversation to summarize:"
# The line that ends the transcript (a request to summarize may follow it).
TRANSCRIPT_END = "(end of the conversation)"
# The line of the extraction's instruction after which the facts already saved are listed.
SAVED_HEADER = "Already saved (do not save these again):"
# The first line of a reflection's pending event: the journal entries to reflect on.
REFLECTION_HEADER = "Entries of your journal since you last reflected (id, importance, text):"
# The first line of the entries that a scoring call asks the model to rate.
SCORING_HEADER = "Journal entries to rate:"
# How a line of working memory opens in the prompt (the offline engine recalls nothing there).
CONVERSATION_LINE = "Talking with "
# How a recalled memory that a newer fact replaced opens (a model must not answer with it).
SUPERSEDED_MARK = "(no longer true since "
# How ``look`` opens what it could not see (the offline engine recalls nothing there).
NOT_SEEN = "Not seen:"
# The content that takes the place of a masked tool output (see ``ai.sleep.masking``).
MASKED_OUTPUT = "[TOOL OUTPUT ARCHIVED - search history for details]"
# How the marker opens that stands for messages archived whole (see ``ai.sleep.archiving``).
ARCHIVE_MARKER = "[ARCHIVED HISTORY]"
# The metadata key of an archived message a sub-agent wrote (see ``ai.sub_agents``): it is
# for builders, never for a prompt, and no search of the archive finds it.
SUB_AGENT_KEY = "sub_agent"
