"""Compaction: the seeds' five test classes and every guarantee beyond the seeds."""

import json
from itertools import accumulate
from unittest.mock import patch

from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from evennia.utils.idmapper.models import flush_cache
from twisted.internet import defer

from ai.context_usage import measure_frame
from ai.helpers.journal import MAX_ENTRY_CHARS, add_entry, journal_entries, listed
from ai.llm_interaction import SUMMARY_MAX_WORDS, SUMMARY_REQUEST
from ai.models import ConversationMessage
from ai.prompt_assembly import history_units
from ai.sleep import run_sleep_tick
from ai.sleep.common import messages_to_compact, preserve_start, split_history
from ai.sleep.compaction import compact_conversation_history
from ai.sleep.escalation import smallest_window
from ai.sleep.summarizing import MIN_CHUNK_TOKENS, SUMMARY_ANSWER_TOKENS
from ai.utils.markers import SUMMARY_PREAMBLE
from ai.utils.message_format import is_summary, summary_text
from ai.utils.token_counter import count_message_tokens, count_tokens, set_calibration
from ai.utils.value_checks import ConfigError

from .support import (
    AssistantTestCase,
    During,
    ScriptedLLM,
    Unanswered,
    store_window,
    wait_for,
)

FACTS = [
    'Char says, "I buried 40 gold coins under the old oak in Mirkwood."',
    'Char2 says, "The password for the cellar door is swordfish."',
    'Char says, "I promised Char2 to deliver 12 iron ingots on Friday."',
    'Char2 says, "My horse is called Thunder and she is seven years old."',
    'Char says, "The blacksmith Gorm lives by the north gate of Dale."',
    'Char2 says, "We agreed to meet at the Prancing Pony at dawn tomorrow."',
    'Char says, "The dragon Smaug sleeps under the Lonely Mountain."',
    'Char2 says, "I owe the innkeeper Butterbur 3 silver pennies."',
]


def fill(script, lines=FACTS, replies=True):
    """Append each line as a user message, with an assistant reply after it."""
    for line in lines:
        script.append_message({"role": "user", "content": line})
        if replies:
            script.append_message({"role": "assistant", "content": "Understood, I will remember."})


def whole_history_split(history, preserve_count, keep_tokens):
    """The messages to compact as the split first found them: every unit walked from the
    start of the whole history (the reference for the split read from its newest part)."""
    kept, used = 0, 0
    for message in reversed(history):
        used += message["token_count"]
        if used > keep_tokens:
            break
        kept += 1
    boundary = max(len(history) - max(preserve_count, kept), 0)
    start = 0
    for unit in history_units(history):
        if start + len(unit) > boundary:
            break
        start += len(unit)
    return history[:start]


def size_window(script, usage):
    """Set ``max_context_tokens`` so that the next call uses ``usage`` of it."""
    store_window(script, int(script.context_usage().total_tokens / usage))


def live_snapshot(script):
    return [(m["id"], m["role"], m["content"]) for m in script.conversation_history]


class CompactionTestCase(AssistantTestCase):
    """A small window, so that the preserve window's 20% floor stays under four messages."""

    def setUp(self):
        super().setUp()
        store_window(self.script, 1000)
        self.script.set_config("compact_preserve_window", 4)

    def compact(self, force=True, **kwargs):
        return wait_for(
            compact_conversation_history(self.script, self.assistant, force=force, **kwargs)
        )


class TestCompactConversationHistorySkips(CompactionTestCase):
    def test_disabled(self):
        fill(self.script)
        self.script.set_config("compact_enabled", False)
        self.assertEqual(
            self.compact(force=False), {"skipped": True, "reason": "compaction disabled"}
        )

    def test_no_history(self):
        self.assertEqual(self.compact(), {"skipped": True, "reason": "no history"})

    def test_below_threshold(self):
        self.script.set_config("max_context_tokens", 100000)
        fill(self.script)
        result = self.compact(force=False)
        self.assertTrue(result["skipped"])
        self.assertRegex(result["reason"], r"^below threshold \(\d+\.\d% < 70%\)$")
        self.assertLess(result["token_usage"], 0.7)

    def test_a_context_the_extraction_left_under_the_threshold_gets_no_summary_call(self):
        fill(self.script)
        history = self.script.conversation_history

        def extraction():
            store_window(self.script, 100000)  # what it did left the context room
            return defer.succeed(None)

        with ScriptedLLM("- Char buried the coins.") as llm:
            self.script.set_config("compact_model", llm.model)
            result = self.compact(force=False, extract=extraction)
        self.assertEqual(llm.calls, [], "no summary call")
        self.assertTrue(result["skipped"], result)
        self.assertIn("under the threshold after the pre-compaction extraction", result["reason"])
        self.assertEqual(self.script.conversation_history, history)

    def test_history_within_preserve_window(self):
        fill(self.script, FACTS[:2])
        result = self.compact()
        self.assertEqual(result["reason"], "history within preserve window")


