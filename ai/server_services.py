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

from evennia.utils import logger

from .process_start import uses_memory

# What the embedder imports whose import holds the lock too long to run beside the reactor.
LIBRARIES_BEFORE_SERVING = ("torch",)


def start_plugin_services(server):
    """Import the embedder's slowest library if an assistant here will load long-term memory.

    A failure is logged and the start goes on: the library then loads, or fails to, in the
    start's loading thread, as without this hook.

    Args:
        server (EvenniaServerService): Evennia's server service (nothing is added to it).
    """
    try:
        if memory_will_load():
            for library in LIBRARIES_BEFORE_SERVING:
                importlib.import_module(library)
    except Exception:  # a speed-up must never stop a start
        logger.log_trace("AI: loading long-term memory's libraries before serving failed")


def memory_will_load():
    """Return whether an assistant script will load long-term memory at this start.

    Evennia calls the start hook of every script, stopped ones too, and the first hook of an
    assistant that uses memory preloads it. Only the assistants' scripts are read, found by
    importing each stored typeclass path: Evennia's ``filter_family`` knows only the
    subclasses imported so far, and a game's own ``AssistantScript`` subclass may not be
    imported yet this early.
    """
    from evennia.scripts.models import ScriptDB

    paths = ScriptDB.objects.order_by().values_list("db_typeclass_path", flat=True).distinct()
    ours = [path for path in paths if _is_assistant_script(path)]
    return any(
        uses_memory(script)
        for script in ScriptDB.objects.filter(db_typeclass_path__in=ours).iterator()
    )


def _is_assistant_script(path):
    """Return whether the typeclass at ``path`` is an assistant's script (False if it does not
    import: Evennia reports that itself when it loads the script)."""
    from evennia.utils.utils import class_from_module

    from .assistant_script import AssistantScript

    try:
        return issubclass(class_from_module(path), AssistantScript)
    except ImportError:
        return False
