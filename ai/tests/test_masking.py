"""Observation masking, the hybrid strategy and the search_history tool."""

import json
from contextlib import contextmanager

from django.test import override_settings

from ai.models import CompactionRecord
from ai.sleep import run_sleep_tick
from ai.sleep.compaction import RUNNERS, compact_conversation_history
from ai.tools import ToolContext, execute_tool
from ai.utils.markers import MASKED_OUTPUT, SUMMARY_MARKER

from .support import AssistantTestCase, ScriptedLLM, store_window, wait_for

SECRET_OUTPUT = "The vault under the mill opens with the code 4417. " * 20


class ModelCalled(AssertionError):
    """Raised by the scripted model: masking alone must never call one."""


class MaskingCase(AssistantTestCase):
    def setUp(self):
        super().setUp()
        # 20% of it, the preserve window's token floor, holds the four chat lines alone.
        store_window(self.script, 500)
        self.script.set_config("compact_preserve_window", 4)
        self.script.set_config("compact_strategy", "masking")
        self.calls = 0

    def tool_unit(self, output, tool="recall_memories", audience=None):
        """Append a tool call and its result; return the result as stored."""
        self.calls += 1
        call_id = f"call_{self.calls}"
        metadata = {"audience": audience} if audience else {}
        self.script.append_message(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps({"query": "vault"})},
                    }
                ],
                "metadata": metadata,
            }
        )
        return self.script.append_message(
            {"role": "tool", "tool_call_id": call_id, "content": output, "metadata": metadata}
        )

    def chat(self, count):
        for index in range(count):
            self.script.append_message({"role": "user", "content": f'Char says, "hi {index}"'})

    def compact(self, **kwargs):
        return wait_for(compact_conversation_history(self.script, self.assistant, **kwargs))

    @contextmanager
    def no_model(self):
        """A scripted model that fails the test if anything calls it."""
        with ScriptedLLM(*[ModelCalled("a model was called")] * 5) as llm:
            self.script.set_config("llm_model", llm.model)
            self.script.set_config("compact_model", llm.model)
            yield llm

    def live(self, message_id):
        return next(m for m in self.script.history.messages() if m["id"] == message_id)


class TestMasking(MaskingCase):
    def test_old_outputs_become_placeholders_that_keep_their_call(self):
        old = self.tool_unit(SECRET_OUTPUT)
        short = self.tool_unit("Nothing found.")
        self.chat(2)
        recent = self.tool_unit(SECRET_OUTPUT)
        self.chat(2)
        before = self.script.history.token_total()
        with self.no_model() as llm:
            result = self.compact(force=True)
        self.assertEqual(llm.calls, [], "masking calls no model")
        self.assertTrue(result["success"])
        self.assertEqual((result["strategy"], result["compacted_messages"]), ("masking", 1))
        live = self.script.history.messages()
        placeholder = next(m for m in live if m["id"] == result["placeholder_ids"][0])
        self.assertEqual(placeholder["content"], MASKED_OUTPUT)
        self.assertEqual((placeholder["role"], placeholder["tool_call_id"]), ("tool", "call_1"))
        self.assertEqual(placeholder["position"], old["position"])
        metadata = placeholder["metadata"]
        self.assertEqual(
            (metadata["type"], metadata["original_tool"]), ("masked", "recall_memories")
        )
        original = self.script.history.archived_by(placeholder["id"])
        self.assertEqual([m["id"] for m in original], [old["id"]])
        self.assertEqual(metadata["original_token_count"], original[0]["token_count"])
        self.assertIn("T", metadata["archived_at"])
        # The short output saves nothing; the recent one is in the preserve window.
        self.assertEqual(self.live(short["id"])["content"], "Nothing found.")
        self.assertEqual(self.live(recent["id"])["content"], SECRET_OUTPUT)
        self.assertEqual(len(live), 10, "one message for one: every call keeps its result")
        self.assertEqual(
            self.script.history.archived_by(placeholder["id"])[0]["content"], SECRET_OUTPUT
        )
        self.assertEqual(result["new_tokens"], self.script.history.token_total())
        self.assertLess(result["new_tokens"], before)
        self.assertEqual(
            CompactionRecord.objects.get(pk=result["compaction_id"]).strategy, "masking"
        )

    def test_pinned_and_masked_outputs_are_left_and_nothing_left_is_a_skip(self):
        pinned = self.tool_unit(SECRET_OUTPUT)
        self.tool_unit(SECRET_OUTPUT)
        self.chat(4)
        self.script.history.set_pinned([pinned["id"]])
        with self.no_model():
            first = self.compact(force=True, kind="manual")
            second = self.compact(force=True, kind="manual")
        self.assertEqual(first["compacted_messages"], 1)
        self.assertEqual(self.live(pinned["id"])["content"], SECRET_OUTPUT)
        self.assertEqual(second["reason"], "no old tool output worth masking")

    def test_undo_puts_the_original_back(self):
        old = self.tool_unit(SECRET_OUTPUT)
        self.chat(4)
        before = self.script.history.messages()
        result = self.compact(force=True)
        record = CompactionRecord.objects.get(pk=result["compaction_id"])
        self.assertEqual(self.script.history.undo(record), 1)
        self.assertEqual(self.script.history.messages(), before)
        self.assertEqual(self.live(old["id"])["content"], SECRET_OUTPUT)

    def test_a_whispered_output_keeps_its_audience(self):
        whispered = self.tool_unit(SECRET_OUTPUT, audience=[self.char1.dbref])
        self.chat(4)
        result = self.compact(force=True)
        placeholder = self.live(result["placeholder_ids"][0])
        self.assertEqual(placeholder["metadata"]["audience"], [self.char1.dbref])
        self.assertEqual(placeholder["tool_call_id"], whispered["tool_call_id"])
        room = self.script.history.recent(10000)
        self.assertNotIn(placeholder["id"], [m["id"] for m in room])

    def test_only_the_preserve_window_is_kept_however_large(self):
        self.tool_unit(SECRET_OUTPUT)
        self.chat(4)
        self.script.set_config("compact_preserve_window", 20)
        self.assertEqual(self.compact(force=True)["reason"], "history within preserve window")


