"""Long-term memory on real Mem0 (local FAISS and embedder): consolidation, recall,
facts that change, privacy, the memory tools and a reload mid-consolidation."""

import shutil
import tempfile
from datetime import timedelta
from importlib import import_module
from unittest.mock import patch

from django.apps import apps as django_apps
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from ai.helpers.entity_context import (
    add_observation,
    entity_profiles,
    observations_for,
    run_entity_consolidation_batch,
)
from ai.helpers.journal import add_entry
from ai.helpers.memory_links import links_for, memory_metadata, memory_namespace, recalled
from ai.models import EntityObservation, JournalEntry, MemoryLink
from ai.semantic_memory import (
    WORKER,
    add_memory,
    delete_memories,
    memory_config,
    open_memory,
    recall,
    search_memories,
    write_store_files,
)
from ai.sleep import run_sleep_tick
from ai.sleep.consolidation import (
    consolidate_memories_to_semantic,
    repair_memory_links,
)
from ai.sleep.record import sleep_record
from ai.tools import ToolContext, execute_tool
from ai.utils.facts import replaces

from .support import AssistantTestCase, ScriptedLLM, make_assistant, query_plans, wait_for

CODE_NOW_1111 = '{"content": "Char\'s vault code is now 1111."}'


def stored_memories(character):
    """Return the texts Mem0 holds in the assistant's namespace."""
    namespace = memory_namespace(character)
    found = wait_for(
        WORKER.call(lambda memory: memory.get_all(filters={"user_id": namespace}, limit=1000))
    )
    return sorted(hit["memory"] for hit in found["results"])


class MemoryTestCase(AssistantTestCase):
    def consolidate(self, batch=20):
        return wait_for(consolidate_memories_to_semantic(self.script, self.assistant, batch))

    def recall(self, query, audience=None, limit=5):
        return wait_for(recall(self.assistant, query, audience, limit))

    def journal(self, text, audience=None):
        return add_entry(self.assistant, text, "conversation", audience=audience)

    def run_tool(self, name, arguments, audience=None):
        context = ToolContext(self.script, self.assistant, "sleep_consolidate", audience=audience)
        call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
        return wait_for(defer_result(execute_tool(call, context)))


