"""Helpers used by the tick, the prompt builder and the sleep pipeline."""
