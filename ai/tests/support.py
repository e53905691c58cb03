"""Test support: run Twisted's real reactor until a Deferred fires, and build assistants.

The suite does not start the reactor; ``wait_for`` starts its thread pool and iterates
it, so ``deferToThread`` and ``callLater`` run for real, as in the server. No test waits
against a clock: a loaded machine makes the suite slower, never failing.
"""

import faulthandler
import gc
import json
import sys
import threading
import types

from django.db import connection
from django.test import TransactionTestCase, override_settings
from django.test.utils import CaptureQueriesContext
from evennia.utils import create
from evennia.utils.test_resources import (
    DEFAULT_SETTINGS,
    BaseEvenniaCommandTest,
    BaseEvenniaTest,
    EvenniaTestMixin,
)
from twisted.internet import reactor
from twisted.internet.task import deferLater
from twisted.internet.threads import blockingCallFromThread
from twisted.python.failure import Failure

from ai.model_refusals import forget_refusals
from ai.utils.thread_pools import LazyPool

ASSISTANT = "ai.assistant_character.AssistantCharacter"
# How long a wait lasts before it prints every thread's stack: a report, never a failure.
HANG_REPORT_SECONDS = 600


def wait_for(deferred):
    """Iterate the reactor until ``deferred`` fires; return its result or raise its error.

    The wait has no time limit: it lasts while something could still fire ``deferred`` (a
    thread of a pool at work, a call from a thread waiting for the reactor, a timer), and
    fails at once when nothing could. A thread that never ends (a deadlock) would make it
    last forever: after ``HANG_REPORT_SECONDS`` every thread's stack is printed, once, to
    show where, and the wait goes on.
    """
    start_reactor_threads()
    pools = thread_pools()
    outcome = []
    deferred.addBoth(outcome.append)
    # To the process's own stderr: a test may have redirected sys.stderr to a buffer.
    faulthandler.dump_traceback_later(HANG_REPORT_SECONDS, file=sys.__stderr__)
    try:
        while not outcome:
            reactor.iterate(0.005)
            if not outcome and nothing_pending(pools):
                raise AssertionError(
                    "The Deferred can never fire: no thread works for it, no call waits for "
                    "the reactor and no timer is set"
                )
    finally:
        faulthandler.cancel_dump_traceback_later()
    result = outcome[0]
    if isinstance(result, Failure):
        result.raiseException()
    return result


def start_reactor_threads():
    """Start the reactor's thread pool (``deferToThread``), which only a running reactor
    starts; its threads are daemons, as nothing stops the reactor in a test run."""
    pool = reactor.getThreadPool()
    if not pool.started:
        pool.threadFactory = lambda *args, **kwargs: threading.Thread(*args, daemon=True, **kwargs)
        pool.start()


def thread_pools():
    """Return the reactor's thread pool and the contrib's own pools (``LazyPool``), those
    held by a module of ``ai`` or by an object such a module holds."""
    found = {id(reactor.getThreadPool()): reactor.getThreadPool()}
    skipped = (type, types.ModuleType, types.FunctionType)
    for name, module in list(sys.modules.items()):
        if name != "ai" and not name.startswith("ai."):
            continue
        for value in list(vars(module).values()):
            held = (
                [] if isinstance(value, skipped) else list(getattr(value, "__dict__", {}).values())
            )
            for candidate in (value, *held):
                if isinstance(candidate, LazyPool):
                    found[id(candidate)] = candidate
    return list(found.values())


def nothing_pending(pools):
    """Tell whether nothing is left that could fire a Deferred: no active timer, no thread of
    ``pools`` at work or queued, no call from a thread waiting for the reactor, no socket.

    The pools are read before the reactor's queue: a thread queues its result before its
    pool counts it idle, so a result cannot slip between the two readings.
    """
    if any(call.active() for call in reactor.getDelayedCalls()):
        return False
    for pool in pools:
        if isinstance(pool, LazyPool):
            pool = pool._pool  # None until its first call starts it
        if pool is not None and (pool.working or pool._queue.qsize()):
            return False
    if reactor.threadCallQueue:
        return False
    waker = getattr(reactor, "waker", None)
    return not [io for io in (*reactor.getReaders(), *reactor.getWriters()) if io is not waker]


class During:
    """A ``ScriptedLLM`` step that runs ``action()`` in the reactor thread while its call is
    in flight, then answers: what happens "during a model call" happens there, whatever the
    machine's speed.

    Args:
        action (callable): Run in the reactor thread; may return a Deferred.
        answer: The step the call then plays (text by default).

    Attributes:
        outcome: What ``action`` returned (or its Deferred's result); ``result()`` re-raises
            what it raised.
    """

    def __init__(self, action, answer="ok"):
        self.action = action
        self.answer = answer
        self.outcome = self.error = None

    def __call__(self, messages, request):
        try:
            self.outcome = blockingCallFromThread(reactor, self.action)
        except Exception as err:  # re-raised in the test, not into the model call
            self.error = err
        return self.answer

    def result(self):
        """Return what ``action`` gave, or raise what it raised."""
        if self.error is not None:
            raise self.error
        return self.outcome


