"""The ReAct loop: message shapes, every stop condition, and a full tick with tools."""

from unittest.mock import patch

from django.db import DatabaseError, connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from ai.helpers.journal import add_entry, journal_entries
from ai.history import ConversationHistory
from ai.prompt_contexts import CONVERSATION_TOOLS
from ai.tool_execution import run_react_loop
from ai.tools import Tool, ToolResult, register_tool, unregister_tool

from .support import AssistantTestCase, ScriptedLLM, wait_for

SPEECH = {"type": "speech", "speaker_name": "Char", "text": "hi", "in_history": True}


class LoopTestCase(AssistantTestCase):
    def run_loop(self, llm, context="tick_event", **kwargs):
        self.script.set_config("llm_model", llm.model)
        return wait_for(run_react_loop(self.script, self.assistant, context, **kwargs))


class TestRenderedOnceARun(LoopTestCase):
    def test_the_recalled_entries_are_read_once_and_shown_alike_to_each_call(self):
        """The journal recall and the profiles are read for a run's first call; its later
        calls send them unchanged (the prompt's prefix stays reusable), though the run
        journaled in between: that reaches the model as the tool's result."""
        add_entry(self.assistant, "Char said the well is dry.", source_type="conversation")
        event = dict(SPEECH, text="Is the well dry?")
        write = ("add_journal_entry", {"content": "Char asked about the well again today."})
        with ScriptedLLM([write], [("noop", {})]) as llm:
            with CaptureQueriesContext(connection) as asked:
                self.run_loop(llm, event=event)
        # A search counts the holders of the question's words first: once per search.
        recalls = [q for q in asked if q["sql"].startswith("SELECT MAX(word), COUNT(*)")]
        self.assertEqual(len(recalls), 1, "one recall for the run's two calls")
        first, second = ("\n".join(str(m["content"]) for m in call) for call in llm.calls)
        self.assertIn("the well is dry", first)
        first_memories, memories = (
            [m["content"] for m in call if "Things you remember" in m["content"]]
            for call in llm.calls
        )
        self.assertEqual(memories, first_memories)
        self.assertNotIn("asked about the well again", memories[0])
        self.assertIn("asked about the well again", second, "as the tool's result")


class TestStopConditions(LoopTestCase):
    def test_terminal_tool_ends_the_loop(self):
        with ScriptedLLM([("say", {"message": "Hello!"})], "never asked") as llm:
            result = self.run_loop(llm, event=SPEECH)
        self.assertEqual(result.stop_reason, "terminal_tool")
        self.assertEqual((result.iterations, result.tools_called), (1, ["say"]))
        self.assertEqual(result.said, ["Hello!"])

    def test_noop_ends_the_loop(self):
        with ScriptedLLM([("review_journal", {})], [("noop", {})]) as llm:
            result = self.run_loop(llm, event=SPEECH)
        self.assertEqual(result.stop_reason, "noop")
        self.assertEqual(result.tools_called, ["review_journal", "noop"])

    def test_no_tool_call_ends_the_loop_and_the_text_is_spoken(self):
        with ScriptedLLM("Plain words.") as llm:
            with patch.object(self.char1, "msg") as char1_msg:
                result = self.run_loop(llm, event=SPEECH)
        self.assertEqual(result.stop_reason, "no_tool_call")
        self.assertIn("Plain words.", str(char1_msg.call_args))

    def test_a_tool_outside_the_filter_is_not_run_and_stops(self):
        with ScriptedLLM([("say", {"message": "leak"})]) as llm:
            with patch.object(self.char1, "msg") as char1_msg:
                result = self.run_loop(llm, context="pre_compaction")
        self.assertEqual(result.stop_reason, "tool_not_allowed")
        self.assertEqual(result.tools_called, [])
        char1_msg.assert_not_called()
        self.assertEqual(result.tools_refused, ["say"])
        self.assertEqual(self.script.conversation_history, [], "extraction records no history")

    def test_the_iteration_limit_ends_the_loop(self):
        with ScriptedLLM(*[[("review_journal", {})]] * 6) as llm:
            result = self.run_loop(llm, event=SPEECH)
        self.assertEqual(result.stop_reason, "max_iterations")
        self.assertEqual(result.iterations, 5)
        with ScriptedLLM(*[[("review_journal", {})]] * 6) as llm:
            result = self.run_loop(llm, event=SPEECH, iteration_limit=2)
        self.assertEqual(result.iterations, 2)

    @override_settings(AI_LLM_MAX_RETRIES=0)
    def test_a_model_error_ends_the_loop(self):
        with ScriptedLLM(ValueError("broken")) as llm:
            result = self.run_loop(llm, event=SPEECH)
        self.assertEqual(result.stop_reason, "llm_error")
        self.assertEqual(self.script.conversation_history, [])

    def test_a_dangerous_tool_waits_for_confirmation(self):
        ran = []
        register_tool(
            Tool(
                name="demolish",
                description="Destroy the room",
                parameters={"type": "object", "properties": {}},
                categories=frozenset({"dangerous"}),
                handler=lambda ctx, **kwargs: ran.append(1) or ToolResult(True, "gone"),
            )
        )
        self.addCleanup(unregister_tool, "demolish")
        # A game's own tool joins a turn through the context's tool_filter.
        offered = {"tool_filter": [*CONVERSATION_TOOLS, "demolish"]}
        self.script.set_config("context_overrides", {"tick_event": offered})
        with ScriptedLLM([("demolish", {})]) as llm:
            result = self.run_loop(llm, signals={"event_class": "building"})
        self.assertEqual(result.stop_reason, "awaiting_confirmation")
        self.assertEqual(ran, [])
        self.assertEqual(self.script.db.awaiting_confirmation[0]["function"]["name"], "demolish")


