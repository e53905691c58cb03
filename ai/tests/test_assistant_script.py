"""The script's tick machinery: busy guard, errback, modes, events, hearing."""

import gc
import shutil
import sys
import tempfile
import weakref
from importlib import import_module
from pathlib import Path
from unittest.mock import patch

from django.apps import apps
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from twisted.internet import defer

from ai.helpers.call_log import RUNS_KEPT, note_run, recent_runs
from ai.llm_interaction import LLMResult
from ai.models import ModelRun
from ai.process_start import restart_in_turns, start_process
from ai.utils import gc_freeze
from ai.utils.gc_freeze import freeze_when_loaded

from .support import AssistantTestCase, ScriptedLLM, make_assistant, wait_for


class TestBusyGuard(AssistantTestCase):
    def test_a_tick_during_a_running_tick_is_skipped_and_counted(self):
        self.char1.execute_cmd("say are you there?")
        with ScriptedLLM("I am here") as llm:
            self.script.set_config("llm_model", llm.model)
            # Its model call answers in a thread, which only a turn of the reactor (in
            # wait_for) can deliver: the tick is still running for the next two.
            first = self.script.at_repeat()
            self.assertIsNone(self.script.at_repeat())
            self.assertIsNone(self.script.at_repeat())
            self.assertEqual(self.script.ndb.skipped_ticks, 2)
            result = wait_for(first)
        self.assertEqual(result["status"], "replied")
        self.assertFalse(self.script.ndb.tick_running)
        self.assertEqual(len(llm.calls), 1)

    def test_a_failing_tick_is_logged_and_the_guard_released(self):
        with patch.object(self.script, "awake_tick", side_effect=RuntimeError("boom")):
            with patch("ai.assistant_script.logger.log_trace") as log_trace:
                result = self.tick()
        self.assertEqual(result, {"status": "error", "error": "boom"})
        self.assertIn("tick failed: boom", log_trace.call_args.args[0])
        self.assertFalse(self.script.ndb.tick_running)
        self.assertEqual(self.tick()["status"], "idle")

    def test_an_error_after_a_deferred_is_not_lost(self):
        def late_failure(character, config):
            return defer.succeed(None).addCallback(lambda _: 1 / 0)

        with patch.object(self.script, "awake_tick", side_effect=late_failure):
            with patch("ai.assistant_script.logger.log_trace") as log_trace:
                result = self.tick()
        self.assertEqual(result["status"], "error")
        self.assertIn("division by zero", log_trace.call_args.args[0])


class TestLLMFailureInTick(AssistantTestCase):
    def test_a_failed_model_call_keeps_the_event_and_tells_the_room(self):
        self.char1.execute_cmd("say hello")
        failed = LLMResult(ok=False, error_kind="timeout", error="no answer within 60s")
        with patch("ai.tool_execution.call_llm", return_value=defer.succeed(failed)):
            with patch.object(self.char1, "msg") as char1_msg:
                result = self.tick()
        self.assertEqual(result["status"], "llm_error")
        self.assertEqual(result["llm"].error_kind, "timeout")
        self.assertEqual([m["role"] for m in self.script.conversation_history], ["user"])
        self.assertIn("does not answer", str(char1_msg.call_args))


