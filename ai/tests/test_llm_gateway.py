"""The LLM gateway: success, each error kind as a clear result, retries, timeout."""

from unittest.mock import patch

from django.test import override_settings
from litellm import ModelResponse

from ai.config import ConfigError
from ai.litellm_loader import load_litellm
from ai.llm_interaction import call_llm, context_window
from ai.utils.model_location import is_served_locally

from .support import AssistantTestCase, ScriptedLLM, Unanswered, wait_for

HELLO = [{"role": "user", "content": 'Char says, "hello"'}]


def rate_limit():
    return load_litellm().RateLimitError("slow down", llm_provider="scripted", model="test")


@override_settings(AI_LLM_RETRY_DELAY=0.01)
class TestCallLLM(AssistantTestCase):
    def call(self, messages=HELLO, **kwargs):
        return wait_for(call_llm(self.script, messages, **kwargs))

    def test_offline_engine_answers_by_default(self):
        result = self.call()
        self.assertTrue(result.ok)
        self.assertEqual(result.model, "offline/assistant")
        self.assertIn("Hello, Char", result.content)
        self.assertEqual(result.attempts, 1)
        self.assertGreater(result.usage["prompt_tokens"], 0)

    def test_mock_response_text(self):
        result = self.call(model="gpt-4o-mini", mock_response="A mocked answer")
        self.assertTrue(result.ok)
        self.assertEqual(result.content, "A mocked answer")

    def test_mock_tool_call_is_read_into_plain_dicts(self):
        response = ModelResponse(
            choices=[
                {
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_9",
                                "type": "function",
                                "function": {"name": "noop", "arguments": "{}"},
                            }
                        ],
                    },
                }
            ]
        )
        result = self.call(model="gpt-4o-mini", mock_response=response)
        self.assertTrue(result.ok)
        self.assertEqual(result.tool_calls[0]["function"], {"name": "noop", "arguments": "{}"})
        self.assertEqual(result.as_message()["tool_calls"][0]["id"], "call_9")

    def test_rate_limit_is_retried_then_reported(self):
        result = self.call(
            model="gpt-4o-mini", mock_response="litellm.RateLimitError", max_retries=2
        )
        self.assertFalse(result.ok)
        self.assertEqual(result.error_kind, "rate_limit")
        self.assertEqual(result.attempts, 3)

    def test_retry_settings_of_the_wrong_type_fall_back_to_their_defaults(self):
        for name, value in (("AI_LLM_MAX_RETRIES", "2"), ("AI_LLM_RETRY_DELAY", "0.01")):
            with self.subTest(name=name), self.settings(**{name: value}):
                with ScriptedLLM(rate_limit(), "second time lucky") as llm:
                    with patch("ai.utils.checked_settings.logger.log_err") as log_err:
                        result = self.call(model=llm.model)
                self.assertEqual((result.content, result.attempts), ("second time lucky", 2))
                self.assertIn(f"setting {name}='", log_err.call_args.args[0])

    def test_context_window_exceeded_is_not_retried(self):
        result = self.call(
            model="gpt-4o-mini", mock_response="litellm.ContextWindowExceededError", max_retries=3
        )
        self.assertFalse(result.ok)
        self.assertEqual(result.error_kind, "context_window_exceeded")
        self.assertEqual(result.attempts, 1)

    def test_transient_failure_then_success(self):
        with ScriptedLLM(rate_limit(), "second time lucky") as llm:
            result = self.call(model=llm.model, max_retries=2)
        self.assertTrue(result.ok)
        self.assertEqual(result.content, "second time lucky")
        self.assertEqual(result.attempts, 2)
        self.assertEqual(len(llm.calls), 2)

    def test_a_hung_call_times_out(self):
        unanswered = Unanswered()
        self.addCleanup(unanswered.release)
        with ScriptedLLM(unanswered) as llm:
            result = self.call(model=llm.model, timeout=0.2, max_retries=0)
        self.assertFalse(result.ok)
        self.assertEqual(result.error_kind, "timeout")
        self.assertIn("0.2s", result.error)

    def test_timeout_exception_from_the_provider(self):
        timeout = load_litellm().Timeout("too slow", llm_provider="scripted", model="test")
        with ScriptedLLM(timeout, timeout) as llm:
            result = self.call(model=llm.model, max_retries=1)
        self.assertEqual(result.error_kind, "timeout")
        self.assertEqual(result.attempts, 2)

    def test_unreadable_response_is_a_bad_response(self):
        with ScriptedLLM(ValueError("garbage from the wire")) as llm:
            result = self.call(model=llm.model, max_retries=0)
        self.assertFalse(result.ok)
        self.assertEqual(result.error_kind, "api_error")
        bad = ModelResponse()
        bad.choices = []
        result = self.call(model="gpt-4o-mini", mock_response=bad, max_retries=0)
        self.assertEqual(result.error_kind, "bad_response")

    def test_metadata_never_reaches_the_model(self):
        with ScriptedLLM("fine") as llm:
            self.call(
                [
                    {
                        "role": "user",
                        "content": "hi",
                        "metadata": {"x": 1},
                        "token_count": 3,
                        "id": 5,
                    }
                ],
                model=llm.model,
            )
        self.assertEqual(llm.calls[0], [{"role": "user", "content": "hi"}])


