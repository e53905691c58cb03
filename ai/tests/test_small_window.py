"""A fixed prompt that fills much of a small window: the preserved tail adapts, automatic
compactions escalate and converge, and no call is sent over the window (issue 19)."""

from unittest.mock import patch

from django.utils.timezone import now

from ai.context_usage import ContextUsage
from ai.helpers.journal import journal_entries
from ai.history import ConversationHistory
from ai.models import CompactionRecord
from ai.prompt_contexts import CONTEXT_TICK_EVENT
from ai.sleep import run_sleep_tick
from ai.sleep.archiving import STATEMENT_SHARES, archive_marker, marker_text
from ai.sleep.common import preserve_tokens
from ai.sleep.undo import undo_last_compaction
from ai.tools import ToolContext, execute_tool
from ai.utils.markers import ARCHIVE_MARKER, SAID_HEADER

from .support import (
    AssistantTestCase,
    AssistantTransactionTestCase,
    ScriptedLLM,
    store_window,
    wait_for,
)

WINDOW = 2500
# Lines of a long system prompt, as a game's own lore would make it: with them the frame is
# over half of WINDOW, as a real server's was.
LORE = "\n".join(
    f"Lore line {n}: <a fact of the game world, several words long>." for n in range(30)
)
# A summary longer than what it replaces: every summary is refused as not smaller.
LONG_SUMMARY = "- <a line of summary that says far too much about very little>\n" * 60


class SmallWindow:
    """Mixed into an assistant test case: a window whose frame is over half of it."""

    def setUp(self):
        super().setUp()
        self.script.set_config(
            "context_overrides",
            {CONTEXT_TICK_EVENT: {"component_overrides": {"system_prompt": {"content": LORE}}}},
        )
        store_window(self.script, WINDOW)
        self.frame = self.script.context_usage().frame_tokens
        self.assertGreater(self.frame, WINDOW / 2)

    def say_long(self, words):
        """Append a player's line of about ``words`` words (and tokens)."""
        text = " ".join(f"w{n}" for n in range(words))
        return self.script.append_message({"role": "user", "content": f'Char says, "{text}"'})


class SmallWindowCase(SmallWindow, AssistantTestCase):
    pass


class TestPreservedTail(SmallWindowCase):
    def test_the_preserved_tail_is_a_share_of_the_room_history_has(self):
        roomy = ContextUsage(
            total_tokens=900, history_tokens=0, max_tokens=100_000, message_count=0
        )
        self.assertEqual(preserve_tokens(roomy, 0.8), 20_000, "20% of a roomy window")
        usage = self.script.context_usage()
        room = 0.8 * WINDOW - self.frame
        self.assertEqual(preserve_tokens(usage, 0.8), room / 2)
        self.assertLess(preserve_tokens(usage, 0.8), 0.2 * WINDOW)


class TestConvergence(SmallWindowCase):
    def test_ticks_compact_and_converge_without_repeating_a_refusal(self):
        """Every summary is refused as not smaller: the compaction archives instead, each
        emergency brings usage under the threshold, and no summary is tried twice."""
        with ScriptedLLM(*[LONG_SUMMARY] * 40, provider="summarizer") as summarizer:
            self.script.set_config("compact_model", summarizer.model)
            emergencies = []
            for tick in range(14):
                self.hear(f"tick {tick}: the <thing> number {tick} is <value {tick}>.")
                result = self.tick()
                self.assertEqual(result["status"], "replied", result)
                if result["emergency"] and not result["emergency"].get("skipped"):
                    emergencies.append(result["emergency"])
        self.assertGreaterEqual(len(emergencies), 2)
        for emergency in emergencies:
            self.assertFalse(emergency["still_over_threshold"], emergency["context_compaction"])
        transcripts = [call[-1]["content"] for call in summarizer.calls]
        self.assertEqual(len(transcripts), len(set(transcripts)), "a refused summary came back")
        archived = CompactionRecord.objects.filter(db_script_id=self.script.id, strategy="archive")
        self.assertTrue(archived.exists())


class TestConvergenceOutsideATransaction(SmallWindow, AssistantTransactionTestCase):
    """As in a server: each compaction, and each step of its escalation, reads the
    messages it replaces in a worker thread."""

    def test_ticks_of_new_messages_compact_and_converge_reading_in_a_thread(self):
        reads, read_pages = [], ConversationHistory._read_pages

        def counted(store, before):
            reads.append(before)
            return read_pages(store, before)

        with patch.object(ConversationHistory, "_read_pages", counted):
            TestConvergence.test_ticks_compact_and_converge_without_repeating_a_refusal(self)
        records = CompactionRecord.objects.filter(db_script_id=self.script.id).count()
        self.assertGreaterEqual(len(reads), records)
        self.assertGreaterEqual(records, 2)


