"""Model options: server address, key variable, sampling and timeout travel with each call."""

import os
import socket
import subprocess
import sys
import threading
from unittest import mock

from django.test import override_settings
from twisted.internet import reactor

from ai.config import ConfigError
from ai.litellm_loader import load_litellm
from ai.llm_interaction import call_llm, generate_context_summary
from ai.thinking import ThinkingEmote
from ai.tools import get_tool
from ai.utils.gc_freeze import freeze_when_loaded

from .support import (
    AfterReactorDelay,
    AssistantTestCase,
    ScriptedLLM,
    Unanswered,
    make_assistant,
    record_messages,
    wait_for,
)

HELLO = [{"role": "user", "content": 'Char says, "hello"'}]
LOCAL = {"api_base": "http://127.0.0.1:8081/v1", "temperature": 0.2, "max_tokens": 64}


class TestOptionChecks(AssistantTestCase):
    def refused(self, name, value, pattern):
        with self.assertRaisesRegex(ConfigError, pattern):
            self.script.set_config(name, value)
        self.assertEqual(self.script.get_config(name), {})

    def test_known_and_further_litellm_options_are_accepted(self):
        options = dict(LOCAL, api_key_env="MY_KEY", timeout=300, top_p=0.9, stop=["\n\n"])
        self.script.set_config("llm_options", options)
        self.assertEqual(self.script.get_config("llm_options"), options)

    def test_a_key_itself_is_refused_and_the_variable_named_instead(self):
        self.refused("llm_options", {"api_key": "sk-secret"}, r"'api_key'.*api_key_env")

    def test_each_bad_value_is_refused_naming_the_option(self):
        cases = [
            ({"api_base": "127.0.0.1:8080"}, r"\['api_base'\].*http"),
            ({"api_key_env": "sk-abc def"}, r"\['api_key_env'\].*environment variable"),
            ({"temperature": 3}, r"\['temperature'\].*\[0, 2\]"),
            ({"max_tokens": 0}, r"\['max_tokens'\]"),
            ({"timeout": 0}, r"\['timeout'\].*\(0, 86400\]"),
            ({"model": "openai/x"}, r"'model'.*llm_model"),
            ({"tools": []}, r"'tools'"),
            ({"seed": object()}, r"\['seed'\].*plain value"),
            ("fast", r"must be a dict"),
        ]
        for value, pattern in cases:
            with self.subTest(value=value):
                self.refused("llm_options", value, pattern)
        self.refused("compact_options", {"api_key": "x"}, r"api_key_env")