class TestCompactConversationHistoryExecution(CompactionTestCase):
    def setUp(self):
        super().setUp()
        fill(self.script)

    def test_old_messages_become_one_summary_and_the_window_stays(self):
        before = self.script.conversation_history
        result = self.compact()
        self.assertTrue(result["success"])
        history = self.script.conversation_history
        self.assertEqual(len(history), 5)
        self.assertEqual([m["id"] for m in history[1:]], [m["id"] for m in before[-4:]])
        summary = history[0]
        self.assertEqual(summary["role"], "system")
        self.assertTrue(summary["content"].startswith("[CONTEXT SUMMARY]\n"))
        self.assertIn(
            "Char: I buried 40 gold coins under the old oak in Mirkwood.", summary["content"]
        )
        metadata = summary["metadata"]
        self.assertEqual(metadata["type"], "compaction")
        self.assertEqual(metadata["compacted_count"], 12)
        self.assertEqual(
            metadata["original_token_count"], sum(m["token_count"] for m in before[:12])
        )
        self.assertEqual(metadata["summary_token_count"], summary["token_count"])
        self.assertEqual(metadata["successive_compactions"], 1)
        self.assertEqual(result["compacted_messages"], 12)
        self.assertEqual(result["preserved_messages"], 4)
        self.assertAlmostEqual(
            result["reduction_pct"], (1 - result["new_tokens"] / result["original_tokens"]) * 100
        )
        self.assertEqual(self.script.history.totals(), (sum(m["token_count"] for m in history), 5))

    def test_the_offline_summary_keeps_facts_and_promises_with_who_said_them(self):
        self.script.history.clear()
        lines = [
            ("user", 'Char says, "Hello there! What a fine, quiet morning it is today."'),
            ("assistant", "Hello, Char! It is a fine morning indeed. How can I help you?"),
            ("user", 'Char2 says, "Where is the old mill?"'),
            ("assistant", "I don't know that yet, Char2. Tell me and I will remember it."),
            ("user", 'Char2 says, "I owe the miller Hobb 5 silver for the flour."'),
            ("assistant", "Understood, Char2. I'll keep that in mind: I owe the miller Hobb 5."),
            ("assistant", "I promise to guide Char2 to the mill at Westbrook before noon."),
        ]
        for role, content in lines + [("user", 'Char says, "filler line"')] * 4:
            self.script.append_message({"role": role, "content": content})
        result = self.compact()
        summary = self.script.conversation_history[0]["content"]
        self.assertEqual(
            summary,
            f"[CONTEXT SUMMARY]\n{SUMMARY_PREAMBLE}\n"
            "Char2: I owe the miller Hobb 5 silver for the flour.\n"
            "You said: I promise to guide Char2 to the mill at Westbrook before noon.",
        )
        self.assertEqual(result["compacted_messages"], len(lines))

    def test_only_the_messages_to_compact_are_sent_with_the_custom_prompt_and_model(self):
        self.script.set_config("compact_prompt", "Condense this, keep names.")
        with ScriptedLLM("Char buried coins; Char2 knows the password.") as llm:
            self.script.set_config("compact_model", llm.model)
            result = self.compact()
        self.assertTrue(result["success"])
        self.assertEqual(len(llm.calls), 1)
        system, user = llm.calls[0]
        self.assertEqual(system, {"role": "system", "content": "Condense this, keep names."})
        self.assertIn("Mirkwood", user["content"])
        self.assertNotIn("Butterbur", user["content"], "preserved messages are not sent")

    def test_compacts_at_the_sleep_threshold_without_force(self):
        self.assertGreaterEqual(self.script.context_usage().usage, 0.7)
        self.assertTrue(self.compact(force=False)["success"])


class TestCompactConversationHistoryJournal(CompactionTestCase):
    def test_a_synthesis_entry_archives_the_summary(self):
        fill(self.script)
        with patch("ai.sleep.compaction.logger.log_info") as log_info:
            result = self.compact()
        entry = journal_entries(self.assistant)[-1]
        self.assertRegex(entry["id"], r"^compact_\d{8}_\d{6}$")
        self.assertTrue(entry["content"].startswith("[CONTEXT SYNTHESIS]\n"))
        self.assertIn("swordfish", entry["content"])
        self.assertEqual((entry["source_type"], entry["importance"]), ("compaction", 7))
        self.assertEqual(entry["tags"], ["compaction", "synthesis"])
        self.assertEqual(entry["source_message_ids"], [result["summary_id"]])
        self.assertIsNotNone(self.script.db.last_compaction)
        fill(self.script)
        self.compact()
        ids = [entry["id"] for entry in journal_entries(self.assistant)]
        self.assertEqual(len(ids), len(set(ids)), "two compactions in one second get distinct ids")
        self.assertRegex(
            log_info.call_args.args[0],
            r"^AI Helper\(#\d+\): Context compaction: 12 messages → summary, "
            r"\d+→\d+ tokens \(\d+% reduction\)$",
        )

    def test_successive_syntheses_are_listed_by_what_each_compaction_kept(self):
        """A summary of a summary opens with what the earlier one told: listed whole, every
        synthesis would read alike; each is listed as what it kept that the one before did
        not."""
        fill(self.script, FACTS)
        self.compact()
        fill(self.script, ['Char says, "The ferry to Laketown leaves at 9 in the morning."'])
        fill(self.script, FACTS[:3], replies=False)
        self.compact()
        entries = journal_entries(self.assistant)
        first, second = [
            line
            for entry, line in zip(entries, listed(entries))
            if entry["id"].startswith("compact_")
        ]
        self.assertTrue(first.startswith("[CONTEXT SYNTHESIS] "), first)
        self.assertIn("Mirkwood", first)
        self.assertTrue(second.startswith("[CONTEXT SYNTHESIS] new: "), second)
        self.assertIn("Laketown", second)
        self.assertNotIn("Mirkwood", second, "what the first summary told is not listed again")
        self.assertIn("Mirkwood", entries[-1]["content"], "the entry itself keeps it")


