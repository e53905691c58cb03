"""Pre-compaction fact extraction: entry conditions, the signal, stop conditions, results."""

from django.test import override_settings

from ai.helpers.entity_context import entity_profiles
from ai.helpers.journal import credited, journal_entries
from ai.prompt_contexts import DEFAULT_PRE_COMPACTION_PROMPT
from ai.sleep.extraction import EXTRACTION_INSTRUCTION, run_pre_compaction_extraction

from .support import AssistantTestCase, During, ScriptedLLM, wait_for
from .test_context_compaction import FACTS, fill

JOURNAL = ("add_journal_entry", {"content": "Char buried 40 gold coins in Mirkwood"})


class ExtractionTestCase(AssistantTestCase):
    def extract(self, **kwargs):
        return wait_for(run_pre_compaction_extraction(self.script, self.assistant, **kwargs))


class TestEntryConditions(ExtractionTestCase):
    def test_disabled(self):
        fill(self.script)
        self.script.set_config("pre_compact_extraction_enabled", False)
        result = self.extract()
        self.assertEqual((result["success"], result["reason"]), (False, "extraction disabled"))

    def test_needs_at_least_five_messages(self):
        fill(self.script, FACTS[:2])
        self.assertEqual(self.extract()["reason"], "fewer than 5 messages")
        fill(self.script, FACTS[2:3], replies=False)
        self.assertNotIn("reason", self.extract())


class TestOfflineExtraction(ExtractionTestCase):
    def test_journals_one_fact_per_iteration_naming_its_message_then_noops(self):
        fill(self.script, FACTS[:3])
        result = self.extract()
        self.assertEqual(
            result,
            {
                "success": True,
                "facts_recorded": 3,
                "iterations": 4,
                "stop_reason": "noop",
                "audiences": 1,
                "text_tool_calls": 0,
                "malformed_tool_calls": [],
                "tools_called": ["add_journal_entry"] * 3 + ["noop"],
            },
        )
        entries = journal_entries(self.assistant)
        self.assertEqual(
            entries[0]["content"],
            "Char said: I buried 40 gold coins under the old oak in Mirkwood.",
        )
        self.assertEqual(entries[0]["source_type"], "pre_compaction")
        first_message = self.script.conversation_history[0]
        self.assertEqual(entries[0]["source_message_ids"], [first_message["id"]])

    def test_entity_observations_name_their_source_message_too(self):
        fill(self.script, FACTS[:3])
        observe = (
            "update_entity_observation",
            {"entity": "Char", "observation": "Char buried 40 gold coins under the old oak."},
        )
        with ScriptedLLM([observe], [("noop", {})]) as llm:
            self.script.set_config("llm_model", llm.model)
            self.extract()
        profile = entity_profiles(self.assistant)[self.char1.dbref]
        first_message = self.script.conversation_history[0]
        self.assertEqual(profile["observations"][0]["source_message_ids"], [first_message["id"]])

    def test_the_iteration_limit_holds_and_sleep_defaults_to_five(self):
        fill(self.script)
        self.assertEqual(self.extract(max_iterations=3)["iterations"], 3)
        self.assertEqual(len(journal_entries(self.assistant)), 3)
        result = self.extract()
        self.assertEqual((result["iterations"], result["stop_reason"]), (5, "max_iterations"))
        self.assertEqual(len(journal_entries(self.assistant)), 8)

    def test_a_later_extraction_is_told_what_the_history_gave_the_journal_already(self):
        fill(self.script, FACTS[:3])
        self.extract()
        with ScriptedLLM([("noop", {})]) as llm:
            self.script.set_config("llm_model", llm.model)
            self.extract()
        instruction = llm.calls[0][-1]["content"]
        self.assertIn("Already saved (do not save these again):", instruction)
        for entry in journal_entries(self.assistant):
            self.assertIn(f"- {entry['content']}", instruction)
        self.assertEqual(len(journal_entries(self.assistant)), 3)

    def test_the_configured_limit_governs_whatever_the_per_tick_limit(self):
        fill(self.script, FACTS * 2)
        self.script.set_config("pre_compact_max_iterations", 8)
        self.script.set_config("execution_config", {"max_iterations_per_tick": 2})
        result = self.extract()
        self.assertEqual((result["iterations"], result["stop_reason"]), (8, "max_iterations"))
        self.assertEqual(result["facts_recorded"], 8)


