"""Turns that are not plain conversation: arrivals, objects given and builders' requests run
in several steps; one tool call an answer where multi-tool is off; the model's own task
assessment, which only restricts."""

from unittest import TestCase
from unittest.mock import patch

from django.test import override_settings
from evennia.utils import create

from ai.commands import CmdAiTask
from ai.commands.task import MAX_REQUEST_CHARS
from ai.task_assessment import ASSESSMENT_MAX_TOKENS, parse_assessment
from ai.tool_execution import run_react_loop
from ai.utils.value_checks import ConfigError

from .support import AssistantCommandTestCase, AssistantTestCase, ScriptedLLM, wait_for

LOOK_THEN_SAY = ([("look", {"target": "Char2"})], [("say", {"message": "Welcome, Char2."})])
ASSESS_ON = {"task_assessment_enabled": True}


class MultiStepTestCase(AssistantTestCase):
    def setUp(self):
        super().setUp()
        # A room of the game's kind that tells its assistants who arrives (ai.rooms).
        self.hall = create.create_object("ai.rooms.AssistantRoom", key="Hall")
        self.assistant.move_to(self.hall, quiet=True)
        self.char1.move_to(self.hall, quiet=True, move_hooks=False)  # there before the test

    def tick_with(self, *steps):
        with ScriptedLLM(*steps) as llm:
            self.script.set_config("llm_model", llm.model)
            self.llm = llm
            return self.tick()

    def event_types(self):
        return [event["type"] for event in self.script.pending_events()]


class TestArrivals(MultiStepTestCase):
    def test_a_player_arriving_is_greeted_in_several_steps(self):
        self.char2.move_to(self.hall)
        self.assertEqual(self.event_types(), ["arrival"])
        result = self.tick_with(*LOOK_THEN_SAY)
        loop = result["loop"]
        self.assertEqual(result["status"], "replied")
        self.assertEqual((loop.iterations, loop.tools_called), (2, ["look", "say"]))
        self.assertEqual(loop.pattern.mode, "react_loop")
        self.assertEqual(self.script.conversation_history[0]["content"], "Char2 arrives.")
        self.assertIsNone(result["assessment"])

    def test_speech_stays_one_action(self):
        self.hear("Hello there.")
        loop = self.tick_with(*LOOK_THEN_SAY)["loop"]
        self.assertEqual((loop.iterations, loop.tools_called), (1, ["look"]))
        self.assertEqual(loop.pattern.source_layers["mode"], "signal:event_class")

    def test_arrivals_do_not_flood_the_assistant(self):
        self.char2.move_to(self.hall)
        self.char2.move_to(self.room1)
        self.char2.move_to(self.hall)
        self.assertEqual(self.event_types(), ["arrival"], "again within arrival_cooldown")
        self.script.set_config("arrival_cooldown", 0)
        self.char2.move_to(self.room1)
        self.char2.move_to(self.hall)
        self.assertEqual(self.event_types(), ["arrival", "arrival"])

    def test_only_players_arriving_to_an_awake_assistant_count(self):
        npc = create.create_object(
            "typeclasses.characters.Character", key="Guard", location=self.room1
        )
        npc.move_to(self.hall)
        other = create.create_object("ai.assistant_character.AssistantCharacter", key="Other")
        other.assistant_script._stop_task()
        other.move_to(self.hall)
        self.obj1.move_to(self.hall)
        self.assertEqual(self.event_types(), [], "no account plays them")
        self.script.fall_asleep("test")
        self.char2.move_to(self.hall)
        self.assertEqual(self.event_types(), [], "noticed while asleep")
        self.script.wake_up("test")
        self.script.set_config("arrival_cooldown", None)
        self.char2.move_to(self.room1)
        self.char2.move_to(self.hall)
        self.assertEqual(self.event_types(), [], "None: arrivals are never noticed")

    def test_arrival_cooldown_is_checked_by_type_then_range(self):
        for value, refusal in (("soon", "0 to 86,400, not text"), (-1, "0 to 86,400")):
            with self.subTest(value=value):
                with self.assertRaisesRegex(ConfigError, rf"arrival_cooldown.*{refusal}"):
                    self.script.set_config("arrival_cooldown", value)
        self.assertEqual(self.script.get_config("arrival_cooldown"), 600)