class TestEmergencyCompaction(CompactionTestCase):
    def setUp(self):
        super().setUp()
        fill(self.script, FACTS * 3)
        # The frame (instructions, tool schemas) is much of a small window: size it so that
        # history pushes usage just over 80%.
        size_window(self.script, 0.82)

    def test_an_awake_tick_over_the_threshold_extracts_compacts_and_goes_on(self):
        self.assertGreaterEqual(self.script.context_usage().usage, 0.8)
        self.char1.execute_cmd("say Where did I bury the gold coins?")
        with patch("ai.assistant_script.logger.log_warn") as log_warn:
            result = self.tick()
        self.assertRegex(
            log_warn.call_args_list[0].args[0],
            r"^AI Helper\(#\d+\): Emergency compaction triggered: \d+% context usage$",
        )
        emergency = result["emergency"]
        self.assertTrue(emergency["pre_compaction_extraction"]["success"])
        self.assertLessEqual(emergency["pre_compaction_extraction"]["iterations"], 3)
        self.assertTrue(emergency["context_compaction"]["success"])
        self.assertEqual(emergency["context_compaction"]["kind"], "emergency")
        self.assertFalse(emergency["still_over_threshold"])
        self.assertEqual(result["status"], "replied")
        self.assertIn("40 gold coins", result["reply"])

    @override_settings(AI_COMPACT_STRATEGY="bogus")
    def test_a_bad_server_wide_strategy_falls_back_and_the_player_is_answered(self):
        self.char1.execute_cmd("say Where did I bury the gold coins?")
        with patch("ai.utils.checked_settings.logger.log_err") as log_err:
            result = self.tick()
            self.char1.execute_cmd("say And the password?")
            self.tick()
        compaction = result["emergency"]["context_compaction"]
        self.assertTrue(compaction["success"])
        self.assertEqual(compaction["strategy"], "summary")
        self.assertEqual(result["status"], "replied")
        log_err.assert_called_once()
        self.assertEqual(
            log_err.call_args.args[0],
            "AI: setting AI_COMPACT_STRATEGY='bogus' refused: must be one of 'summary', "
            "'masking', 'assistant_runs', 'hybrid'; using the default 'summary'",
        )

    def test_below_the_threshold_nothing_happens(self):
        self.script.set_config("max_context_tokens", 100000)
        self.assertIsNone(self.tick()["emergency"])

    def test_nothing_happens_when_compaction_is_disabled(self):
        self.script.set_config("compact_enabled", False)
        self.assertGreaterEqual(self.script.context_usage().usage, 0.8)
        result = self.tick()
        self.assertIsNone(result["emergency"])
        self.assertFalse(self.script.history.archived_by(0))
        self.assertEqual(ConversationMessage.objects.filter(is_live=False).count(), 0)

    def test_a_huge_preserved_message_does_not_cause_a_compaction_loop(self):
        self.script.append_message(
            {"role": "user", "content": "Char says: " + "lorem ipsum " * 400}
        )
        first = self.tick()["emergency"]
        self.assertTrue(first["still_over_threshold"])
        with patch("ai.sleep.extraction.run_pre_compaction_extraction") as extraction:
            second = self.tick()
        extraction.assert_not_called()
        self.assertEqual(
            second["emergency"]["reason"], "still over the threshold, history unchanged"
        )
        self.assertEqual(second["status"], "idle", "the tick goes on")


