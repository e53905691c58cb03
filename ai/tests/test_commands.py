"""In-game commands: talk, aimode, aiconfig, and their locks."""

from evennia.utils.test_resources import BaseEvenniaCommandTest

from ai.commands import CmdAiConfig, CmdAiMode, CmdTalk

from .support import make_assistant, wait_for


class CommandTestCase(BaseEvenniaCommandTest):
    def setUp(self):
        super().setUp()
        self.assistant = make_assistant("Helper", self.room1)
        self.script = self.assistant.assistant_script


class TestTalk(CommandTestCase):
    def test_talk_queues_an_event_and_is_answered(self):
        self.call(
            CmdTalk(), "Helper = where is the forge?", 'You say to Helper, "where is the forge?"'
        )
        event = self.script.db.pending_events[0]
        self.assertEqual((event["type"], event["text"]), ("talk", "where is the forge?"))
        result = wait_for(self.script.at_repeat())
        self.assertEqual(result["status"], "replied")

    def test_talk_without_a_name_finds_the_only_assistant(self):
        self.call(CmdTalk(), "hello", 'You say to Helper, "hello"')
        self.assertEqual(len(self.script.db.pending_events), 1)

    def test_talk_to_an_absent_assistant(self):
        self.assistant.location = self.room2
        self.call(CmdTalk(), "Helper = hi", "Helper is not here.")
        self.call(CmdTalk(), "", "Usage: talk <assistant> = <message>")

    def test_everyone_may_talk(self):
        self.assertTrue(CmdTalk().access(self.char2, "cmd"))


class TestAiMode(CommandTestCase):
    def test_builders_switch_modes(self):
        self.call(CmdAiMode(), "Helper", "Helper is awake.")
        self.call(
            CmdAiMode(), "Helper = sleep", "Helper drifts off to sleep.|Helper is asleep (dozing)."
        )
        self.assertEqual(self.script.db.operating_mode, "sleep")
        self.call(CmdAiMode(), "Helper = awake", "Helper wakes up.|Helper is awake.")
        self.call(CmdAiMode(), "Helper = dance", "Unknown mode 'dance'")

    def test_locked_to_builders(self):
        self.assertTrue(CmdAiMode().access(self.char1, "cmd"))  # Developer
        self.assertFalse(CmdAiMode().access(self.char2, "cmd"))


class TestAiConfig(CommandTestCase):
    def test_shows_the_configuration(self):
        output = self.call(CmdAiConfig(), "Helper")
        self.assertIn("compact_sleep_threshold", output)
        self.assertIn("0.7", output)

    def test_sets_a_valid_value(self):
        self.call(
            CmdAiConfig(),
            "Helper/compact_preserve_window = 12",
            "Helper: compact_preserve_window = 12",
        )
        self.assertEqual(self.script.db.compact_preserve_window, 12)

    def test_refuses_a_bad_value_naming_the_range(self):
        self.call(
            CmdAiConfig(),
            "Helper/compact_sleep_threshold = 2",
            "Refused: compact_sleep_threshold=2 refused: must be a number in (0, 1]",
        )
        self.call(
            CmdAiConfig(), "Helper/llm_model = gpt nope", "'gpt nope' is not a Python literal"
        )
        self.assertEqual(self.script.db.compact_sleep_threshold, 0.7)

    def test_locked_to_builders(self):
        self.assertFalse(CmdAiConfig().access(self.char2, "cmd"))
