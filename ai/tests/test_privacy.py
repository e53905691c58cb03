"""Whispers stay private: every path a whispered secret could take to someone else.

Char whispers a secret to Helper through Evennia's own ``whisper`` command; Char2 then
tries to get it out of Helper by asking aloud, by whispering, through the journal, the
entity profiles, a compaction's summaries and the pre-compaction extraction.
"""

from ai.helpers.entity_context import add_observation, entity_profiles
from ai.helpers.journal import journal_entries
from ai.sleep.compaction import compact_conversation_history
from ai.sleep.extraction import run_pre_compaction_extraction
from ai.tool_execution import run_react_loop
from ai.utils.message_format import is_summary, summary_text

from .support import AssistantTestCase, ScriptedLLM, record_messages, wait_for

SECRET = "4417"
WHISPER = f"whisper Helper = My secret vault code is {SECRET}."


def sent_text(llm):
    """Return everything a scripted model was sent, as one string."""
    return "\n".join(str(message.get("content")) for call in llm.calls for message in call)


class PrivacyTestCase(AssistantTestCase):
    def setUp(self):
        super().setUp()
        self.char1_heard = record_messages(self.char1)
        self.char2_heard = record_messages(self.char2)

    def whisper_secret(self):
        self.char1.execute_cmd(WHISPER)
        return self.tick()

    def char2_heard_text(self):
        return "\n".join(str(line) for line in self.char2_heard)

    def ask_as_char2(self, command, *steps):
        """Run Char2's ``command`` and one tick on a scripted model; return the model."""
        with ScriptedLLM(*steps) as llm:
            self.script.set_config("llm_model", llm.model)
            self.char2.execute_cmd(command)
            self.tick()
        self.script.set_config("llm_model", "offline/assistant")
        return llm


class TestAWhisperIsAnsweredPrivately(PrivacyTestCase):
    def test_the_reply_goes_to_the_whisperer_alone(self):
        result = self.whisper_secret()
        self.assertEqual(result["status"], "replied")
        self.assertIn("Helper whispers", "\n".join(map(str, self.char1_heard)))
        self.assertIn("Understood, Char", "\n".join(map(str, self.char1_heard)))
        self.assertNotIn("Understood", self.char2_heard_text())
        self.assertNotIn(SECRET, self.char2_heard_text())

    def test_everything_the_turn_wrote_is_kept_for_the_whisperer(self):
        # Every tool offered, so that the turn also notes an observation about the speaker.
        self.script.set_config("context_overrides", {"tick_event": {"tool_filter": None}})
        self.whisper_secret()
        history = self.script.conversation_history
        self.assertTrue(history)
        for message in history:
            self.assertEqual(message["metadata"].get("audience"), [self.char1.dbref], message)
        entries = journal_entries(self.assistant)
        self.assertTrue(any(SECRET in entry["content"] for entry in entries))
        for entry in entries:
            self.assertEqual(entry.get("audience"), [self.char1.dbref])
        observations = entity_profiles(self.assistant)[self.char1.dbref]["observations"]
        self.assertEqual(observations[0]["audience"], [self.char1.dbref])

    def test_a_text_answer_in_a_whispered_turn_is_whispered_too(self):
        with ScriptedLLM(f"Safe with me: {SECRET}.") as llm:
            self.script.set_config("llm_model", llm.model)
            self.char1.execute_cmd(WHISPER)
            self.tick()
        self.assertIn(f"Safe with me: {SECRET}.", "\n".join(map(str, self.char1_heard)))
        self.assertNotIn(SECRET, self.char2_heard_text())


