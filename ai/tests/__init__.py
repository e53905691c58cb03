"""The evennia-ai test suite."""