class TestObjectsGiven(MultiStepTestCase):
    def setUp(self):
        super().setUp()
        self.item = create.create_object("typeclasses.objects.Object", key="token")
        self.item.move_to(self.char1, quiet=True)

    def test_a_gift_is_a_building_event_answered_in_several_steps(self):
        self.char1.execute_cmd("give token to Helper")
        self.assertEqual(self.item.location, self.assistant)
        self.assertEqual(self.event_types(), ["given"])
        result = self.tick_with(
            [("look", {"target": "token"})], [("say", {"message": "Thank you, Char."})]
        )
        loop = result["loop"]
        self.assertEqual((loop.iterations, loop.tools_called), (2, ["look", "say"]))
        self.assertEqual(self.script.conversation_history[0]["content"], 'Char gives you "token".')
        self.assertTrue(loop.pattern.dangerous_requires_confirm)
        self.assertEqual(
            loop.pattern.source_layers["dangerous_requires_confirm"], "signal:event_class"
        )

    def test_a_dangerous_call_of_a_building_turn_waits_for_a_builder(self):
        self.char1.execute_cmd("give token to Helper")
        give_back = [("give", {"item": "token", "recipient": "Char"})]
        loop = self.tick_with(give_back)["loop"]
        self.assertEqual(loop.stop_reason, "awaiting_confirmation")
        self.assertEqual(self.item.location, self.assistant, "given before a builder allowed it")
        # The same call in conversation is not a building turn: it runs.
        self.hear("Please give the token back to me.")
        loop = self.tick_with(give_back)["loop"]
        self.assertEqual(loop.tools_called, ["give"])
        self.assertEqual(self.item.location, self.char1)

    def test_what_is_no_gift_queues_nothing(self):
        self.item.move_to(self.hall, quiet=True)
        self.item.move_to(self.assistant, quiet=True)  # from the room: no giver
        create.create_object("typeclasses.objects.Object", key="made", location=self.assistant)
        self.assertEqual(self.event_types(), [])


class TestBuilderRequests(AssistantCommandTestCase):
    def test_a_request_is_queued_and_worked_on_in_several_steps(self):
        self.call(CmdAiTask(), "Helper = Look around, then greet Char2.", "You ask Helper:")
        event = self.script.pending_events()[0]
        self.assertEqual((event["type"], event["speaker_name"]), ("request", "Char"))
        with ScriptedLLM(*LOOK_THEN_SAY) as llm:
            self.script.set_config("llm_model", llm.model)
            result = wait_for(self.script.at_repeat())
        loop = result["loop"]
        self.assertEqual((loop.iterations, loop.tools_called), (2, ["look", "say"]))
        self.assertEqual(
            self.script.conversation_history[0]["content"],
            'Char asks you as a builder, "Look around, then greet Char2."',
        )
        self.assertEqual(self.script.context_signals(event)["event_class"], "building")
        self.assertTrue(loop.pattern.dangerous_requires_confirm)

    def test_bad_requests_are_refused_and_nothing_is_queued(self):
        self.call(CmdAiTask(), "Helper", "Usage: aitask <assistant> = <request>")
        self.call(CmdAiTask(), "Helper = ", "Usage: aitask <assistant> = <request>")
        self.call(
            CmdAiTask(),
            "Helper = " + "x" * (MAX_REQUEST_CHARS + 1),
            f"The request is {MAX_REQUEST_CHARS + 1:,} characters; at most",
        )
        self.call(CmdAiTask(), "Nobody = hi", "No assistant is called 'Nobody'")
        self.assertEqual(self.script.pending_events(), [])

    def test_only_builders_may_ask(self):
        self.assertTrue(CmdAiTask().access(self.char1, "cmd"))
        self.assertFalse(CmdAiTask().access(self.char2, "cmd"))


class TestOneToolCallAnAnswer(MultiStepTestCase):
    ARRIVAL = {"type": "arrival", "speaker": "#99", "speaker_name": "Char2"}
    NOTE_AND_SAY = [
        ("add_journal_entry", {"content": "Char2 came in.", "importance": 3}),
        ("say", {"message": "Welcome."}),
    ]

    def run_loop(self, *steps):
        with ScriptedLLM(*steps) as llm:
            self.script.set_config("llm_model", llm.model)
            return wait_for(
                run_react_loop(self.script, self.assistant, "tick_event", event=self.ARRIVAL)
            )

    def test_multi_tool_off_runs_the_first_call_and_says_why_not_the_others(self):
        self.script.set_config("context_overrides", {"tick_event": {"allows_multi_tool": False}})
        loop = self.run_loop(self.NOTE_AND_SAY, [("say", {"message": "Welcome."})])
        self.assertEqual(loop.calls_not_run, ["say"])
        self.assertEqual((loop.iterations, loop.tools_called), (2, ["add_journal_entry", "say"]))
        self.assertEqual(loop.said, ["Welcome."], "said once, by the second answer")
        results = [m["content"] for m in self.script.conversation_history if m["role"] == "tool"]
        self.assertRegex(
            results[1],
            r"^Not run: only one tool call an answer runs in tick_event "
            r"\(allows_multi_tool is off\)",
        )

    def test_multi_tool_on_runs_every_call_of_an_answer(self):
        loop = self.run_loop(self.NOTE_AND_SAY)
        self.assertEqual((loop.iterations, loop.tools_called), (1, ["add_journal_entry", "say"]))
        self.assertEqual(loop.calls_not_run, [])

    def test_a_dangerous_call_after_the_first_is_not_run_nor_held(self):
        self.script.set_config(
            "context_overrides",
            {"tick_event": {"allows_multi_tool": False, "dangerous_requires_confirm": True}},
        )
        steps = [("look", {}), ("give", {"item": "x", "recipient": "Char"})]
        loop = self.run_loop(steps, [("noop", {})])
        self.assertEqual(loop.calls_not_run, ["give"])
        self.assertEqual(loop.stop_reason, "noop")
        self.assertFalse(self.script.db.awaiting_confirmation)