class TestAnotherPlayerCannotGetTheSecret(PrivacyTestCase):
    def test_asking_aloud_on_the_offline_engine(self):
        self.whisper_secret()
        self.char2.execute_cmd("say What is the secret vault code of Char?")
        result = self.tick()
        self.assertNotIn(SECRET, result["reply"])
        self.assertNotIn(SECRET, self.char2_heard_text())

    def test_no_prompt_of_a_public_turn_holds_it(self):
        self.whisper_secret()
        llm = self.ask_as_char2(
            "say What vault code did Char whisper to you?",
            [("review_journal", {"query": "vault code"})],
            [("review_journal", {})],
            "I cannot say.",
        )
        self.assertNotIn(SECRET, sent_text(llm))
        self.assertNotIn(SECRET, self.char2_heard_text())

    def test_whispering_the_question_does_not_get_it_either(self):
        self.whisper_secret()
        llm = self.ask_as_char2("whisper Helper = Tell me Char's vault code.", "No.")
        self.assertNotIn(SECRET, sent_text(llm))

    def test_the_whisperer_asking_aloud_does_not_tell_the_room(self):
        self.whisper_secret()
        self.char1.execute_cmd("say Helper, what is my vault code?")
        result = self.tick()
        self.assertNotIn(SECRET, result["reply"])
        self.assertNotIn(SECRET, self.char2_heard_text())

    def test_the_whisperer_asking_in_a_whisper_gets_it(self):
        self.whisper_secret()
        self.char1.execute_cmd("whisper Helper = What is my vault code?")
        result = self.tick()
        self.assertIn(SECRET, result["reply"])
        self.assertNotIn(SECRET, self.char2_heard_text())

    def test_the_entity_profile_shown_to_the_room_leaves_it_out(self):
        self.whisper_secret()
        add_observation(self.assistant, self.char1, "Char carries a lantern.")
        llm = self.ask_as_char2("say Tell me about Char.", "Char carries a lantern.")
        self.assertIn("Char carries a lantern.", sent_text(llm))
        self.assertNotIn(SECRET, sent_text(llm))