class TestConsolidation(MemoryTestCase):
    def test_entries_become_memories_recalled_by_meaning(self):
        self.journal("Dana said the gate password is swordfish.")
        self.journal("Bob owes Dana five gold coins.")
        result = self.consolidate()
        self.assertEqual(result["memories_added"], 2)
        self.assertEqual(result["remaining"], 0)
        found = self.recall("What opens the gate?")
        self.assertIn("swordfish", found[0]["text"])
        self.assertTrue(all(row.consolidated for row in JournalEntry.objects.all()))

    def test_each_memory_is_linked_to_its_entry_and_messages(self):
        entry = add_entry(
            self.assistant, "Bob runs the forge.", "conversation", source_message_ids=[7, 8]
        )
        self.consolidate()
        link = MemoryLink.objects.get(entry__entry_id=entry["id"])
        self.assertTrue(link.memory_id)
        self.assertEqual(link.entry.source_message_ids, [7, 8])

    def test_a_batch_writes_the_index_files_once_and_they_hold_it_all(self):
        store = wait_for(WORKER.call(lambda memory: memory.vector_store))
        if not hasattr(store, "write_files"):
            self.skipTest("files are FAISS's: this store keeps its vectors in a database")
        with patch.object(store, "write_files", wraps=store.write_files) as write_files:
            for number in range(5):
                self.journal(f"Crate {number} holds {number} apples.")
            self.assertEqual(self.consolidate()["memories_added"], 5)
        self.assertEqual(write_files.call_count, 1)
        reopened = open_memory(memory_config())  # what a restarted server reads
        namespace = memory_namespace(self.assistant)
        found = reopened.get_all(filters={"user_id": namespace}, limit=100)["results"]
        self.assertEqual(len(found), 5)

    def test_a_deleted_memory_leaves_the_others_found_by_their_own_words(self):
        store = wait_for(WORKER.call(lambda memory: memory.vector_store))
        if not hasattr(store, "write_files"):
            self.skipTest("the rows are FAISS's: this store keeps its vectors in a database")
        namespace = memory_namespace(self.assistant)
        facts = ["Ada keeps bees.", "Bob runs the forge.", "Cy sails at dawn.", "Di bakes rye."]
        ids = [wait_for(WORKER.call(add_memory, namespace, fact, {})) for fact in facts]
        wait_for(WORKER.call(delete_memories, [ids[1]]))
        wait_for(WORKER.call(write_store_files))

        def best(memory, fact):
            return search_memories(memory, namespace, fact, 1)[0][:2]

        for memory in (None, open_memory(memory_config())):  # the worker's, then reopened
            for memory_id, fact in zip(ids, facts):
                if memory_id == ids[1]:
                    continue
                if memory is None:
                    found = wait_for(WORKER.call(best, fact))
                else:
                    found = best(memory, fact)
                self.assertEqual(found, (memory_id, fact))
        gone = wait_for(WORKER.call(search_memories, namespace, facts[1], 10))
        self.assertNotIn(ids[1], [memory_id for memory_id, _, _ in gone])

    def test_batches_are_bounded_and_resume(self):
        for number in range(5):
            self.journal(f"Crate {number} holds {number} apples.")
        first = self.consolidate(batch=3)
        self.assertEqual((len(first["consolidated_entry_ids"]), first["remaining"]), (3, 2))
        second = self.consolidate(batch=3)
        self.assertEqual((len(second["consolidated_entry_ids"]), second["remaining"]), (2, 0))
        self.assertEqual(len(stored_memories(self.assistant)), 5)
        self.assertTrue(self.consolidate()["skipped"])

    def test_compaction_syntheses_are_consolidated_without_a_memory(self):
        add_entry(self.assistant, "[CONTEXT SYNTHESIS]\nThey talked.", "compaction", max_chars=None)
        result = self.consolidate()
        self.assertEqual(result["memories_added"], 0)
        self.assertEqual(stored_memories(self.assistant), [])

    def test_a_reload_after_the_add_does_not_add_the_memory_twice(self):
        self.journal("The well is dry since spring.")
        rows = list(JournalEntry.objects.all())
        # The interrupted batch: its link was written and Mem0 added the memory, then the
        # server reloaded before the memory id was recorded.
        links, _ = links_for(self.assistant, rows)
        link = links[rows[0].id]
        namespace = memory_namespace(self.assistant)
        wait_for(WORKER.call(add_memory, namespace, link.text, memory_metadata(link)))
        result = self.consolidate()
        self.assertEqual(result["memories_added"], 0)
        self.assertEqual(stored_memories(self.assistant), ["The well is dry since spring."])
        link.refresh_from_db()
        self.assertTrue(link.memory_id)

    def test_memories_of_one_assistant_are_not_recalled_by_another(self):
        other = make_assistant("Sage", self.room1)
        add_entry(other, "The sage hides the key under the bell.", "conversation")
        wait_for(consolidate_memories_to_semantic(other.scripts.all()[0], other, 20))
        self.assertEqual(self.recall("Where is the key hidden?"), [])

    def test_a_memory_of_another_assistant_is_never_shown_and_lookups_use_its_index(self):
        other = make_assistant("Sage", self.room1)
        add_entry(other, "The sage hides the key under the bell.", "conversation")
        wait_for(consolidate_memories_to_semantic(other.scripts.all()[0], other, 20))
        self.journal("The miller hides the flour in the loft.")
        self.consolidate()
        theirs = MemoryLink.objects.get(db_object_id=other.id).memory_id
        mine = MemoryLink.objects.get(db_object_id=self.assistant.id).memory_id
        hits = [(theirs, "The sage hides the key.", 0.9), (mine, "The miller hides it.", 0.8)]
        found = recalled(self.assistant, hits, None, 5)
        self.assertEqual([memory["memory_id"] for memory in found], [mine])
        if connection.vendor == "sqlite":
            # Not every link of the assistant read by the owner index to find two.
            (plan,) = [
                plan
                for sql, plan in query_plans(
                    lambda: recalled(self.assistant, hits, None, 5), "ai_memorylink"
                )
                if "memory_id IN" in sql
            ]
            self.assertIn("memory_id", plan)
            self.assertNotIn("owner", plan)

    def test_a_broken_memory_configuration_fails_clearly_and_changes_nothing(self):
        self.journal("The mill wheel squeaks.")
        with override_settings(AI_MEMORY_CONFIG={"vector_store": {"provider": "no-such-store"}}):
            with self.assertRaises(Exception) as raised:
                self.consolidate()
        self.assertIn("no-such-store", str(raised.exception))
        self.assertFalse(JournalEntry.objects.get().consolidated)
        self.assertEqual(self.consolidate()["memories_added"], 1)


