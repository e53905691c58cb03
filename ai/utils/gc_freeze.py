"""Keep Python's full garbage collections from stalling the reactor.

A server with the model libraries and the memory embedder loaded holds close to a million
long-lived objects (torch, transformers, litellm, Evennia's own), and every full
collection walks all of them: measured with fifty assistants, single stalls of 2.3 s.
Once the server has loaded them, ``gc.freeze()`` moves what exists to a permanent
generation that collections skip (stalls then stayed under 0.35 s; see docs/benchmarks.md,
"Reactor lag"). Objects made later are collected as always. ``AI_GC_FREEZE = False``
turns it off.
"""

import gc

from evennia.utils import logger
from twisted.internet import defer

from ..config import ai_setting

_frozen = []


def freeze_when_loaded(*loading):
    """Freeze the objects alive once every Deferred in ``loading`` has fired (once a process)."""
    if _frozen or not ai_setting("AI_GC_FREEZE"):
        return defer.succeed(None)
    _frozen.append(True)
    waiting = defer.DeferredList(list(loading), consumeErrors=True)
    waiting.addCallback(lambda _: _freeze())
    return waiting


def _freeze():
    gc.collect()
    gc.freeze()
    logger.log_info(f"AI: {gc.get_freeze_count()} objects loaded at start left out of GC")
