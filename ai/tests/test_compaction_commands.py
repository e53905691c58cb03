"""In-game commands around compaction: aihistory (and its switches) and aicompact."""

import re
from unittest.mock import patch

from twisted.internet import reactor, task

from ai.commands import CmdAiCompact, CmdAiHistory
from ai.helpers.journal import add_entry, journal_entries
from ai.log_channel import log_channel
from ai.models import CompactionRecord
from ai.sleep.compaction import compact_conversation_history
from ai.utils.message_format import summary_text

from .support import AssistantCommandTestCase, make_assistant, store_window, wait_for
from .test_commands import words

FACTS = [
    'Char says, "I buried 40 gold coins under the old oak in Mirkwood."',
    'Char says, "My sister Elena works as a blacksmith in Riverdale village."',
    'Char says, "The northern bridge collapsed during last winter\'s storm."',
    'Char says, "Captain Harlow keeps the harbour keys inside his blue coat."',
    'Char says, "The library closes early every Thursday for cleaning."',
    'Char says, "Wild boars roam the eastern forest after sunset."',
]


def summary(successive, **metadata):
    """Return a compaction summary message with the given metadata."""
    return {
        "role": "system",
        "content": "[CONTEXT SUMMARY]\nChar: The harbour opens at dawn every day.",
        "metadata": {
            "type": "compaction",
            "kind": "sleep",
            "compacted_count": 7,
            "successive_compactions": successive,
            **metadata,
        },
    }


class CompactionCommandTestCase(AssistantCommandTestCase):
    def tell_facts(self, facts=FACTS):
        for fact in facts:
            self.script.append_message({"role": "user", "content": fact})
            self.script.append_message({"role": "assistant", "content": "Noted, thank you."})

    def make_compactable(self):
        """Shrink the preserve window (by count and by the 20% token share) to 2 messages."""
        self.script.set_config("compact_preserve_window", 2)
        store_window(self.script, 1000)

    def compact(self):
        result = wait_for(
            compact_conversation_history(self.script, self.assistant, force=True, kind="manual")
        )
        self.assertTrue(result.get("success"), result)
        return result