class TestTheFrameAtTheStartOfATick(CompactionTestCase):
    """A tick measures before it takes its event: the frame it counts is the last event
    call's, less what that event alone brought (its line, what it recalled)."""

    QUESTION = "say What is the cellar password?"

    def setUp(self):
        super().setUp()
        store_window(self.script, 100000)
        fill(self.script, FACTS * 3)
        for number in range(5):
            add_entry(
                self.assistant,
                f"Char said the cellar password is swordfish ({number}); "
                + "the cellar is under the inn, past the barrels of ale and the old cart. " * 8,
                "conversation",
            )

    def test_what_an_event_recalled_does_not_count_toward_the_next_measure(self):
        self.char1.execute_cmd(self.QUESTION)
        self.assertEqual(self.tick()["status"], "replied")
        without_event = measure_frame(self.script, self.assistant)[0]
        measured = self.script.context_usage()
        self.assertAlmostEqual(measured.frame_tokens, without_event, delta=40)
        self.assertNotIn("semantic_memories", measured.frame_parts)

    def least_window_after_a_question(self):
        """Answer the question, then return the least window a builder may set."""
        self.char1.execute_cmd(self.QUESTION)
        self.tick()
        without_event = measure_frame(self.script, self.assistant)[0]
        return smallest_window(without_event, 0.8, self.script.history.model)

    def test_at_the_least_window_builders_hear_of_no_room_once_whatever_is_recalled(self):
        self.script.set_config("max_context_tokens", self.least_window_after_a_question())
        with patch("ai.sleep.escalation.logger.log_err") as log_err:
            for _ in range(4):
                self.char1.execute_cmd(self.QUESTION)
                self.assertEqual(self.tick()["status"], "replied")
        # Once until the frame or the window changes: what each event recalls changes
        # neither.
        self.assertLessEqual(log_err.call_count, 1)

    def test_the_least_window_a_builder_may_set_does_not_depend_on_the_last_call(self):
        least = self.least_window_after_a_question()
        self.script.set_config("max_context_tokens", least)
        self.assertEqual(self.script.get_config("max_context_tokens"), least)
        with self.assertRaisesRegex(ConfigError, f"use at least {least:,}$"):
            self.script.set_config("max_context_tokens", least - 1)

    def test_a_new_calibration_of_the_model_counts_the_frame_again(self):
        self.tick_on("Good evening.", text="Hello there")
        model = self.llm.model
        counted = self.script.context_usage().frame_tokens
        set_calibration(model, 2.0)
        self.addCleanup(set_calibration, model, 1.0)
        self.assertGreater(self.script.context_usage().frame_tokens, 1.5 * counted)

    def test_a_sleep_keeps_the_frame_it_rendered_until_the_configuration_changes(self):
        self.script.fall_asleep()
        self.tick()  # dozing
        self.tick()  # dreaming: no call kept a frame in this process, so it is rendered
        rendered = self.script.ndb.context_usage.frame_tokens
        self.assistant.db.desc = "A tall figure in a grey cloak, patient and watchful. " * 20
        self.assertEqual(self.tick()["phase"], "dreaming")
        self.assertEqual(self.script.ndb.context_usage.frame_tokens, rendered)
        self.script.set_config("compact_notify_room", True)
        self.tick()
        self.assertGreater(self.script.ndb.context_usage.frame_tokens, rendered + 150)


class TestSleepPhaseIntegration(CompactionTestCase):
    def test_dreaming_extracts_then_compacts(self):
        fill(self.script, FACTS * 3)
        size_window(self.script, 0.75)
        results = wait_for(run_sleep_tick(self.script, self.assistant))
        extraction = results["pre_compaction_extraction"]
        self.assertTrue(extraction["success"])
        self.assertGreater(extraction["facts_recorded"], 0)
        self.assertTrue(results["context_compaction"]["success"])
        kinds = [entry["source_type"] for entry in journal_entries(self.assistant)]
        self.assertEqual(kinds[-1], "compaction")
        self.assertEqual(set(kinds[:-1]), {"pre_compaction"}, "facts were journaled first")

    def test_nothing_runs_below_the_sleep_threshold(self):
        self.script.set_config("max_context_tokens", 100000)
        fill(self.script)
        results = wait_for(run_sleep_tick(self.script, self.assistant))
        self.assertEqual(results["pre_compaction_extraction"]["reason"], "compaction not due")
        self.assertTrue(results["context_compaction"]["skipped"])

    @override_settings(AI_LLM_MAX_RETRIES=0)
    def test_a_sleep_compaction_that_did_not_help_is_not_repeated_until_history_changes(self):
        with ScriptedLLM(*[ValueError("model down")] * 20) as llm:
            self.script.set_config("llm_model", llm.model)
            fill(self.script, FACTS * 3)
            size_window(self.script, 0.75)
            with patch("ai.sleep.logger.log_warn") as log_warn:
                first = wait_for(run_sleep_tick(self.script, self.assistant))
            self.assertFalse(first["context_compaction"]["success"])
            self.assertIn("not retrying until the history changes", log_warn.call_args.args[0])
            calls = len(llm.calls)
            second = wait_for(run_sleep_tick(self.script, self.assistant))
            self.assertEqual(len(llm.calls), calls, "no model call while nothing changed")
            for step in ("pre_compaction_extraction", "context_compaction"):
                self.assertIn("history unchanged", second[step]["reason"])
            self.script.append_message({"role": "user", "content": 'Char says, "wake up!"'})
            wait_for(run_sleep_tick(self.script, self.assistant))
            self.assertGreater(len(llm.calls), calls, "a changed history is tried again")

    def test_the_script_runs_the_pipeline_while_dreaming(self):
        fill(self.script, FACTS * 3)
        size_window(self.script, 0.75)
        self.script.fall_asleep("test")
        self.assertEqual(self.tick()["phase"], "dozing")
        dreaming = self.tick()
        self.assertTrue(dreaming["memory"]["context_compaction"]["success"])
        self.assertEqual(dreaming["memory"]["context_compaction"]["kind"], "sleep")