class TestFactsThatChange(MemoryTestCase):
    def test_replacement_is_read_from_the_words(self):
        self.assertTrue(replaces("The gate password is now marmalade.", "The gate password is X."))
        self.assertTrue(replaces("Dana moved to Rivertown.", "Dana lives in Oakvale."))
        self.assertTrue(replaces("Dana paid Bob back.", "Dana owes Bob five gold coins."))
        self.assertTrue(
            replaces("Dana said her favourite colour is green.", "Dana's favourite colour is blue.")
        )
        self.assertFalse(replaces("The vault password is Y.", "The gate password is X."))
        self.assertFalse(replaces("The gate password is X.", "The gate password is X."))
        self.assertFalse(replaces("Bob likes apples.", "Dana likes apples."))

    def test_a_lead_in_says_how_a_fact_changed_not_what_it_is(self):
        self.assertTrue(
            replaces(
                "Things have changed: the mill in Oakvale charges 9 coins a sack.",
                "The mill in Oakvale charges 4 coins a sack.",
            )
        )
        self.assertTrue(
            replaces("Correction: the mill charges 9 coins.", "The mill charges 4 coins.")
        )
        # As a journal entry quotes it: who said it, then the lead-in inside the quotes.
        self.assertTrue(
            replaces(
                "Ada says, 'Things have changed: the mill charges 9 coins.'",
                "Ada says, 'The mill charges 4 coins.'",
            )
        )
        # Without a word of change, another value of an unknown verb is another fact.
        self.assertFalse(replaces("The mill charges 9 coins.", "The mill charges 4 coins."))
        # A colon that holds the value itself is no lead-in.
        self.assertFalse(replaces("The gate code is: X.", "The vault code is Y."))

    def test_two_players_own_things_are_two_subjects(self):
        """Default seed 26: Nils's "My falcon is called Nutmeg." replaced Mabel's "... my
        falcon is called Puddle.", and her falcon's name was lost."""
        aside, own = (
            "Oh, and by the way, my falcon is called Puddle.",
            "My falcon is called Nutmeg.",
        )
        self.assertTrue(replaces(own, aside), "one speaker's: the same falcon")
        self.assertFalse(replaces(own, aside, ("Nils", "Mabel")))
        self.assertTrue(replaces(own, aside, ("Nils", "nils")))
        self.assertFalse(replaces(f"Nils says, '{own}'", f"Mabel says, '{aside}'"))
        # Said of no one's own: the last word on it holds, whoever said it.
        self.assertTrue(
            replaces(
                "Nils says, 'The vault password is now X.'",
                "Mabel says, 'The vault password is Y.'",
            )
        )

    def test_a_fact_changed_twice_is_recalled_current_first_with_its_history(self):
        self.journal("The gate password is swordfish.")
        self.consolidate()
        self.journal("The gate password is now marmalade.")
        self.journal("Bob sells bread at dawn.")
        self.consolidate()
        self.journal("The gate password is now quince.")
        result = self.consolidate()
        self.assertEqual(len(result["superseded"]), 1)
        found = self.recall("gate password")
        self.assertEqual(found[0]["text"], "The gate password is now quince.")
        self.assertIsNone(found[0]["invalid_at"])
        older = {memory["text"]: memory for memory in found[1:] if memory["invalid_at"]}
        self.assertEqual(
            older["The gate password is swordfish."]["superseded_by"],
            "The gate password is now marmalade.",
        )
        self.assertEqual(
            older["The gate password is now marmalade."]["superseded_by"],
            "The gate password is now quince.",
        )

    def test_changes_within_one_batch_are_ordered_by_time(self):
        self.journal("Dana lives in Oakvale.")
        self.journal("Dana moved to Rivertown.")
        self.journal("Dana moved to Lakeside.")
        self.consolidate()
        current = [m["text"] for m in self.recall("Where does Dana live?") if not m["invalid_at"]]
        self.assertEqual(current, ["Dana moved to Lakeside."])

    def test_an_entity_profile_keeps_what_holds_and_tells_what_changed(self):
        for text in ("I live in Oakvale.", "I moved to Rivertown.", "I moved to Lakeside."):
            add_observation(self.assistant, self.char1, text)
        add_observation(self.assistant, self.char1, "I moved to Lakeside.")
        result = run_entity_consolidation_batch(self.script, self.assistant, 20)
        self.assertEqual(len(result["superseded"]), 2)
        self.assertEqual(len(result["merged"]), 1)
        current = observations_for(self.assistant, self.char1.dbref, None, 10)
        self.assertEqual(current, ["I moved to Lakeside."])
        observations = entity_profiles(self.assistant)[self.char1.dbref]["observations"]
        history = {o["text"]: o.get("superseded_by") for o in observations}
        self.assertEqual(history["I live in Oakvale."], "I moved to Rivertown.")
        self.assertEqual(history["I moved to Rivertown."], "I moved to Lakeside.")


