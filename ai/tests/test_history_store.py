"""The history table: order, validation at the door, O(1) appends and totals."""

import importlib
import random
from types import SimpleNamespace
from unittest import TestCase, skipUnless
from unittest.mock import patch

from django.db import connection
from django.test.utils import CaptureQueriesContext
from twisted.internet import defer, reactor

from ai.audience import may_hear, message_audience
from ai.history import HistoryChanged, _heard_suffix, _Tail
from ai.models import ConversationMessage
from ai.utils.message_format import MessageValidationError
from ai.utils.token_counter import count_message_tokens

from .support import AssistantTestCase, make_assistant, query_plans, wait_for
from .test_token_counter import TOOL_CALL_MESSAGE

MODEL = "offline/assistant"
LINK_MIGRATION = importlib.import_module("ai.migrations.0023_replaced_by_without_constraint")


class TestHistoryStore(AssistantTestCase):
    def test_messages_come_back_in_order_in_the_seed_format(self):
        self.script.append_message({"role": "user", "content": 'Char says, "one"'})
        self.script.append_message(TOOL_CALL_MESSAGE)
        self.script.append_message({"role": "tool", "tool_call_id": "call_1", "content": "done"})
        history = self.script.conversation_history
        self.assertEqual([m["role"] for m in history], ["user", "assistant", "tool"])
        self.assertEqual(history[1]["tool_calls"], TOOL_CALL_MESSAGE["tool_calls"])
        self.assertEqual(history[2]["tool_call_id"], "call_1")
        self.assertEqual(
            history[0]["token_count"],
            count_message_tokens({"role": "user", "content": 'Char says, "one"'}, MODEL),
        )

    def test_metadata_comes_back_as_stored(self):
        self.script.append_message(
            {"role": "user", "content": 'Char says, "hi"', "metadata": {"speaker": "Char", "n": 2}}
        )
        self.script.append_message({"role": "assistant", "content": "Hello."})
        first, second = self.script.conversation_history
        self.assertEqual(first["metadata"], {"speaker": "Char", "n": 2})
        self.assertEqual(second["metadata"], {})

    def test_totals_follow_every_append(self):
        messages = [{"role": "user", "content": f'Char says, "line {i}"'} for i in range(5)]
        for message in messages:
            self.script.append_message(message)
        tokens, count = self.script.history.totals()
        self.assertEqual(count, 5)
        self.assertEqual(tokens, sum(count_message_tokens(m, MODEL) for m in messages))

    def test_malformed_messages_are_refused_and_nothing_is_stored(self):
        bad = [
            ({"role": "wizard", "content": "hi"}, "unknown role 'wizard'"),
            ({"role": "user", "content": 42}, "'content' must be a string"),
            ({"role": "tool", "content": "result"}, "tool_call_id"),
            ({"role": "user", "tool_calls": []}, "needs 'content'"),
            (
                {"role": "user", "content": "x", "tool_calls": TOOL_CALL_MESSAGE["tool_calls"]},
                "only an assistant",
            ),
            (
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}],
                },
                "JSON string",
            ),
            ("just text", "must be a dict"),
        ]
        for message, expected in bad:
            with self.subTest(message=message):
                with self.assertRaisesRegex(MessageValidationError, expected):
                    self.script.append_message(message)
        self.assertEqual(ConversationMessage.objects.count(), 0)
        self.assertEqual(self.script.history.totals(), (0, 0))

    def test_append_and_check_cost_the_same_queries_at_any_length(self):
        store = self.script.history
        store.append(
            {"role": "user", "content": 'Char says, "the first message creates the counter"'}
        )

        def queries_for_append_and_check():
            with CaptureQueriesContext(connection) as ctx:
                store.append({"role": "user", "content": 'Char says, "hello"'})
                store.totals()
            return len(ctx.captured_queries)

        early = queries_for_append_and_check()
        ConversationMessage.objects.bulk_create(
            ConversationMessage(
                db_script_id=self.script.id,
                position=1000 + i,
                role="user",
                content="x",
                token_count=2,
            )
            for i in range(300)
        )
        late = queries_for_append_and_check()
        self.assertEqual(early, late)
        self.assertLessEqual(late, 6)

    def test_appends_keep_their_order_whether_updates_return_rows_or_not(self):
        # SQLite from 3.35 and PostgreSQL claim a position in one statement; MySQL reads
        # the counter back. A new assistant has no counter yet: its first append makes it.
        for returns in (True, False):
            with self.subTest(returns=returns):
                script = make_assistant(f"Scribe{returns}", self.room1).assistant_script
                lines = [{"role": "user", "content": f'Char says, "line {i}"'} for i in range(4)]
                with patch("ai.history._updates_return_rows", return_value=returns):
                    stored = [script.append_message(line) for line in lines]
                positions = [message["position"] for message in stored]
                self.assertEqual(positions, sorted(set(positions)))
                history = script.conversation_history
                self.assertEqual([m["content"] for m in history], [m["content"] for m in lines])
                self.assertEqual(script.history.totals()[1], 4)

    def test_changing_the_model_recounts_once(self):
        self.script.append_message({"role": "user", "content": "Hello, world! " * 10})
        offline_tokens = self.script.history.token_total()
        self.script.set_config("llm_model", "ollama/llama3")  # counted by the heuristic
        recounted = self.script.history.token_total()
        expected = count_message_tokens(
            {"role": "user", "content": "Hello, world! " * 10}, "ollama/llama3"
        )
        self.assertEqual(recounted, expected)
        self.assertNotEqual(recounted, offline_tokens)
        self.assertEqual(self.script.conversation_history[0]["token_count"], expected)