class TestBeyondTheSeeds(CompactionTestCase):
    def test_the_split_keeps_a_tool_call_with_its_results(self):
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "review_journal", "arguments": "{}"},
        }
        fill(self.script, FACTS[:5])
        self.script.append_message({"role": "assistant", "content": None, "tool_calls": [call]})
        self.script.append_message({"role": "tool", "tool_call_id": "c1", "content": "empty"})
        fill(self.script, FACTS[5:6])
        history = self.script.conversation_history
        to_compact, to_preserve = split_history(history, 3, 256)
        self.assertEqual(to_preserve[0]["role"], "assistant", "the boundary moved back to the call")
        self.assertEqual(len(to_preserve), 4)
        self.assertEqual(to_compact + to_preserve, history)

    def test_the_split_read_from_the_newest_messages_is_the_split_of_the_whole_history(self):
        for index in range(120):
            if index % 7 == 3:  # a tool call whose results may straddle any boundary
                calls = [
                    {"id": f"c{index}_{n}", "type": "function", "function": {"name": "noop"}}
                    for n in range(index % 3 + 1)
                ]
                self.script.append_message({"role": "assistant", "tool_calls": calls})
                for call in calls:
                    self.script.append_message(
                        {"role": "tool", "tool_call_id": call["id"], "content": "ok " * index}
                    )
            elif index == 60:  # a unit longer than the outline reads past what it needs
                call = {"id": "long", "type": "function", "function": {"name": "noop"}}
                self.script.append_message({"role": "assistant", "tool_calls": [call]})
                for _ in range(80):
                    self.script.append_message(
                        {"role": "tool", "tool_call_id": "long", "content": "ok"}
                    )
            elif index % 11 == 5:  # a result whose call is not there
                self.script.append_message({"role": "tool", "tool_call_id": "gone", "content": "?"})
            else:
                fill(self.script, [f'Char says, "{"word " * (index % 13)}{index}"'], replies=False)
        store = self.script.history
        history = self.script.conversation_history
        # Every boundary, set by the tokens to keep and by the count; then both at once.
        newest_tokens = list(accumulate(m["token_count"] for m in reversed(history)))
        cases = [(1, keep) for keep in newest_tokens]
        cases += [(preserve, 0) for preserve in range(1, len(history) + 2)]
        cases += [(30, newest_tokens[10]), (4, newest_tokens[60]), (500, 10**9)]
        for preserve, keep in cases:
            with self.subTest(preserve=preserve, keep=keep):
                expected = whole_history_split(history, preserve, keep)
                to_compact, read_at = wait_for(messages_to_compact(store, preserve, keep))
                self.assertEqual(to_compact, expected)
                self.assertEqual(split_history(history, preserve, keep, 1)[0], expected)
                self.assertEqual(read_at, store.newest_outline(0, 0).revision)
        # With the newest messages held in memory (as after a tick), the split is found in
        # them: the outline costs the counter's read alone, and splits where it did.
        store.recent(sum(m["token_count"] for m in history[-70:]))
        for preserve, keep in cases:
            compacted = whole_history_split(history, preserve, keep)
            with self.subTest(preserve=preserve, keep=keep, held=True):
                with CaptureQueriesContext(connection) as queries:
                    newest = store.newest_outline(keep, preserve)
                start = preserve_start(newest, preserve, keep)
                split = newest[start]["position"] if start < len(newest) else None
                kept = history[len(compacted) :]
                self.assertEqual(split, kept[0]["position"] if kept else None)
                if preserve < 60 and keep < newest_tokens[50]:
                    self.assertEqual(len(queries), 1)

    def test_the_preserve_window_keeps_the_recent_messages_within_20_percent_of_the_context(self):
        fill(self.script)
        history = self.script.conversation_history
        per_message = max(m["token_count"] for m in history)
        _, to_preserve = split_history(history, 2, per_message * 40)
        share = sum(m["token_count"] for m in to_preserve)
        self.assertGreater(len(to_preserve), 2)
        self.assertLessEqual(share, 0.2 * per_message * 40)

    def test_messages_appended_during_the_summary_call_are_kept_in_order(self):
        fill(self.script)
        late_line = {"role": "user", "content": 'Char says, "a late line"'}
        during = During(lambda: self.script.append_message(late_line), "late answer")
        with ScriptedLLM(during) as llm:
            self.script.set_config("compact_model", llm.model)
            result = self.compact()
        late = during.result()
        self.assertTrue(result["success"])
        self.assertEqual(result["preserved_messages"], 4, "the late line was not preserved")
        history = self.script.conversation_history
        self.assertEqual(history[-1]["id"], late["id"])
        self.assertEqual(len(history), 1 + 4 + 1)
        self.assertEqual(self.script.history.totals()[1], 6)

    def test_a_model_change_during_the_summary_call_leaves_the_counter_right(self):
        store_window(self.script, 4000)  # the summary call fits, counted three times over
        # Small talk: no statement the quality gate would keep, counted three times over.
        fill(self.script, ['Char says, "what a fine and quiet evening it is, friend."'] * 8)

        def change_model():
            self.script.set_config("llm_model", llm.model)
            self.script.append_message({"role": "user", "content": 'Char says, "a late line"'})

        during = During(change_model, "late answer")
        with ScriptedLLM(during) as llm:
            # The new model counts three times what the old one did.
            set_calibration(llm.model, 3.0)
            self.addCleanup(set_calibration, llm.model, 1.0)
            self.script.set_config("compact_model", llm.model)
            result = self.compact(kind="manual")
            during.result()
            history = self.script.conversation_history
            counted = sum(count_message_tokens(m, llm.model) for m in history)
        self.assertTrue(result["success"], result)
        self.assertEqual(self.script.history.totals(), (counted, len(history)))

    def test_a_failed_timed_out_or_empty_summary_changes_nothing(self):
        fill(self.script)
        before = live_snapshot(self.script)
        cases = [
            (ValueError("model exploded"), "summary call failed (api_error)"),
            ("   ", "the summary came back empty"),
        ]
        for step, reason in cases:
            with self.subTest(reason=reason), ScriptedLLM(step, step, step) as llm:
                self.script.set_config("compact_model", llm.model)
                result = self.compact()
                self.assertFalse(result["success"])
                self.assertIn(reason, result["error"])
                self.assertEqual(live_snapshot(self.script), before)
        unanswered = Unanswered()
        self.addCleanup(unanswered.release)
        with (
            ScriptedLLM(unanswered) as llm,
            self.settings(AI_LLM_TIMEOUT=0.2, AI_LLM_MAX_RETRIES=0),
        ):
            self.script.set_config("compact_model", llm.model)
            result = self.compact()
        self.assertIn("summary call failed (timeout)", result["error"])
        self.assertEqual(live_snapshot(self.script), before)
        self.assertEqual(ConversationMessage.objects.filter(is_live=False).count(), 0)
        self.assertEqual(journal_entries(self.assistant), [])

    def test_a_reload_during_the_summary_call_leaves_history_intact(self):
        fill(self.script)
        before = live_snapshot(self.script)

        def reload():
            # A reload now keeps what the database holds: the whole history, nothing half-done.
            flush_cache()
            reloaded = self.assistant.__class__.objects.get(id=self.assistant.id).assistant_script
            archived = ConversationMessage.objects.filter(is_live=False).count()
            return live_snapshot(reloaded), archived, journal_entries(self.assistant)

        during = During(reload, "late answer")
        with ScriptedLLM(during) as llm:
            self.script.set_config("compact_model", llm.model)
            self.compact()  # a reload would drop this Deferred; the test must not leak it
        self.assertEqual(during.result(), (before, 0, []))

    def test_replaced_messages_are_archived_and_linked_not_deleted(self):
        fill(self.script)
        before = self.script.conversation_history
        result = self.compact()
        archived = self.script.history.archived_by(result["summary_id"])
        self.assertEqual([m["id"] for m in archived], [m["id"] for m in before[:12]])
        self.assertEqual(ConversationMessage.objects.count(), len(before) + 1)
        self.assertTrue(
            all(
                not row.is_live
                for row in ConversationMessage.objects.filter(replaced_by_id=result["summary_id"])
            )
        )

    def test_an_earlier_summary_is_folded_in_and_successive_compactions_counted(self):
        fill(self.script, FACTS[:4])
        fill(self.script, FACTS[4:])
        self.compact()
        fill(self.script, ['Char says, "The ferry to Laketown leaves at 9 in the morning."'] * 1)
        fill(self.script, FACTS[:3], replies=False)
        second = self.compact()
        self.assertEqual(second["successive_compactions"], 2)
        summary = self.script.conversation_history[0]["content"]
        self.assertIn("Mirkwood", summary, "the first summary's facts survive in the second")
        self.assertIn("Laketown", summary)
        fill(self.script, FACTS[3:8])
        with patch("ai.sleep.compaction.logger.log_warn") as log_warn:
            third = self.compact()
        self.assertEqual(third["successive_compactions"], 3)
        self.assertIn("a summary of a summary of a summary (depth 3)", log_warn.call_args.args[0])

    def test_a_summary_that_is_not_smaller_is_refused(self):
        fill(self.script)
        before = live_snapshot(self.script)
        with ScriptedLLM(*["word " * 2000] * 10) as llm:
            self.script.set_config("compact_model", llm.model)
            result = self.compact()
        self.assertFalse(result["success"])
        self.assertRegex(
            result["error"], r"summary \(\d+ tokens\) is not smaller than the \d+ tokens"
        )
        self.assertEqual(live_snapshot(self.script), before)

    def test_messages_too_large_for_the_summarizer_are_summarized_in_chunks_and_merged(self):
        fill(self.script, FACTS * 3)
        with ScriptedLLM(*["Short part summary."] * 20) as llm:
            self.script.set_config("compact_model", llm.model)
            store_window(self.script, 800)  # the summarizer's window
            result = self.compact()
        self.assertTrue(result["success"])
        self.assertGreater(len(llm.calls), 2)
        merge_call = llm.calls[-1][1]["content"]
        self.assertIn("[CONTEXT SUMMARY]\n  Short part summary.", merge_call)
        for call in llm.calls:
            # The window is below the summary's own reserve, so chunks take the minimum
            # size; the transcript adds its header, end and framing to the stored counts,
            # and the request to summarize follows it.
            request = count_tokens(SUMMARY_REQUEST.format(max_words=SUMMARY_MAX_WORDS), llm.model)
            transcript = count_message_tokens(call[1], llm.model) - request
            self.assertLessEqual(transcript, MIN_CHUNK_TOKENS + 25)

    def test_one_empty_chunk_is_described_and_the_compaction_goes_on(self):
        fill(self.script, FACTS * 3)
        with ScriptedLLM("", *["Short part summary."] * 20) as llm:
            self.script.set_config("compact_model", llm.model)
            store_window(self.script, 800)  # the summarizer's window
            result = self.compact()
        self.assertTrue(result["success"], result)
        self.assertIn("in which the summary found nothing to keep", llm.calls[-1][1]["content"])

    def test_a_message_too_large_for_the_summarizer_is_cut_for_the_call_and_kept_whole(self):
        huge = "Char says: " + " ".join(f"Crate {i} holds {i * 7} arrows." for i in range(400))
        self.script.append_message({"role": "user", "content": huge})
        fill(self.script)
        with ScriptedLLM(*["Char listed crates of arrows."] * 10) as llm:
            self.script.set_config("compact_model", llm.model)
            self.script.set_config("max_context_tokens", 2000)  # the summarizer's window
            self.assertGreater(self.script.conversation_history[0]["token_count"], 2000)
            result = self.compact()
        self.assertTrue(result["success"], result)
        for call in llm.calls:
            sent = sum(count_message_tokens(message, llm.model) for message in call)
            self.assertLessEqual(sent + SUMMARY_ANSWER_TOKENS, 2000)
        first_call = llm.calls[0][1]["content"]
        self.assertIn("Crate 0 holds 0 arrows.", first_call)
        self.assertIn("Crate 399 holds 2793 arrows.", first_call)
        self.assertRegex(first_call, r"\[\.\.\. \d+ characters left out \.\.\.\]")
        archived = self.script.history.archived_by(result["summary_id"])
        self.assertEqual(archived[0]["content"], huge, "the archive keeps the whole message")

    def test_tool_call_arguments_too_large_for_the_summarizer_are_cut_too(self):
        crates = " ".join(f"Crate {i} holds {i * 7} arrows." for i in range(600))
        call = {
            "id": "call_big",
            "type": "function",
            "function": {"name": "add_journal_entry", "arguments": json.dumps({"content": crates})},
        }
        self.script.append_message({"role": "assistant", "content": None, "tool_calls": [call]})
        self.script.append_message({"role": "tool", "tool_call_id": "call_big", "content": "ok"})
        fill(self.script)
        self.assertGreater(self.script.conversation_history[0]["token_count"], 5000)
        with ScriptedLLM(*["Char listed crates of arrows."] * 10) as llm:
            self.script.set_config("compact_model", llm.model)
            self.script.set_config("max_context_tokens", 2000)  # the summarizer's window
            result = self.compact(kind="manual")
        self.assertTrue(result.get("success"), result)
        for sent in llm.calls:
            tokens = sum(count_message_tokens(message, llm.model) for message in sent)
            self.assertLessEqual(tokens + SUMMARY_ANSWER_TOKENS, 2000)
        self.assertIn("Crate 0 holds 0 arrows.", llm.calls[0][1]["content"])
        self.assertIn("characters left out", llm.calls[0][1]["content"])
        archived = self.script.history.archived_by(result["summary_id"])
        self.assertEqual(archived[0]["tool_calls"][0], call, "the archive keeps the whole call")

    def test_a_summary_longer_than_a_journal_entry_is_archived_whole(self):
        # A window wide enough for one summary call over the compacted part.
        self.script.set_config("max_context_tokens", 10000)
        fill(self.script, FACTS * 20)
        names = ["Char", "Char2"] * 60
        summary = " ".join(f"{name} paid the ferryman {i} coins." for i, name in enumerate(names))
        self.assertGreater(len(summary), MAX_ENTRY_CHARS)
        with ScriptedLLM(summary) as llm:
            self.script.set_config("compact_model", llm.model)
            result = self.compact()
        self.assertTrue(result["success"], result)
        self.assertEqual(len(llm.calls), 1)
        synthesis = journal_entries(self.assistant)[-1]
        # Whole: the model's summary, and after it the statements the gate kept.
        self.assertTrue(synthesis["content"].startswith(f"[CONTEXT SYNTHESIS]\n{summary}\n"))
        (stored,) = [m for m in self.script.conversation_history if is_summary(m)]
        self.assertEqual(
            synthesis["content"], f"[CONTEXT SYNTHESIS]\n{summary_text(stored['content'])}"
        )
        self.assertIsNotNone(self.script.db.last_compaction)

    def test_history_that_changed_under_the_summary_call_is_left_as_it_now_is(self):
        fill(self.script)

        def start_over():
            self.script.history.clear()
            self.script.append_message({"role": "user", "content": 'Char says, "start over"'})
            return live_snapshot(self.script)

        during = During(start_over, "late answer")
        with ScriptedLLM(during) as llm:
            self.script.set_config("compact_model", llm.model)
            result = self.compact()
        after_change = during.result()
        self.assertEqual(
            result,
            {
                "success": False,
                "kind": "emergency",
                "error": "the messages to compact are no longer the live ones",
            },
        )
        self.assertEqual(live_snapshot(self.script), after_change)
        self.assertEqual(journal_entries(self.assistant), [])

    def test_the_default_prompt_asks_for_what_a_summary_must_keep(self):
        fill(self.script)
        with ScriptedLLM("Char buried gold.") as llm:
            self.script.set_config("compact_model", llm.model)
            self.compact()
        prompt = llm.calls[0][0]["content"]
        for topic in (
            "who said or did what",
            "people, creatures, objects, places and events",
            "decisions",
            "promises",
            "current state",
            "tasks in progress",
            "planned next",
            "constraint",
            "carry on",
            "[CONTEXT SUMMARY]",
            "at most 400 words",
        ):
            with self.subTest(topic=topic):
                self.assertIn(topic, prompt)
        transcript = llm.calls[0][1]["content"]
        self.assertTrue(
            transcript.endswith(SUMMARY_REQUEST.format(max_words=SUMMARY_MAX_WORDS)),
            "the request to list the facts comes after the transcript",
        )

    def test_a_custom_prompt_gets_no_request_after_the_transcript(self):
        fill(self.script)
        self.script.set_config("compact_prompt", "Condense this, keep names.")
        with ScriptedLLM("Char buried gold.") as llm:
            self.script.set_config("compact_model", llm.model)
            self.compact()
        self.assertTrue(llm.calls[0][1]["content"].endswith("(end of the conversation)"))


