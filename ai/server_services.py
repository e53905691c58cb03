"""What the server process loads before it serves players: Evennia's server plugin hook.

A game adds this module to ``SERVER_SERVICES_PLUGIN_MODULES`` in its settings. Evennia
calls :func:`start_plugin_services` while it sets the server up, before the reactor runs and
before the portal hands the server its players.

The memory embedder's libraries load in a thread once the server runs
(``ai.process_start``). Importing torch among them holds Python's lock for about 220 ms in
one call (its own initialisation), and for that long the reactor, and every player's
command, waits: once per server process (``bench/startup.py``). Imported here instead, it
makes the start about a second longer and serves no one late. Without this module in the
setting, torch imports in that thread as before.
"""

import importlib

from django.db import DatabaseError
from evennia.utils import logger

from .process_start import uses_memory

# What the embedder imports whose import holds the lock too long to run beside the reactor.
LIBRARIES_BEFORE_SERVING = ("torch",)


def start_plugin_services(server):
    """Import the embedder's slowest library if an assistant here will load long-term
    memory (Evennia calls this with its server service, which needs nothing from us)."""
    try:
        needed = memory_will_load()
    except DatabaseError as err:  # no tables yet: the first start before `evennia migrate`
        logger.log_err(f"AI: could not tell whether an assistant uses long-term memory: {err}")
        return
    if needed:
        for library in LIBRARIES_BEFORE_SERVING:
            importlib.import_module(library)


def memory_will_load():
    """Return whether an active assistant script will load long-term memory at this start."""
    from evennia.scripts.models import ScriptDB

    from .assistant_script import AssistantScript

    return any(
        isinstance(script, AssistantScript) and uses_memory(script)
        for script in ScriptDB.objects.filter(db_is_active=True).iterator()
    )
