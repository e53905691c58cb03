"""Token counts for a model with no offline tokenizer follow what its provider reports."""

from ai.models import TokenCalibration
from ai.token_calibration import MAX_FACTOR, load_calibrations, observe
from ai.utils.token_counter import (
    count_message_tokens,
    count_tokens,
    count_tools_tokens,
    set_calibration,
    tokenizer_tier,
)

from .support import AssistantTestCase, ScriptedLLM

RAW = "uncalibrated/model"


def reporting(factor):
    """A provider's usage: our own count of the prompt times ``factor`` (its template's cost)."""

    def prompt_tokens(messages, tools):
        # Counted as a model nobody calibrates: the provider's count does not follow ours.
        counted = sum(count_message_tokens(m, RAW) for m in messages)
        return int((counted + count_tools_tokens(tools, RAW) + 3) * factor)

    return prompt_tokens


class TestCalibration(AssistantTestCase):
    def setUp(self):
        super().setUp()
        set_calibration("scripted/test", 1.0)

    def tearDown(self):
        set_calibration("scripted/test", 1.0)
        super().tearDown()

    def converse(self, factor, lines=3):
        with ScriptedLLM(*["Fine."] * lines, prompt_tokens=reporting(factor)) as llm:
            self.script.set_config("llm_model", llm.model)
            for number in range(lines):
                self.hear(f"Line {number} of talk.")
                self.tick()
        return llm

    def test_an_undercounting_estimate_is_raised_to_what_the_provider_reports(self):
        self.assertEqual(tokenizer_tier("scripted/test"), "heuristic")
        text = "The ferry to Port Ashby leaves at six bells every morning. " * 20
        before = count_tokens(text, "scripted/test")
        self.converse(1.3)
        stored = TokenCalibration.objects.get(model="scripted/test")
        self.assertAlmostEqual(stored.factor, 1.3)
        self.assertEqual(len(stored.samples), 3)
        self.assertGreaterEqual(count_tokens(text, "scripted/test"), before * 1.3)

    def test_usage_is_never_below_what_the_provider_last_reported(self):
        llm = self.converse(1.27)
        # The next call sends this history again plus a new event: the measure must not be
        # below what the provider reported for the smaller last prompt.
        reported = reporting(1.27)(llm.calls[-1], llm.requests[-1].get("tools"))
        self.assertGreaterEqual(self.script.context_usage().total_tokens, reported)

    def test_the_history_is_recounted_under_the_new_factor(self):
        self.converse(1.0, lines=2)
        plain = self.script.history.token_total()
        self.converse(1.5, lines=1)
        recounted = self.script.history.token_total()
        self.assertGreater(recounted, plain * 1.4)
        self.assertEqual(recounted, sum(m["token_count"] for m in self.script.conversation_history))

    def test_the_factor_is_bounded_and_survives_a_restart(self):
        self.assertEqual(observe("scripted/test", 100, 100_000), MAX_FACTOR)
        set_calibration("scripted/test", 1.0)
        load_calibrations()
        self.assertEqual(count_tokens("abcd" * 10, "scripted/test"), 10 * MAX_FACTOR)

    def test_a_model_with_its_own_tokenizer_is_never_calibrated(self):
        self.assertIsNone(observe("offline/assistant", 100, 150))
        self.assertIsNone(observe("gpt-4o-mini", 100, 150))
        self.assertFalse(TokenCalibration.objects.exists())

    def test_no_reported_usage_teaches_nothing(self):
        self.tick_on("Fine.", text="hi")
        self.assertFalse(TokenCalibration.objects.exists())