class TestRecentHistory(AssistantTestCase):
    """``recent``: the newest messages a prompt could send, held in memory between ticks."""

    def line(self, index, **extra):
        return self.script.append_message(
            {"role": "user", "content": f'Char says, "line {index}"', **extra}
        )

    def test_only_the_newest_messages_worth_the_tokens_are_read(self):
        for index in range(40):
            self.line(index)
        each = self.script.conversation_history[0]["token_count"]
        recent = self.script.history.recent(5 * each)
        self.assertEqual([m["content"] for m in recent][0], 'Char says, "line 35"')
        self.assertEqual((recent.older_count, recent.older_tokens), (35, 35 * each))
        self.assertEqual(len(self.script.history.recent(10**6)), 40)

    def test_the_held_copy_follows_appends_and_notices_other_writes(self):
        for index in range(3):
            self.line(index)
        history = self.script.history
        self.assertEqual(len(history.recent(10**6)), 3)
        self.line(3)
        self.assertEqual(history.recent(10**6)[-1]["content"], 'Char says, "line 3"')
        # A write that bypasses this copy (another process, a builder's tool): the
        # counter's revision changes, and the next read is fresh.
        row = ConversationMessage.objects.get(content='Char says, "line 1"')
        row.content = 'Char says, "edited"'
        row.save()
        self.script.history.recount()
        self.assertIn('Char says, "edited"', [m["content"] for m in history.recent(10**6)])

    def test_a_room_never_gets_a_whisper_from_the_held_copy(self):
        self.line(0)
        self.assertEqual(len(self.script.history.recent(10**6)), 1)  # held from here on
        self.line(1, metadata={"audience": [self.char1.dbref]})
        self.line(2)
        room = [m["content"] for m in self.script.history.recent(10**6)]
        self.assertEqual(room, ['Char says, "line 0"', 'Char says, "line 2"'])
        whisperer = self.script.history.recent(10**6, [self.char1.dbref])
        self.assertEqual(len(whisperer), 3)

    def test_hidden_whispers_make_it_read_further_back(self):
        for index in range(10):
            self.line(index)
        for index in range(10, 30):
            self.line(index, metadata={"audience": [self.char1.dbref]})
        each = self.script.conversation_history[0]["token_count"]
        room = self.script.history.recent(5 * each)
        self.assertEqual([m["content"] for m in room][-1], 'Char says, "line 9"')
        self.assertEqual(len(room), 5)

    def test_a_partial_copy_never_starts_with_a_result_without_its_call(self):
        for index in range(10):
            self.line(index)
        self.script.append_message(TOOL_CALL_MESSAGE)
        for _ in range(3):
            self.script.append_message({"role": "tool", "tool_call_id": "call_1", "content": "x"})
        self.line(10)
        tool_tokens = self.script.conversation_history[-2]["token_count"]
        recent = self.script.history.recent(2 * tool_tokens)
        self.assertNotEqual(recent[0]["role"], "tool")

    def read_cold(self, tokens, between=None):
        """Warm a history not held, a page of 10 messages a reactor turn (no more: the
        turn's slice is none); call ``between`` at the first turn. Return how many turns
        another timer saw before it was held."""
        self.script.ndb.live_tail = None
        turns = []

        def turn():
            turns.append(1)
            if between and len(turns) == 1:
                between()
            if not warming.called:
                reactor.callLater(0, turn)

        with patch("ai.history.WARM_PAGE", 10), patch("ai.utils.reactor_turns.SLICE_S", 0):
            warming = self.script.history.warm(tokens)
            reactor.callLater(0, turn)
            wait_for(warming)
        return len(turns)

    def test_a_history_not_held_is_read_a_page_a_reactor_turn(self):
        for index in range(45):
            self.line(index)
        expected = [m["id"] for m in self.script.conversation_history]
        self.assertGreaterEqual(self.read_cold(10**6), 4, "the reactor turned between pages")
        with CaptureQueriesContext(connection) as queries:
            held = self.script.history.recent(10**6)
        self.assertEqual([m["id"] for m in held], expected)
        self.assertEqual(len(queries), 1, "only the counter is read: the messages are held")

    def test_assistants_warming_together_take_turns_page_by_page(self):
        """A server's start: every assistant's first tick reads its history. Their pages
        take turns (here one page a reactor turn in all), never all in one turn."""
        other = make_assistant("Sage", self.room1).assistant_script
        for index in range(45):
            self.line(index)
            other.append_message({"role": "user", "content": f'Char says, "line {index}"'})
        self.script.ndb.live_tail = other.ndb.live_tail = None
        turns = []

        def turn():
            turns.append(1)
            if not both.called:
                reactor.callLater(0, turn)

        with patch("ai.history.WARM_PAGE", 10), patch("ai.utils.reactor_turns.SLICE_S", 0):
            both = defer.DeferredList([self.script.history.warm(10**6), other.history.warm(10**6)])
            reactor.callLater(0, turn)
            wait_for(both)
        self.assertGreaterEqual(len(turns), 9, "ten pages, one a turn")
        self.assertEqual(len(other.history.recent(10**6)), 45)

    def test_a_history_written_while_it_is_read_is_read_again(self):
        for index in range(45):
            self.line(index)
        self.read_cold(10**6, between=lambda: self.line(45))
        contents = [m["content"] for m in self.script.history.recent(10**6)]
        self.assertEqual(len(contents), 46)
        self.assertEqual(contents[-1], 'Char says, "line 45"')


