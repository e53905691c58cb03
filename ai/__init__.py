"""evennia-ai: an LLM assistant NPC for Evennia whose context never overflows."""
