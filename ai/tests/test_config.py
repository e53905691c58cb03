"""Configuration: defaults from the seeds, clear refusals, ticks that survive bad values."""

import re
from unittest import TestCase
from unittest.mock import patch

from django.test import override_settings

from ai.config import (
    AI_SETTINGS,
    SCRIPT_CONFIG,
    SMALLEST_WINDOW_AT_DEFAULTS,
    ConfigError,
    ai_setting,
    parse_value,
)

from .support import AssistantTestCase

# A value of the wrong type, or out of range, for every AI_* setting.
BAD_SETTINGS = {
    "AI_LLM_MODEL": 42,
    "AI_LLM_OPTIONS": {"temperature": "hot"},
    "AI_COMPACT_OPTIONS": {"timeout": "30"},
    "AI_COMPACT_STRATEGY": "bogus",
    "AI_TICK_INTERVAL": "5",
    "AI_LLM_TIMEOUT": "30",
    "AI_LLM_LOCAL_TIMEOUT": 10**38,
    "AI_LLM_MAX_RETRIES": "2",
    "AI_LLM_THREADS": 0,
    "AI_LLM_RETRY_DELAY": "1",
    "AI_GC_FREEZE": "no",
    "AI_GC_THAW_SECONDS": 30,
    "AI_MAX_PENDING_EVENTS": "50",
    "AI_LOG_CHANNEL": 42,
    "AI_CONTEXT_OVERRIDES": {"tick_event": {"max_iterations": "3"}},
    "AI_MEMORY_DIR": 42,
    "AI_MEMORY_CONFIG": "mem0",
    "AI_MEMORY_VECTOR_STORE": "qdrant",
}


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
            r"compact_preserve_window=0 refused: must be a whole number from 1 to 10,000$",
        ),
        ("compact_preserve_window", 2.5, r"whole number"),
        ("compact_enabled", "yes", r"must be True or False"),
        ("llm_model", "not-a-model", r"litellm knows no provider for 'not-a-model'"),
        ("compact_model", "", r"non-empty litellm model string"),
        (
            "max_context_tokens",
            600,
            r"^max_context_tokens=600 refused: the prompt without any history is already \d+ "
            r"tokens \(tool schemas \d+, .*\), and history needs \d+ beside it under the 80% "
            r"emergency threshold \(a summary worth making and the newest messages\); use at "
            r"least \d,\d00$",
        ),
        (
            "max_context_tokens",
            10**38,
            r"^max_context_tokens=10{38} refused: must be a whole number up to 10,000,000, ",
        ),
        ("max_context_tokens", 0, r"must be a whole number up to 10,000,000"),
        ("max_context_tokens", 2000.0, r"must be a whole number up to"),
        ("working_memory_ttl", 10**38, r"must be a whole number from 60 to 31,536,000$"),
        ("compact_preserve_window", 10**38, r"must be a whole number from 1 to 10,000$"),
        ("sleep_after_idle_ticks", 10**38, r"must be a whole number from 0 to 1,000,000$"),
        (
            "llm_options",
            {"temperature": "hot"},
            r"^llm_options=\{'temperature': 'hot'\} refused: \['temperature'\] must be a number "
            r"in \[0, 2\], not text: write it without quotes$",
        ),
        (
            "llm_options",
            {"temperature": "0.7"},
            r"\['temperature'\] must be a number in \[0, 2\], not text: write it without quotes$",
        ),
        (
            "compact_options",
            {"timeout": "30"},
            r"^compact_options=\{'timeout': '30'\} refused: \['timeout'\] must be a number in "
            r"\(0, 86400\], not text: write it without quotes$",
        ),
        ("llm_options", {"max_tokens": 2.5}, r"\['max_tokens'\] must be a whole number from 1 to"),
        (
            "thinking_delay",
            "3",
            r"^thinking_delay='3' refused: must be a number in \[0, 600\], not",
        ),
        (
            "thinking_emote",
            "{nme} ponders.",
            r"^thinking_emote='\{nme\} ponders.' refused: must be text in which "
            r"\{name\} \(the assistant's name\) is the only field in braces, not \{nme\}$",
        ),
        ("thinking_emote", "{name} hums {", r"the only field in braces, not \{$"),
        ("thinking_emote", "{name!r} hums", r"the only field in braces, not \{name!r\}$"),
        ("thinking_emote", 42, r"thinking_emote=42 refused: must be text in which \{name\}"),
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

    def test_the_smallest_window_at_the_defaults_is_the_one_documented(self):
        smallest = SMALLEST_WINDOW_AT_DEFAULTS
        with self.assertRaisesRegex(ConfigError, rf"; use at least {smallest:,}$"):
            self.script.set_config("max_context_tokens", smallest - 100)
        self.script.set_config("max_context_tokens", smallest)
        self.assertEqual(self.script.db.max_context_tokens, smallest)
        self.assertIn(f"({smallest:,} at the defaults", SCRIPT_CONFIG["max_context_tokens"].allowed)

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
            ("compact_preserve_window", "twelve", r"must be a whole number from 1 to 10,000$"),
            ("max_context_tokens", "none", r"must be None or a whole number up to 10,000,000"),
            ("llm_options", "{[1]: 2}", r"^llm_options='\{\[1\]: 2\}' refused: must be a dict"),
        ]
        for name, text, message in cases:
            with self.subTest(name=name, text=text):
                with self.assertRaisesRegex(ConfigError, message):
                    parse_value(name, text)

    def test_every_attribute_says_what_it_allows(self):
        self.assertEqual(SCRIPT_CONFIG["compact_sleep_threshold"].allowed, "a number in (0, 1]")
        self.assertEqual(
            SCRIPT_CONFIG["max_context_tokens"].allowed,
            "None or a whole number up to 10,000,000, and at least the prompt's frame plus room "
            f"for history ({SMALLEST_WINDOW_AT_DEFAULTS:,} at the defaults; a refusal names "
            "the least for this assistant)",
        )
        self.assertEqual(
            SCRIPT_CONFIG["compact_enabled"].allowed, "yes or no (or true/false, on/off)"
        )
        for name, option in SCRIPT_CONFIG.items():
            with self.subTest(name=name):
                self.assertTrue(option.allowed)


