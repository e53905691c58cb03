"""The history's scattered replacements, undo of a recorded compaction, and pins."""

from ai.history import HistoryChanged
from ai.models import CompactionRecord, ConversationMessage

from .support import AssistantTestCase
from .test_token_counter import TOOL_CALL_MESSAGE

SUMMARY = {"role": "system", "content": "[CONTEXT SUMMARY]\nChar said hello."}


class HistoryCase(AssistantTestCase):
    def setUp(self):
        super().setUp()
        self.history = self.script.history

    def say(self, count, start=0):
        return [
            self.script.append_message({"role": "user", "content": f'Char says, "hello {i}"'})
            for i in range(start, start + count)
        ]

    def tool_unit(self):
        call = self.script.append_message(TOOL_CALL_MESSAGE)
        result = self.script.append_message(
            {"role": "tool", "tool_call_id": "call_1", "content": "Journaled."}
        )
        return call, result

    def record(self):
        return CompactionRecord.objects.create(
            db_script_id=self.script.id,
            kind="manual",
            strategy="summary",
            result={"counted_for": self.history.counted_for},
        )

    def assert_totals_match(self):
        live = self.history.messages()
        self.assertEqual(self.history.totals(), (sum(m["token_count"] for m in live), len(live)))


class TestReplaceEach(HistoryCase):
    def test_scattered_messages_are_replaced_in_place(self):
        messages = self.say(6)
        masked = {"role": "user", "content": "(masked)"}
        first, second = self.history.replace_each(
            [(masked, messages[1:2]), (SUMMARY, messages[3:5])], self.record()
        )
        live = self.history.messages()
        expected = [messages[0]["id"], first["id"], messages[2]["id"], second["id"]]
        self.assertEqual([m["id"] for m in live], expected + [messages[5]["id"]])
        self.assertEqual(self.history.archived_by(second["id"]), messages[3:5])
        self.assert_totals_match()

    def test_a_message_no_longer_live_or_pinned_refuses_all_of_it(self):
        messages = self.say(4)
        self.history.replace_each([(SUMMARY, messages[:2])])
        self.history.set_pinned([messages[3]["id"]])
        before = self.history.messages()
        for gone in (messages[0], messages[3]):
            with self.subTest(gone=gone["content"]):
                with self.assertRaisesRegex(HistoryChanged, "no longer the live ones"):
                    self.history.replace_each([(SUMMARY, [messages[2]]), (SUMMARY, [gone])])
                self.assertEqual(self.history.messages(), before)
                self.assert_totals_match()


class TestUndo(HistoryCase):
    def test_undo_puts_the_messages_back_where_they_were(self):
        messages = self.say(6)
        before = self.history.messages()
        record = self.record()
        self.history.replace_with_summaries(messages[:4], [(SUMMARY, messages[:4])], record=record)
        late = self.say(1, start=6)
        self.assertEqual(self.history.undo(record), 4)
        self.assertEqual(self.history.messages(), before + late)
        self.assert_totals_match()
        self.assertFalse(ConversationMessage.objects.filter(made_by=record).exists())
        record.refresh_from_db()
        self.assertIsNotNone(record.undone_at)
        with self.assertRaisesRegex(HistoryChanged, "undone already"):
            self.history.undo(record)

    def test_undo_is_refused_while_a_later_compaction_holds_its_summary(self):
        messages = self.say(6)
        first, second = self.record(), self.record()
        (summary,) = self.history.replace_with_summaries(
            messages[:3], [(SUMMARY, messages[:3])], record=first
        )
        self.history.replace_with_summaries(
            [summary, *messages[3:5]], [(SUMMARY, [summary, *messages[3:5]])], record=second
        )
        after = self.history.messages()
        with self.assertRaisesRegex(HistoryChanged, "undo that one first"):
            self.history.undo(first)
        self.assertEqual(self.history.messages(), after)
        self.history.undo(second)
        self.history.undo(first)
        self.assertEqual([m["id"] for m in self.history.messages()], [m["id"] for m in messages])
        self.assert_totals_match()

    def test_undo_after_a_model_change_counts_for_the_new_tokenizer(self):
        messages = self.say(6)
        record = self.record()
        self.history.replace_with_summaries(messages[:4], [(SUMMARY, messages[:4])], record=record)
        record.result["counted_for"] = "another tokenizer"
        record.save()
        ConversationMessage.objects.filter(replaced_by__isnull=False).update(token_count=1)
        self.history.undo(record)
        self.assertNotIn(1, [m["token_count"] for m in self.history.messages()])
        self.assert_totals_match()


class TestPins(HistoryCase):
    def test_a_pin_holds_the_whole_tool_call_unit(self):
        self.say(2)
        call, result = self.tool_unit()
        self.say(2, start=2)
        for target in (call, result):
            with self.subTest(pinned=target["role"]):
                self.assertEqual(
                    self.history.set_pinned([target["id"]]), [call["id"], result["id"]]
                )
                pinned = self.history.pinned_messages()
                self.assertEqual([m["id"] for m in pinned], [call["id"], result["id"]])
                self.history.set_pinned([target["id"]], pinned=False)
                self.assertEqual(self.history.pinned_messages(), [])

    def test_a_summary_passes_over_pinned_messages_and_keeps_them_in_order(self):
        messages = self.say(6)
        self.history.set_pinned([messages[2]["id"]])
        unpinned = [m for m in messages[:5] if m["id"] != messages[2]["id"]]
        (summary,) = self.history.replace_with_summaries(unpinned, [(SUMMARY, unpinned)])
        live = [m["id"] for m in self.history.messages()]
        self.assertEqual(live, [summary["id"], messages[2]["id"], messages[5]["id"]])
        self.assertEqual(self.history.archived_by(summary["id"]), unpinned)
        self.assert_totals_match()

    def test_pinned_messages_are_not_sent_with_their_pin(self):
        (message,) = self.say(1)
        self.history.set_pinned([message["id"]])
        (held,) = self.history.recent(10_000)
        self.assertTrue(held["pinned"])
        self.assertNotIn("pinned", held.sendable())