class TestEvents(AssistantTestCase):
    def test_the_assistant_hears_say_and_whisper_but_not_itself(self):
        self.char1.execute_cmd("say the gate opens at dawn")
        self.char2.execute_cmd("whisper Helper = the password is mellon")
        self.assistant.execute_cmd("say I talk to myself")
        events = self.script.pending_events()
        self.assertEqual(
            [e["text"] for e in events], ["the gate opens at dawn", "the password is mellon"]
        )
        self.assertEqual(events[0]["speaker"], self.char1.dbref)

    def test_other_assistants_are_not_heard(self):
        other = make_assistant("Echo", self.room1)
        other.execute_cmd("say hello Helper")
        self.assertEqual(self.script.pending_events(), [])

    @override_settings(AI_MAX_PENDING_EVENTS=3)
    def test_a_full_queue_drops_the_oldest(self):
        for number in range(5):
            self.char1.execute_cmd(f"say line {number}")
        self.assertEqual(
            [e["text"] for e in self.script.pending_events()], ["line 2", "line 3", "line 4"]
        )

    def test_events_are_handled_in_order_one_per_tick(self):
        self.char1.execute_cmd("say first")
        self.char2.execute_cmd("say second")
        self.assertEqual(self.tick()["event"]["text"], "first")
        self.assertEqual(self.tick()["event"]["text"], "second")
        self.assertEqual(self.tick()["status"], "idle")

    def test_waiting_events_outlive_a_reload_and_an_empty_queue_costs_no_query(self):
        self.char1.execute_cmd("say the gate opens at dawn")
        self.script.ndb.pending_event_count = None  # what a reload leaves: nothing in memory
        self.assertEqual(self.tick()["event"]["text"], "the gate opens at dawn")
        with CaptureQueriesContext(connection) as queries:
            self.assertIsNone(self.script.pop_event())
            self.assertFalse(self.script.has_pending_events())
        self.assertEqual(len(queries), 0)

    def test_an_event_that_cannot_be_heard_is_dropped_whole_and_the_next_is_heard(self):
        # A game's own code queued a line whose words are not text: its note in working
        # memory fails after the line was appended, in the transaction that took the event.
        self.script.queue_event({"type": "speech", "speaker": self.char1.dbref, "text": 42})
        self.char1.execute_cmd("say the gate opens at dawn")
        with patch("ai.event_queue.logger.log_warn") as log_warn:
            with patch("ai.assistant_script.logger.log_trace"):
                self.assertEqual(self.tick()["status"], "error")
        self.assertIn("dropped event", log_warn.call_args.args[0])
        self.assertEqual(self.script.conversation_history, [])  # the line went with it
        self.assertEqual(
            [event["text"] for event in self.script.pending_events()], ["the gate opens at dawn"]
        )
        self.assertTrue(self.script.has_pending_events())
        self.assertEqual(self.tick()["event"]["text"], "the gate opens at dawn")
        self.assertEqual(self.tick()["status"], "idle")

    def test_an_upgrade_moves_the_attributes_that_held_events_and_runs_into_rows(self):
        migration = import_module("ai.migrations.0022_pending_events_and_model_runs")
        self.script.attributes.add(
            "pending_events", [{"type": "speech", "text": "hello", "audience": ["#1"]}]
        )
        run = {"at": "2026-11-01T10:00:00+00:00", "context": "tick_event", "calls": 2}
        self.script.attributes.add(
            "model_runs", [dict(run, stop_reason="terminal_tool", audience=None)]
        )
        migration.move_attributes(apps, None)
        self.assertFalse(self.script.attributes.has("pending_events"))
        self.assertFalse(self.script.attributes.has("model_runs"))
        self.script.ndb.pending_event_count = None
        self.assertEqual(self.script.pop_event()["audience"], ["#1"])
        self.assertEqual(
            recent_runs(self.script), [dict(run, stop_reason="terminal_tool", audience=None)]
        )

    def test_the_model_runs_kept_are_the_newest_and_bounded(self):
        for number in range(1, 46):
            note_run(self.script, "tick_event", number, "terminal_tool")
        self.assertEqual([r["calls"] for r in recent_runs(self.script)], list(range(26, 46)))
        kept = ModelRun.objects.filter(db_script_id=self.script.id).count()
        self.assertLessEqual(kept, 2 * RUNS_KEPT)


class TestModes(AssistantTestCase):
    def test_idle_ticks_put_the_assistant_to_sleep_and_speech_wakes_it(self):
        self.script.set_config("sleep_after_idle_ticks", 2)
        self.tick()
        self.assertEqual(self.script.db.operating_mode, "awake")
        self.tick()
        self.assertEqual(self.script.db.operating_mode, "sleep")
        self.assertEqual(self.script.db.sleep_phase, "dozing")
        self.assertEqual(self.tick()["phase"], "dozing")
        dreaming = self.tick()
        self.assertEqual(dreaming["phase"], "dreaming")
        self.assertEqual(dreaming["memory"]["context_compaction"]["skipped"], True)
        self.char1.execute_cmd("say wake up, Helper")
        result = self.tick()
        self.assertEqual(self.script.db.operating_mode, "awake")
        self.assertEqual(result["status"], "replied")

    def test_zero_means_never_sleep(self):
        self.script.set_config("sleep_after_idle_ticks", 0)
        for _ in range(3):
            self.tick()
        self.assertEqual(self.script.db.operating_mode, "awake")