class TestAiHistory(CompactionCommandTestCase):
    def test_shows_usage_thresholds_and_live_history(self):
        self.script.append_message({"role": "user", "content": FACTS[0]})
        self.script.append_message(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "look", "arguments": '{"target": "oak"}'},
                    }
                ],
            }
        )
        self.script.append_message(
            {"role": "tool", "tool_call_id": "call_1", "content": "An old oak. " * 20}
        )
        usage = self.script.context_usage()
        output = self.call(CmdAiHistory(), "Helper")
        self.assertIn(
            f"Helper context: {usage.total_tokens}/100000 tokens ({usage.usage:.1%}); "
            "thresholds: sleep 70% (not reached), emergency 80% (not reached)",
            words(output),
        )
        self.assertIn(
            f"History: {usage.history_tokens} tokens ({usage.history_usage:.1%}) in 3 messages. "
            "Model: offline/assistant. Last compaction: never.",
            words(output),
        )
        self.assertEqual([line for line in output.splitlines() if len(line) > 78], [])
        user, call, result = self.script.history.messages()
        self.assertRegex(
            output,
            r"Live history \(aihistory/archived <row id> shows what a summary replaced\):\n"
            r" row id  role       context +tokens  preview",
        )
        self.assertRegex(
            output,
            rf"\n {user['id']} +user +{user['token_count']} +Char says, \"I buried 40 gold",
        )
        self.assertRegex(
            output, rf"\n {call['id']} +assistant +\d+ +→ look\(\{{\"target\": \"oak\"\}}\)"
        )
        table = output[output.index(" row id") :].splitlines()
        self.assertEqual([len(line) for line in table if len(line) > 78], [])
        cut = next(line for line in table if line.startswith(f" {result['id']} "))
        self.assertRegex(cut, r" tool +\d+ +An old oak\. An old oak\. An old oak\. .*…")
        self.assertEqual(len(cut.rstrip()), 77, "the preview fills the 78 columns")
        self.assertNotIn("Warning", output)

    def test_names_the_thresholds_crossed(self):
        self.script.set_config("max_context_tokens", 2000)
        usage = self.script.context_usage().usage
        sleep, emergency = round(usage - 0.05, 2), round(usage + 0.05, 2)
        self.script.set_config("compact_sleep_threshold", sleep)
        self.script.set_config("compact_emergency_threshold", emergency)
        output = self.call(CmdAiHistory(), "")
        self.assertIn(
            f"thresholds: sleep {sleep:.0%} (crossed), emergency {emergency:.0%} (not reached)",
            words(output),
        )
        self.assertIn("No live history.", output)

    def test_a_refused_setting_falls_back_and_the_context_is_still_measured(self):
        bad = {"tick_event": {"max_iterations": 0}}
        with (
            self.settings(AI_CONTEXT_OVERRIDES=bad),
            patch("ai.utils.checked_settings.logger.log_err") as log,
        ):
            output = self.call(CmdAiHistory(), "Helper")
        self.assertIn(
            "thresholds: sleep 70% (not reached), emergency 80% (not reached)", words(output)
        )
        self.assertIn("AI_CONTEXT_OVERRIDES['tick_event']['max_iterations']=0", log.call_args[0][0])

    def test_shows_a_summary_marker_with_its_metadata(self):
        self.tell_facts()
        self.make_compactable()
        result = self.compact()
        output = self.call(CmdAiHistory(), "Helper")
        self.assertRegex(
            output,
            rf"\n {result['summary_id']} +system +{result['summary_tokens']} +\[CONTEXT SUMMARY\] "
            rf"{result['compacted_messages']} msgs, manual",
        )
        self.assertIn(f"Last compaction: {self.script.db.last_compaction[:10]}", words(output))
        self.assertNotIn("Warning", output)

    def test_shows_each_live_summary_in_full_and_the_synthesis_entries(self):
        self.tell_facts()
        self.make_compactable()
        result = self.compact()
        marker = self.script.history.messages()[0]
        metadata = marker["metadata"]
        output = self.call(CmdAiHistory(), "Helper")
        shown = words(output)
        self.assertIn(
            f"Summary {result['summary_id']} (manual, a summary of messages (depth 1), "
            f"{metadata['compacted_at'][:10]} ",
            shown,
        )
        self.assertIn(
            f"replaced {result['compacted_messages']} messages, "
            f"{metadata['original_token_count']} → {metadata['summary_token_count']} tokens:",
            shown,
        )
        kept = summary_text(marker["content"])
        self.assertGreater(len(kept), 80, "long enough that a preview would cut it")
        for line in kept.splitlines():
            self.assertIn(words(line), shown)
        synthesis = journal_entries(self.assistant)[-1]
        self.assertIn(f"Synthesis entries in the journal: {synthesis['id']} (", shown)

    def test_a_summary_tells_its_depth_not_compactions_in_a_row(self):
        self.tell_facts()
        self.make_compactable()
        first = self.compact()
        self.tell_facts(FACTS[:2])
        with patch.object(type(log_channel()), "msg") as channel_msg:
            second = self.compact()  # folds the first summary in: a summary of a summary
        self.assertRegex(
            words(channel_msg.call_args.args[0]),
            r"^Helper compacted its context \(manual\): 5 messages into a summary, .*; it is a "
            r"summary of a summary \(depth 2\)$",
        )
        output = " ".join(self.call(CmdAiHistory(), "Helper").split())
        self.assertIn(
            f"Summary {second['summary_id']} (manual, a summary of a summary (depth 2), ", output
        )
        self.assertIn(f"[CONTEXT SUMMARY] {second['compacted_messages']} msgs, manual", output)
        self.assertNotIn("in a row", output)
        self.assertEqual(first["successive_compactions"], 1)

    def test_warns_from_the_third_successive_compaction(self):
        self.script.append_message(summary(2))
        self.assertNotIn("Warning", self.call(CmdAiHistory(), "Helper"))
        stored = self.script.append_message(summary(3))
        output = self.call(CmdAiHistory(), "Helper")
        self.assertIn(
            f"Warning: summary {stored['id']} is a summary of a summary of a summary (depth "
            "3); accuracy degrades with each summary of a summary.",
            words(output),
        )

    def test_long_output_is_paged(self):
        self.tell_facts(FACTS * 5)
        output = self.call(CmdAiHistory(), "Helper")
        self.assertRegex(output, r"Page \[1/2\]")
        self.assertIn(FACTS[0][:30], output)
        self.assertIsNotNone(self.char1.ndb._more)

    def test_journal_lists_entries_newest_last_with_syntheses(self):
        self.call(CmdAiHistory(), "/journal Helper", "Helper's journal is empty.")
        add_entry(self.assistant, "Char likes apples.", "conversation", 4, tags=["char", "food"])
        self.tell_facts()
        self.make_compactable()
        self.compact()
        synthesis = journal_entries(self.assistant)[-1]
        output = self.call(CmdAiHistory(), "/journal Helper")
        self.assertIn("Journal of Helper (2 entries, newest last):", output)
        self.assertRegex(
            output,
            r"journal_\S+ \(importance 4; conversation; tags: char, food\)\n"
            r"    Char likes apples\.",
        )
        shown = " ".join(output.split())
        self.assertIn(
            f"{synthesis['id']} (importance 7; compaction; tags: compaction, synthesis) "
            "[CONTEXT SYNTHESIS] ",
            shown,
        )
        for line in synthesis["content"].splitlines():
            self.assertIn(" ".join(line.split()), shown, "each entry is shown in full")
        self.assertLess(output.index("Char likes apples"), output.index(synthesis["id"]))
        self.assertLessEqual(max(len(line) for line in output.splitlines()), 78)

    def test_compactions_lists_live_and_archived_summaries(self):
        self.call(CmdAiHistory(), "/compactions Helper", "Helper has never compacted its context.")
        add_entry(self.assistant, "Char likes apples.", "conversation")
        self.tell_facts(FACTS[:4])
        self.make_compactable()
        first = self.compact()
        self.tell_facts(FACTS[4:])
        second = self.compact()
        metadata = self.script.history.messages()[0]["metadata"]
        output = self.call(CmdAiHistory(), "/compactions Helper")
        self.assertRegex(
            output,
            rf"{first['summary_id']} +archived in {second['summary_id']} +manual +\S+ \S+ +\d+ "
            r"+\d+ → \d+ +1",
        )
        self.assertRegex(
            output,
            rf"{second['summary_id']} +live +manual +{metadata['compacted_at'][:10]} \S+ +"
            rf"{metadata['compacted_count']} +{metadata['original_token_count']} → "
            rf"{metadata['summary_token_count']} +2",
        )
        self.assertLessEqual(max(len(line) for line in output.splitlines()), 78)
        syntheses = [e["id"] for e in journal_entries(self.assistant)][1:]
        self.assertEqual(len(syntheses), 2)
        self.assertIn(
            f"Synthesis entries in the journal: {', '.join(syntheses)}.", " ".join(output.split())
        )

    def test_archived_shows_the_replaced_messages(self):
        self.tell_facts()
        self.make_compactable()
        result = self.compact()
        output = self.call(CmdAiHistory(), f"/archived Helper {result['summary_id']}")
        kept, replaced = output.split(f"Messages replaced by summary {result['summary_id']}:")
        self.assertTrue(kept.startswith(f"Summary {result['summary_id']} (manual, "))
        self.assertIn("Char: I buried 40 gold coins", kept, "what the summary kept")
        self.assertRegex(replaced, r"^\n row id  role       context +tokens  preview")
        self.assertEqual([line for line in replaced.splitlines() if len(line) > 78], [])
        for fact in FACTS[:5]:
            self.assertIn(fact[:30], replaced)
        self.assertNotIn(FACTS[5][:40], output)
        self.call(CmdAiHistory(), f"/archived {result['summary_id']}", "Summary ")

    def test_archived_refuses_what_is_not_this_assistants_summary(self):
        message = self.script.append_message({"role": "user", "content": FACTS[0]})
        other = make_assistant("Other", self.room2)
        foreign = other.assistant_script.append_message(summary(1))
        for wrong in (message["id"], foreign["id"], 9999):
            self.assertEqual(
                words(self.call(CmdAiHistory(), f"/archived Helper {wrong}")),
                f"{wrong} is not a summary or masked output of Helper's history; "
                "see aihistory/compactions.",
            )
        self.call(
            CmdAiHistory(),
            "/archived Helper",
            "Usage: aihistory/archived [<assistant>] <row id>",
        )

    def test_an_unknown_switch_or_two_switches_are_refused(self):
        for args, refusal in (
            (
                "/jurnal Helper",
                "aihistory has no switch /jurnal. Its switches: /journal, /compactions, "
                "/archived, /pins, /calls, /subagents.",
            ),
            ("/journal/pins Helper", "aihistory takes one switch at a time, not /journal/pins."),
        ):
            with self.subTest(args):
                self.assertEqual(" ".join(self.call(CmdAiHistory(), args).split()), refusal)
        self.call(CmdAiHistory(), "/jour Helper", "Helper's journal is empty.")

    def test_locked_to_builders(self):
        self.assertTrue(CmdAiHistory().access(self.char1, "cmd"))
        self.assertFalse(CmdAiHistory().access(self.char2, "cmd"))