class TestPrivateMemories(MemoryTestCase):
    def test_a_whispered_fact_is_recalled_only_for_the_whisperer(self):
        self.journal("Char's locker code is 4471.", audience=[self.char1.dbref])
        self.consolidate()
        self.assertEqual(self.recall("locker code"), [])
        self.assertEqual(self.recall("locker code", audience=[self.char2.dbref]), [])
        found = self.recall("locker code", audience=[self.char1.dbref])
        self.assertIn("4471", found[0]["text"])

    def test_a_whispered_change_does_not_outdate_what_the_room_knows(self):
        self.journal("The gate password is swordfish.")
        self.consolidate()
        self.journal("The gate password is now marmalade.", audience=[self.char1.dbref])
        self.consolidate()
        found = self.recall("gate password")
        self.assertEqual(
            [(m["text"], m["invalid_at"]) for m in found],
            [("The gate password is swordfish.", None)],
        )

    def test_a_line_said_aloud_never_outdates_a_whisper(self):
        """Char whispers a code; Char2 says aloud it changed; a sleep later Char's own
        memory still holds the whispered code as current."""
        self.char1.execute_cmd("whisper Helper = My vault code is 4417.")
        self.tick()
        self.char2.execute_cmd("say Char's vault code is now 1111.")
        self.tick()
        heard_by = {e.content: e.audience for e in JournalEntry.objects.all()}
        self.assertEqual(
            heard_by,
            {
                "Char said: My vault code is 4417.": [self.char1.dbref],
                "Char2 said: Char's vault code is now 1111.": None,
            },
        )
        result = wait_for(run_sleep_tick(self.script, self.assistant))
        self.assertEqual(result["memory_consolidation"]["superseded"], [])
        found = self.recall("vault code", audience=[self.char1.dbref])
        current = {m["text"] for m in found if m["invalid_at"] is None}
        self.assertIn("Char said: My vault code is 4417.", current)
        self.assertTrue(all(m["invalid_at"] is None for m in found), found)

    def test_a_whisper_is_outdated_by_a_later_whisper_of_the_same_listener(self):
        self.journal("Char's vault code is 4417.", audience=[self.char1.dbref])
        self.consolidate()
        self.journal("Char's vault code is now 2020.", audience=[self.char2.dbref])
        self.journal("Char's vault code is now 1111.")
        self.assertEqual(self.consolidate()["superseded"], [])
        self.journal("Char's vault code is now 5555.", audience=[self.char1.dbref])
        self.assertEqual(len(self.consolidate()["superseded"]), 1)
        found = self.recall("vault code", audience=[self.char1.dbref])
        self.assertEqual(
            [m["text"] for m in found if m["invalid_at"] is None][:1],
            ["Char's vault code is now 5555."],
        )
        older = next(m for m in found if m["invalid_at"])
        self.assertEqual(older["text"], "Char's vault code is 4417.")

    def test_whispers_near_a_public_fact_hide_it_neither_from_its_change_nor_recall(self):
        self.journal("The gate password is swordfish.")
        self.consolidate()
        for number in range(30):
            self.journal(f"The gate password is now x{number}.", audience=[f"#{900 + number}"])
        self.consolidate(batch=30)
        self.journal("The gate password is now marmalade.")
        self.assertEqual(len(self.consolidate()["superseded"]), 1)
        found = self.recall("gate password")
        self.assertEqual(
            [(m["text"], m["invalid_at"] is None) for m in found],
            [
                ("The gate password is now marmalade.", True),
                ("The gate password is swordfish.", False),
            ],
        )

    def test_storing_a_fact_aloud_never_tells_that_a_whispered_one_exists(self):
        self.journal("Char's vault code is 4417.", audience=[self.char1.dbref])
        self.consolidate()
        self.journal("Char said aloud that the vault code is now 1111.")
        stored = self.run_tool("store_memory", CODE_NOW_1111)
        self.assertTrue(stored.ok, stored.content)
        self.assertNotIn("replaces", stored.content)
        whispered = self.recall("vault code", audience=[self.char1.dbref])
        self.assertTrue(all(m["invalid_at"] is None for m in whispered), whispered)

    def test_an_observation_made_aloud_never_outdates_a_whispered_one(self):
        add_observation(self.assistant, self.char1, "I live in Oakvale.", [], [self.char1.dbref])
        add_observation(self.assistant, self.char1, "I moved to Rivertown.")
        result = run_entity_consolidation_batch(self.script, self.assistant, 20)
        self.assertEqual(result["superseded"], [])
        self.assertEqual(
            observations_for(self.assistant, self.char1.dbref, [self.char1.dbref], 10),
            ["I live in Oakvale.", "I moved to Rivertown."],
        )

    def test_the_upgrade_restores_whispers_that_a_public_line_outdated(self):
        whisper, now = [self.char1.dbref], timezone.now()
        old, aloud, later = (
            MemoryLink.objects.create(
                db_object=self.assistant,
                memory_id=f"m{n}",
                text=text,
                audience=heard_by,
                valid_from=now + timedelta(minutes=n),
            )
            for n, (text, heard_by) in enumerate(
                [
                    ("Char's vault code is 4417.", whisper),
                    ("Char's vault code is now 1111.", None),
                    ("Char's vault code is now 5555.", whisper),
                ]
            )
        )
        add_observation(self.assistant, self.char1, "I live in Oakvale.", [], whisper)
        add_observation(self.assistant, self.char1, "I moved to Rivertown.")
        first, second = EntityObservation.objects.order_by("id")
        EntityObservation.objects.update(consolidated=True)
        # As an older version left them: outdated by a fact of another audience.
        for row, newer in ((old, aloud), (first, second)):
            type(row).objects.filter(id=row.id).update(
                invalid_at=timezone.now(), superseded_by=newer
            )
        upgrade = import_module("ai.migrations.0015_supersession_within_one_audience")
        upgrade.resettle_supersessions(django_apps, None)
        old.refresh_from_db()
        self.assertEqual((old.superseded_by, old.invalid_at), (later, later.valid_from))
        first.refresh_from_db()
        self.assertEqual((first.superseded_by, first.invalid_at), (None, None))
        self.assertEqual(
            observations_for(self.assistant, self.char1.dbref, whisper, 10),
            ["I live in Oakvale.", "I moved to Rivertown."],
        )

    def test_a_whispered_observation_never_outdates_the_public_profile(self):
        add_observation(self.assistant, self.char1, "I live in Oakvale.")
        add_observation(self.assistant, self.char1, "I moved to Rivertown.", [], [self.char1.dbref])
        run_entity_consolidation_batch(self.script, self.assistant, 20)
        self.assertEqual(
            observations_for(self.assistant, self.char1.dbref, None, 10), ["I live in Oakvale."]
        )


