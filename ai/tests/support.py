"""Test support: run Twisted's real reactor until a Deferred fires, and build assistants.

The suite does not start the reactor; ``wait_for`` starts its thread pool and iterates
it, so ``deferToThread`` and ``callLater`` run for real, as in the server.
"""

import time

from evennia.utils import create
from evennia.utils.test_resources import BaseEvenniaTest
from twisted.internet import reactor
from twisted.python.failure import Failure

ASSISTANT = "ai.assistant_character.AssistantCharacter"


def wait_for(deferred, timeout=20.0):
    """Iterate the reactor until ``deferred`` fires; return its result or raise its error."""
    pool = reactor.getThreadPool()
    if not pool.started:
        pool.start()
    outcome = []
    deferred.addBoth(outcome.append)
    deadline = time.monotonic() + timeout
    while not outcome:
        if time.monotonic() > deadline:
            raise AssertionError(f"Deferred did not fire within {timeout}s")
        reactor.iterate(0.005)
    result = outcome[0]
    if isinstance(result, Failure):
        result.raiseException()
    return result


class AssistantTestCase(BaseEvenniaTest):
    """An Evennia test with an assistant in Room beside Char and Char2."""

    def setUp(self):
        super().setUp()
        self.assistant = create.create_object(
            ASSISTANT, key="Helper", location=self.room1, home=self.room1
        )
        self.script = self.assistant.assistant_script

    def tick(self):
        """Run one tick through ``at_repeat`` and return its result dict."""
        return wait_for(self.script.at_repeat())