class TestMaskingDuringSleep(MaskingCase):
    def fill_to(self, usage):
        for _ in range(6):
            self.tool_unit(SECRET_OUTPUT)
        self.chat(4)
        store_window(self.script, int(self.script.context_usage().total_tokens / usage))

    def test_masking_runs_at_the_mask_threshold_without_extraction(self):
        self.fill_to(0.55)  # over the mask threshold (0.5), under the sleep one (0.7)
        with self.no_model() as llm:
            results = wait_for(run_sleep_tick(self.script, self.assistant))
        self.assertEqual(llm.calls, [])
        self.assertTrue(results["context_compaction"]["success"])
        self.assertEqual(results["context_compaction"]["strategy"], "masking")
        self.assertEqual(results["pre_compaction_extraction"]["reason"], "nothing was summarized")
        self.assertLess(self.script.context_usage().usage, 0.5)

    def test_the_summary_strategy_waits_for_the_sleep_threshold(self):
        self.fill_to(0.55)
        self.script.set_config("compact_strategy", "summary")
        results = wait_for(run_sleep_tick(self.script, self.assistant))
        self.assertIn("below threshold", results["context_compaction"]["reason"])

    def test_a_masking_that_left_usage_over_is_not_repeated_until_history_changes(self):
        self.fill_to(0.55)
        self.script.set_config("compact_mask_threshold", 0.1)  # out of masking's reach
        first = wait_for(run_sleep_tick(self.script, self.assistant))
        self.assertTrue(first["context_compaction"]["success"])
        second = wait_for(run_sleep_tick(self.script, self.assistant))
        self.assertIn("history unchanged", second["context_compaction"]["reason"])
        self.chat(1)
        third = wait_for(run_sleep_tick(self.script, self.assistant))
        self.assertNotIn("history unchanged", str(third["context_compaction"]))