class TestLinkRepair(MemoryTestCase):
    def test_a_link_whose_entry_was_deleted_is_pruned_with_its_memory(self):
        self.journal("The ferry leaves at noon.")
        self.journal("The inn has no rooms left.")
        self.consolidate()
        ferry, inn = MemoryLink.objects.order_by("id")
        JournalEntry.objects.filter(id=ferry.entry_id).delete()  # a builder withdrew it
        result = wait_for(repair_memory_links(self.script, self.assistant, 10))
        self.assertEqual(result["pruned_link_ids"], [ferry.id])
        self.assertEqual(list(MemoryLink.objects.all()), [inn])
        self.assertEqual(stored_memories(self.assistant), ["The inn has no rooms left."])

    def test_a_memory_the_store_lost_is_restored_from_its_link(self):
        self.journal("The ferry leaves at noon.")
        self.consolidate()
        link = MemoryLink.objects.get()
        wait_for(WORKER.call(lambda memory: memory.delete(link.memory_id)))
        result = wait_for(repair_memory_links(self.script, self.assistant, 10))
        self.assertEqual((result["pruned_link_ids"], result["restored_link_ids"]), ([], [link.id]))
        self.assertEqual(stored_memories(self.assistant), ["The ferry leaves at noon."])
        self.assertIn("noon", self.recall("When does the ferry leave?")[0]["text"])
        self.assertNotEqual(MemoryLink.objects.get().memory_id, link.memory_id)

    def test_a_whole_store_lost_comes_back_a_batch_a_tick_and_nothing_is_forgotten(self):
        # As when the game's memory directory was lost, or AI_MEMORY_VECTOR_STORE changed.
        whisperer = [self.char1.dbref]
        for place in ("mill", "inn", "forge"):
            self.journal(f"The {place} opens at dawn.", whisperer if place == "inn" else None)
        self.consolidate()
        lost = tempfile.mkdtemp(prefix="ai-lost-")  # an empty store, on either database
        self.addCleanup(shutil.rmtree, lost)
        with override_settings(AI_MEMORY_VECTOR_STORE="faiss", AI_MEMORY_DIR=lost):
            self.assertEqual(stored_memories(self.assistant), [])
            repair = lambda: wait_for(  # noqa: E731
                repair_memory_links(self.script, self.assistant, 2)
            )
            self.assertEqual([len(repair()["restored_link_ids"]) for _ in range(3)], [2, 1, 0])
            self.assertEqual(MemoryLink.objects.count(), 3)
            self.assertEqual(len(stored_memories(self.assistant)), 3)
            self.assertIn("mill", self.recall("When does the mill open?")[0]["text"])
            heard = [hit["text"] for hit in self.recall("When does the inn open?")]
            self.assertNotIn("The inn opens at dawn.", heard, "a whisper stays private")
            heard = [hit["text"] for hit in self.recall("When does the inn open?", whisperer)]
            self.assertIn("The inn opens at dawn.", heard)

    def test_links_are_checked_one_batch_at_a_time(self):
        for place in ("mill", "inn", "forge", "smithy", "bakery", "chapel", "dock"):
            self.journal(f"The {place} opens at dawn.")
        self.consolidate()
        prune = lambda: wait_for(repair_memory_links(self.script, self.assistant, 1))  # noqa: E731
        self.assertEqual([prune()["checked"] for _ in range(4)], [5, 2, 0, 5])
        self.assertEqual(MemoryLink.objects.count(), 7)

    def test_a_tick_prunes_at_most_one_batch_and_the_rest_follow(self):
        for place in ("mill", "inn", "forge"):
            self.journal(f"The {place} opens at dawn.")
        self.consolidate()
        links = list(MemoryLink.objects.order_by("id").values_list("id", flat=True))
        JournalEntry.objects.all().delete()
        prune = lambda: wait_for(repair_memory_links(self.script, self.assistant, 2))  # noqa: E731
        self.assertEqual(prune()["pruned_link_ids"], links[:2])
        self.assertEqual(len(stored_memories(self.assistant)), 1)
        self.assertEqual(prune()["pruned_link_ids"], links[2:])
        self.assertEqual(stored_memories(self.assistant), [])


