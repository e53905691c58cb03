"""The journal's and the profiles' tables: the seeds' formats kept, old attributes moved in."""

import importlib
from unittest.mock import patch

from django.apps import apps

from ai.helpers.entity_context import entity_profiles, observations_for
from ai.helpers.journal import (
    add_entry,
    count_entries,
    find_same,
    journal_entries,
    listed,
    search_entries,
)

from .support import AssistantTestCase

MIGRATION = importlib.import_module("ai.migrations.0004_journal_table")
PROFILES_MIGRATION = importlib.import_module("ai.migrations.0005_entity_observations")


class TestJournalTable(AssistantTestCase):
    def test_entries_keep_the_seeds_format(self):
        entry = add_entry(self.assistant, "Bob runs the forge.", "conversation", 6, ["bob"])
        self.assertEqual(
            set(entry),
            {
                "id",
                "timestamp",
                "content",
                "source_type",
                "importance",
                "tags",
                "source_message_ids",
            },
        )
        self.assertEqual(journal_entries(self.assistant), [entry])
        self.assertEqual(count_entries(self.assistant), 1)

    def test_ids_stay_unique_within_one_journal_only(self):
        first = add_entry(self.assistant, "One.", "conversation", entry_id="compact_x")
        second = add_entry(self.assistant, "Two.", "conversation", entry_id="compact_x")
        self.assertEqual((first["id"], second["id"]), ("compact_x", "compact_x_2"))
        other = add_entry(self.char1, "Three.", "conversation", entry_id="compact_x")
        self.assertEqual(other["id"], "compact_x")
        more = [
            add_entry(self.assistant, f"{n}.", "conversation", entry_id="compact_x")
            for n in range(10)
        ]
        self.assertEqual([entry["id"] for entry in more], [f"compact_x_{n}" for n in range(3, 13)])

    def test_search_finds_by_word_by_substring_and_by_tag(self):
        add_entry(self.assistant, "Char's sword is Dawnbringer.", "conversation", tags=["arms"])
        add_entry(self.assistant, "The ferry leaves at nine.", "conversation")
        self.assertEqual(len(search_entries(self.assistant, "sword")), 1)
        self.assertEqual(len(search_entries(self.assistant, "DAWN")), 1)
        self.assertEqual(len(search_entries(self.assistant, "arms")), 1)
        self.assertEqual(search_entries(self.assistant, "dragons"), [])

    def test_words_of_any_script_are_found_as_they_were_written(self):
        # A word is stored as written (the words go to the database in one parameter).
        add_entry(
            self.assistant, "Zoë keeps the café by the 𝐀𝐁𝐂 sign; 東京都 is far.", "conversation"
        )
        add_entry(self.assistant, "Nothing here but the ferry.", "conversation")
        for word in ("zoë", "café", "東京都", "𝐀𝐁𝐂"):
            with self.subTest(word=word):
                (found,) = search_entries(self.assistant, f"where is {word} now please")
                self.assertIn("café", found["content"])

    def test_a_rare_word_is_found_among_many_entries_sharing_a_common_one(self):
        for number in range(510):  # more than a word may hold to find candidates by
            add_entry(self.assistant, f"Guard {number} stands at the north gate.", "conversation")
        add_entry(self.assistant, "The ferry leaves from the north gate at nine.", "conversation")
        best = search_entries(self.assistant, "When does the ferry at the north gate leave?", 1)
        self.assertEqual(best[0]["content"], "The ferry leaves from the north gate at nine.")
        newest = search_entries(self.assistant, "Who stands at the north gate?", 2)
        self.assertEqual(len(newest), 2, "common words alone still find entries")

    def test_when_every_word_is_common_the_rarest_finds_the_candidates(self):
        # "xray" is the rarer, though its newest holders do not reach as far back as
        # "yankee"'s: it is counted, not guessed.
        with patch("ai.helpers.journal._COMMON_WORD", 5):
            for number in range(16):
                add_entry(self.assistant, f"Yankee {number}.", "conversation")
            for number in range(7):
                add_entry(self.assistant, f"Xray {number}.", "conversation")
            best = search_entries(self.assistant, "yankee xray", 1)
        self.assertEqual(best[0]["content"], "Xray 6.")

    def test_a_repeat_is_found_whatever_its_case_and_end_stop(self):
        add_entry(self.assistant, "Bob runs the forge.", "conversation")
        self.assertIsNotNone(find_same(self.assistant, "bob runs  the FORGE"))
        self.assertIsNone(find_same(self.assistant, "Bob runs the mill."))