class Cycle:
    """An object that refers to itself: only the garbage collector frees it."""

    def __init__(self):
        self.itself = self


class TestGcFreeze(AssistantTestCase):
    """What the server loaded at start is left out of garbage collection, once."""

    def setUp(self):
        super().setUp()
        self.addCleanup(self.unfreeze)
        self.unfreeze()  # a server start in an earlier test may have frozen already

    def unfreeze(self):
        gc_freeze.SURVIVORS.stop()
        gc.unfreeze()
        gc_freeze._frozen.clear()

    @override_settings(AI_GC_FREEZE=True)
    def test_objects_alive_at_start_and_once_loading_ends_are_frozen_once_a_process(self):
        loading = defer.Deferred()
        freeze_when_loaded(loading)
        at_start = gc.get_freeze_count()
        self.assertGreater(at_start, 0, "what the server loaded already, at once")
        loaded = [Cycle() for _ in range(100)]  # what the loading threads make
        loading.errback(RuntimeError("the embedder failed"))  # a failed load counts as ended
        self.assertGreaterEqual(gc.get_freeze_count(), at_start + len(loaded))
        gc_freeze.SURVIVORS.stop()  # no collection may freeze anything from here on
        gc.unfreeze()
        freeze_when_loaded(defer.succeed(None))
        self.assertEqual(gc.get_freeze_count(), 0, "only once")

    @override_settings(AI_GC_FREEZE=True)
    def test_what_survives_a_full_collection_is_frozen_and_a_thaw_frees_what_died(self):
        """Held messages later (each a dict holding its metadata) are frozen by the full
        collection they survive; a cycle frozen alive and dropped since is freed by the
        next thaw, which freezes the survivors again."""
        freeze_when_loaded(defer.succeed(None))
        at_start = gc.get_freeze_count()
        held = [{"role": "user", "content": str(n), "metadata": {}} for n in range(1000)]
        cycle = Cycle()
        gone = weakref.ref(cycle)
        gc.collect(1)
        self.assertEqual(gc.get_freeze_count(), at_start, "a young collection freezes nothing")
        gc.collect()
        self.assertGreaterEqual(gc.get_freeze_count(), at_start + len(held))
        del cycle
        gc.collect()
        self.assertIsNotNone(gone(), "frozen: no collection frees it before a thaw")
        gc_freeze.SURVIVORS.thaw()
        self.assertIsNone(gone())
        self.assertGreaterEqual(gc.get_freeze_count(), len(held), "the survivors frozen again")

    @override_settings(AI_GC_FREEZE=False)
    def test_the_setting_turns_it_off(self):
        freeze_when_loaded(defer.succeed(None))
        gc.collect()
        self.assertEqual(gc.get_freeze_count(), 0)