class TestRecallInThePrompt(MemoryTestCase):
    def test_a_fact_gone_from_history_and_journal_search_is_recalled(self):
        self.journal("Dana said the gate password is swordfish.")
        self.consolidate()
        self.tick_on("ok", text="Helper, what was the password for the gate?")
        prompt = "\n".join(m["content"] or "" for m in self.llm.calls[0])
        self.assertIn("Things you remember:\n- Dana said the gate password is swordfish.", prompt)
        self.assertEqual(prompt.count("swordfish"), 1)  # not again from the journal

    def test_a_memory_of_messages_the_prompt_still_shows_is_not_repeated(self):
        said = self.script.append_message(
            {"role": "user", "content": 'Dana says, "The gate password is swordfish."'}
        )
        add_entry(
            self.assistant,
            "Dana said the gate password is swordfish.",
            "conversation",
            source_message_ids=[said["id"]],
        )
        self.consolidate()
        self.tick_on("ok", text="Helper, what was the password for the gate?")
        prompt = "\n".join(m["content"] or "" for m in self.llm.calls[0])
        self.assertNotIn("Things you remember", prompt)
        self.assertIn("swordfish", prompt, "the history still says it")

    def test_the_room_is_never_reminded_of_a_whisper(self):
        self.journal("Char's locker code is 4471.", audience=[self.char1.dbref])
        self.consolidate()
        self.tick_on("ok", text="Helper, what is the locker code?")
        prompt = "\n".join(m["content"] or "" for m in self.llm.calls[0])
        self.assertNotIn("4471", prompt)


