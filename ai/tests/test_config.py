"""Configuration: defaults from the seeds, clear refusals, ticks that survive bad values."""

from unittest import TestCase
from unittest.mock import patch

from ai.config import SCRIPT_CONFIG, ConfigError, parse_value

from .support import AssistantTestCase


class TestDefaults(AssistantTestCase):
    def test_seed_defaults_are_set_at_creation(self):
        db = self.script.db
        self.assertIs(db.compact_enabled, True)
        self.assertEqual(db.compact_sleep_threshold, 0.7)
        self.assertEqual(db.compact_emergency_threshold, 0.8)
        self.assertEqual(db.compact_preserve_window, 20)
        self.assertIsNone(db.compact_model)
        self.assertIsNone(db.compact_prompt)
        self.assertEqual(db.max_context_tokens, 100000)
        self.assertIs(db.pre_compact_extraction_enabled, True)
        self.assertEqual(db.pre_compact_max_iterations, 5)
        self.assertIsNone(db.pre_compact_prompt)
        self.assertIsNone(db.last_compaction)
        self.assertEqual(db.execution_config["max_iterations_per_tick"], 5)
        self.assertEqual(db.operating_mode, "awake")

    def test_every_option_is_stored(self):
        for name in SCRIPT_CONFIG:
            self.assertTrue(self.script.attributes.has(name), name)


class TestRefusals(AssistantTestCase):
    CASES = [
        (
            "compact_sleep_threshold",
            0,
            r"compact_sleep_threshold=0 refused: must be a number in \(0, 1\]",
        ),
        ("compact_sleep_threshold", 1.5, r"in \(0, 1\]"),
        ("compact_emergency_threshold", "high", r"compact_emergency_threshold='high' refused"),
        ("compact_emergency_threshold", 0.5, r"must be at least compact_sleep_threshold \(0.7\)"),
        (
            "compact_preserve_window",
            0,
            r"compact_preserve_window=0 refused: must be a whole number of at least 1",
        ),
        ("compact_preserve_window", 2.5, r"whole number"),
        ("compact_enabled", "yes", r"must be True or False"),
        ("llm_model", "not-a-model", r"litellm knows no provider for 'not-a-model'"),
        ("compact_model", "", r"non-empty litellm model string"),
        ("max_context_tokens", 10, r"of at least 256"),
        (
            "max_context_tokens",
            600,
            r"max_context_tokens=600 refused: the prompt without any history is already \d+ "
            r"tokens \(tool schemas \d+, .*every tick would compact in vain; use at least \d+00",
        ),
        ("pre_compact_max_iterations", 11, r"from 1 to 10"),
        (
            "execution_config",
            {"max_iterations_per_tick": 50},
            r"\['max_iterations_per_tick'\] must be a whole number from 1 to 10",
        ),
        ("execution_config", {"turbo": True}, r"unknown key 'turbo'"),
        ("no_such_option", 1, r"unknown configuration attribute 'no_such_option'"),
    ]

    def test_bad_values_are_refused_and_nothing_changes(self):
        for name, value, message in self.CASES:
            with self.subTest(name=name, value=value):
                before = self.script.attributes.get(name)
                with self.assertRaisesRegex(ConfigError, message):
                    self.script.set_config(name, value)
                self.assertEqual(self.script.attributes.get(name), before)

    def test_good_values_are_stored(self):
        self.script.set_config("compact_emergency_threshold", 0.9)
        self.script.set_config("compact_sleep_threshold", 0.9)
        self.script.set_config("llm_model", "anthropic/claude-3-5-haiku-latest")
        self.script.set_config("llm_model", "openai/gpt-4o-mini")
        self.script.set_config("max_context_tokens", None)  # litellm knows its window
        self.assertEqual(self.script.db.compact_sleep_threshold, 0.9)
        self.assertEqual(self.script.db.llm_model, "openai/gpt-4o-mini")
        self.assertEqual(self.script.context_usage().max_tokens, 128000)

    def test_no_context_limit_is_refused_for_a_model_of_unknown_window(self):
        unknown = "anthropic/claude-3-5-haiku-latest"  # not in the pinned litellm's model map
        self.script.set_config("llm_model", unknown)
        with self.assertRaisesRegex(
            ConfigError,
            rf"^max_context_tokens=None refused: litellm does not know the input window of "
            rf"'{unknown}'; set max_context_tokens$",
        ):
            self.script.set_config("max_context_tokens", None)
        self.assertEqual(self.script.db.max_context_tokens, 100000)
        self.script.set_config("llm_model", "openai/gpt-4o-mini")
        self.script.set_config("max_context_tokens", None)
        with self.assertRaisesRegex(ConfigError, "does not know the input window"):
            self.script.set_config("llm_model", unknown)
        self.assertEqual(self.script.db.llm_model, "openai/gpt-4o-mini")

    def test_raising_sleep_above_emergency_is_refused(self):
        with self.assertRaisesRegex(ConfigError, "compact_emergency_threshold=0.8 refused"):
            self.script.set_config("compact_sleep_threshold", 0.85)

    def test_a_refused_context_override_says_refused_once(self):
        with self.assertRaisesRegex(
            ConfigError,
            r"^context_overrides\['tick_event'\]\['max_iterations'\]=0 refused: must be a whole "
            r"number from 1 to 10$",
        ):
            self.script.set_config("context_overrides", {"tick_event": {"max_iterations": 0}})


