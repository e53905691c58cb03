"""Work spread over the reactor's turns, so that no turn holds the server for long.

A server start hands the reactor a lot at once: every assistant's timer to restart and,
with its first tick, every history to read. Given here, that work runs a step at a time,
all of it in turns on one :class:`twisted.internet.task.Cooperator`, ``SLICE_S`` of a
reactor turn at most (always at least one step a turn).
"""

import time

from twisted.internet import task

SLICE_S = 0.005


def _slice():
    """Return what ends a reactor turn's share: true once ``SLICE_S`` has passed."""
    ends = time.monotonic() + SLICE_S
    return lambda: time.monotonic() >= ends


_TURNS = task.Cooperator(terminationPredicateFactory=_slice)


def in_turns(steps):
    """Run the iterator ``steps`` a step at a time, in turns with the other work given here.

    Returns:
        Deferred: Fires with the iterator once it is exhausted, or fails with what a step
        raised.
    """
    return _TURNS.cooperate(steps).whenDone()
