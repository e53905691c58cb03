"""Markers that several parts of the contrib (and the offline engine) must agree on."""

# The first line of the system message that replaces compacted history.
SUMMARY_MARKER = "[CONTEXT SUMMARY]"
# The first line of the journal entry that archives a compaction's summary.
SYNTHESIS_MARKER = "[CONTEXT SYNTHESIS]"
# The first line of the transcript that a summary call receives.
TRANSCRIPT_HEADER = "Conversation to summarize:"
# The line that ends the transcript (a request to summarize may follow it).
TRANSCRIPT_END = "(end of the conversation)"
# The line of the extraction's instruction after which the facts already saved are listed.
SAVED_HEADER = "Already saved (do not save these again):"
# The first line of the entries that a scoring call asks the model to rate.
SCORING_HEADER = "Journal entries to rate:"
# How a line of working memory opens in the prompt (the offline engine recalls nothing there).
CONVERSATION_LINE = "Talking with "
# How a recalled memory that a newer fact replaced opens (a model must not answer with it).
SUPERSEDED_MARK = "(no longer true since "
# The content that takes the place of a masked tool output (see ``ai.sleep.masking``).
MASKED_OUTPUT = "[TOOL OUTPUT ARCHIVED - search history for details]"