class TestReadingBuildersText(TestCase):
    def test_each_attribute_reads_text_by_its_kind(self):
        cases = [
            ("compact_enabled", "Yes", True),
            ("compact_enabled", "OFF", False),
            ("compact_enabled", " true ", True),
            ("compact_enabled", "False", False),
            ("llm_model", "openai/gpt-4o-mini", "openai/gpt-4o-mini"),
            ("llm_model", "'openai/gpt-4o-mini'", "openai/gpt-4o-mini"),
            ("llm_model", "None", None),
            ("compact_prompt", "Keep names, numbers = facts.", "Keep names, numbers = facts."),
            ("thinking_emote", "[{name} hums]", "[{name} hums]"),
            ("thinking_emote", "3", "3"),
            ("compact_sleep_threshold", "0.6", 0.6),
            ("max_context_tokens", "None", None),
            ("compact_preserve_window", "12", 12),
            ("llm_options", "{'temperature': 0.3}", {"temperature": 0.3}),
        ]
        for name, text, value in cases:
            with self.subTest(name=name, text=text):
                self.assertEqual(parse_value(name, text), value)
                self.assertIs(type(parse_value(name, text)), type(value))

    def test_text_of_no_kind_the_attribute_takes_is_refused_with_what_it_allows(self):
        cases = [
            ("compact_enabled", "1", r"^compact_enabled='1' refused: must be yes or no"),
            ("compact_preserve_window", "twelve", r"must be a whole number of at least 1$"),
            ("max_context_tokens", "none", r"must be None or a whole number of at least 256$"),
            ("llm_options", "{[1]: 2}", r"^llm_options='\{\[1\]: 2\}' refused: must be a dict"),
        ]
        for name, text, message in cases:
            with self.subTest(name=name, text=text):
                with self.assertRaisesRegex(ConfigError, message):
                    parse_value(name, text)

    def test_every_attribute_says_what_it_allows(self):
        self.assertEqual(SCRIPT_CONFIG["compact_sleep_threshold"].allowed, "a number in (0, 1]")
        self.assertEqual(
            SCRIPT_CONFIG["max_context_tokens"].allowed, "None or a whole number of at least 256"
        )
        self.assertEqual(
            SCRIPT_CONFIG["compact_enabled"].allowed, "yes or no (or true/false, on/off)"
        )
        for name, option in SCRIPT_CONFIG.items():
            with self.subTest(name=name):
                self.assertTrue(option.allowed)


class TestTickSurvivesBadStoredValues(AssistantTestCase):
    def test_a_stored_unknown_window_falls_back_to_the_default_limit(self):
        self.script.db.max_context_tokens = None
        with self.settings(AI_LLM_MODEL="anthropic/claude-3-5-haiku-latest"):
            with patch("ai.assistant_script.logger.log_err") as log_err:
                self.assertEqual(self.script.context_usage().max_tokens, 100000)
                self.script.context_usage()
        log_err.assert_called_once()
        self.assertIn(
            "max_context_tokens=None refused: litellm does not know the input window of "
            "'anthropic/claude-3-5-haiku-latest'; set max_context_tokens; using the default "
            "max_context_tokens=100000",
            log_err.call_args.args[0],
        )

    def test_a_value_set_directly_falls_back_to_the_default_with_a_logged_error(self):
        self.script.db.llm_model = "nonsense"
        self.script.db.compact_preserve_window = -3
        with patch("ai.assistant_script.logger.log_err") as log_err:
            self.char1.execute_cmd("say hello there")
            result = self.tick()
            self.tick()
        self.assertEqual(result["status"], "replied")
        logged = " ".join(call.args[0] for call in log_err.call_args_list)
        self.assertIn("llm_model='nonsense' refused", logged)
        self.assertIn("compact_preserve_window=-3 refused", logged)
        self.assertEqual(log_err.call_count, 2, "each problem is logged once, not every tick")
        self.assertEqual(self.script.get_config("compact_preserve_window"), 20)

    def test_inverted_thresholds_fall_back_to_both_defaults(self):
        self.script.db.compact_sleep_threshold = 0.9
        self.script.db.compact_emergency_threshold = 0.6
        with patch("ai.assistant_script.logger.log_err"):
            config = self.script.effective_config()
        self.assertEqual(
            (config["compact_sleep_threshold"], config["compact_emergency_threshold"]), (0.7, 0.8)
        )