class TestServerWideSettings(TestCase):
    def test_every_setting_is_tried_here(self):
        self.assertEqual(set(BAD_SETTINGS), set(AI_SETTINGS))

    def test_a_bad_setting_falls_back_to_its_default_with_one_logged_error(self):
        for name, value in BAD_SETTINGS.items():
            default = AI_SETTINGS[name].default
            with self.subTest(name=name), override_settings(**{name: value}):
                with patch("ai.utils.checked_settings.logger.log_err") as log_err:
                    self.assertEqual(ai_setting(name), default)
                    self.assertEqual(ai_setting(name), default)
                log_err.assert_called_once()
                self.assertRegex(
                    log_err.call_args.args[0],
                    rf"^AI: setting {name}\W.* refused: .*must be .*; using the default "
                    rf"{re.escape(repr(default))}$",
                )

    def test_the_refusal_names_the_setting_and_what_it_allows(self):
        with override_settings(AI_LLM_OPTIONS={"temperature": "0.7"}):
            with patch("ai.utils.checked_settings.logger.log_err") as log_err:
                ai_setting("AI_LLM_OPTIONS")
        self.assertEqual(
            log_err.call_args.args[0],
            "AI: setting AI_LLM_OPTIONS={'temperature': '0.7'} refused: ['temperature'] must be "
            "a number in [0, 2], not text: write it without quotes; using the default {}",
        )

    def test_the_offline_model_is_checked_without_importing_litellm_in_the_reactor(self):
        with override_settings(AI_LLM_MODEL="offline/assistant"):
            with patch("ai.litellm_loader.load_litellm") as load_litellm:
                self.assertEqual(ai_setting("AI_LLM_MODEL"), "offline/assistant")
        load_litellm.assert_not_called()

    def test_a_good_setting_is_used_as_it_is(self):
        with override_settings(AI_LLM_MAX_RETRIES=0, AI_COMPACT_STRATEGY="masking"):
            with patch("ai.utils.checked_settings.logger.log_err") as log_err:
                self.assertEqual(ai_setting("AI_LLM_MAX_RETRIES"), 0)
                self.assertEqual(ai_setting("AI_COMPACT_STRATEGY"), "masking")
        log_err.assert_not_called()