class TestServerStart(AssistantTestCase):
    def test_a_start_loads_what_assistants_share_once_and_reads_one_attribute_each(self):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext
        from evennia.scripts.models import ScriptDB

        for number in range(4):
            make_assistant(f"Helper{number}", self.room1)
        calls = []
        with (
            patch("ai.process_start.STARTED", set()),  # a new server process
            patch("ai.process_start.load_calibrations", lambda: calls.append("calibrations")),
            patch("ai.process_start.open_log_channel", lambda: calls.append("log channel")),
            CaptureQueriesContext(connection) as queries,
        ):
            ScriptDB.objects.update_scripts_after_server_start()
        for script in ScriptDB.objects.all():
            script._stop_task()  # the loop restarts timers: none may fire in a later test
        self.assertEqual(calls, ["calibrations", "log channel"], "once, not once a script")
        ours = [q["sql"] for q in queries.captured_queries if "memory_enabled" in q["sql"]]
        self.assertLessEqual(len(ours), 1, "the embedder's preload asks one assistant")

    @override_settings(AI_LLM_MODEL="openai/gpt-4o")
    def test_a_start_loads_the_first_assistants_tokenizer_in_a_thread(self):
        """Its first count would load it in the reactor, a few hundred ms of CPU."""
        import threading

        self.script.attributes.add("llm_model", None)  # the server's model
        self.script.attributes.add("memory_enabled", False)  # no embedder to load
        loaded = []
        with (
            patch("ai.process_start.STARTED", set()),
            patch("ai.process_start.load_litellm", lambda: None),
            patch(
                "ai.process_start.load_tokenizer",
                lambda model: loaded.append((model, threading.current_thread())),
            ),
        ):
            wait_for(start_process(self.script))
        self.assertEqual(len(loaded), 1)
        self.assertEqual(loaded[0][0], "openai/gpt-4o")
        self.assertIsNot(loaded[0][1], threading.main_thread())

    def paused_by_a_reload(self, count):
        """Return the scripts of this assistant and ``count`` more, their timers running,
        then paused as a reload pauses them (a new process holds no timer), the next tick
        of each due 60, 120, 180... seconds after the restart. The interval is 1,000 s, so
        neither a tick during a slow restart nor a fresh interval passes for a kept phase."""
        scripts = [self.script] + [
            make_assistant(f"Helper{number}", self.room1).assistant_script
            for number in range(count)
        ]
        for wait, script in enumerate(scripts, start=1):
            # No timer may fire in a later test (a deleted script has none).
            self.addCleanup(lambda script=script: script.pk and script._stop_task())
            script.interval = 1000
            script._start_task()
            script._pause_task(auto_pause=True)
            script.db._paused_time = 60 * wait
        return scripts

    def start_loop(self):
        """Run Evennia's start loop in a process that has loaded what a start loads; return
        the Deferreds of the restarts handed to the reactor's turns."""
        from evennia.scripts.models import ScriptDB

        restarts = []
        with (
            patch("ai.process_start.STARTED", {"shared", "memory"}),
            patch(
                "ai.assistant_script.restart_in_turns",
                lambda script, restart: restarts.append(restart_in_turns(script, restart)),
            ),
        ):
            ScriptDB.objects.update_scripts_after_server_start()
        return restarts

    def test_timers_a_reload_paused_restart_after_the_start_loop_in_turns(self):
        """Evennia restarts every timer inside its start loop, a dozen queries each: the
        assistants' restart later, in the reactor's turns, each where it was paused."""
        scripts = self.paused_by_a_reload(3)
        restarts = self.start_loop()
        self.assertEqual(len(restarts), len(scripts))
        for wait, script in enumerate(scripts, start=1):
            self.assertIsNone(script.ndb._task, "not restarted inside the loop")
            self.assertEqual(script.db._paused_time, 60 * wait, "still paused")
        wait_for(defer.DeferredList(restarts, fireOnOneErrback=True))
        for wait, script in enumerate(scripts, start=1):
            self.assertTrue(script.ndb._task.running)
            self.assertIsNone(script.db._paused_time)
            self.assertLessEqual(script.time_until_next_repeat(), 60 * wait, "its own phase")

    def test_a_reload_before_the_restart_leaves_the_pause_to_the_next_start(self):
        """A reload's shutdown pauses every script and still turns the reactor: a restart
        waiting then would start the timer and clear the pause, and the next start would
        find nothing to restart."""
        scripts = self.paused_by_a_reload(1)
        restarts = self.start_loop()
        for script in scripts:
            script._pause_task(auto_pause=True)  # the reload
        wait_for(defer.DeferredList(restarts, fireOnOneErrback=True))
        for wait, script in enumerate(scripts, start=1):
            self.assertIsNone(script.ndb._task, "called off")
            self.assertEqual(script.db._paused_time, 60 * wait, "the pause kept")
        wait_for(defer.DeferredList(self.start_loop(), fireOnOneErrback=True))
        for script in scripts:
            self.assertTrue(script.ndb._task.running, "restarted by the next start")

    def test_a_builder_pausing_an_assistant_before_its_restart_keeps_it_paused(self):
        self.paused_by_a_reload(0)
        restarts = self.start_loop()
        self.script.pause()
        wait_for(defer.DeferredList(restarts, fireOnOneErrback=True))
        self.assertIsNone(self.script.ndb._task)
        self.assertTrue(self.script.db._manually_paused, "the next start leaves it paused")

    def test_a_script_deleted_before_its_turn_is_not_restarted(self):
        scripts = self.paused_by_a_reload(1)
        gone = scripts[-1]
        restarts = self.start_loop()
        gone.delete()
        with patch("ai.process_start.logger.log_err") as log_err:
            wait_for(defer.DeferredList(restarts, fireOnOneErrback=True))
        log_err.assert_not_called()
        self.assertIsNone(gone.ndb._task)
        self.assertTrue(scripts[0].ndb._task.running)

    def test_a_timer_a_killed_server_left_unpaused_starts_again(self):
        """Evennia pauses timers only when it shuts down itself: after a kill or a crash a
        timer has no pause to resume, and Evennia would leave it stopped for good."""
        self.addCleanup(lambda: self.script._stop_task())
        self.script.interval = 1000
        self.script._start_task()
        self.script.ndb._task.stop()  # the process ends: no pause is written
        self.script.ndb._task = None
        wait_for(defer.DeferredList(self.start_loop(), fireOnOneErrback=True))
        self.assertTrue(self.script.ndb._task.running, "ticking again")
        self.assertIsNone(self.script.db._paused_time)

    def test_a_builder_pausing_and_unpausing_an_assistant_is_evennias_own(self):
        self.addCleanup(self.script._stop_task)
        self.script._start_task()
        self.script.pause()
        with patch("ai.assistant_script.restart_in_turns") as in_turns:
            self.script.unpause()
        in_turns.assert_not_called()
        self.assertTrue(self.script.ndb._task.running, "restarted at once")

    def test_a_restart_that_fails_is_logged(self):
        def failing(auto_unpause):
            raise RuntimeError("the timer broke")

        self.paused_by_a_reload(0)
        with patch("ai.process_start.logger.log_err") as log_err:
            wait_for(restart_in_turns(self.script, failing))
        self.assertIn("Helper", log_err.call_args.args[0])
        self.assertIn("did not restart: the timer broke", log_err.call_args.args[0])


