"""A missing or refused key is a permanent error: said once (the log, the AIlog channel,
aimode), never retried on the ticks after as if it might pass."""

import os
from unittest import mock

from django.test import override_settings
from evennia.utils.ansi import strip_ansi

from ai.commands import AssistantCmdSet
from ai.litellm_loader import load_litellm
from ai.llm_interaction import call_llm

from .support import AssistantTestCase, ScriptedLLM, record_messages, wait_for

HELLO = [{"role": "user", "content": 'Char says, "hello"'}]


def refused_key():
    return load_litellm().AuthenticationError(
        "Incorrect API key provided", llm_provider="scripted", model="test"
    )


@override_settings(AI_LLM_RETRY_DELAY=0.01)
class TestRefusedKey(AssistantTestCase):
    def setUp(self):
        super().setUp()
        self.char1.cmdset.add(AssistantCmdSet)
        self.builders_heard = record_messages(self.account)
        self.char1_heard = record_messages(self.char1)

    def talk_for_ticks(self, llm, count=3):
        results = []
        for number in range(count):
            self.char1.execute_cmd(f"talk Helper = Hello, are you there? ({number})")
            results.append(self.tick())
        return results

    def errors_logged(self, log_err):
        return [
            call.args[0] for call in log_err.call_args_list if "refused its key" in call.args[0]
        ]

    def test_a_refused_key_is_said_once_and_not_called_again_on_later_ticks(self):
        with ScriptedLLM(refused_key(), "hello", "hello") as llm:
            self.script.set_config("llm_model", llm.model)
            with mock.patch("ai.llm_interaction.logger.log_err") as log_err:
                results = self.talk_for_ticks(llm)
        self.assertEqual([result["status"] for result in results], ["llm_error"] * 3)
        self.assertEqual([result["llm"].error_kind for result in results], ["auth"] * 3)
        self.assertEqual(len(llm.calls), 1, "the refused key was sent again")
        (logged,) = self.errors_logged(log_err)
        self.assertIn("Helper", logged)
        self.assertIn("Incorrect API key provided", logged)
        channel = strip_ansi("\n".join(map(str, self.builders_heard)))
        self.assertEqual(channel.count("refused its key"), 1, channel)
        for line in channel.splitlines():
            self.assertLessEqual(len(line), 78, line)
        self.assertEqual(
            strip_ansi(str(self.char1_heard)).count("does not answer"), 3, "players still know"
        )

    def test_aimode_says_why_it_cannot_answer(self):
        with ScriptedLLM(refused_key()) as llm:
            self.script.set_config("llm_model", llm.model)
            self.talk_for_ticks(llm, count=1)
        before = len(self.char1_heard)
        self.char1.execute_cmd("aimode Helper")
        said = strip_ansi("\n".join(map(str, self.char1_heard[before:])))
        self.assertIn("Helper is awake.", said)
        self.assertIn("It cannot answer: scripted/test refused its key", said)
        self.assertIn("Incorrect API key provided", " ".join(said.split()))

    def test_another_key_is_tried_again(self):
        with ScriptedLLM(refused_key(), "Hello, Char!") as llm:
            self.script.set_config("llm_model", llm.model)
            self.talk_for_ticks(llm, count=1)
            self.script.set_config("llm_options", {"api_key_env": "EVAL_TEST_NEW_KEY"})
            with mock.patch.dict(os.environ, {"EVAL_TEST_NEW_KEY": "sk-new"}):
                (result,) = self.talk_for_ticks(llm, count=1)
                self.char1.execute_cmd("aimode Helper")
        self.assertEqual(result["status"], "replied")
        self.assertEqual(len(llm.calls), 2)
        self.assertNotIn("cannot answer", strip_ansi(str(self.char1_heard[-1])))

    def test_a_key_variable_that_is_not_set_is_said_once(self):
        os.environ.pop("EVAL_TEST_UNSET_KEY", None)
        self.script.set_config("llm_options", {"api_key_env": "EVAL_TEST_UNSET_KEY"})
        with ScriptedLLM("hello") as llm:
            self.script.set_config("llm_model", llm.model)
            with mock.patch("ai.llm_interaction.logger.log_err") as log_err:
                results = self.talk_for_ticks(llm)
        self.assertEqual([result["llm"].error_kind for result in results], ["bad_config"] * 3)
        self.assertEqual(llm.calls, [])
        logged = [call.args[0] for call in log_err.call_args_list]
        self.assertEqual(len(logged), 1, logged)
        self.assertIn("EVAL_TEST_UNSET_KEY", logged[0])
        self.char1.execute_cmd("aimode Helper")
        said = " ".join(strip_ansi(str(self.char1_heard[-1])).split())
        self.assertIn("It cannot answer: calls to scripted/test cannot be made", said)
        self.assertIn("EVAL_TEST_UNSET_KEY", said)


@override_settings(AI_LLM_RETRY_DELAY=0.01)
class TestMissingKeyOfTheClient(AssistantTestCase):
    def test_an_openai_client_without_a_key_is_refused_at_once_not_retried(self):
        # The OpenAI client refuses to send a request without a key, before any connection;
        # litellm reports it as a server error (500).
        environment = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        self.script.set_config("llm_options", {"api_base": "http://127.0.0.1:9/v1"})
        with mock.patch.dict(os.environ, environment, clear=True):
            result = wait_for(call_llm(self.script, HELLO, model="openai/local", max_retries=2))
        self.assertEqual(result.error_kind, "auth")
        self.assertEqual(result.attempts, 1, "retried as if it might pass")
        self.assertIn("Missing credentials", result.error)
