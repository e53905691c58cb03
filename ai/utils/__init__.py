"""Leaf utilities: they import nothing else from the `ai` package."""
