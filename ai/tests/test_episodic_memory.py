"""Episodic memory: old small talk leaves the active journal; conversations are remembered
while they last, each line only for those who may hear it."""

import importlib
from datetime import timedelta

from django.apps import apps
from django.utils import timezone

from ai.helpers.episodic_index import prune_low_importance_entries
from ai.helpers.journal import (
    add_entry,
    journal_entries,
    recent_entries,
    search_entries,
)
from ai.helpers.working_memory import clear_stale_conversations, conversations
from ai.models import JournalEntry, WorkingMemory
from ai.prompt_contexts import CONTEXT_TICK_EVENT, get_context_config
from ai.prompt_rendering import PromptState, render_entity_context

from .support import AssistantTestCase, ScriptedLLM

SCORING_MIGRATION = importlib.import_module("ai.migrations.0010_prune_index_with_age")
CHATTER = "Char said: Hello Helper, nice weather!"
PASSWORD = "Char said: the cellar password is bluebell."


class TestEpisodicPrune(AssistantTestCase):
    def write(
        self, content, days_old=30, consolidated=True, source_type="conversation", importance=5
    ):
        """Journal ``content`` as written ``days_old`` days ago; return its id."""
        entry_id = add_entry(self.assistant, content, source_type, importance)["id"]
        JournalEntry.objects.filter(entry_id=entry_id).update(
            timestamp=timezone.now() - timedelta(days=days_old), consolidated=consolidated
        )
        return entry_id

    def prune(self):
        return prune_low_importance_entries(self.script, self.assistant)

    def test_old_small_talk_leaves_the_active_journal_but_is_kept(self):
        chatter = self.write(CHATTER)
        result = self.prune()
        self.assertEqual(result["archived"], 1)
        self.assertEqual(result["archived_entry_ids"], [chatter])
        self.assertEqual(result["remaining_candidates"], 0)
        self.assertEqual(search_entries(self.assistant, "weather"), [])
        self.assertEqual(search_entries(self.assistant), [])
        self.assertEqual(recent_entries(self.assistant, None, 10), [])
        self.assertEqual(len(search_entries(self.assistant, "weather", include_archived=True)), 1)
        (kept,) = journal_entries(self.assistant)
        self.assertEqual((kept["id"], kept["archived"]), (chatter, True))

    def test_important_unconsolidated_young_and_synthesis_entries_stay(self):
        self.write(PASSWORD)
        self.write(CHATTER, consolidated=False)
        self.write(CHATTER.replace("nice", "lovely"), days_old=2)
        # A synthesis is written with importance 7, as compaction writes it.
        self.write(f"[CONTEXT SYNTHESIS]\n{CHATTER}", source_type="compaction", importance=7)
        self.assertEqual(self.prune()["archived"], 0)
        self.assertEqual(len(search_entries(self.assistant, limit=10)), 4)
        self.assertTrue(all("archived" not in entry for entry in journal_entries(self.assistant)))

    def test_an_entry_moved_in_before_scores_existed_is_scored_then_judged(self):
        chatter, password = self.write(CHATTER), self.write(PASSWORD)
        JournalEntry.objects.update(score=None)
        SCORING_MIGRATION.score_unscored_entries(apps, None)
        self.assertEqual(self.prune()["archived_entry_ids"], [chatter])
        self.assertGreater(JournalEntry.objects.get(entry_id=password).score, 4)

    def test_age_0_disables_the_prune(self):
        self.write(CHATTER)
        self.script.set_config("journal_prune_age", 0)
        self.assertTrue(self.prune()["skipped"])
        self.assertEqual(len(search_entries(self.assistant)), 1)

    def test_one_prune_archives_a_bounded_batch(self):
        self.script.set_config("memory_batch_size", 1)
        for _ in range(7):
            self.write("Char said: hi there!")
        first = self.prune()
        self.assertEqual((first["archived"], first["remaining_candidates"]), (5, 2))
        self.assertEqual(self.prune()["archived"], 2)
        self.assertEqual(self.prune()["archived"], 0)


class TestWorkingMemory(AssistantTestCase):
    def render(self, audience):
        config = get_context_config(CONTEXT_TICK_EVENT, self.script)
        state = PromptState(self.script, self.assistant, config, audience=audience)
        return render_entity_context(state)

    def test_a_conversation_is_rendered_while_the_speaker_is_present(self):
        self.hear("Hello Helper!")
        self.tick()
        self.hear("The ferry leaves at nine.")
        self.tick()
        rendered = self.render(None)
        self.assertRegex(rendered, r"Talking with Char since \d\d:\d\d\.")
        self.assertNotIn("ferry", rendered, "what was said is in the history already")
        self.char1.location = self.room2
        self.assertNotIn("Talking with Char", self.render(None))

    def test_a_whispered_conversation_is_rendered_for_the_whisperer_only(self):
        self.char2.execute_cmd("whisper Helper = The cellar password is bluebell.")
        self.tick()
        self.assertNotIn("Talking with Char2", self.render(None))
        self.assertNotIn("Talking with Char2", self.render([self.char1.dbref]))
        self.assertIn("Talking with Char2 since ", self.render([self.char2.dbref]))

    def test_a_room_prompt_holds_no_whispered_words(self):
        self.char1.execute_cmd("whisper Helper = The cellar password is bluebell.")
        self.tick()
        with ScriptedLLM("Good day.") as llm:
            self.script.set_config("llm_model", llm.model)
            self.hear("Good day, Helper.", self.char2)
            self.tick()
        sent = "\n".join(str(message.get("content")) for message in llm.calls[0])
        self.assertIn("Talking with Char2 since ", sent)
        self.assertNotIn("Talking with Char ", sent)
        self.assertNotIn("bluebell", sent)

    def test_a_stale_conversation_is_cleared_and_a_fresh_one_kept(self):
        self.hear("Hello Helper!")
        self.hear("Hello again.", self.char2)
        self.tick()
        self.tick()
        ttl = self.script.get_config("working_memory_ttl")
        quiet = timezone.now() - timedelta(seconds=ttl + 1)
        WorkingMemory.objects.filter(speaker=self.char1.dbref).update(last_active=quiet)
        self.assertEqual(
            [talk["speaker"] for talk in conversations(self.assistant, None, ttl)],
            [self.char2.dbref],
        )
        result = clear_stale_conversations(self.script, self.assistant)
        self.assertEqual(result, {"cleared": 1, "speakers": ["Char"]})
        self.assertEqual(
            list(WorkingMemory.objects.values_list("speaker", flat=True)), [self.char2.dbref]
        )

    def test_a_line_after_a_long_quiet_starts_a_new_conversation(self):
        self.hear("Hello Helper!")
        self.tick()
        quiet = timezone.now() - timedelta(days=1)
        WorkingMemory.objects.update(last_active=quiet, started_at=quiet)
        self.hear("I am back.")
        self.tick()
        row = WorkingMemory.objects.get()
        self.assertEqual((row.turns, [line["text"] for line in row.recent]), (1, ["I am back."]))
        self.assertGreater(row.started_at, quiet)

    def test_only_the_last_lines_are_kept(self):
        for number in range(7):
            self.hear(f"Line {number}.")
            self.tick()
        row = WorkingMemory.objects.get()
        self.assertEqual(row.turns, 7)
        self.assertEqual([line["text"] for line in row.recent], [f"Line {n}." for n in range(2, 7)])