class TestTimeoutDefaults(AssistantTestCase):
    """A model served locally (on a CPU, minutes a call) waits longer than a hosted one."""

    def timeout_of(self, options=None):
        self.script.set_config("llm_options", options or {})
        with ScriptedLLM("fine") as llm:
            result = wait_for(call_llm(self.script, HELLO, model=llm.model))
        return result, (llm.requests[0]["timeout"] if llm.requests else None)

    def test_a_hosted_model_keeps_the_short_default(self):
        self.assertEqual(self.timeout_of()[1], 60)
        self.assertEqual(self.timeout_of({"api_base": "https://api.example.com/v1"})[1], 60)

    def test_a_model_on_loopback_or_a_private_network_gets_the_local_default(self):
        for base in (
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434",
            "http://192.168.1.20:8000/v1",
            "http://10.0.0.7/v1",
            "http://[::1]:8080/v1",
        ):
            with self.subTest(base=base):
                self.assertEqual(self.timeout_of({"api_base": base})[1], 600)

    def test_the_settings_and_the_models_own_option_win(self):
        local = {"api_base": "http://127.0.0.1:8080/v1"}
        with self.settings(AI_LLM_LOCAL_TIMEOUT=900, AI_LLM_TIMEOUT=30):
            self.assertEqual(self.timeout_of(local)[1], 900)
            self.assertEqual(self.timeout_of()[1], 30)
        self.assertEqual(self.timeout_of({**local, "timeout": 45})[1], 45)

    def test_a_bad_setting_is_refused_by_name_type_before_range_and_its_default_used(self):
        local = {"api_base": "http://127.0.0.1:8080/v1"}
        for name, value, why, default in (
            ("AI_LLM_LOCAL_TIMEOUT", "600", "a number", 600),
            ("AI_LLM_LOCAL_TIMEOUT", 0, r"\(0, 86400\]", 600),
            ("AI_LLM_TIMEOUT", None, "a number", 60),
        ):
            with self.subTest(name=name, value=value), self.settings(**{name: value}):
                with patch("ai.utils.checked_settings.logger.log_err") as log_err:
                    result, sent = self.timeout_of(local if "LOCAL" in name else None)
                self.assertTrue(result.ok)
                self.assertEqual(sent, default)
                self.assertRegex(log_err.call_args.args[0], f"{name}={value!r} refused.*{why}")

    def test_a_timeout_option_of_the_wrong_type_is_refused_by_name(self):
        with self.assertRaisesRegex(ConfigError, r"\['timeout'\].*a number in \(0, 86400\]"):
            self.script.set_config("llm_options", {"timeout": "600"})

    def test_providers_that_serve_on_this_machine_count_as_local(self):
        self.assertTrue(is_served_locally("ollama_chat/qwen2.5:3b"))
        self.assertTrue(is_served_locally("lm_studio/any"))
        self.assertFalse(is_served_locally("ollama/qwen2.5:3b", "https://ollama.example.com"))
        self.assertFalse(is_served_locally("openai/gpt-4o-mini"))
        self.assertFalse(is_served_locally("openai/x", "http://8.8.8.8/v1"))


class TestContextWindow(AssistantTestCase):
    def test_default_is_the_seed_value(self):
        self.assertEqual(context_window(self.script), 100000)

    def test_none_asks_litellm_for_the_input_window(self):
        self.script.set_config("max_context_tokens", None)
        self.script.set_config("llm_model", "gpt-4o-mini")
        self.assertEqual(context_window(self.script), 128000)


class TestWhatIsSent(AssistantTestCase):
    def test_a_tool_calling_message_without_text_is_sent_with_empty_content(self):
        call = {"id": "c1", "type": "function", "function": {"name": "noop", "arguments": "{}"}}
        history = [
            {"role": "user", "content": 'Char says, "hi"', "metadata": {"speaker": "#1"}},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "Done."},
        ]
        with ScriptedLLM("ok") as llm:
            wait_for(call_llm(self.script, history, model=llm.model))
        sent = llm.calls[0]
        self.assertEqual(sent[1]["content"], "")
        self.assertNotIn("metadata", sent[0])

    def test_what_a_provider_does_to_the_messages_never_reaches_the_history(self):
        # Some of litellm's provider transformations change the messages they are given in
        # place: a client that does reaches only its own copy.
        import litellm

        complete = litellm.completion

        def tampering(*args, messages, **kwargs):
            for message in messages:
                message["content"] = "tampered"
            return complete(*args, messages=messages, **kwargs)

        with patch.object(litellm, "completion", tampering):
            self.tick_on("Noted.", text="The ferry leaves at dawn.")
        self.tick_on("Good morning.", text="And the cart at noon.")
        held = [message["content"] for message in self.script.history.messages()]
        self.assertNotIn("tampered", held)
        self.assertIn('Char says, "The ferry leaves at dawn."', held)
        sent = [message["content"] for message in self.llm.calls[0]]
        self.assertNotIn("tampered", sent)
        self.assertIn('Char says, "The ferry leaves at dawn."', sent)

    def test_what_a_provider_does_to_the_tools_never_reaches_a_later_call(self):
        # The tools' schemas are made once and offered call after call: a client that
        # changes them in place changes only its own copy.
        import litellm

        complete = litellm.completion

        def tampering(*args, tools=None, **kwargs):
            for tool in tools or ():
                tool["function"]["description"] = "tampered"
                tool["function"]["parameters"]["properties"].clear()
            return complete(*args, tools=tools, **kwargs)

        with patch.object(litellm, "completion", tampering):
            self.tick_on("Noted.", text="The ferry leaves at dawn.")
        self.tick_on("Good morning.", text="And the cart at noon.")
        offered = self.llm.requests[-1]["tools"]
        say = next(tool["function"] for tool in offered if tool["function"]["name"] == "say")
        self.assertNotEqual(say["description"], "tampered")
        self.assertIn("message", say["parameters"]["properties"])