class TestTickSurvivesBadStoredValues(AssistantTestCase):
    def talk_twice(self, logged_by):
        """Say two lines, each followed by a tick; return the ticks' statuses and the errors
        the module ``logged_by`` logged meanwhile."""
        statuses = []
        with patch(f"{logged_by}.logger.log_err") as log_err:
            for line in ("hello there", "are you still there?"):
                self.char1.execute_cmd(f"say {line}")
                statuses.append(self.tick()["status"])
        return statuses, [call.args[0] for call in log_err.call_args_list]

    def test_bad_server_wide_settings_fall_back_and_the_assistant_answers(self):
        for name in (
            "AI_LLM_MODEL",
            "AI_LLM_OPTIONS",
            "AI_MAX_PENDING_EVENTS",
            "AI_CONTEXT_OVERRIDES",
        ):
            with self.subTest(name=name), self.settings(**{name: BAD_SETTINGS[name]}):
                statuses, logged = self.talk_twice(logged_by="ai.utils.checked_settings")
                self.assertEqual(statuses, ["replied", "replied"])
                self.assertEqual(len(logged), 1, "logged once, not every tick")
                self.assertIn(f"setting {name}", logged[0])

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

    def test_values_of_the_wrong_type_or_absurd_size_fall_back_and_ticks_still_answer(self):
        stored = {
            "llm_options": {"temperature": "hot"},
            "compact_options": {"timeout": "30"},
            "thinking_emote": "{nme} ponders.",
            "working_memory_ttl": 10**38,
            "max_context_tokens": 10**38,
            "compact_preserve_window": 10**38,
            "execution_config": {"max_iterations_per_tick": "5"},
        }
        for name, value in stored.items():
            self.script.attributes.add(name, value)
        statuses, logged = self.talk_twice(logged_by="ai.assistant_script")
        self.assertEqual(statuses, ["replied", "replied"])
        for name in stored:
            with self.subTest(name=name):
                self.assertEqual(sum(f" {name}=" in line for line in logged), 1, logged)
                self.assertEqual(self.script.get_config(name), SCRIPT_CONFIG[name].default)
        self.assertEqual(len(logged), len(stored), "each logged once, not every tick")

    def test_a_value_written_or_removed_outside_set_config_counts_at_once(self):
        # The resolved configuration is kept between ticks; a builder's `set` (an attribute
        # written directly) or a removed attribute must still count for the next tick.
        self.char1.execute_cmd("say hello there")
        self.tick()
        self.assertEqual(
            self.script.get_config("thinking_delay"), SCRIPT_CONFIG["thinking_delay"].default
        )
        self.script.db.thinking_delay = 0.5
        self.assertEqual(self.script.get_config("thinking_delay"), 0.5)
        self.script.attributes.add("sleep_after_idle_ticks", 1)
        self.tick()
        self.assertEqual(self.script.state, "dozing", "one idle tick put it to sleep")
        self.script.attributes.remove("thinking_delay")
        self.assertEqual(
            self.script.get_config("thinking_delay"), SCRIPT_CONFIG["thinking_delay"].default
        )

    def test_inverted_thresholds_fall_back_to_both_defaults(self):
        self.script.db.compact_sleep_threshold = 0.9
        self.script.db.compact_emergency_threshold = 0.6
        with patch("ai.assistant_script.logger.log_err"):
            config = self.script.effective_config()
        self.assertEqual(
            (config["compact_sleep_threshold"], config["compact_emergency_threshold"]), (0.7, 0.8)
        )