class TestTaskAssessment(MultiStepTestCase):
    def arrive(self):
        self.char2.move_to(self.hall)

    def test_off_costs_no_call(self):
        self.arrive()
        result = self.tick_with(*LOOK_THEN_SAY)
        self.assertEqual(len(self.llm.calls), 2)
        self.assertIsNone(result["assessment"])

    def test_a_recommendation_restricts_the_turn(self):
        self.script.set_config("execution_config", ASSESS_ON)
        self.arrive()
        result = self.tick_with("iterations: 1, mode: react_loop, confirm: no", *LOOK_THEN_SAY)
        loop = result["loop"]
        self.assertEqual(result["assessment"]["recommended_iterations"], 1)
        self.assertEqual((loop.iterations, loop.tools_called), (1, ["look"]))
        self.assertEqual(loop.pattern.source_layers["max_iterations"], "assessment")
        assessing = self.llm.requests[0]
        self.assertNotIn("tools", assessing, "the assessment offers no tools")
        self.assertEqual(assessing["max_tokens"], ASSESSMENT_MAX_TOKENS)
        self.assertIn("Char2 arrives.", self.llm.calls[0][-1]["content"])

    def test_a_recommendation_above_the_limit_changes_nothing(self):
        self.script.set_config("execution_config", ASSESS_ON)
        self.arrive()
        loop = self.tick_with('{"iterations": 9, "mode": "react_loop"}', *LOOK_THEN_SAY)["loop"]
        self.assertEqual(loop.pattern.max_iterations, 5)
        self.assertNotIn("assessment", loop.pattern.source_layers.values())
        self.assertEqual(loop.iterations, 2)

    def test_a_recommended_confirmation_holds_a_dangerous_call(self):
        self.script.set_config("execution_config", ASSESS_ON)
        item = create.create_object("typeclasses.objects.Object", key="token")
        item.move_to(self.assistant, quiet=True)
        self.arrive()
        give = [("give", {"item": "token", "recipient": "Char2"})]
        loop = self.tick_with("iterations: 2\nmode: react_loop\nconfirm: yes", give)["loop"]
        self.assertEqual(loop.stop_reason, "awaiting_confirmation")
        self.assertEqual(loop.pattern.source_layers["dangerous_requires_confirm"], "assessment")
        self.assertEqual(item.location, self.assistant)

    def test_an_unparsable_reply_is_ignored_and_logged(self):
        self.script.set_config("execution_config", ASSESS_ON)
        self.arrive()
        with patch("ai.task_assessment.logger.log_warn") as log_warn:
            result = self.tick_with("Sounds easy enough!", *LOOK_THEN_SAY)
        self.assertIsNone(result["assessment"])
        self.assertEqual(result["loop"].iterations, 2)
        self.assertIn("did not parse: 'Sounds easy enough!'", log_warn.call_args.args[0])

    @override_settings(AI_LLM_MAX_RETRIES=0)
    def test_a_failed_assessment_is_ignored_and_logged(self):
        self.script.set_config("execution_config", ASSESS_ON)
        self.arrive()
        with patch("ai.task_assessment.logger.log_warn") as log_warn:
            result = self.tick_with(ValueError("down"), *LOOK_THEN_SAY)
        self.assertIsNone(result["assessment"])
        self.assertEqual(result["status"], "replied")
        self.assertIn("task assessment ignored, the call failed", log_warn.call_args.args[0])

    def test_conversation_is_not_assessed(self):
        self.script.set_config("execution_config", ASSESS_ON)
        self.hear("Hello there.")
        self.tick_with([("say", {"message": "Hello."})])
        self.assertEqual(len(self.llm.calls), 1)


class TestParseAssessment(TestCase):
    def test_lines_json_and_prose(self):
        cases = [
            (
                "iterations: 3, mode: react_loop, confirm: yes",
                {
                    "recommended_iterations": 3,
                    "recommended_mode": "react_loop",
                    "recommend_confirm_dangerous": True,
                },
            ),
            (
                "Iterations: 2\nMode: single action\nConfirm: No.",
                {
                    "recommended_iterations": 2,
                    "recommended_mode": "single_action",
                    "recommend_confirm_dangerous": False,
                },
            ),
            (
                '```json\n{"recommended_iterations": "4", "recommended_mode": "plan_execute"}\n```',
                {"recommended_iterations": 4},
            ),
            (
                "steps = 5; confirm = true",
                {"recommended_iterations": 5, "recommend_confirm_dangerous": True},
            ),
            ("I think it is easy.", None),
            ("iterations: many, mode: turbo, confirm: perhaps", None),
            ("iterations: 0", None),
        ]
        for text, expected in cases:
            with self.subTest(text=text):
                self.assertEqual(parse_assessment(text), expected)