class TestNoCallWasted(SmallWindowCase):
    def setUp(self):
        super().setUp()
        self.old = [
            self.script.append_message({"role": "user", "content": f'Char2 says, "{line}"'})
            for line in (
                "The <thing> by the river is <value>, and the ferry waits there until dusk.",
                "Remember that <name> keeps the keys of the <place> every market day.",
                "And the <other thing> costs <number> coins at the stall near the <place>.",
                "Also, <name> said the bridge to the <place> closes when it rains hard.",
            )
        ]
        # The newest line alone leaves too little of the room for the old part to matter.
        # (A margin of words: the scripted model of the tick counts a little differently.)
        old_tokens = sum(message["token_count"] for message in self.old)
        self.say_long(int(0.8 * WINDOW - self.frame - old_tokens) + 20)
        self.assertGreaterEqual(self.script.context_usage().usage, 0.8)

    def test_a_compaction_too_small_for_a_summary_journals_then_archives_unsummarized(self):
        fact = "Char2 said the ferry waits by the river until dusk."
        journaling = [("add_journal_entry", {"content": fact})]
        with (
            ScriptedLLM(journaling, [("noop", {})], AssertionError("a reply")) as model,
            ScriptedLLM(
                AssertionError("the summarizer was called"), provider="summarizer"
            ) as summarizer,
        ):
            self.script.set_config("llm_model", model.model)
            self.script.set_config("compact_model", summarizer.model)
            result = self.tick()
        self.assertEqual(summarizer.calls, [])
        self.assertEqual(result["emergency"]["pre_compaction_extraction"]["facts_recorded"], 1)
        self.assertIn(fact, [entry["content"] for entry in journal_entries(self.assistant)])
        compaction = result["emergency"]["context_compaction"]
        self.assertTrue(compaction["success"], compaction)
        self.assertEqual(
            (compaction["strategy"], compaction["archived_messages"]), ("archive", 4), compaction
        )
        self.assertFalse(result["emergency"]["still_over_threshold"])
        marker = self.script.conversation_history[0]
        self.assertTrue(marker["content"].startswith(f"{ARCHIVE_MARKER} 4 earlier messages"))
        self.assertIn("search_history", marker["content"])

    def test_the_archived_messages_are_searchable_and_the_archive_undoable(self):
        self.script.set_config("llm_model", "offline/assistant")
        self.tick()
        self.assertNotIn(self.old[0]["id"], [m["id"] for m in self.script.conversation_history])
        found = execute_tool(
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "search_history", "arguments": '{"query": "ferry"}'},
            },
            ToolContext(self.script, self.assistant, CONTEXT_TICK_EVENT),
        )
        self.assertIn("the ferry waits there until dusk", found.content)
        undone = undo_last_compaction(self.script, self.assistant, force=True)
        self.assertEqual(undone["restored"], 4)
        live = [m["id"] for m in self.script.conversation_history]
        self.assertEqual(live[:4], [m["id"] for m in self.old])