class TestHeardSuffix(TestCase):
    """What ``recent`` takes from the held messages, public or not, as one walk takes it."""

    def test_it_takes_what_walking_back_message_by_message_takes(self):
        rng = random.Random(7)
        for _ in range(300):
            messages, audiences = [], rng.choice(((None,), (None, None, ["#1"], ["#2"])))
            for _ in range(rng.randint(1, 30)):
                role = rng.choice(("user", "assistant", "tool"))
                audience = rng.choice(audiences)
                metadata = {"audience": audience} if audience else {}
                tokens = rng.randint(1, 20)
                messages.append({"role": role, "metadata": metadata, "token_count": tokens})
            private = sum(1 for message in messages if message_audience(message))
            total = sum(message["token_count"] for message in messages)
            tail = _Tail(1, "m", messages, total, False, 10**6, private)
            tokens, listeners = rng.randint(0, total + 10), rng.choice((None, ["#1"]))
            heard, index, held = [], len(messages), 0
            while index > 0 and (held < tokens or (heard and heard[-1]["role"] == "tool")):
                index -= 1  # the reference: one message at a time
                if may_hear(message_audience(messages[index]), listeners):
                    heard.append(messages[index])
                    held += messages[index]["token_count"]
            spanned = sum(message["token_count"] for message in messages[index:])
            with self.subTest(messages=messages, tokens=tokens, listeners=listeners):
                self.assertEqual(
                    _heard_suffix(tail, tokens, listeners), (heard[::-1], index, held, spanned)
                )