class TestMemoryTools(MemoryTestCase):
    def test_a_memory_the_journal_does_not_tell_is_refused_with_why(self):
        self.journal("Char said the tailor charges 9 copper for a cloak.")
        self.journal("Char's locker code is 4471.", audience=[self.char1.dbref])
        invented = self.run_tool("store_memory", '{"content": "The tailor charges 100 copper."}')
        self.assertFalse(invented.ok)
        self.assertIn("your journal never mentions 100", invented.content)
        private = self.run_tool("store_memory", '{"content": "Char\'s locker code is 4471."}')
        self.assertFalse(private.ok, "a whisper grounds nothing said aloud")
        self.assertEqual(JournalEntry.objects.filter(source_type="memory").count(), 0)
        told = self.run_tool("store_memory", '{"content": "The tailor charges 9 copper."}')
        self.assertTrue(told.ok, told.content)

    def test_a_memory_crediting_the_wrong_player_is_stored_with_the_one_who_said_it(self):
        said = self.script.history.append(
            {"role": "user", "content": 'Edda says, "I will bring you turnips tomorrow."'}
        )
        chat = self.script.history.append(
            {"role": "user", "content": 'Wynn says, "Lovely weather for the market."'}
        )
        for text, message in [
            ("Edda said: I will bring you turnips tomorrow.", said),
            ("Wynn said the weather is lovely for the market.", chat),
        ]:
            add_entry(self.assistant, text, "conversation", source_message_ids=[message["id"]])
        stored = self.run_tool(
            "store_memory", '{"content": "Wynn promised to bring me turnips tomorrow."}'
        )
        self.assertTrue(stored.ok, stored.content)
        memory = JournalEntry.objects.get(source_type="memory").content
        self.assertIn("Edda", memory)
        self.assertNotIn("Wynn", memory)
        self.assertIn("turnips", stored_memories(self.assistant)[0])

    def test_store_then_recall_and_a_change_reported(self):
        self.journal("Char said the ferry leaves at noon.")
        stored = self.run_tool("store_memory", '{"content": "The ferry leaves at noon."}')
        self.assertTrue(stored.ok, stored.content)
        self.journal("Char said the ferry now leaves at dusk.")
        changed = self.run_tool("store_memory", '{"content": "The ferry now leaves at dusk."}')
        self.assertIn("replaces 1 older fact", changed.content)
        recalled = self.run_tool("recall_memories", '{"query": "When does the ferry leave?"}')
        first, second = recalled.content.splitlines()[:2]
        self.assertEqual(first, "- The ferry now leaves at dusk.")
        self.assertIn("no longer true since", second)

    def test_recall_when_memory_is_off_says_so(self):
        self.script.set_config("memory_enabled", False)
        recalled = self.run_tool("recall_memories", '{"query": "ferry"}')
        self.assertFalse(recalled.ok)
        self.assertIn("off", recalled.content)


