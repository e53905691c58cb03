"""The suite itself: it waits on events, never against a clock, and pytest finds it.

A test that passed alone failed on a loaded machine ("Deferred did not fire within
20.0s": its first model call outlasted the wait's deadline). A wait now lasts while
something could still fire what it waits for, and fails at once when nothing could.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from unittest import TestCase

from twisted.internet import defer, reactor, threads

from .support import AfterReactorDelay, During, ScriptedLLM, wait_for

ROOT = Path(__file__).resolve().parents[2]


class TestWaitFor(TestCase):
    def test_a_deferred_that_nothing_can_fire_fails_at_once(self):
        with self.assertRaisesRegex(AssertionError, "can never fire: no thread works for it"):
            wait_for(defer.Deferred())

    def test_threads_at_work_are_waited_for_with_nothing_else_pending(self):
        from ai.llm_interaction import MODEL_CALLS

        def work():
            time.sleep(0.2)  # at work for many turns of an otherwise idle reactor
            return "done"

        for name, start in (("reactor pool", threads.deferToThread), ("ai pool", MODEL_CALLS.run)):
            with self.subTest(name):
                self.assertEqual(wait_for(start(work)), "done")

    def test_a_timer_is_waited_for(self):
        fired = defer.Deferred()
        reactor.callLater(0.05, fired.callback, "later")
        self.assertEqual(wait_for(fired), "later")

    def test_a_failure_is_raised(self):
        with self.assertRaises(ZeroDivisionError):
            wait_for(defer.maybeDeferred(lambda: 1 / 0))


class TestOverlappingSteps(TestCase):
    def test_during_runs_its_action_in_the_reactor_thread_while_the_call_is_in_flight(self):
        from ai.litellm_loader import load_litellm

        during = During(lambda: threading.current_thread() is threading.main_thread(), "hi")
        with ScriptedLLM(during) as llm:
            answer = wait_for(
                threads.deferToThread(
                    load_litellm().completion,
                    model=llm.model,
                    messages=[{"role": "user", "content": "hello"}],
                )
            )
        self.assertIs(during.result(), True)
        self.assertEqual(answer.choices[0].message.content, "hi")

    def test_after_reactor_delay_answers_after_a_timer_set_as_long_before(self):
        from ai.litellm_loader import load_litellm

        fired = []
        with ScriptedLLM(AfterReactorDelay(0.05, "late")) as llm:
            calling = threads.deferToThread(
                load_litellm().completion,
                model=llm.model,
                messages=[{"role": "user", "content": "hello"}],
            )
            timer = reactor.callLater(0.05, fired.append, "timer")
            calling.addCallback(lambda answer: fired.append(answer.choices[0].message.content))
            wait_for(calling)
        self.assertFalse(timer.active())
        self.assertEqual(fired, ["timer", "late"])


class TestPytestFindsTheSuite(TestCase):
    def test_pytest_without_arguments_collects_its_testpaths_without_a_warning(self):
        if not (ROOT / "pyproject.toml").exists():
            self.skipTest("pyproject.toml is not shipped with an installed package")
        if importlib.util.find_spec("pytest_django") is None:
            self.skipTest("pytest-django is not installed (the dev extra has it)")
        # The settings of pyproject.toml, not those of a runner that started this test.
        env = {
            name: value for name, value in os.environ.items() if name != "DJANGO_SETTINGS_MODULE"
        }
        # One file as testpaths, as pyproject's ai/tests would be: before, Evennia's
        # settings left the process in another directory, where pytest found no testpaths
        # and collected the whole checkout instead, with a warning.
        collected = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--collect-only",
                "-q",
                "-p",
                "no:cacheprovider",
                "-o",
                "testpaths=ai/tests/test_echo.py",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        self.assertEqual(collected.returncode, 0, collected.stdout + collected.stderr)
        warned = "No files were found in testpaths" in collected.stdout
        self.assertFalse(warned, "pytest found no testpaths and collected the whole checkout")
        nodes = [line for line in collected.stdout.splitlines() if "::" in line]
        self.assertTrue(nodes)
        self.assertEqual({line.split("::")[0] for line in nodes}, {"ai/tests/test_echo.py"})


class TestLogsStayOutOfEvennia(TestCase):
    def test_the_suite_and_the_benchmarks_log_outside_the_installed_evennia(self):
        """Logs written into Evennia's game template are copied into every game that
        `evennia --init` makes from that installation (we found 33 AIlog channel logs and
        lock warnings of several MB in a new game)."""
        import evennia
        from django.conf import settings

        sys.path.insert(0, str(ROOT / "bench"))
        from bench_env import _settings_module

        template = os.path.dirname(evennia.__file__)
        folder = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, folder)
        bench = _settings_module(os.path.join(folder, "bench.db3"))
        for where in (settings, bench):
            for name in ("LOG_DIR", "SERVER_LOG_FILE", "LOCKWARNING_LOG_FILE", "HTTP_LOG_FILE"):
                path = os.path.abspath(getattr(where, name))
                self.assertFalse(path.startswith(template), f"{name} is {path}")