class TestStopConditionsAndSignal(ExtractionTestCase):
    def setUp(self):
        super().setUp()
        fill(self.script, FACTS[:3])

    def run_scripted(self, *steps, **kwargs):
        with ScriptedLLM(*steps) as llm:
            self.script.set_config("llm_model", llm.model)
            return self.extract(**kwargs), llm

    def test_noop(self):
        result, _ = self.run_scripted([JOURNAL], [("noop", {})])
        self.assertEqual((result["stop_reason"], result["facts_recorded"]), ("noop", 1))

    def test_no_tool_call(self):
        result, _ = self.run_scripted("I have nothing to add.")
        self.assertEqual((result["stop_reason"], result["iterations"]), ("no_tool_call", 1))

    def test_a_non_journal_tool_stops_without_running(self):
        result, _ = self.run_scripted([("say", {"message": "hi"})])
        self.assertEqual((result["stop_reason"], result["facts_recorded"]), ("tool_not_allowed", 0))

    def test_the_custom_prompt_replaces_the_default_one(self):
        _, llm = self.run_scripted([("noop", {})])
        self.assertEqual(llm.calls[0][0]["content"], DEFAULT_PRE_COMPACTION_PROMPT)
        self.script.set_config("pre_compact_prompt", "Journal only the passwords.")
        _, llm = self.run_scripted([("noop", {})])
        sent = llm.calls[0]
        self.assertEqual(sent[0], {"role": "system", "content": "Journal only the passwords."})
        self.assertNotIn(DEFAULT_PRE_COMPACTION_PROMPT, [m.get("content") for m in sent])
        self.assertEqual(sent[-1], {"role": "user", "content": EXTRACTION_INSTRUCTION})
        self.assertIn("Mirkwood", " ".join(m.get("content") or "" for m in sent))

    def signal(self):
        return self.script.context_signals()["pre_compaction"]

    def test_the_signal_is_set_during_extraction_and_cleared_after(self):
        during = During(self.signal, "late answer")
        self.run_scripted(during)
        self.assertIs(during.result(), True)
        self.assertIs(self.signal(), False)

    @override_settings(AI_LLM_MAX_RETRIES=0)
    def test_the_signal_is_cleared_on_failure_too(self):
        result, _ = self.run_scripted(ValueError("model down"))
        self.assertFalse(result["success"])
        self.assertEqual(result["stop_reason"], "llm_error")
        self.assertIs(self.signal(), False)

    def test_the_signal_is_cleared_when_the_loop_raises(self):
        from unittest.mock import patch

        with patch("ai.sleep.extraction.run_react_loop", side_effect=RuntimeError("bug")):
            with patch("ai.sleep.extraction.logger.log_trace"):
                result = self.extract()
        self.assertEqual(result["reason"], "extraction failed: bug")
        self.assertIs(self.signal(), False)

    def test_a_reload_during_extraction_leaves_no_signal_set(self):
        from evennia.scripts.models import ScriptDB

        def reload():
            # A reload ends the process and the extraction with it: the new process starts
            # every script (at_server_start) with nothing in ndb.
            self.script.ndb.extracting = None
            ScriptDB.objects.update_scripts_after_server_start()
            return self.signal()

        during = During(reload, "late answer")
        self.run_scripted(during)
        self.assertIs(during.result(), False)

    def test_a_second_extraction_while_one_runs_is_refused(self):
        during = During(
            lambda: run_pre_compaction_extraction(self.script, self.assistant), "late answer"
        )
        self.run_scripted(during, [("noop", {})])
        self.assertEqual(during.result()["reason"], "an extraction is already running")
        self.assertFalse(self.script.ndb.extracting)


class TestFactsInAPlayersWords(ExtractionTestCase):
    def test_a_fact_in_the_first_person_is_credited_to_the_player_who_said_it(self):
        fill(self.script, FACTS[:3])
        mine = "I promised Char2 to deliver 12 iron ingots on Friday."
        steps = [
            [("add_journal_entry", {"content": mine})],
            [("add_journal_entry", {"content": "Char2 said the cellar password is swordfish."})],
            # A model that answers in prose repeats the players' words as they were said.
            "- My horse is called Thunder.\n- I buried 40 gold coins under the old oak.",
        ]
        fill(self.script, FACTS[3:4])
        with ScriptedLLM(*steps) as llm:
            self.script.set_config("llm_model", llm.model)
            self.extract()
        entries = [entry["content"] for entry in journal_entries(self.assistant)]
        # Read later, an uncredited "I" would be the assistant's own promise.
        self.assertIn(f"Char said: {mine}", entries)
        self.assertIn("Char2 said the cellar password is swordfish.", entries)
        self.assertIn("Char2 said: My horse is called Thunder.", entries)
        self.assertIn("Char said: I buried 40 gold coins under the old oak.", entries)

    def test_words_credited_to_the_wrong_player_are_journaled_as_the_speakers(self):
        fill(self.script, FACTS[:3])
        wrong = "Char: The password for the cellar door is swordfish."
        fill(self.script, FACTS[3:4])
        with ScriptedLLM([("add_journal_entry", {"content": wrong})], [("noop", {})]) as llm:
            self.script.set_config("llm_model", llm.model)
            self.extract()
        entries = [entry["content"] for entry in journal_entries(self.assistant)]
        self.assertEqual(entries, ["Char2: The password for the cellar door is swordfish."])

    def test_words_already_credited_are_not_credited_again(self):
        said = {"id": 7, "role": "user", "content": 'Char whispers to you, "I sold my mare."'}
        entry = 'Remember this: Char whispers to you, "I sold my mare."'
        self.assertEqual(credited(entry, [said]), entry)
        self.assertEqual(credited("I sold my mare.", [said]), "Char said: I sold my mare.")