class TestNewestOutline(AssistantTestCase):
    """``newest_outline``: where a compaction splits, found without reading content."""

    def assert_outline_of_newest(self, outline, tokens, count):
        history = self.script.conversation_history
        newest = history[len(history) - len(outline) :]
        self.assertEqual([entry["id"] for entry in outline], [m["id"] for m in newest])
        self.assertGreater(sum(entry["token_count"] for entry in outline), tokens)
        self.assertGreater(len(outline), count)
        self.assertNotEqual(outline[0]["role"], "tool")
        self.assertEqual(outline.older_count, len(history) - len(outline))

    def test_enough_of_the_newest_messages_without_their_content(self):
        for index in range(200):
            self.script.append_message({"role": "user", "content": f'Char says, "line {index}"'})
        each = self.script.conversation_history[0]["token_count"]
        outline = self.script.history.newest_outline(5 * each, 2)
        self.assert_outline_of_newest(outline, 5 * each, 2)
        self.assertLess(len(outline), 200)
        self.assertEqual(set(outline[0]), {"id", "position", "role", "token_count"})

    def test_it_reads_further_back_when_the_newest_messages_are_small(self):
        for index in range(30):
            self.script.append_message({"role": "user", "content": "long " * 200 + str(index)})
        self.script.append_message(TOOL_CALL_MESSAGE)
        for index in range(200):
            self.script.append_message({"role": "tool", "tool_call_id": "call_1", "content": "x"})
        small = self.script.conversation_history[-1]["token_count"]
        outline = self.script.history.newest_outline(150 * small, 10)
        # Never a result without its call at the start: the call's tool_calls come along.
        self.assert_outline_of_newest(outline, 150 * small, 10)
        called = [entry for entry in outline if entry.get("tool_calls")]
        self.assertEqual(called[0]["tool_calls"], TOOL_CALL_MESSAGE["tool_calls"])
        self.assertEqual(outline[-1]["tool_call_id"], "call_1")

    def test_it_never_begins_with_a_result_without_its_call(self):
        self.script.append_message({"role": "user", "content": 'Char says, "go"'})
        self.script.append_message(TOOL_CALL_MESSAGE)
        for index in range(200):
            self.script.append_message({"role": "tool", "tool_call_id": "call_1", "content": "x"})
        small = self.script.conversation_history[-1]["token_count"]
        self.assert_outline_of_newest(self.script.history.newest_outline(100 * small, 10), 0, 0)