@override_settings(AI_LLM_RETRY_DELAY=0.01)
class TestOptionsReachTheModel(AssistantTestCase):
    def test_every_option_reaches_litellm_and_the_key_comes_from_its_variable(self):
        self.script.set_config("llm_options", dict(LOCAL, api_key_env="EVAL_TEST_KEY", seed=7))
        with ScriptedLLM("hi") as llm, mock.patch.dict(os.environ, {"EVAL_TEST_KEY": "sk-env"}):
            result = wait_for(call_llm(self.script, HELLO, model=llm.model))
        self.assertTrue(result.ok)
        sent = llm.requests[0]
        self.assertEqual(sent["api_base"], LOCAL["api_base"])
        self.assertEqual(sent["api_key"], "sk-env")
        self.assertEqual((sent["temperature"], sent["max_tokens"], sent["seed"]), (0.2, 64, 7))

    def test_a_missing_key_variable_fails_the_call_clearly_without_calling(self):
        self.script.set_config("llm_options", {"api_key_env": "EVAL_UNSET_KEY"})
        os.environ.pop("EVAL_UNSET_KEY", None)
        with ScriptedLLM("hi") as llm:
            result = wait_for(call_llm(self.script, HELLO, model=llm.model))
        self.assertFalse(result.ok)
        self.assertEqual(result.error_kind, "bad_config")
        self.assertIn("EVAL_UNSET_KEY", result.error)
        self.assertEqual(llm.calls, [])

    def test_two_assistants_on_two_servers_side_by_side(self):
        other = make_assistant("Sage", self.room1).assistant_script
        self.script.set_config("llm_options", {"api_base": "http://127.0.0.1:9001/v1"})
        other.set_config("llm_options", {"api_base": "http://127.0.0.1:9002/v1"})
        with ScriptedLLM("a", "b") as llm:
            wait_for(call_llm(self.script, HELLO, model=llm.model))
            wait_for(call_llm(other, HELLO, model=llm.model))
        self.assertEqual(
            [request["api_base"] for request in llm.requests],
            ["http://127.0.0.1:9001/v1", "http://127.0.0.1:9002/v1"],
        )

    @override_settings(AI_LLM_OPTIONS={"api_base": "http://127.0.0.1:7000", "temperature": 0.5})
    def test_the_server_wide_setting_lies_under_the_assistants_own(self):
        self.script.set_config("llm_options", {"temperature": 0.1})
        with ScriptedLLM("hi") as llm:
            wait_for(call_llm(self.script, HELLO, model=llm.model))
        self.assertEqual(llm.requests[0]["api_base"], "http://127.0.0.1:7000")
        self.assertEqual(llm.requests[0]["temperature"], 0.1)

    @override_settings(AI_LLM_OPTIONS={"api_key": "sk-in-settings", "temperature": 0.5})
    def test_a_bad_setting_is_left_out_naming_it_and_the_call_is_made(self):
        with (
            ScriptedLLM("hi") as llm,
            mock.patch("ai.utils.checked_settings.logger.log_err") as log_err,
        ):
            result = wait_for(call_llm(self.script, HELLO, model=llm.model))
        self.assertTrue(result.ok)
        self.assertIsNone(llm.requests[0]["api_key"])
        self.assertNotIn("temperature", llm.requests[0])
        self.assertRegex(
            log_err.call_args.args[0],
            r"^AI: setting AI_LLM_OPTIONS=.* refused: may not set 'api_key'",
        )

    def test_summary_calls_layer_compact_options_over_the_main_models(self):
        self.script.set_config("llm_options", {"api_base": "http://127.0.0.1:1/v1", "seed": 1})
        self.script.set_config("compact_options", {"max_tokens": 700})
        with ScriptedLLM("summary") as llm:
            self.script.set_config("llm_model", llm.model)
            wait_for(generate_context_summary(self.script, HELLO))
        sent = llm.requests[0]
        self.assertEqual(
            (sent["api_base"], sent["seed"], sent["max_tokens"]), ("http://127.0.0.1:1/v1", 1, 700)
        )

    def test_max_tokens_limits_replies_and_work_keeps_a_cap_of_its_own(self):
        self.script.set_config("llm_options", {"max_tokens": 40, "temperature": 0.3})
        with ScriptedLLM("reply", "notes", "summary") as llm:
            wait_for(call_llm(self.script, HELLO, model=llm.model))
            wait_for(call_llm(self.script, HELLO, model=llm.model, purpose="task"))
            self.script.set_config("llm_model", llm.model)
            wait_for(generate_context_summary(self.script, HELLO))
        self.assertEqual([r.get("max_tokens") for r in llm.requests], [40, 1000, 1000])
        self.assertEqual([r["temperature"] for r in llm.requests], [0.3, 0.3, 0.3])

    def test_a_separate_summary_model_takes_compact_options_alone(self):
        self.script.set_config("llm_options", {"api_base": "http://127.0.0.1:1/v1", "seed": 1})
        self.script.set_config("compact_options", {"api_base": "http://127.0.0.1:2/v1"})
        with ScriptedLLM("summary") as llm:
            self.script.set_config("compact_model", llm.model)
            wait_for(generate_context_summary(self.script, HELLO))
        self.assertEqual(llm.requests[0]["api_base"], "http://127.0.0.1:2/v1")
        self.assertNotIn("seed", llm.requests[0])

    def test_the_models_own_timeout_wins_over_the_setting(self):
        self.script.set_config("llm_options", {"timeout": 0.2})
        unanswered = Unanswered()
        self.addCleanup(unanswered.release)
        with ScriptedLLM(unanswered) as llm, self.settings(AI_LLM_TIMEOUT=60):
            result = wait_for(call_llm(self.script, HELLO, model=llm.model, max_retries=0))
        self.assertEqual(result.error_kind, "timeout")
        self.assertIn("no answer within 0.2s", result.error)


class SilentServer:
    """A loopback server that accepts a request and never answers.

    ``finished`` is set when the client closes the connection (``dropped`` True) or, for a
    client that only abandons it, when ``ABANDONED_AFTER`` seconds pass without a close: a
    bound only a failing run reaches (a client that closes does so one timeout after
    connecting).
    """

    ABANDONED_AFTER = 120

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.dropped = False
        self.finished = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        connection, _ = self.sock.accept()
        connection.settimeout(self.ABANDONED_AFTER)
        try:
            while connection.recv(4096):
                pass
            self.dropped = True
        except OSError:
            pass
        finally:
            connection.close()
            self.sock.close()
            self.finished.set()


class TestTimeoutCancelsTheRequest(AssistantTestCase):
    def test_a_timed_out_request_is_closed_not_only_abandoned(self):
        server = SilentServer()
        self.script.set_config(
            "llm_options",
            {
                "api_base": f"http://127.0.0.1:{server.port}/v1",
                "api_key_env": "EVAL_T",
                "timeout": 1,
            },
        )
        with mock.patch.dict(os.environ, {"EVAL_T": "x"}):
            result = wait_for(call_llm(self.script, HELLO, model="openai/local", max_retries=0))
        self.assertEqual(result.error_kind, "timeout")
        server.finished.wait()
        self.assertTrue(server.dropped, "the request was never closed")