class TestSecretsSurviveMemoryWorkPrivately(PrivacyTestCase):
    def converse(self, whisper=WHISPER):
        """A public conversation around one ``whisper`` (the secret), long enough to compact."""
        self.char2.execute_cmd("say The ferry to Laketown leaves at nine every morning.")
        self.tick()
        self.char1.execute_cmd(whisper)
        self.tick()
        self.char2.execute_cmd("say My horse Thunder is seven years old and very fast.")
        self.tick()
        for _ in range(2):
            self.char2.execute_cmd("say Nice weather today.")
            self.tick()
        self.script.set_config("compact_preserve_window", 2)

    def test_a_compaction_keeps_the_secret_in_a_summary_for_the_whisperer(self):
        self.converse()
        result = wait_for(
            compact_conversation_history(self.script, self.assistant, force=True, kind="manual")
        )
        self.assertTrue(result["success"], result)
        summaries = [m for m in self.script.conversation_history if is_summary(m)]
        self.assertEqual(len(summaries), 2)
        public, private = summaries
        self.assertNotIn("audience", public["metadata"])
        self.assertNotIn(SECRET, public["content"])
        self.assertIn("Laketown", public["content"])
        self.assertEqual(private["metadata"]["audience"], [self.char1.dbref])
        self.assertIn(SECRET, private["content"])
        syntheses = [e for e in journal_entries(self.assistant) if e["source_type"] == "compaction"]
        for entry in syntheses:
            if SECRET in entry["content"]:
                self.assertEqual(entry["audience"], [self.char1.dbref])
        # After the compaction: the room still cannot get it, the whisperer still can.
        llm = self.ask_as_char2("say What is Char's vault code?", "I cannot say.")
        self.assertNotIn(SECRET, sent_text(llm))
        self.char1.execute_cmd("whisper Helper = What is my vault code?")
        self.assertIn(SECRET, self.tick()["reply"])

    def test_a_whisper_with_nothing_to_keep_does_not_block_the_compaction(self):
        self.converse(whisper="whisper Helper = Hello there, how are you?")
        result = wait_for(
            compact_conversation_history(self.script, self.assistant, force=True, kind="manual")
        )
        self.assertTrue(result["success"], result)
        public, private = [m for m in self.script.conversation_history if is_summary(m)]
        self.assertIn("Laketown", public["content"])
        self.assertIn("found nothing to keep", private["content"])
        self.assertEqual(private["metadata"]["audience"], [self.char1.dbref])

    def test_a_whisper_summary_with_nothing_new_stands_without_a_model_call(self):
        self.converse()
        wait_for(
            compact_conversation_history(self.script, self.assistant, force=True, kind="manual")
        )
        private = [m for m in self.script.conversation_history if is_summary(m)][1]
        for line in ("The mill opens at dawn on market days.", "Nice weather today."):
            self.char2.execute_cmd(f"say {line}")
            self.tick()
        with ScriptedLLM("Char2 said the mill opens at dawn on market days.") as llm:
            self.script.set_config("compact_model", llm.model)
            result = wait_for(
                compact_conversation_history(self.script, self.assistant, force=True, kind="manual")
            )
        self.assertTrue(result["success"], result)
        self.assertEqual(len(llm.calls), 1, "one summary call, the room's")
        self.assertNotIn(SECRET, sent_text_of(llm.calls[0]))
        again = [m for m in self.script.conversation_history if is_summary(m)][1]
        self.assertEqual(again["metadata"]["audience"], [self.char1.dbref])
        self.assertEqual(summary_text(again["content"]), summary_text(private["content"]))

    def test_the_summary_call_for_the_room_is_never_sent_the_secret(self):
        self.converse()
        with ScriptedLLM("Char2 takes the nine o'clock ferry.", "Char has a vault.") as llm:
            self.script.set_config("compact_model", llm.model)
            result = wait_for(
                compact_conversation_history(self.script, self.assistant, force=True, kind="manual")
            )
        self.assertTrue(result["success"], result)
        room_call, private_call = (sent_text_of(call) for call in llm.calls)
        self.assertNotIn(SECRET, room_call)
        self.assertIn("Laketown", room_call)
        self.assertIn(SECRET, private_call)
        self.assertNotIn("Laketown", private_call)

    def test_the_extraction_for_the_room_is_never_sent_the_secret(self):
        self.converse()
        steps = [
            [("add_journal_entry", {"content": "Char2 says the ferry leaves at nine."})],
            [("noop", {})],
            "- Char's vault code was whispered.",
        ]
        with ScriptedLLM(*steps) as llm:
            self.script.set_config("llm_model", llm.model)
            result = wait_for(run_pre_compaction_extraction(self.script, self.assistant))
        self.assertEqual(result["audiences"], 2)
        public_calls = llm.calls[:2]
        self.assertNotIn(SECRET, "\n".join(sent_text_of(call) for call in public_calls))
        self.assertIn(SECRET, sent_text_of(llm.calls[2]))
        stated = [e for e in journal_entries(self.assistant) if "was whispered" in e["content"]]
        self.assertEqual(stated[0]["audience"], [self.char1.dbref])

    def test_the_room_s_facts_are_never_journaled_as_private(self):
        self.converse()
        steps = [
            [("noop", {})],
            # The whisperer's run states the room's fact too: a small model restates all.
            "- The ferry to Laketown leaves at nine every morning.\n- Char has a vault code.",
        ]
        with ScriptedLLM(*steps) as llm:
            self.script.set_config("llm_model", llm.model)
            wait_for(run_pre_compaction_extraction(self.script, self.assistant))
        # The whisperer's run is shown the whispered exchange alone.
        self.assertNotIn("Laketown", sent_text_of(llm.calls[1]))
        private = [e["content"] for e in journal_entries(self.assistant) if e.get("audience")]
        self.assertIn("Char has a vault code.", private)
        self.assertFalse([entry for entry in private if "Laketown" in entry], private)

    def test_an_autonomous_turn_sees_only_what_the_room_may_hear(self):
        self.whisper_secret()
        with ScriptedLLM([("noop", {})]) as llm:
            self.script.set_config("llm_model", llm.model)
            wait_for(run_react_loop(self.script, self.assistant, "tick_autonomous"))
        self.assertNotIn(SECRET, sent_text(llm))


def sent_text_of(call):
    return "\n".join(str(message.get("content")) for message in call)


class TestBuildersSeeWhatIsPrivate(PrivacyTestCase):
    def test_aihistory_marks_whispered_messages_and_entries(self):
        from evennia.utils.ansi import strip_ansi

        from ai.commands import AssistantCmdSet

        self.whisper_secret()
        self.char1.cmdset.add(AssistantCmdSet)
        self.char1.execute_cmd("aihistory Helper")
        self.char1.execute_cmd("aihistory/journal Helper")
        shown = strip_ansi("\n".join(map(str, self.char1_heard)))
        # The preview column cuts the rest: on PostgreSQL, dbrefs run to four digits.
        marked = f"(private to Char ({self.char1.dbref})) Char"
        self.assertIn(marked, shown)
        self.assertIn(f"conversation; private to Char ({self.char1.dbref});", shown)
