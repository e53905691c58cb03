"""Keep Python's full garbage collections from stalling the reactor.

A server with the model libraries and the memory embedder loaded holds close to a million
long-lived objects (torch, transformers, litellm, Evennia's own), and every full
collection walks all of them: measured with fifty assistants, single stalls of 2.3 s.
At a start, and again once the server has loaded them, ``gc.freeze()`` moves what exists
to a permanent generation that collections skip (stalls then stayed under 0.35 s; see
docs/benchmarks.md, "Reactor lag"). Garbage among them waits for the first thaw (below):
a full collection to find it first held the reactor for up to half a second.

What lives long later is frozen too: the messages the assistants hold (400,000 for 200
assistants of 2,000 messages, each a dict holding its metadata dict, which the collector
always walks) made every full collection hold the reactor for a quarter of a second, every
few seconds. So what survives each full collection is frozen with the rest, and every
``AI_GC_THAW_SECONDS`` everything is thawed and collected once: a cycle of objects frozen
while alive that died since (a closed connection's protocol and transport, objects Evennia's
idmapper flushed from its cache) is freed then, not before. That collection walks every
object, those loaded at start too: one stall an interval as long as a full collection
without freezing (a fraction of a second to seconds, with the model libraries loaded).
``AI_GC_FREEZE = False`` turns all of it off.
"""

import gc
import time

from evennia.utils import logger
from twisted.internet import defer, task

from ..config import ai_setting

_frozen = []


def freeze_when_loaded(*loading):
    """Freeze the objects alive now and again once every Deferred in ``loading`` has fired,
    then the survivors of each full collection (once a process)."""
    if _frozen or not ai_setting("AI_GC_FREEZE"):
        return defer.succeed(None)
    _frozen.append(True)
    # What the server has loaded already (Evennia, Django), and from now on what survives
    # each full collection: the collections made while the libraries load in their threads
    # (holding the GIL) walk only what was made since the last one. Before, each walked
    # everything loaded so far, up to 0.4 s at the end of the embedder's loading.
    gc.freeze()
    SURVIVORS.start(ai_setting("AI_GC_THAW_SECONDS"))
    waiting = defer.DeferredList(list(loading), consumeErrors=True)
    waiting.addCallback(lambda _: _freeze())
    return waiting


def _freeze():
    # No full collection first (see the module's docstring), and no count of the frozen
    # objects for the log: a walk over them all, 80 ms with the embedder loaded.
    gc.freeze()
    logger.log_info("AI: what the server loaded at start is left out of GC")


class SurvivorFreezer:
    """Freezes what survives each full collection; thaws and collects everything at an
    interval."""

    def __init__(self):
        self._thawing = None

    def start(self, interval):
        """Freeze the survivors of each full collection from now on; thaw every
        ``interval`` seconds."""
        if self._thawing is not None:
            return
        gc.callbacks.append(self._after_collection)
        self._thawing = task.LoopingCall(self.thaw)
        self._thawing.start(interval, now=False).addErrback(self._failed)

    def stop(self):
        """Freeze nothing more and thaw no more (what is frozen stays frozen)."""
        if self._thawing is None:
            return
        gc.callbacks.remove(self._after_collection)
        if self._thawing.running:
            self._thawing.stop()
        self._thawing = None

    def _failed(self, failure):
        """A thaw failed: freeze no more, since nothing would thaw what is frozen."""
        logger.log_err(f"AI: GC thaw failed, survivors no longer frozen: {failure.value}")
        self.stop()

    @staticmethod
    def _after_collection(phase, info):
        # A full collection leaves the young generations empty: only survivors are frozen.
        if phase == "stop" and info["generation"] == 2:
            gc.freeze()

    @staticmethod
    def thaw():
        """Collect every object once, the frozen ones too (the survivors are frozen again):
        one long collection an interval instead of one every few seconds."""
        frozen = gc.get_freeze_count()
        gc.unfreeze()
        started = time.perf_counter()
        freed = gc.collect()
        took = (time.perf_counter() - started) * 1000
        logger.log_info(
            f"AI: GC thawed {frozen} frozen objects: {freed} unreachable freed in {took:.0f} ms"
        )


SURVIVORS = SurvivorFreezer()