class TestThinkingEmote(AssistantTestCase):
    def setUp(self):
        super().setUp()
        self.heard = record_messages(self.char1)

    def tick_with(self, *steps, delay):
        self.script.set_config("thinking_delay", delay)
        return self.tick_on(*steps, text="hi")

    def thinking_lines(self):
        return [line for line in self.heard if "deep in thought" in str(line)]

    def thinking_timers(self):
        """The emotes still due: a timer left behind would show one long after the reply."""
        return [
            call
            for call in reactor.getDelayedCalls()
            if call.active() and getattr(call.func, "__func__", None) is ThinkingEmote._show
        ]

    def test_a_slow_answer_shows_the_emote_once(self):
        result = self.tick_with(AfterReactorDelay(0.1), delay=0.1)
        self.assertEqual(result["status"], "replied")
        self.assertEqual(self.thinking_lines(), ["Helper pauses, deep in thought."])

    def test_a_quick_answer_shows_none_and_leaves_no_timer(self):
        # The longest delay there is: no answer of a scripted model comes that late.
        self.tick_with("Hello there!", delay=600)
        self.assertEqual(self.thinking_lines(), [])
        self.assertEqual(self.thinking_timers(), [])
        self.assertIn("Hello there!", " ".join(str(line) for line in self.heard))

    def test_a_stored_emote_with_an_unknown_field_falls_back_to_the_default(self):
        self.script.db.thinking_emote = "{nme} ponders."
        with mock.patch("ai.assistant_script.logger.log_err") as log_err:
            result = self.tick_with(AfterReactorDelay(0.1), delay=0.1)
        self.assertEqual(result["status"], "replied")
        self.assertEqual(self.thinking_lines(), ["Helper pauses, deep in thought."])
        self.assertIn("thinking_emote='{nme} ponders.' refused", log_err.call_args.args[0])

    def test_none_turns_it_off(self):
        self.script.set_config("thinking_emote", None)
        self.tick_with(AfterReactorDelay(0.05), delay=0.05)
        self.assertEqual(self.thinking_lines(), [])


# Run in a fresh process: the modules that a first call after load_litellm imports.
FIRST_CALL_IMPORTS = """
import sys
from ai.litellm_loader import load_litellm
litellm = load_litellm()
before = set(sys.modules)
litellm.completion(model="offline/first", messages=[{"role": "user", "content": "hello"}])
print("\\n".join(sorted(set(sys.modules) - before)))
"""


class TestLitellmPreload(AssistantTestCase):
    def test_server_start_imports_litellm_in_a_worker_thread(self):
        threads = []

        def loading():
            threads.append(threading.current_thread())
            return load_litellm()

        watching = mock.patch("ai.process_start.freeze_when_loaded", wraps=freeze_when_loaded)
        fresh = mock.patch("ai.process_start.STARTED", set())  # a new server process
        with mock.patch("ai.process_start.load_litellm", loading), watching as freezing, fresh:
            self.script.at_server_start()
            preloading = freezing.call_args.args[0]
            wait_for(preloading)
        self.assertEqual(len(threads), 1)
        self.assertIsNot(threads[0], threading.main_thread())

    def test_once_preloaded_the_first_call_has_nothing_left_to_import(self):
        # A fresh process: this one imported everything long ago.
        found = subprocess.run(
            [sys.executable, "-c", FIRST_CALL_IMPORTS],
            capture_output=True,
            text=True,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "ai.tests.settings"},
        )
        self.assertEqual(found.returncode, 0, found.stderr)
        self.assertEqual(found.stdout.split(), [], "imported by the first call")


class TestToolsAsText(AssistantTestCase):
    def test_tools_are_listed_in_the_prompt_and_calls_read_from_the_text(self):
        self.script.set_config("llm_options", {"tools_as_text": True})
        schemas = [get_tool("say").schema(), get_tool("noop").schema()]
        answer = '{"name": "say", "arguments": {"message": "Hello, Char!"}}'
        with ScriptedLLM(answer) as llm:
            result = wait_for(call_llm(self.script, HELLO, model=llm.model, tools=schemas))
        self.assertNotIn("tools", llm.requests[0])
        system = llm.calls[0][0]
        self.assertEqual(system["role"], "system")
        self.assertIn("- say(message): Say your reply aloud", system["content"])
        self.assertIn("- noop(): ", system["content"])
        self.assertEqual(result.tool_calls[0]["function"]["name"], "say")
        self.assertEqual(result.text_tool_calls, 1)
        self.assertEqual(result.content, "")

    def test_by_default_tools_go_to_the_api(self):
        schemas = [get_tool("say").schema()]
        with ScriptedLLM("hi") as llm:
            wait_for(call_llm(self.script, HELLO, model=llm.model, tools=schemas))
        self.assertEqual(llm.requests[0]["tools"], schemas)
        self.assertNotIn("Tools:", str(llm.calls[0]))

    def test_the_option_is_checked(self):
        with self.assertRaisesRegex(ConfigError, r"\['tools_as_text'\].*True or False"):
            self.script.set_config("llm_options", {"tools_as_text": "yes"})