class TestArchiveKeepsStatements(SmallWindowCase):
    def test_an_archive_keeps_the_statements_the_journal_does_not_hold(self):
        """Archived unsummarized after an extraction that journaled nothing: the players'
        statements that name someone or hold a number stay live, in their own words."""
        lines = ["Nice evening, friend.", "The ferry to Saltmarsh leaves at 9 bells."]
        for line in lines + ["What a fine and quiet evening it is by the fire, my friend."] * 4:
            self.script.append_message({"role": "user", "content": f'Char2 says, "{line}"'})
        old = sum(message["token_count"] for message in self.script.conversation_history)
        self.say_long(int(0.8 * WINDOW - self.frame - old) + 20)
        with (
            ScriptedLLM([("noop", {})]) as model,
            ScriptedLLM(AssertionError("summarized"), provider="summarizer") as summarizer,
        ):
            self.script.set_config("llm_model", model.model)
            self.script.set_config("compact_model", summarizer.model)
            result = self.tick()
        compaction = result["emergency"]["context_compaction"]
        self.assertEqual(compaction.get("strategy"), "archive", result["emergency"])
        marker = self.script.conversation_history[0]["content"]
        self.assertTrue(marker.startswith(f"{ARCHIVE_MARKER} 6 earlier messages"))
        self.assertIn(
            f'{SAID_HEADER}\n- Char2: "The ferry to Saltmarsh leaves at 9 bells."', marker
        )
        self.assertNotIn("Nice evening", marker)

    def test_a_whispered_statement_archived_with_its_answer_is_kept_for_the_whisperer(self):
        """A whisper and its answer get a marker of their own; its one statement fits the
        first share tried, though the marker's own words outnumber the two messages'."""
        private = {"audience": [self.char1.dbref]}
        members = [
            self.script.append_message(
                {
                    "role": "user",
                    "content": 'Char whispers to you, "The mill in Oakvale charges 6 copper a sack."',
                    "metadata": private,
                }
            ),
            self.script.append_message(
                {"role": "assistant", "content": "Noted.", "metadata": private}
            ),
        ]
        text = marker_text(self.assistant.key, [], members, STATEMENT_SHARES[0])
        marker = archive_marker("sleep", private["audience"], members, "model", now(), text)
        self.assertTrue(marker["content"].startswith(f"{ARCHIVE_MARKER} 2 earlier messages"))
        kept = '- Char: "The mill in Oakvale charges 6 copper a sack."'
        self.assertIn(kept, marker["content"])
        self.assertEqual(marker["metadata"]["audience"], private["audience"])

    def test_an_archive_of_an_archive_keeps_what_the_first_kept(self):
        """A sleep archives a whisper behind a marker that keeps its statement; the next
        archives that marker with newer messages: the statement is still live."""
        private = {"audience": [self.char1.dbref]}
        line = "The mill in Oakvale charges 6 copper a sack."
        whispered = [
            self.script.append_message(
                {"role": "user", "content": f'Char whispers to you, "{line}"', "metadata": private}
            ),
            self.script.append_message(
                {"role": "assistant", "content": "Noted.", "metadata": private}
            ),
        ]
        share = STATEMENT_SHARES[0]
        text = marker_text(self.assistant.key, [], whispered, share)
        first = archive_marker("sleep", private["audience"], whispered, "model", now(), text)
        later = [
            self.script.append_message(first),
            self.script.append_message(
                {
                    "role": "user",
                    "content": 'Char whispers to you, "Thanks, good night."',
                    "metadata": private,
                }
            ),
        ]
        second = marker_text(self.assistant.key, [], later, share)
        self.assertTrue(second.startswith(f"{ARCHIVE_MARKER} 2 earlier messages"), second)
        self.assertIn(f'- Char: "{line}"', second)
        self.assertEqual(second.count(ARCHIVE_MARKER), 1, second)
        self.assertNotIn(SAID_HEADER, second, "nothing said in the later messages to keep")


class TestHybridSleep(SmallWindowCase):
    def test_a_hybrid_sleep_makes_room_under_the_sleep_threshold_and_keeps_statements(self):
        """hybrid masks from 50%, but needs usage only under the sleep threshold: with the
        frame over 50%, a refused summary still escalates to an archive that keeps the
        players' statements, as it would at the summary strategy."""
        self.script.set_config("compact_strategy", "hybrid")
        statements = [
            "The ferry to Saltmarsh leaves at 9 bells.",
            "My sister Maren keeps the lighthouse on Gull Rock.",
        ]
        for line in statements + ["What a fine and quiet evening it is by the fire."] * 6:
            self.script.append_message({"role": "user", "content": f'Char2 says, "{line}"'})
        old = sum(message["token_count"] for message in self.script.conversation_history)
        self.say_long(int(0.73 * WINDOW - self.frame - old))
        self.assertGreater(self.script.context_usage().usage, 0.7)
        with (
            ScriptedLLM([("noop", {})], [("noop", {})]) as model,
            ScriptedLLM(LONG_SUMMARY, provider="summarizer") as summarizer,
        ):
            self.script.set_config("llm_model", model.model)
            self.script.set_config("compact_model", summarizer.model)
            results = wait_for(run_sleep_tick(self.script, self.assistant))
        compaction = results["context_compaction"]
        self.assertTrue(compaction["success"], compaction)
        self.assertLess(self.script.context_usage().usage, 0.7)
        marker = self.script.conversation_history[0]["content"]
        self.assertTrue(marker.startswith(ARCHIVE_MARKER), marker)
        for line in statements:
            self.assertIn(f'- Char2: "{line}"', marker)


class TestNothingOverTheWindow(SmallWindowCase):
    def test_a_prompt_over_the_window_is_not_sent(self):
        store_window(self.script, self.frame // 2)  # shrinking the rest cannot make it fit
        result = self.tick_on("never sent", text="Hello there.")
        self.assertEqual(self.llm.calls, [])
        self.assertEqual(result["status"], "over_window")