@skipUnless(connection.vendor == "sqlite", "the plans of SQLite's query planner")
class TestLiveIndex(AssistantTestCase):
    """The live index holds live rows only, so archiving removes a row from it and moves
    nothing; SQLite uses it only for a query naming the bare column as its condition does."""

    def setUp(self):
        super().setUp()
        for index in range(8):
            self.script.append_message({"role": "user", "content": f'Char says, "line {index}"'})
        self.history = self.script.history

    def assert_live_index_used(self, operation):
        plans = [
            (sql, plan)
            for sql, plan in query_plans(operation, "ai_conversationmessage")
            if " is_live" in sql
        ]
        self.assertTrue(plans, "the operation read the live rows")
        for sql, plan in plans:
            self.assertIn("ai_live_idx", plan, sql)

    def test_the_stores_reads_and_its_archive_use_the_live_index(self):
        history, ndb = self.history, self.script.ndb
        summary = {"role": "system", "content": "[CONTEXT SUMMARY]\nChar counted lines."}
        operations = {
            # Nothing held: both read the table.
            "the tail": lambda: (setattr(ndb, "live_tail", None), history.recent(10**6)),
            "the outline": lambda: (
                setattr(ndb, "live_tail", None),
                history.newest_outline(10**6, 0),
            ),
            "every live message": history.messages,
            "the live messages before one": lambda: history.messages(before=5),
            "the pinned ones": history.pinned_messages,
            "a tool-call unit": lambda: history._unit_at(3),
            "the archive": lambda: history.replace_with_summaries(
                history.messages()[:4], [(summary, history.messages()[:4])]
            ),
        }
        for name, operation in operations.items():
            with self.subTest(name):
                self.assert_live_index_used(operation)


class TestIdsAfterTheLinkMigration(AssistantTestCase):
    @skipUnless(connection.vendor == "sqlite", "SQLite rebuilds the table; others alter it")
    def test_a_new_message_never_takes_the_id_of_one_deleted_before_the_rebuild(self):
        # Migration 0023 rebuilds the table on SQLite, and a copy of its rows would restart
        # the ids at the highest left: journal entries still name the deleted ones.
        for index in range(3):
            self.script.append_message({"role": "user", "content": f'Char says, "{index}"'})
        newest = ConversationMessage.objects.order_by("-id").first().id
        editor = SimpleNamespace(connection=connection)
        ConversationMessage.objects.filter(id=newest).delete()
        LINK_MIGRATION.remember_sequence(None, editor)
        with connection.cursor() as cursor:  # what the rebuild does to the sequence
            cursor.execute(
                "UPDATE sqlite_sequence SET seq = %s WHERE name = %s",
                [newest - 1, ConversationMessage._meta.db_table],
            )
        LINK_MIGRATION.restore_sequence(None, editor)
        self.script.append_message({"role": "user", "content": 'Char says, "later"'})
        self.assertGreater(self.script.history.messages()[-1]["id"], newest)