class AfterReactorDelay:
    """A ``ScriptedLLM`` step that answers once ``seconds`` have passed on the reactor after
    the call began: every timer the caller set for that long before the call fires first.

    Args:
        seconds (float): How long, as the reactor's timers count it.
        answer: The step the call then plays.
    """

    def __init__(self, seconds, answer="late answer"):
        self.seconds = seconds
        self.answer = answer

    def __call__(self, messages, request):
        # A millisecond more than the caller's timer, set later: it fires after that timer.
        blockingCallFromThread(reactor, deferLater, reactor, self.seconds + 0.001, lambda: None)
        return self.answer


class Unanswered:
    """A ``ScriptedLLM`` step that does not answer until released: its call can only end by
    the gateway's own timeout. Release it when the test ends (``addCleanup(step.release)``).

    It answers after ``BROKEN_GATEWAY_SECONDS`` anyway, a bound that only a gateway whose
    timeout failed reaches, so that such a failure ends the test instead of hanging it.
    """

    BROKEN_GATEWAY_SECONDS = 600

    def __init__(self, answer="too late"):
        self.answer = answer
        self.released = threading.Event()

    def __call__(self, messages, request):
        self.released.wait(self.BROKEN_GATEWAY_SECONDS)
        return self.answer

    def release(self):
        """Let the call answer (its caller has stopped waiting for it)."""
        self.released.set()


def query_plans(operation, table):
    """Run ``operation`` and return ``(statement, SQLite's plan)`` of each statement it ran
    that reads or changes ``table`` (SQLite only: ``EXPLAIN QUERY PLAN``)."""
    with CaptureQueriesContext(connection) as queries:
        operation()
    plans = []
    with connection.cursor() as cursor:
        for query in queries:
            if table in query["sql"] and not query["sql"].startswith("INSERT"):
                cursor.execute(f"EXPLAIN QUERY PLAN {query['sql']}")
                plans.append((query["sql"], " ".join(str(row[-1]) for row in cursor.fetchall())))
    return plans


def record_messages(obj):
    """Return a list that collects the text of every message ``obj`` receives from now on."""
    received = []
    original = obj.msg

    def msg(text=None, *args, **kwargs):
        received.append(text[0] if isinstance(text, tuple) else text)
        return original(text, *args, **kwargs)

    obj.msg = msg
    return received


def store_window(script, tokens):
    """Store a ``max_context_tokens`` smaller than a builder may set (below the prompt frame).

    Tests of compaction at tiny windows need one; ``set_config`` refuses it.
    """
    script.attributes.add("max_context_tokens", tokens)


def make_assistant(key, location):
    """Create an assistant whose ticks only the test drives.

    The script's own timer is stopped: left running, it would fire during a later test's
    ``wait_for``, against objects that test's database no longer has.
    """
    assistant = create.create_object(ASSISTANT, key=key, location=location, home=location)
    assistant.assistant_script._stop_task()
    return assistant