class TestJournalListing(AssistantTestCase):
    """``listed``: each entry on one line; a synthesis as what its compaction kept anew."""

    def synthesis(self, text, audience=None):
        return add_entry(
            self.assistant, f"[CONTEXT SYNTHESIS]\n{text}", "compaction", 7, audience=audience
        )

    def test_a_prose_synthesis_is_listed_by_the_sentences_the_one_before_did_not_hold(self):
        notes = add_entry(self.assistant, "Char said: the mill\nis closed.", "conversation")
        first = self.synthesis("Char hid the key under the mat. Char2 owes 3 silver.")
        second = self.synthesis(
            "Char hid the key under the mat, and Char2 still owes 3 silver. The ferry to "
            'Laketown leaves at 9.\nKept from what was said:\n- Char2: "The toll is 2 copper."'
            "\nNotes:\n- the oldest messages were archived whole"
        )
        third = self.synthesis("Char hid the key under the mat.")
        self.assertEqual(
            listed([notes, first, second, third]),
            [
                "Char said: the mill / is closed.",
                "[CONTEXT SYNTHESIS] Char hid the key under the mat. / Char2 owes 3 silver.",
                '[CONTEXT SYNTHESIS] new: The ferry to Laketown leaves at 9. / Char2: "The toll '
                'is 2 copper."',
                "[CONTEXT SYNTHESIS] nothing new: Char hid the key under the mat.",
            ],
        )

    def test_a_private_synthesis_is_compared_with_the_one_before_for_the_same_audience(self):
        public = self.synthesis("The ferry to Laketown leaves at 9.")
        private = self.synthesis("Char's vault code is 4417.", audience=[self.char1.dbref])
        later = self.synthesis("The ferry to Laketown leaves at 9. The toll is 2 copper.")
        self.assertEqual(
            listed([public, private, later])[1:],
            [
                "[CONTEXT SYNTHESIS] Char's vault code is 4417.",
                "[CONTEXT SYNTHESIS] new: The toll is 2 copper.",
            ],
        )


class TestOldJournalsMoveIn(AssistantTestCase):
    def test_an_attribute_journal_becomes_rows_and_is_dropped(self):
        old = {
            "entries": [
                {
                    "id": "journal_20260101_120000",
                    "timestamp": "2026-01-01T12:00:00+00:00",
                    "content": "Bob said the password is swordfish.",
                    "source_type": "conversation",
                    "importance": 7,
                    "tags": ["bob"],
                    "source_message_ids": [3],
                },
                {
                    "id": "journal_20260101_120001",
                    "timestamp": "2026-01-01T12:00:01+00:00",
                    "content": "Char whispered the vault code 4417.",
                    "source_type": "conversation",
                    "importance": 5,
                    "tags": [],
                    "audience": ["#6"],
                },
            ],
            "consolidated_entry_ids": ["journal_20260101_120000"],
        }
        self.assistant.attributes.add("journal", old)
        MIGRATION.move_journals(apps, None)
        self.assistant.attributes.reset_cache()
        self.assertIsNone(self.assistant.attributes.get("journal"))
        entries = journal_entries(self.assistant)
        self.assertEqual(
            [(e["id"], e["content"], e.get("audience")) for e in entries],
            [(entry["id"], entry["content"], entry.get("audience")) for entry in old["entries"]],
        )
        self.assertEqual(entries[0]["source_message_ids"], [3])
        self.assertEqual(len(search_entries(self.assistant, "password")), 1)
        self.assertEqual(search_entries(self.assistant, "vault"), [], "still private")
        self.assertEqual(len(search_entries(self.assistant, "vault", audience=["#6"])), 1)


class TestOldProfilesMoveIn(AssistantTestCase):
    def test_an_attribute_profile_becomes_rows_and_is_dropped(self):
        old = {
            self.char1.dbref: {
                "name": "Char",
                "observations": [
                    {"text": "Carries a lantern.", "timestamp": "2026-01-01T12:00:00+00:00"},
                    {"text": "Has a vault.", "timestamp": "", "audience": [self.char1.dbref]},
                ],
                "updated": "2026-01-01T12:00:00+00:00",
            }
        }
        self.assistant.attributes.add("entity_profiles", old)
        PROFILES_MIGRATION.move_profiles(apps, None)
        self.assistant.attributes.reset_cache()
        self.assertIsNone(self.assistant.attributes.get("entity_profiles"))
        profile = entity_profiles(self.assistant)[self.char1.dbref]
        self.assertEqual(profile["name"], "Char")
        self.assertEqual(
            [(o["text"], o.get("audience")) for o in profile["observations"]],
            [("Carries a lantern.", None), ("Has a vault.", [self.char1.dbref])],
        )
        self.assertEqual(
            observations_for(self.assistant, self.char1.dbref, None, 5), ["Carries a lantern."]
        )