class TestMessageShapes(LoopTestCase):
    def test_each_call_is_answered_by_a_tool_message_with_its_id(self):
        steps = [[("add_journal_entry", {"content": "Char likes tea"}), ("say", {"message": "ok"})]]
        with ScriptedLLM(*steps) as llm:
            self.run_loop(llm, event=SPEECH)
        history = self.script.conversation_history
        self.assertEqual([m["role"] for m in history], ["assistant", "tool", "tool"])
        call_ids = [call["id"] for call in history[0]["tool_calls"]]
        self.assertEqual([m["tool_call_id"] for m in history[1:]], call_ids)

    def test_a_call_whose_result_cannot_be_stored_is_not_stored_either(self):
        """The answer and its calls' results are stored together: a provider refuses a
        history with a call left unanswered, so a failed write leaves neither."""
        original = ConversationHistory.append

        def failing_on_results(store, message):
            if message["role"] == "tool":
                raise DatabaseError("disk I/O error")
            return original(store, message)

        steps = [[("add_journal_entry", {"content": "Char likes tea"})], [("noop", {})]]
        with ScriptedLLM(*steps) as llm:
            with patch.object(ConversationHistory, "append", failing_on_results):
                with self.assertRaisesRegex(DatabaseError, "disk I/O error"):
                    self.run_loop(llm, event=SPEECH)
        self.assertEqual(self.script.conversation_history, [])
        self.assertEqual(self.script.history.totals(), (0, 0))
        with ScriptedLLM([("say", {"message": "Tea it is."})]) as llm:
            self.run_loop(llm, event=SPEECH)
        history = self.script.conversation_history
        self.assertEqual([m["role"] for m in history], ["assistant", "tool"])

    def test_bad_arguments_come_back_as_a_readable_result(self):
        with ScriptedLLM([("add_journal_entry", {"importance": 99})], [("noop", {})]) as llm:
            result = self.run_loop(llm, event=SPEECH)
        tool_message = self.script.conversation_history[1]
        self.assertIn("add_journal_entry", tool_message["content"])
        self.assertEqual(journal_entries(self.assistant), [])
        self.assertEqual(result.stop_reason, "noop")

    def test_contexts_that_do_not_record_history_leave_it_alone(self):
        with ScriptedLLM(
            [("add_journal_entry", {"content": "A reflection"})], [("noop", {})]
        ) as llm:
            result = self.run_loop(llm, context="reflection")
        self.assertEqual(result.tools_called, ["add_journal_entry", "noop"])
        self.assertEqual(self.script.conversation_history, [])
        # An insight without cites is refused; its result still reaches the next call.
        self.assertIn("Result of your last action: Not journaled", llm.calls[1][-1]["content"])


class TestFullTickWithTools(AssistantTestCase):
    def test_a_players_fact_is_journaled_and_answered_in_the_room(self):
        self.char1.execute_cmd("say I promised to bring 12 iron ingots to the forge.")
        with patch.object(self.char2, "msg") as char2_msg:
            result = self.tick()
        self.assertEqual(result["status"], "replied")
        self.assertEqual(result["loop"].tools_called, ["add_journal_entry", "say"])
        entry = journal_entries(self.assistant)[-1]
        self.assertEqual(
            entry["content"], "Char said: I promised to bring 12 iron ingots to the forge."
        )
        self.assertEqual(entry["importance"], 7)
        self.assertEqual(entry["source_message_ids"], [result["event"]["message_id"]])
        self.assertIn("Helper says", str(char2_msg.mock_calls))
        self.assertEqual(result["loop"].pattern.mode, "single_action")

    def test_a_question_is_answered_without_journaling(self):
        self.char1.execute_cmd("say Where is the forge?")
        result = self.tick()
        self.assertEqual(result["loop"].tools_called, ["say"])
        self.assertEqual(journal_entries(self.assistant), [])
