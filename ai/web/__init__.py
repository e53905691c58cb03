"""The assistant inspector: pages of the game's website that show builders inside an
assistant (its context, compactions, journal, memories, profiles and goals), and its JSON.

A game includes ``ai.web.urls`` from its ``web/website/urls.py`` (see docs/inspector.md).
"""
