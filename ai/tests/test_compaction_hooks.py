"""The ``pre_compaction`` and ``post_compaction`` signals: veto, notes, results, failures."""

from unittest.mock import patch

from ai.signals import CompactionVetoed, post_compaction, pre_compaction
from ai.sleep.compaction import compact_conversation_history
from ai.utils.markers import NOTES_HEADER
from ai.utils.message_format import is_summary

from .support import AssistantTestCase, ScriptedLLM, wait_for
from .test_context_compaction import fill, live_snapshot


class HookTestCase(AssistantTestCase):
    def setUp(self):
        super().setUp()
        self.script.set_config("compact_preserve_window", 4)
        fill(self.script)
        self.plans, self.results = [], []
        self.listen(post_compaction, lambda result, **kwargs: self.results.append(result))

    def listen(self, signal, receiver):
        signal.connect(receiver, weak=False)
        self.addCleanup(signal.disconnect, receiver)

    def compact(self):
        with ScriptedLLM("Char buried 40 gold coins under the old oak in Mirkwood.") as llm:
            self.script.set_config("compact_model", llm.model)
            self.llm = llm
            return wait_for(
                compact_conversation_history(self.script, self.assistant, force=True, kind="manual")
            )


class TestPreCompaction(HookTestCase):
    def test_receivers_see_the_plan_and_the_script(self):
        def receiver(sender, script, character, plan, **kwargs):
            self.plans.append((sender, script, character, plan))

        self.listen(pre_compaction, receiver)
        result = self.compact()
        [(sender, script, character, plan)] = self.plans
        self.assertEqual(
            (sender, script, character), (type(self.script), self.script, self.assistant)
        )
        self.assertEqual((plan.kind, plan.strategy, plan.message_count), ("manual", "summary", 12))
        self.assertEqual(plan.tokens, sum(m["token_count"] for m in plan.messages))
        self.assertEqual(plan.history_tokens, result["original_tokens"])

    def test_a_veto_changes_nothing_and_calls_no_model(self):
        def veto(plan, **kwargs):
            raise CompactionVetoed("the festival is on")

        self.listen(pre_compaction, veto)
        before = live_snapshot(self.script)
        result = self.compact()
        self.assertEqual(
            result,
            {
                "skipped": True,
                "reason": "vetoed: the festival is on",
                "kind": "manual",
                "vetoed": True,
            },
        )
        self.assertEqual(self.llm.calls, [])
        self.assertEqual(live_snapshot(self.script), before)
        self.assertEqual(self.results, [result])

    def test_notes_are_appended_to_the_summary_and_listed_in_the_result(self):
        self.listen(
            pre_compaction, lambda plan, **kwargs: plan.add_note("Quest: the  lamp\nis lit")
        )
        result = self.compact()
        summary = next(m for m in self.script.conversation_history if is_summary(m))
        self.assertTrue(summary["content"].endswith(f"\n{NOTES_HEADER}\n- Quest: the lamp is lit"))
        self.assertEqual(result["notes"], ["Quest: the lamp is lit"])

    def test_a_failing_receiver_is_logged_and_the_compaction_goes_on(self):
        def broken(**kwargs):
            raise ValueError("bad receiver")

        self.listen(pre_compaction, broken)
        self.listen(post_compaction, broken)
        with patch("ai.signals.logger.log_err") as log_err:
            result = self.compact()
        self.assertTrue(result["success"], result)
        self.assertEqual(log_err.call_count, 2)
        self.assertIn("broken", log_err.call_args[0][0])
        self.assertIn("ValueError: bad receiver", log_err.call_args[0][0])


class TestPostCompaction(HookTestCase):
    def test_it_carries_the_result_of_every_announced_compaction(self):
        result = self.compact()
        self.assertEqual(self.results, [result])
        self.assertTrue(result["success"])

    def test_nothing_is_sent_for_a_compaction_that_never_started(self):
        self.script.set_config("compact_preserve_window", 100)
        self.assertTrue(self.compact()["skipped"])
        self.assertEqual(self.results, [])