class TestLogs(CompactionTestCase):
    def test_logs_name_the_assistant_and_warn_of_successive_compactions_once(self):
        with patch("ai.sleep.compaction.logger") as logger:
            for _ in range(5):
                fill(self.script)
                self.assertTrue(self.compact()["success"])
        label = f"AI Helper({self.assistant.dbref}):"
        lines = [call.args[0] for call in logger.log_info.mock_calls + logger.log_warn.mock_calls]
        self.assertTrue(lines)
        for line in lines:
            self.assertTrue(line.startswith(label), line)
        warnings = [line for line in lines if "summaries of summaries lose accuracy" in line]
        self.assertEqual(len(warnings), 1)

    def test_still_over_after_an_emergency_names_the_prompt_frame_when_it_is_the_cause(self):
        fill(self.script)
        store_window(self.script, 600)  # below the prompt frame alone
        with patch("ai.assistant_script.logger") as logger:
            self.tick()
        still = [c.args[0] for c in logger.log_warn.mock_calls if "still at" in c.args[0]]
        self.assertEqual(len(still), 1, logger.log_warn.mock_calls)
        self.assertRegex(
            still[0],
            r"the prompt without history alone is \d+ tokens \(tool schemas \d+, .*\) of "
            r"max_context_tokens 600",
        )
        self.assertNotIn("preserved messages alone", still[0])

    def test_the_emergency_log_names_the_assistant(self):
        fill(self.script)
        store_window(self.script, 600)
        with patch("ai.assistant_script.logger") as logger:
            self.tick()
        self.assertIn(
            f"AI Helper({self.assistant.dbref}): Emergency compaction triggered",
            logger.log_warn.mock_calls[0].args[0],
        )


