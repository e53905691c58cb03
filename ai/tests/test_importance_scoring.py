"""Importance scores: lasting facts outrank small talk, and the model may weigh in asleep."""

from django.test import override_settings

from ai.helpers.journal import add_entry
from ai.importance_scoring import heuristic_importance, score_entries_with_model
from ai.models import JournalEntry

from .support import AssistantTestCase, ScriptedLLM, wait_for

PASSWORD = "Char said: the vault password is swordfish."
GREETING = "Char said: Hello Helper!"


class TestHeuristicImportance(AssistantTestCase):
    def test_a_password_fact_scores_above_a_greeting(self):
        self.assertGreater(
            heuristic_importance(PASSWORD, "conversation"),
            heuristic_importance(GREETING, "conversation") + 3,
        )

    def test_concrete_facts_rise_and_small_talk_falls_from_the_writers_importance(self):
        for fact in (
            "Bob owes Dana 5 gold by Friday.",
            "Dana promised to guard the bridge.",
            "The key is buried beneath the old oak.",
            "Dana never drinks wine.",
            "Char's sword is Dawnbringer.",
        ):
            self.assertGreater(heuristic_importance(fact, "conversation"), 5, fact)
        for chatter in ("Thanks!", "Nice weather today.", "Dana greeted me.", "Bob said hi."):
            self.assertLess(heuristic_importance(chatter, "conversation"), 4, chatter)

    def test_the_score_stays_within_0_and_10(self):
        self.assertEqual(heuristic_importance("Secret code 12: Bob promised never", "x", 10), 10)
        self.assertEqual(heuristic_importance("Hi, thanks!", "conversation", 1), 0)

    def test_every_new_entry_is_stored_with_its_heuristic_score(self):
        entry = add_entry(self.assistant, PASSWORD, "conversation", 6, ["vault"])
        row = JournalEntry.objects.get(entry_id=entry["id"])
        self.assertEqual(row.score, heuristic_importance(PASSWORD, "conversation", 6, ["vault"]))


@override_settings(AI_LLM_MAX_RETRIES=0)
class TestModelScoring(AssistantTestCase):
    def setUp(self):
        super().setUp()
        self.script.set_config("importance_model_scoring", True)
        self.password = add_entry(self.assistant, PASSWORD, "conversation")["id"]
        self.greeting = add_entry(self.assistant, GREETING, "conversation")["id"]

    def rows(self):
        return {row.entry_id: row for row in JournalEntry.objects.filter(db_object=self.assistant)}

    def score(self, *steps, limit=10):
        with ScriptedLLM(*steps) as llm:
            self.script.set_config("llm_model", llm.model)
            result = wait_for(score_entries_with_model(self.script, self.assistant, limit))
        self.llm = llm
        return result

    def assert_unchanged(self, before):
        for entry_id, row in self.rows().items():
            self.assertEqual(row.score, before[entry_id].score)
            self.assertFalse(row.model_scored)

    def test_a_fenced_json_answer_scores_each_entry_once(self):
        before = self.rows()
        answer = f'Sure!\n```json\n{{"{self.password}": 9, "{self.greeting}": 1}}\n```'
        result = self.score(answer)
        self.assertEqual(result, {"scored": 2, "entry_ids": [self.greeting, self.password]})
        rows = self.rows()
        self.assertEqual(rows[self.password].score, round((before[self.password].score + 9) / 2, 1))
        self.assertEqual(rows[self.greeting].score, round((before[self.greeting].score + 1) / 2, 1))
        self.assertTrue(all(row.model_scored for row in rows.values()))
        self.assertIn(PASSWORD, str(self.llm.calls[0]))
        again = self.score("never asked")
        self.assertTrue(again["skipped"])
        self.assertEqual(self.llm.calls, [])

    def test_bad_values_and_unknown_ids_are_ignored(self):
        answer = f'{{"{self.password}": 8, "{self.greeting}": "high", "journal_x": 5}}'
        result = self.score(answer)
        self.assertEqual(result["entry_ids"], [self.password])
        self.assertFalse(self.rows()[self.greeting].model_scored)

    def test_a_garbage_answer_changes_nothing(self):
        before = self.rows()
        result = self.score("They all seem rather important to me.")
        self.assertEqual(result["scored"], 0)
        self.assertIn("no readable score", result["error"])
        self.assert_unchanged(before)

    def test_a_failed_call_changes_nothing(self):
        before = self.rows()
        result = self.score(ValueError("model down"))
        self.assertEqual(result["scored"], 0)
        self.assertIn("api_error", result["error"])
        self.assert_unchanged(before)

    def test_only_the_newest_entries_up_to_the_limit_are_sent(self):
        self.score(f'{{"{self.greeting}": 2}}', limit=1)
        self.assertNotIn(PASSWORD, str(self.llm.calls[0]))

    def test_off_unless_enabled(self):
        self.script.set_config("importance_model_scoring", False)
        self.assertTrue(self.score("never asked")["skipped"])
        self.assertEqual(self.llm.calls, [])

    def test_the_offline_engine_rates_a_password_above_a_greeting(self):
        self.script.set_config("llm_model", "offline/assistant")
        result = wait_for(score_entries_with_model(self.script, self.assistant, 10))
        self.assertEqual(result["scored"], 2)
        rows = self.rows()
        self.assertGreater(rows[self.password].score, rows[self.greeting].score + 3)