class TestReplaceWithSummary(AssistantTestCase):
    SUMMARY = {"role": "system", "content": "[CONTEXT SUMMARY]\nChar said hello six times."}

    def setUp(self):
        super().setUp()
        for index in range(6):
            self.script.append_message({"role": "user", "content": f'Char says, "hello {index}"'})
        self.history = self.script.history

    def assert_unchanged(self, before):
        self.assertEqual(self.history.messages(), before)
        self.assertEqual(ConversationMessage.objects.filter(is_live=False).count(), 0)
        self.assertEqual(self.history.totals()[1], 6)

    def test_the_run_is_archived_and_the_totals_follow(self):
        before = self.history.messages()
        (summary,) = self.history.replace_with_summaries(before[:4], [(self.SUMMARY, before[:4])])
        live = self.history.messages()
        self.assertEqual([m["id"] for m in live], [summary["id"]] + [m["id"] for m in before[4:]])
        self.assertEqual(
            self.history.totals(),
            (sum(m["token_count"] for m in live), 3),
        )
        self.assertEqual(self.history.archived_by(summary["id"]), before[:4])

    def test_deleting_a_summary_leaves_no_link_to_it(self):
        # The link has no constraint in the database (a compaction's archiving would pay
        # for it row by row): Django clears it.
        before = self.history.messages()
        (summary,) = self.history.replace_with_summaries(before[:4], [(self.SUMMARY, before[:4])])
        ConversationMessage.objects.filter(id=summary["id"]).delete()
        self.assertEqual(self.history.archived_by(summary["id"]), [])
        archived = ConversationMessage.objects.filter(is_live=False)
        self.assertEqual([row.replaced_by_id for row in archived], [None] * 4)

    def test_two_summaries_each_link_the_messages_they_replace(self):
        before = self.history.messages()
        odd, even = before[0:4:2], before[1:4:2]
        first, second = self.history.replace_with_summaries(
            before[:4], [(self.SUMMARY, odd), ({**self.SUMMARY, "content": "other"}, even)]
        )
        live = self.history.messages()
        self.assertEqual([m["id"] for m in live[:2]], [first["id"], second["id"]])
        self.assertEqual(self.history.archived_by(first["id"]), odd)
        self.assertEqual(self.history.archived_by(second["id"]), even)
        self.assertEqual(self.history.totals(), (sum(m["token_count"] for m in live), 4))

    def test_the_smaller_audience_first_still_gets_its_own_messages(self):
        before = self.history.messages()
        first, second = self.history.replace_with_summaries(
            before[:4],
            [(self.SUMMARY, before[:1]), ({**self.SUMMARY, "content": "b"}, before[1:4])],
        )
        self.assertEqual(self.history.archived_by(first["id"]), before[:1])
        self.assertEqual(self.history.archived_by(second["id"]), before[1:4])
        self.assertEqual(self.history.totals()[1], 4)

    def test_messages_appended_after_the_run_was_read_stay_live(self):
        read_at = self.history.newest_outline(0, 0).revision
        before = self.history.messages()
        late = self.script.append_message({"role": "user", "content": 'Char says, "late"'})
        (summary,) = self.history.replace_with_summaries(
            before[:4], [(self.SUMMARY, before[:4])], read_at
        )
        live = self.history.messages()
        expected = [summary["id"]] + [m["id"] for m in before[4:]] + [late["id"]]
        self.assertEqual([m["id"] for m in live], expected)
        self.assertEqual(self.history.totals(), (sum(m["token_count"] for m in live), 4))
        self.assertEqual(self.history.archived_by(summary["id"]), before[:4])

    def test_a_run_read_at_the_current_revision_is_not_read_again(self):
        read_at = self.history.newest_outline(0, 0).revision
        before = self.history.messages()
        with CaptureQueriesContext(connection) as queries:
            (summary,) = self.history.replace_with_summaries(
                before[:4], [(self.SUMMARY, before[:4])], read_at
            )
        self.assertFalse([q for q in queries if q["sql"].startswith("SELECT id, token_count")])
        self.assertEqual(self.history.archived_by(summary["id"]), before[:4])
        live = self.history.messages()
        self.assertEqual(self.history.totals(), (sum(m["token_count"] for m in live), 3))

    def test_a_run_that_is_no_longer_live_is_refused_and_nothing_changes(self):
        before = self.history.messages()
        with self.subTest("a message is missing from the run"):
            with self.assertRaisesRegex(HistoryChanged, "no longer the live ones"):
                self.history.replace_with_summaries(
                    [before[0], before[2]], [(self.SUMMARY, [before[0], before[2]])]
                )
            self.assert_unchanged(before)
        with self.subTest("part of the run was compacted meanwhile"):
            stale = self.history.messages()[:4]
            self.history.replace_with_summaries(stale[:2], [(self.SUMMARY, stale[:2])])
            after_first = self.history.messages()
            with self.assertRaisesRegex(HistoryChanged, "no longer the live ones"):
                self.history.replace_with_summaries(stale, [(self.SUMMARY, stale)])
            self.assertEqual(self.history.messages(), after_first)
        with self.subTest("the revision it was read at is no longer the counter's"):
            read_at = self.history.newest_outline(0, 0).revision
            stale = self.history.messages()[:3]
            self.history.replace_with_summaries(stale[1:], [(self.SUMMARY, stale[1:])])
            after_second = self.history.messages()
            with self.assertRaisesRegex(HistoryChanged, "no longer the live ones"):
                self.history.replace_with_summaries(stale, [(self.SUMMARY, stale)], read_at)
            self.assertEqual(self.history.messages(), after_second)