def defer_result(outcome):
    from twisted.internet import defer

    return defer.maybeDeferred(lambda: outcome)


class TestDreamingTick(MemoryTestCase):
    def sleep_tick(self):
        return wait_for(run_sleep_tick(self.script, self.assistant))

    def test_the_six_operations_run_in_the_seeds_order_then_compaction(self):
        self.journal("The mill opens at dawn.")
        result = self.sleep_tick()
        self.assertEqual(
            list(result),
            [
                "memory_consolidation",
                "sleep_consolidate",
                "importance_scoring",
                "entity_consolidation",
                "orphaned_link_cleanup",
                "episodic_prune",
                "stale_conversation_cleanup",
                "pre_compaction_extraction",
                "context_compaction",
            ],
        )
        self.assertEqual(result["memory_consolidation"]["memories_added"], 1)
        record = sleep_record(self.script)
        self.assertEqual(record["steps"]["memory_consolidation"]["memories"], 1)

    def test_a_failing_step_is_reported_and_the_next_steps_still_run(self):
        self.journal("The mill opens at dawn.")
        add_observation(self.assistant, self.char1, "I live in Oakvale.")
        add_observation(self.assistant, self.char1, "I moved to Rivertown.")
        broken = {"vector_store": {"provider": "no-such-store"}}
        with override_settings(AI_MEMORY_CONFIG=broken), patch("ai.sleep.logger") as logger:
            result = self.sleep_tick()
        self.assertIn("no-such-store", result["memory_consolidation"]["error"])
        self.assertIn("memory_consolidation", logger.log_trace.call_args.args[0])
        self.assertEqual(len(result["entity_consolidation"]["superseded"]), 1)
        self.assertIn("context_compaction", result)
        self.assertFalse(JournalEntry.objects.get().consolidated, "nothing marked done")

    def test_with_memory_off_mem0_is_left_alone(self):
        self.script.set_config("memory_enabled", False)
        self.journal("The mill opens at dawn.")
        result = self.sleep_tick()
        self.assertTrue(result["memory_consolidation"]["skipped"])
        self.assertTrue(result["orphaned_link_cleanup"]["skipped"])
        self.assertFalse(JournalEntry.objects.get().consolidated)

    def test_the_review_owns_its_ten_iterations_beyond_the_per_tick_cap(self):
        self.journal("The mill opens at dawn.")
        self.assertEqual(self.script.get_config("execution_config")["max_iterations_per_tick"], 5)
        review = [("review_journal", {})]
        with ScriptedLLM(*[review] * 12) as llm:
            self.script.set_config("llm_model", llm.model)
            result = self.sleep_tick()
        self.assertEqual(result["sleep_consolidate"]["iterations"], 10)
        self.assertEqual(len(llm.calls), 10)
        self.script.set_config("context_overrides", {"sleep_consolidate": {"max_iterations": 3}})
        self.journal("The well runs dry in summer.")
        with ScriptedLLM(*[review] * 12) as llm:
            self.script.set_config("llm_model", llm.model)
            self.assertEqual(self.sleep_tick()["sleep_consolidate"]["iterations"], 3)

    def test_the_model_reviews_new_memories_once_per_audience(self):
        self.journal("The mill opens at dawn.")
        self.journal("Char's locker code is 4471.", audience=[self.char1.dbref])
        store = [("store_memory", {"content": "The mill opens at dawn, every day."})]
        with ScriptedLLM(store, [("noop", {})], [("noop", {})]) as llm:
            self.script.set_config("llm_model", llm.model)
            result = self.sleep_tick()
        review = result["sleep_consolidate"]
        self.assertEqual(
            (review["runs"], review["tools_called"]), (2, ["store_memory", "noop", "noop"])
        )
        public, _, private = ("\n".join(m["content"] or "" for m in call) for call in llm.calls)
        self.assertIn("The mill opens at dawn.", public)
        self.assertNotIn("4471", public)
        self.assertIn("4471", private)
        stored = JournalEntry.objects.get(source_type="memory")
        self.assertIsNone(stored.audience, "stored for the room, which heard it")