class TestAiCompact(CompactionCommandTestCase):
    def run_compact(self, args="Helper"):
        """Run aicompact and wait for its report; return the report sent to the caller."""
        self.call(
            CmdAiCompact(), args, "Helper starts compacting: journaling facts, then summarizing."
        )
        with patch.object(self.char1, "msg") as msg:
            wait_for(self.script.ndb.manual_compaction)
        self.assertEqual(msg.call_count, 1)
        return msg.call_args[0][0]

    def test_journals_compacts_and_reports(self):
        self.tell_facts()
        # Extraction needs the history in its prompt: a window that holds it, whose 20%
        # (the preserve window) holds only the small talk that followed the facts.
        self.tell_facts(['Char says, "Nice weather today, is it not?"'] * 15)
        self.script.set_config("compact_preserve_window", 2)
        self.script.set_config("max_context_tokens", 2000)
        report = self.run_compact()
        facts = [e for e in journal_entries(self.assistant) if e["source_type"] == "pre_compaction"]
        history = self.script.history.messages()
        match = re.fullmatch(
            r"Helper: (\d+) facts journaled; compacted (\d+) messages: (\d+) → (\d+) tokens "
            r"\((\d+)% less\)\.",
            report,
        )
        self.assertIsNotNone(match, report)
        self.assertEqual(int(match[1]), 5)
        self.assertEqual(len(facts), 5)
        self.assertEqual(int(match[2]), history[0]["metadata"]["compacted_count"])
        self.assertEqual(int(match[4]), sum(m["token_count"] for m in history))
        self.assertEqual(int(match[5]), round((1 - int(match[4]) / int(match[3])) * 100))
        self.assertEqual(history[0]["metadata"]["kind"], "manual")

    def test_reports_a_skip_and_why_nothing_was_journaled(self):
        self.tell_facts(FACTS[:1])
        self.assertEqual(
            words(self.call(CmdAiCompact(), "")),
            "Helper starts compacting: journaling facts, then summarizing. "
            "Helper: 0 facts journaled (nothing was summarized); "
            "compaction skipped: history within preserve window (the last 20 messages are "
            "kept; lower compact_preserve_window to compact more).",
        )

    def test_compacts_at_the_default_settings_keeping_only_the_preserve_window(self):
        # 100,000 tokens: 20% of the window would keep all of this short history.
        self.tell_facts(FACTS * 3)
        self.assertEqual(self.script.get_config("max_context_tokens"), 100000)
        result = self.compact()
        self.assertTrue(result["success"], result)
        self.assertEqual(result["preserved_messages"], 20)

    def test_reports_a_failed_summary(self):
        self.tell_facts(['Char says, "Hello!"'] * 4)
        self.make_compactable()
        self.script.set_config("pre_compact_extraction_enabled", False)
        report = self.run_compact()
        self.assertEqual(
            words(report),
            "Helper: 0 facts journaled (extraction disabled); "
            "compaction failed: the summary came back empty.",
        )
        self.assertEqual(len(self.script.history.messages()), 8)

    def test_reports_an_error(self):
        self.tell_facts()

        def disk_full():
            raise RuntimeError("disk full")

        # It fails a moment later, as a compaction would, after aicompact has answered.
        with patch(
            "ai.commands.compaction.compact_conversation_history",
            return_value=task.deferLater(reactor, 0, disk_full),
        ):
            report = self.run_compact()
        self.assertEqual(report, "Helper: compaction failed: disk full")

    def test_warns_from_the_third_successive_compaction(self):
        self.script.append_message(summary(2))
        self.tell_facts()
        self.make_compactable()
        report = self.run_compact()
        self.assertIn(
            "Its summary is a summary of a summary of a summary (depth 3): check the "
            "synthesis entries (aihistory/journal).",
            words(report),
        )

    def test_refuses_while_a_compaction_runs(self):
        self.tell_facts()
        self.make_compactable()
        self.script.ndb.compacting = True
        self.call(CmdAiCompact(), "Helper", "Helper is already compacting; wait until it is done.")
        self.script.ndb.compacting = False
        self.call(CmdAiCompact(), "Helper", "Helper starts compacting")
        running = self.script.ndb.manual_compaction
        self.assertFalse(running.called)
        self.call(CmdAiCompact(), "Helper", "Helper is already compacting; wait until it is done.")
        self.assertIs(self.script.ndb.manual_compaction, running)
        with patch.object(self.char1, "msg"):
            wait_for(running)
        self.call(CmdAiCompact(), "Helper", "Helper starts compacting")

    def test_a_misspelt_switch_is_refused_and_nothing_is_compacted(self):
        self.tell_facts()
        self.make_compactable()
        before = [message["id"] for message in self.script.history.messages()]
        for args, refusal in (
            (
                "/udno Helper",
                "aicompact has no switch /udno. Its switches: /undo, /force, /pin, /unpin, "
                "/pinfact.",
            ),
            ("/un Helper", "aicompact: /un could be /undo or /unpin; type more of it."),
            (
                "/force/bogus Helper",
                "aicompact has no switch /bogus. Its switches: /undo, /force, /pin, /unpin, "
                "/pinfact.",
            ),
        ):
            with self.subTest(args):
                self.assertEqual(" ".join(self.call(CmdAiCompact(), args).split()), refusal)
        self.assertIsNone(self.script.ndb.manual_compaction)
        self.assertEqual([message["id"] for message in self.script.history.messages()], before)
        self.assertFalse(CompactionRecord.objects.filter(db_script_id=self.script.id).exists())

    def test_locked_to_builders(self):
        self.assertTrue(CmdAiCompact().access(self.char1, "cmd"))
        self.assertFalse(CmdAiCompact().access(self.char2, "cmd"))