@override_settings(SERVER_SERVICES_PLUGIN_MODULES=["ai.server_services"])
class TestBeforeServing(AssistantTestCase):
    """With ``ai.server_services`` in the setting, Evennia's server imports the embedder's
    slowest library while it sets up, before it serves anyone (here a stand-in library)."""

    LIBRARY = "ai_library_before_serving"

    def setUp(self):
        super().setUp()
        folder = tempfile.mkdtemp()
        self.library = Path(folder, f"{self.LIBRARY}.py")
        self.library.write_text("")
        sys.path.insert(0, folder)
        self.addCleanup(shutil.rmtree, folder)
        self.addCleanup(sys.path.remove, folder)
        self.addCleanup(sys.modules.pop, self.LIBRARY, None)
        libraries = patch("ai.server_services.LIBRARIES_BEFORE_SERVING", (self.LIBRARY,))
        libraries.start()
        self.addCleanup(libraries.stop)

    def server_set_up(self):
        """Run Evennia's own plugin step of a server's set-up; return whether the library
        is imported."""
        from evennia.server.service import EvenniaServerService

        EvenniaServerService.register_plugins(None)
        return self.LIBRARY in sys.modules

    def test_an_assistant_that_remembers_has_it_imported_even_stopped(self):
        """Evennia calls a stopped script's start hook too, which preloads memory."""
        self.assertFalse(self.script.is_active)
        self.assertTrue(self.server_set_up())

    def test_it_is_left_alone_when_no_assistant_remembers(self):
        from evennia import create_script

        self.script.attributes.add("memory_enabled", False)
        weather = create_script("evennia.scripts.scripts.DefaultScript", key="weather")
        weather.is_active = True  # another script of the game, which is not ours
        self.assertFalse(self.server_set_up())

    def test_a_library_that_fails_to_import_is_logged_and_the_set_up_goes_on(self):
        self.library.write_text('raise OSError("libtorch_cpu.so: cannot open shared object")')
        with patch("ai.server_services.logger.log_trace") as log_trace:
            self.assertFalse(self.server_set_up())
        self.assertIn("before serving failed", log_trace.call_args.args[0])