class TestNotifications(CompactionTestCase):
    def test_the_log_channel_exists_from_the_start_with_the_builders_subscribed(self):
        from evennia.comms.models import ChannelDB

        channel = ChannelDB.objects.channel_search("AIlog", exact=True)[0]
        self.assertTrue(channel.subscriptions.has(self.account), "a Builder hears it")
        self.assertFalse(channel.subscriptions.has(self.account2), "a player does not")
        self.account2.permissions.add("Builder")
        with patch("ai.process_start.STARTED", set()):  # a new server process
            self.script.at_server_start()
        self.assertTrue(channel.subscriptions.has(self.account2), "new Builders join at start")

    def test_builders_hear_on_the_log_channel_and_the_room_only_if_asked(self):
        from unittest.mock import patch as mock_patch

        from ai.log_channel import log_channel

        channel = log_channel()
        self.assertTrue(channel.access(self.char1, "listen"), "Builders listen")
        self.assertFalse(channel.access(self.char2, "listen"))
        fill(self.script)
        with mock_patch.object(type(channel), "msg") as channel_msg:
            with mock_patch.object(self.char1, "msg") as char1_msg:
                self.compact()
        # The first post; the window is too small for the frame, which a second one says.
        self.assertRegex(
            channel_msg.call_args_list[0].args[0], r"^Helper compacted its context \(emergency\)"
        )
        self.assertNotIn("gathers", str(char1_msg.mock_calls))
        self.script.set_config("compact_notify_room", True)
        fill(self.script)
        with mock_patch.object(self.char1, "msg") as char1_msg:
            self.compact()
        self.assertIn("Helper pauses and gathers their thoughts.", str(char1_msg.mock_calls))
        self.script.fall_asleep()
        fill(self.script)
        with mock_patch.object(self.char1, "msg") as char1_msg:
            self.compact()
        self.assertIn("Helper stirs in their sleep.", str(char1_msg.mock_calls))
        self.assertNotIn("pauses", str(char1_msg.mock_calls), "asleep, it does not pause")

    def test_a_failing_room_does_not_turn_a_stored_compaction_into_an_error(self):
        self.script.set_config("compact_notify_room", True)
        fill(self.script)
        with patch.object(type(self.room1), "msg_contents", side_effect=RuntimeError("bad room")):
            with patch("ai.sleep.notify.logger.log_trace") as log_trace:
                result = self.compact()
        self.assertTrue(result["success"])
        self.assertIn("could not tell the room", log_trace.call_args.args[0])
        self.assertEqual(self.script.conversation_history[0]["id"], result["summary_id"])
