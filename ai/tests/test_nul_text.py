"""NUL characters, which PostgreSQL refuses in text and JSON, are stored and read back as
they were said, on every database (``make test-postgres`` runs this on PostgreSQL)."""

import re
from unittest import TestCase

from django.apps import apps
from django.db import connection, models

from ai.fields import ESCAPE, escape_nul, restore_nul
from ai.helpers.entity_context import add_observation, entity_profiles, observations_for
from ai.helpers.journal import add_entry, journal_entries, search_entries
from ai.helpers.memory_links import links_for
from ai.helpers.working_memory import conversations, note_conversation
from ai.history import row_to_message
from ai.models import ConversationMessage, JournalEntry, MemoryLink
from ai.utils.raw_rows import insert_row, select_rows

from .support import AssistantTestCase

# NUL, and the escape character alone, doubled and before a "0" as if escaped.
SAID = f"the vault code is 12\x0034, not {ESCAPE}0 nor {ESCAPE}{ESCAPE}\x00"
# A NUL written in JSON: \u0000 after an even number of backslashes.
JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


class TestEscaping(TestCase):
    def test_every_text_comes_back_and_is_stored_without_nul(self):
        texts = ["", "plain", "\x00", "\x00\x00", ESCAPE, f"{ESCAPE}0", f"\x00{ESCAPE}", SAID]
        for text in texts:
            with self.subTest(text=text):
                self.assertNotIn("\x00", escape_nul(text))
                self.assertEqual(restore_nul(escape_nul(text)), text)
        self.assertIsNone(restore_nul(escape_nul(None)))

    def test_text_written_before_the_escaping_reads_back_unchanged(self):
        for text in ["plain", "a\x00b", f"a lone {ESCAPE} here"]:
            with self.subTest(text=text):
                self.assertEqual(restore_nul(text), text)


class TestNulIsStored(AssistantTestCase):
    def assertNoNulStored(self):
        """Fail if a column of the contrib's tables holds a NUL as stored: in text, or in
        JSON as an unescaped ``\\u0000`` (which SQLite keeps and PostgreSQL refuses)."""
        with connection.cursor() as cursor:
            for model in apps.get_app_config("ai").get_models():
                fields = model._meta.concrete_fields
                columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
                table = connection.ops.quote_name(model._meta.db_table)
                cursor.execute(f"SELECT {columns} FROM {table}")
                for row in cursor.fetchall():
                    for field, value in zip(fields, row):
                        if not isinstance(value, str):
                            continue
                        json = isinstance(field, models.JSONField)
                        nul = JSON_NUL.search(value) if json else "\x00" in value
                        self.assertFalse(nul, f"{model.__name__}.{field.name}: {value!r}")

    def test_history_messages_come_back_unchanged(self):
        call = {"id": "call\x001", "type": "function", "function": {"name": "say"}}
        call["function"]["arguments"] = f'{{"message": "{SAID}"}}'
        messages = [
            {"role": "user", "content": SAID, "metadata": {SAID: [SAID, 1], "speaker": "Char"}},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call\x001", "name": "say\x00", "content": SAID},
        ]
        for message in messages:
            self.script.append_message(message)
        expected = [messages[0], {**messages[1], "metadata": {}}, {**messages[2], "metadata": {}}]
        read = self.script.conversation_history  # read with SQL
        self.script.ndb.live_tail = None  # what a tick reads, read anew with SQL
        recent = self.script.history.recent(10**6)
        orm = [row_to_message(row) for row in ConversationMessage.objects.order_by("id")]
        outline = self.script.history.newest_outline(0, 3)  # read with SQL, without content
        for stored in (read, recent, orm, outline):
            self.assertEqual(len(stored), len(expected))
            keys = ("tool_calls", "tool_call_id") if stored is outline else None
            self.assertEqual(
                [
                    {key: got.get(key) for key in keys or want}
                    for got, want in zip(stored, expected)
                ],
                [{key: want.get(key) for key in keys or want} for want in expected],
            )
        self.assertNoNulStored()

    def test_raw_rows_store_and_read_what_the_orm_does(self):
        call = {"id": f"c{ESCAPE}\x00", "type": "function", "function": {"name": SAID}}
        for tool_calls in (None, [call]):
            values = {
                "db_script_id": self.script.id,
                "position": 7,
                "role": "assistant",
                "content": SAID,
                "name": "say\x00",
                "tool_calls": tool_calls,
                "tool_call_id": f"c{ESCAPE}\x00",
                "metadata": {SAID: [SAID, 1]},
                "token_count": 3,
            }
            ids = [insert_row(ConversationMessage, values)]
            ids.append(ConversationMessage.objects.create(**values).id)
            names = [f.name for f in ConversationMessage._meta.concrete_fields]
            names = [name for name in names if name not in ("id", "created_at")]
            rows = select_rows(ConversationMessage, names, "id IN (%s, %s)", ids, "ORDER BY id")
            orm = ConversationMessage.objects.filter(id__in=ids).order_by("id")
            with self.subTest(tool_calls=tool_calls):
                self.assertEqual(rows, list(orm.values_list(*names)))
                self.assertEqual(rows[0], rows[1])
        self.assertNoNulStored()

    def test_journal_entries_observations_and_memory_links_come_back_unchanged(self):
        entry = add_entry(self.assistant, SAID, "conversation", tags=["vault\x00", ESCAPE])
        self.assertEqual((entry["content"], entry["tags"]), (SAID, ["vault\x00", ESCAPE]))
        (stored,) = journal_entries(self.assistant)
        self.assertEqual((stored["content"], stored["tags"]), (SAID, ["vault\x00", ESCAPE]))
        self.assertEqual(search_entries(self.assistant, "vault code")[0]["content"], SAID)
        self.assertEqual(search_entries(self.assistant, "12\x0034")[0]["content"], SAID)

        add_observation(self.assistant, self.char1, SAID)
        profile = entity_profiles(self.assistant)[self.char1.dbref]
        self.assertEqual(profile["observations"][0]["text"], SAID)
        self.assertEqual(observations_for(self.assistant, self.char1.dbref, None, 5), [SAID])

        links_for(self.assistant, list(JournalEntry.objects.all()))
        self.assertEqual(list(MemoryLink.objects.values_list("text", flat=True)), [SAID])
        self.assertNoNulStored()

    def test_working_memory_keeps_the_lines_heard(self):
        event = {"type": "speech", "speaker": self.char1.dbref, "speaker_name": "Char"}
        note_conversation(self.assistant, {**event, "text": SAID})
        (conversation,) = conversations(self.assistant, None)
        self.assertEqual([line["text"] for line in conversation["heard"]], [SAID])
        self.assertNoNulStored()

    def test_a_tick_that_hears_and_writes_nul_stores_it(self):
        said = "Helper, the vault code is 12\x0034."
        self.tick_on([("add_journal_entry", {"content": said, "tags": ["vault\x00"]})], text=said)
        (conversation,) = conversations(self.assistant, None)
        self.assertEqual([line["text"] for line in conversation["heard"]], [said])
        self.assertIn(said, self.script.conversation_history[-1]["content"])  # the tool's answer
        self.assertIn(said, [entry["content"] for entry in journal_entries(self.assistant)])
        self.assertNoNulStored()
