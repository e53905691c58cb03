"""What a server process loads once at its start, for all its assistants.

Evennia calls every script's ``at_server_start`` in one loop, and nothing else runs on the
reactor until it ends: with 200 assistants, work repeated in each hook (reading the whole
configuration, the stored token calibrations and tool offerings, the log channel's
subscribers) stalled the server for seconds (``bench/startup.py``). A reload starts a new
server process, so once per process is once per start.
"""

from evennia.utils import logger
from twisted.internet import threads

from .config import default_value
from .litellm_loader import load_litellm
from .log_channel import open_log_channel
from .semantic_memory import WORKER
from .token_calibration import load_calibrations
from .tool_offering import load_tool_offerings
from .utils.gc_freeze import freeze_when_loaded

# What this process has started: "shared" (the stored choices, the log channel, litellm)
# and "memory" (the embedder, once an assistant with long-term memory starts).
STARTED = set()


def start_process(script):
    """Do what the first start hook of a process does, and load long-term memory for the
    first assistant that uses it.

    Importing litellm and loading the memory embedder take seconds, so they run in worker
    threads rather than in the first tick; once loaded, what they made is left out of
    garbage collection (``ai.utils.gc_freeze``).
    """
    loading = []
    if "shared" not in STARTED:
        STARTED.add("shared")
        load_calibrations()
        load_tool_offerings()
        open_log_channel()
        loading.append(
            threads.deferToThread(load_litellm).addErrback(
                lambda failure: logger.log_err(
                    f"AI: litellm failed to load: {failure.getErrorMessage()}"
                )
            )
        )
    # One attribute, not the whole configuration: a preload needs no checked value.
    if "memory" not in STARTED and script.attributes.get(
        "memory_enabled", default=default_value("memory_enabled")
    ):
        STARTED.add("memory")
        loading.append(
            WORKER.preload().addErrback(
                lambda failure: logger.log_err(
                    f"AI: long-term memory failed to load: {failure.getErrorMessage()}"
                )
            )
        )
    if loading:
        freeze_when_loaded(*loading)