class TestHybrid(MaskingCase):
    def setUp(self):
        super().setUp()
        self.script.set_config("compact_strategy", "hybrid")

    def horses(self, count):
        for index in range(count):
            self.script.append_message(
                {"role": "user", "content": f'Char says, "My horse number {index} is brown."'}
            )

    def test_no_summary_when_masking_is_enough(self):
        for _ in range(6):
            self.tool_unit(SECRET_OUTPUT)
        self.chat(4)
        store_window(self.script, int(self.script.context_usage().total_tokens / 0.75))
        with self.no_model() as llm:
            result = self.compact(force=True, kind="emergency")
        self.assertEqual(llm.calls, [])
        self.assertEqual(result["strategy"], "hybrid")
        self.assertEqual(result["compacted_messages"], len(result["placeholder_ids"]))
        self.assertNotIn("summary", result)
        self.assertEqual(CompactionRecord.objects.count(), 1)

    def test_a_summary_follows_when_masking_is_not_enough(self):
        self.tool_unit(SECRET_OUTPUT)
        self.horses(60)
        before = self.script.history.token_total()
        store_window(self.script, int(self.script.context_usage().total_tokens / 0.95))
        result = self.compact(force=True, kind="emergency")
        self.assertTrue(result["success"])
        self.assertEqual(result["strategy"], "hybrid")
        self.assertEqual(result["masking"]["compacted_messages"], 1)
        self.assertEqual(result["original_tokens"], before, "the figures span both steps")
        strategies = list(CompactionRecord.objects.values_list("strategy", flat=True))
        self.assertEqual(strategies, ["masking", "summary"])
        live = self.script.history.messages()
        self.assertTrue(live[0]["content"].startswith(SUMMARY_MARKER))

    def test_a_builders_compaction_summarizes_when_there_is_nothing_to_mask(self):
        self.horses(30)
        self.chat(4)
        store_window(self.script, 10_000)
        automatic = self.compact(force=True, kind="sleep")
        self.assertTrue(automatic.get("skipped"), "below the threshold: no summary")
        manual = self.compact(force=True, kind="manual")
        self.assertTrue(manual["success"], manual)
        self.assertEqual(manual["strategy"], "hybrid")
        self.assertTrue(manual["masking"].get("skipped"))
        self.assertTrue(self.script.history.messages()[0]["content"].startswith(SUMMARY_MARKER))

    @override_settings(AI_LLM_MAX_RETRIES=0)
    def test_a_failed_summary_after_masking_reports_both(self):
        self.tool_unit(SECRET_OUTPUT)
        self.horses(60)
        store_window(self.script, int(self.script.context_usage().total_tokens / 0.95))
        with ScriptedLLM(ValueError("model down")) as llm:
            self.script.set_config("compact_model", llm.model)
            result = self.compact(force=True, kind="emergency")
        self.assertTrue(result["success"], "the masking stands")
        self.assertFalse(result["summary"]["success"])
        self.assertIn("model down", result["summary"]["error"])

    def test_every_strategy_a_builder_may_set_has_a_runner_and_a_description(self):
        from ai.commands import COMPACTION_STEPS
        from ai.config import COMPACT_STRATEGIES

        self.assertEqual(set(RUNNERS), set(COMPACT_STRATEGIES))
        self.assertEqual(set(COMPACTION_STEPS), set(COMPACT_STRATEGIES))


class TestSearchHistory(MaskingCase):
    def setUp(self):
        super().setUp()
        self.tool_unit(SECRET_OUTPUT)
        self.tool_unit(
            "Char2 whispered: the spare key is behind the barrel. " * 10,
            audience=[self.char2.dbref],
        )
        self.chat(4)
        self.compact(force=True)

    def search(self, audience=None, **arguments):
        ctx = ToolContext(self.script, self.assistant, "tick_event", audience=audience)
        call = {
            "id": "call_x",
            "type": "function",
            "function": {"name": "search_history", "arguments": json.dumps(arguments)},
        }
        return execute_tool(call, ctx)

    def test_finds_a_masked_output_and_reads_it_back_whole(self):
        found = self.search(query="vault code")
        self.assertTrue(found.ok)
        self.assertIn("4417", found.content)
        self.assertIn("(result of call_1)", found.content)
        whole = self.search(message_id=found.data["ids"][0])
        self.assertIn(SECRET_OUTPUT.strip(), whole.content)

    def test_the_room_never_hears_a_whisper(self):
        for arguments in ({"query": "spare key barrel"}, {"query": "call_2"}):
            with self.subTest(arguments=arguments):
                self.assertNotIn("behind the", self.search(**arguments).content)
        private = self.search(audience=[self.char2.dbref], query="spare key barrel")
        self.assertIn("behind the barrel", private.content)
        secret_id = private.data["ids"][0]
        refused = self.search(message_id=secret_id)
        self.assertFalse(refused.ok)
        self.assertNotIn("barrel", refused.content)
        self.assertNotIn(
            "barrel", self.search(audience=[self.char1.dbref], message_id=secret_id).content
        )

    def test_bounds_and_errors(self):
        long_text = "Gandalf said the password is mellon. " + "x" * 9000
        self.tool_unit(long_text)
        self.chat(4)
        self.compact(force=True)
        found = self.search(query="mellon")
        self.assertLess(len(found.content), 600)
        whole = self.search(message_id=found.data["ids"][0])
        self.assertIn("more characters]", whole.content)
        self.assertLess(len(whole.content), 4200)
        self.assertIn("No archived message matches", self.search(query="dragons").content)
        self.assertFalse(self.search().ok)
        live_id = self.script.history.messages()[-1]["id"]
        self.assertFalse(self.search(message_id=live_id).ok, "live messages are not archived")
        self.assertFalse(self.search(query="50%_").content.startswith("["), "wildcards are literal")
