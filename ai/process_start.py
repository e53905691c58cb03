"""What a server process does at its start for its assistants: what it loads once, and
their timers restarted in turns.

Evennia restarts every script's timer and calls its ``at_server_start`` in one loop, and
nothing else runs on the reactor until it ends: with 200 assistants, work repeated in each
hook (reading the whole configuration, the stored token calibrations and tool offerings,
the log channel's subscribers) stalled the server for seconds (``bench/startup.py``). A
reload starts a new server process, so once per process is once per start.
"""

from evennia.utils import logger
from twisted.internet import defer, threads

from .config import ai_setting, default_value
from .litellm_loader import load_litellm
from .log_channel import open_log_channel
from .semantic_memory import WORKER
from .token_calibration import load_calibrations
from .tool_offering import load_tool_offerings
from .utils.gc_freeze import freeze_when_loaded
from .utils.reactor_turns import in_turns
from .utils.token_counter import load_tokenizer

# What this process has started: "shared" (the stored choices, the log channel, litellm)
# and "memory" (the embedder, once an assistant with long-term memory starts).
STARTED = set()


def start_process(script):
    """Do what the first start hook of a process does, and load long-term memory for the
    first assistant that uses it.

    Importing litellm and loading a tokenizer or the memory embedder take from a few
    hundred ms to seconds, so they run in worker threads rather than in the first tick;
    once loaded, what they made is left out of garbage collection (``ai.utils.gc_freeze``).

    Returns:
        Deferred: Fires once what this call started loading is loaded (or failed, logged).
    """
    loading = []
    if "shared" not in STARTED:
        STARTED.add("shared")
        load_calibrations()
        load_tool_offerings()
        open_log_channel()
        loading.append(_failure_logged(threads.deferToThread(load_litellm), "litellm"))
        # Its first count would hold the reactor for a few hundred ms: the first assistant's
        # model's tokenizer (another model's loads at its first count).
        model = script.attributes.get("llm_model") or ai_setting("AI_LLM_MODEL")
        loading.append(
            _failure_logged(
                threads.deferToThread(load_tokenizer, model), f"the tokenizer of {model}"
            )
        )
    if "memory" not in STARTED and uses_memory(script):
        STARTED.add("memory")
        loading.append(_failure_logged(WORKER.preload(), "long-term memory"))
    if loading:
        freeze_when_loaded(*loading)
    return defer.DeferredList(loading)


def uses_memory(script):
    """Return whether the assistant ``script`` uses long-term memory. One attribute, not
    the whole configuration: a preload needs no checked value."""
    return script.attributes.get("memory_enabled", default=default_value("memory_enabled"))


def _failure_logged(loading, what):
    """Return the Deferred ``loading``, its failure logged as ``what`` failing to load."""
    return loading.addErrback(
        lambda failure: logger.log_err(f"AI: {what} failed to load: {failure.getErrorMessage()}")
    )


def restart_in_turns(script, restart):
    """Call ``restart(auto_unpause=True)`` (Evennia's ``_unpause_task`` of ``script``) in
    the reactor's turns, with the other assistants' (``ai.utils.reactor_turns``), instead of
    inside Evennia's start loop.

    Until then the script stays paused as the reload left it. A pause meanwhile calls the
    restart off (:func:`call_off_restart`): a reload's, whose shutdown still turns the
    reactor, must leave the pause for the next start to restart. A timer that no pause
    stopped (the process was killed or crashed: Evennia pauses timers only when it shuts
    down itself) starts anew, where Evennia would leave it stopped for good.

    Returns:
        Deferred: Fires once the timer is restarted or the restart called off (a failure
        is logged).
    """
    script.ndb.restart_waits = True

    def steps():
        if script.ndb.restart_waits:
            script.ndb.restart_waits = False
            if script.pk and not script.db._paused_time:
                script._start_task()
            else:
                restart(auto_unpause=True)
        yield

    return in_turns(steps()).addErrback(
        lambda failure: logger.log_err(
            f"AI {script.label}: its timer did not restart: {failure.getErrorMessage()}"
        )
    )


def call_off_restart(script):
    """Call off the restart of ``script``'s timer waiting in :func:`restart_in_turns`, if
    any; return whether one waited."""
    waited = bool(script.ndb.restart_waits)
    script.ndb.restart_waits = False
    return waited