class WithAssistant:
    """Mixed into an Evennia test case: an assistant in Room beside Char and Char2."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        freeze_loaded_objects()

    def setUp(self):
        super().setUp()
        self.assistant = make_assistant("Helper", self.room1)
        self.script = self.assistant.assistant_script
        # The switch to tools listed as text is kept in memory as well as in the test's
        # (rolled back) database: each test starts and ends without one, under pytest and
        # `evennia test` alike (whose runner knows no pytest fixture). So are the models
        # that refused their key.
        forget_tool_offerings()
        self.addCleanup(forget_tool_offerings)
        forget_refusals()
        self.addCleanup(forget_refusals)

    def tick(self):
        """Run one tick through ``at_repeat`` and return its result dict."""
        return wait_for(self.script.at_repeat())

    def hear(self, text, speaker=None):
        """Queue ``text`` as said by ``speaker`` (Char by default), as the room would."""
        speaker = speaker or self.char1
        self.script.queue_event(
            {"type": "speech", "speaker": speaker.dbref, "speaker_name": speaker.key, "text": text}
        )

    def tick_on(self, *steps, text):
        """Hear ``text``, then run one tick on a scripted model (kept as ``self.llm``)."""
        with ScriptedLLM(*steps) as llm:
            self.script.set_config("llm_model", llm.model)
            self.hear(text)
            self.llm = llm
            return self.tick()


def freeze_loaded_objects():
    """Freeze what the test process holds once it is loaded (Django, Evennia, torch, Mem0),
    unless something is frozen already: the garbage collector's full collections then skip
    it, as the freezer's do in a server (``ai.utils.gc_freeze``), without its hourly thaw.
    Again after a test of the freezer thawed everything."""
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()


def forget_tool_offerings():
    """Forget which models were switched to tools listed as text (``ai.tool_offering``)."""
    from ai.tool_offering import _as_text

    _as_text.clear()


# Evennia's test cases reset the settings to its defaults, whose INSTALLED_APPS lack ours
# under pytest: without it Django knows no relation to our tables (a deleted entry's
# links, words...). A game's `INSTALLED_APPS += ["ai"]` adds it to those defaults in place.
# Nor does a test start the garbage collector's freezer, whatever the game's settings say
# (`evennia test` reads them): its hourly thaw would be a timer that ``wait_for`` counts as
# something that could still fire (the loaded objects are frozen once instead:
# ``freeze_loaded_objects``).
_DEFAULT_APPS = DEFAULT_SETTINGS["INSTALLED_APPS"]
WITH_THIS_APP = override_settings(
    INSTALLED_APPS=[*_DEFAULT_APPS, *(["ai"] if "ai" not in _DEFAULT_APPS else [])],
    AI_GC_FREEZE=False,
)


@WITH_THIS_APP
class AssistantCommandTestCase(WithAssistant, BaseEvenniaCommandTest):
    """An Evennia command test with an assistant in Room beside Char and Char2."""


@WITH_THIS_APP
class AssistantTestCase(WithAssistant, BaseEvenniaTest):
    """An Evennia test with an assistant in Room beside Char and Char2."""


@WITH_THIS_APP
class AssistantTransactionTestCase(WithAssistant, EvenniaTestMixin, TransactionTestCase):
    """An assistant test whose writes commit, as in a server, so that what a worker thread
    reads on its own connection sees them; every table is emptied after each test."""


class ScriptedLLM:
    """A litellm custom provider for tests: each call plays the next scripted step.

    A step is an exception instance (raised), a string (answered as text), a list of
    ``(tool name, arguments dict)`` (answered with those tool calls), or a callable given
    the call's messages and request (see ``requests``) that returns one of those: a model
    that answers by what it is sent. ``During``, ``AfterReactorDelay`` and ``Unanswered``
    are such callables, for a call that something else must overlap (never a sleep: how
    long a thread takes to start is the machine's business). The LLM boundary is the only
    thing tests replace.

    Args:
        *steps: The answers, in order ("ok" once they run out).
        provider (str): The litellm provider name it registers.
        prompt_tokens (callable, optional): ``prompt_tokens(messages, tools) -> int``, the
            usage the provider reports, as a real server does.

    Attributes:
        calls (list): The messages of each call.
        requests (list): What each call carried besides: ``api_base``, ``api_key``,
            ``timeout`` and the ``optional_params`` (temperature, max_tokens, tools...).
    """

    def __init__(self, *steps, provider="scripted", prompt_tokens=None):
        from litellm import CustomLLM

        self.steps = list(steps)
        self.calls = []
        self.requests = []
        self.provider = provider
        self.prompt_tokens = prompt_tokens
        outer = self

        class Handler(CustomLLM):
            def completion(
                self, model, messages, api_base, custom_prompt_dict, model_response, *args, **kwargs
            ):
                outer.requests.append(
                    {
                        "api_base": api_base,
                        "api_key": kwargs.get("api_key"),
                        "timeout": kwargs.get("timeout"),
                        **(kwargs.get("optional_params") or {}),
                    }
                )
                return outer.answer(messages, model_response)

        self.handler = Handler()

    @property
    def model(self):
        return f"{self.provider}/test"

    def answer(self, messages, model_response):
        self.calls.append(messages)
        step = self.steps.pop(0) if self.steps else "ok"
        if callable(step):
            step = step(messages, self.requests[-1] if self.requests else {})
        if isinstance(step, BaseException):
            raise step
        message = model_response.choices[0].message
        if isinstance(step, list):
            from litellm.types.utils import ChatCompletionMessageToolCall, Function

            message.content = None
            message.tool_calls = [
                ChatCompletionMessageToolCall(
                    id=f"call_{len(self.calls)}_{index}",
                    type="function",
                    function=Function(name=name, arguments=json.dumps(arguments)),
                )
                for index, (name, arguments) in enumerate(step)
            ]
            model_response.choices[0].finish_reason = "tool_calls"
        else:
            message.content = step
        if self.prompt_tokens:
            from litellm.types.utils import Usage

            tools = self.requests[-1].get("tools") if self.requests else None
            reported = self.prompt_tokens(messages, tools)
            model_response.usage = Usage(
                prompt_tokens=reported, completion_tokens=1, total_tokens=reported + 1
            )
        return model_response

    def __enter__(self):
        from litellm.utils import custom_llm_setup

        from ai.litellm_loader import load_litellm

        litellm = load_litellm()
        self._saved = list(litellm.custom_provider_map)
        litellm.custom_provider_map = self._saved + [
            {"provider": self.provider, "custom_handler": self.handler}
        ]
        custom_llm_setup()
        return self

    def __exit__(self, *exc):
        from ai.litellm_loader import load_litellm

        load_litellm().custom_provider_map = self._saved
