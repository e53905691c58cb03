"""A compaction reads the messages it replaces off the reactor, a page at a time; a tick
meets a queue another connection has locked."""

import threading
from unittest import skipUnless
from unittest.mock import patch

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from twisted.internet import reactor
from twisted.internet.threads import blockingCallFromThread

from ai.commands.compaction import compaction_running
from ai.history import ConversationHistory
from ai.models import ConversationMessage, PendingEvent
from ai.sleep.compaction import compact_conversation_history
from ai.utils.message_format import is_summary

from .support import AssistantTransactionTestCase, ScriptedLLM, store_window, wait_for

LINES = [f'Char says, "Line {number}: the {number}th lantern is lit."' for number in range(24)]


class TestCompactionReadsOffTheReactor(AssistantTransactionTestCase):
    """Outside a transaction, as in a server (a test case's own would hide the rows)."""

    def setUp(self):
        super().setUp()
        store_window(self.script, 1000)
        self.script.set_config("compact_preserve_window", 4)
        for line in LINES:
            self.script.append_message({"role": "user", "content": line})
        self.pages = []
        self.during_read = None
        read = ConversationHistory._read

        def paged_read(store, condition, params, limit=None):
            page = read(store, condition, params, limit)
            if threading.current_thread() is not threading.main_thread():
                self.pages.append(len(page))
                if len(self.pages) == 2 and self.during_read:
                    blockingCallFromThread(reactor, self.during_read)
            return page

        patcher = patch.object(ConversationHistory, "_read", paged_read)
        patcher.start()
        self.addCleanup(patcher.stop)

    def compact(self):
        with ScriptedLLM("- Char said the lanterns are lit, one by one.") as llm:
            self.script.set_config("compact_model", llm.model)
            with patch("ai.history.READ_PAGE", 7):
                with CaptureQueriesContext(connection) as reactor_queries:
                    result = wait_for(
                        compact_conversation_history(self.script, self.assistant, force=True)
                    )
        return result, llm, reactor_queries

    def test_the_old_messages_are_read_in_a_thread_in_pages_and_all_summarized(self):
        running = []  # what a builder's aicompact or undo would be told meanwhile
        self.during_read = lambda: running.append(compaction_running(self.script))
        result, llm, reactor_queries = self.compact()
        self.assertEqual(running, [True])
        self.assertTrue(result["success"], result)
        self.assertEqual(result["compacted_messages"], 20)
        self.assertEqual(self.pages, [7, 7, 6])
        # Not a row of them was read on the reactor's connection.
        self.assertFalse([q for q in reactor_queries if "ORDER BY position, id" in q["sql"]])
        sent = " ".join(call[-1]["content"] for call in llm.calls)
        self.assertIn("Line 0:", sent)
        self.assertIn("Line 19:", sent)
        history = self.script.conversation_history
        self.assertTrue(is_summary(history[0]))
        self.assertEqual([m["content"] for m in history[1:]], LINES[20:])
        self.assertEqual(ConversationMessage.objects.filter(is_live=False).count(), 20)

    def test_a_pin_made_while_the_pages_are_read_stops_the_compaction_and_nothing_is_lost(self):
        first = self.script.conversation_history[0]
        self.during_read = lambda: self.script.history.set_pinned([first["id"]])
        result, _, _ = self.compact()
        self.assertFalse(result["success"])
        self.assertIn("no longer the live ones", result["error"])
        history = self.script.conversation_history
        self.assertEqual([m["content"] for m in history], LINES)
        self.assertTrue(history[0].get("pinned"))

    def test_a_line_heard_while_the_pages_are_read_stays_after_the_summary(self):
        late = {"role": "user", "content": 'Char2 says, "A late line."'}
        self.during_read = lambda: self.script.append_message(late)
        result, _, _ = self.compact()
        self.assertTrue(result["success"], result)
        history = self.script.conversation_history
        self.assertEqual(
            [m["content"] for m in history[1:]], [*LINES[20:], 'Char2 says, "A late line."']
        )


@skipUnless(connection.vendor == "sqlite", "SQLite's shared-cache table lock")
class TestAnEventWhileTheDatabaseIsLocked(AssistantTransactionTestCase):
    def test_a_locked_queue_fails_the_tick_and_keeps_the_line_for_the_next(self):
        self.char1.execute_cmd("say the gate opens at dawn")
        locked, release, done = threading.Event(), threading.Event(), threading.Event()

        def hold_the_queue():  # another connection reading the queue in a transaction
            with transaction.atomic():
                list(PendingEvent.objects.all())
                locked.set()
                release.wait()
            connection.close()
            done.set()

        threading.Thread(target=hold_the_queue, daemon=True).start()
        locked.wait()
        try:
            with patch("ai.assistant_script.logger.log_trace"):
                self.assertEqual(self.tick()["status"], "error")
        finally:
            release.set()
            done.wait()
        self.assertEqual(self.script.conversation_history, [])
        self.assertEqual(self.tick()["event"]["text"], "the gate opens at dawn")
