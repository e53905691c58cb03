"""In-game commands: talk, aimode, aiconfig, aiconfirm, and their locks."""

from ai.commands import CmdAiConfig, CmdAiConfirm, CmdAiMode, CmdTalk
from ai.tool_execution import run_react_loop
from ai.tools import Tool, ToolResult, register_tool, unregister_tool

from .support import AssistantCommandTestCase, ScriptedLLM, wait_for


class TestTalk(AssistantCommandTestCase):
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


class TestAiMode(AssistantCommandTestCase):
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


class TestAiConfig(AssistantCommandTestCase):
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


class TestAiConfirm(AssistantCommandTestCase):
    def setUp(self):
        super().setUp()
        self.demolished = []
        register_tool(
            Tool(
                name="demolish",
                description="Tear down a building",
                parameters={"type": "object", "properties": {"what": {"type": "string"}}},
                categories=frozenset({"dangerous"}),
                handler=lambda ctx, what: self.demolished.append(what)
                or ToolResult(True, f"{what} is rubble"),
            )
        )
        self.addCleanup(unregister_tool, "demolish")
        calls = [[("demolish", {"what": "the old mill"})], [("demolish", {"what": "the bridge"})]]
        with ScriptedLLM(*calls) as llm:
            self.script.set_config("llm_model", llm.model)
            for _ in calls:
                loop = wait_for(
                    run_react_loop(
                        self.script,
                        self.assistant,
                        "tick_event",
                        signals={"event_class": "building"},
                    )
                )
                self.assertEqual(loop.stop_reason, "awaiting_confirmation")
        self.assertEqual(self.demolished, [])

    def test_lists_the_waiting_calls(self):
        output = self.call(CmdAiConfirm(), "Helper")
        self.assertIn("Tool calls Helper waits on:", output)
        self.assertRegex(output, r'1 +demolish\(\{"what": "the old mill"\}\)')
        self.assertRegex(output, r'2 +demolish\(\{"what": "the bridge"\}\)')

    def test_confirming_runs_the_call_and_tells_the_assistant(self):
        self.call(
            CmdAiConfirm(),
            "Helper = 2",
            'Ran demolish({"what": "the bridge"}) for Helper: the bridge is rubble',
        )
        self.assertEqual(self.demolished, ["the bridge"])
        self.assertEqual(len(self.script.db.awaiting_confirmation), 1)
        told = self.script.conversation_history[-1]
        self.assertEqual(
            (told["role"], told["content"]),
            (
                "user",
                'Char allowed your call demolish({"what": "the bridge"}); it returned: '
                "the bridge is rubble",
            ),
        )

    def test_discarding_drops_the_call_unrun_and_tells_the_assistant(self):
        self.call(CmdAiConfirm(), "/discard Helper = 1", "Discarded demolish(")
        self.assertEqual(self.demolished, [])
        remaining = self.script.db.awaiting_confirmation
        self.assertEqual(
            [call["function"]["arguments"] for call in remaining], ['{"what": "the bridge"}']
        )
        self.assertIn(
            "Char did not allow your call demolish(",
            self.script.conversation_history[-1]["content"],
        )

    def test_a_call_made_in_a_whispered_turn_runs_for_the_whisperer_alone(self):
        with ScriptedLLM([("demolish", {"what": "the vault"})]) as llm:
            self.script.set_config("llm_model", llm.model)
            event = {"type": "whisper", "speaker": self.char2.dbref, "speaker_name": "Char2"}
            wait_for(
                run_react_loop(
                    self.script,
                    self.assistant,
                    "tick_event",
                    event=dict(event, text="Tear down the vault."),
                    signals={"event_class": "building"},
                )
            )
        self.call(CmdAiConfirm(), "Helper = 3", 'Ran demolish({"what": "the vault"})')
        told = self.script.conversation_history[-1]
        self.assertEqual(told["metadata"]["audience"], [self.char2.dbref])
        self.assertIn("the vault is rubble", told["content"])

    def test_a_wrong_number_changes_nothing(self):
        for wrong in ("0", "3", "two"):
            self.call(CmdAiConfirm(), f"Helper = {wrong}", f"Helper has no waiting call '{wrong}'")
        self.assertEqual(len(self.script.db.awaiting_confirmation), 2)
        self.assertEqual(self.demolished, [])

    def test_nothing_waiting(self):
        self.script.db.awaiting_confirmation = []
        self.call(CmdAiConfirm(), "Helper", "Helper waits on no dangerous tool call.")

    def test_locked_to_builders(self):
        self.assertTrue(CmdAiConfirm().access(self.char1, "cmd"))
        self.assertFalse(CmdAiConfirm().access(self.char2, "cmd"))
