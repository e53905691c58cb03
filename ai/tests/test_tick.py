"""A full tick: a player's words reach the assistant, which answers in the room."""

from unittest.mock import patch

from django.db import DatabaseError

from ai.utils.markers import RESTORED_HEADER, SAID_HEADER, SUMMARY_MARKER, SUMMARY_PREAMBLE

from .support import AssistantTestCase


class TestFullTick(AssistantTestCase):
    def test_player_speech_is_answered_in_the_room(self):
        self.char1.execute_cmd("say My sword is called Dawnbringer.")
        self.assertEqual(len(self.script.pending_events()), 1)
        self.assertEqual(self.script.pending_events()[0]["speaker_name"], "Char")
        with patch.object(self.char2, "msg") as char2_msg:
            result = self.tick()
        self.assertEqual(result["status"], "replied")
        heard = " ".join(str(call.kwargs.get("text") or call.args) for call in char2_msg.mock_calls)
        self.assertIn("Helper says", heard)
        self.assertIn("Understood, Char.", heard)
        self.assertNotIn("Dawnbringer", heard, "the player's line was repeated back")
        history = self.script.conversation_history
        self.assertEqual(history[0]["content"], 'Char says, "My sword is called Dawnbringer."')
        self.assertEqual(history[1]["role"], "assistant")
        self.assertEqual(history[-1]["role"], "tool")

    def test_answers_a_question_from_earlier_conversation(self):
        self.char1.execute_cmd("say My sword is called Dawnbringer.")
        self.tick()
        self.char2.execute_cmd("say What is the sword of Char called?")
        result = self.tick()
        self.assertIn("Char told me: My sword is called Dawnbringer.", result["reply"])

    def test_a_line_whose_note_cannot_be_written_is_not_stored_either(self):
        # The line heard and its note in working memory are one unit: history never holds
        # a line that the tick failing right after it left unanswered and unnoted.
        self.hear("My sword is called Dawnbringer.")
        with patch(
            "ai.assistant_script.note_conversation", side_effect=DatabaseError("disk I/O error")
        ):
            result = self.tick()
        self.assertEqual(result["status"], "error")
        self.assertIn("disk I/O error", result["error"])
        self.assertEqual(self.script.conversation_history, [])
        self.assertEqual(len(self.script.history), 0)
        self.hear("What is my sword called?")
        self.assertEqual(self.tick()["status"], "replied")
        self.assertEqual(len(self.script.conversation_history), 3)

    def test_no_event_is_an_idle_tick(self):
        self.assertEqual(self.tick()["status"], "idle")
        self.assertEqual(self.script.conversation_history, [])


class TestOfflineEngineReadsPlayers(AssistantTestCase):
    """The offline engine's conversation: what it journals, echoes and answers."""

    def journal_entries(self):
        from ai.helpers.journal import journal_entries

        return journal_entries(self.assistant)

    def journal(self):
        return [entry["content"] for entry in self.journal_entries()]

    def test_a_fact_after_a_greeting_is_journaled_without_the_greeting(self):
        self.char1.execute_cmd("say Hello Helper! I buried 40 gold coins under the old oak.")
        self.tick()
        self.assertEqual(self.journal(), ["Char said: I buried 40 gold coins under the old oak."])

    def test_questions_are_not_journaled_even_without_a_question_mark(self):
        for line in ("Do you know where the blacksmith Gorm lives", "Where is the old mill?"):
            self.char1.execute_cmd(f"say {line}")
            self.tick()
        self.assertEqual(self.journal(), [])

    def test_a_promise_is_acknowledged_not_echoed(self):
        self.char1.execute_cmd("say I promise to bring Helper a lantern tomorrow.")
        reply = self.tick()["reply"]
        self.assertEqual(reply, "Understood, Char. I'll remember that.")

    def test_a_pose_naming_the_assistant_is_answered_and_others_are_ambience(self):
        self.char1.execute_cmd("pose sits down by the fire.")
        self.assertEqual(self.script.pending_events(), [])
        self.assertIn("Char sits down by the fire.", self.assistant.ndb.context_buffer)
        self.char1.execute_cmd("pose waves at Helper.")
        result = self.tick()
        self.assertEqual(result["reply"], "Hello, Char!")
        self.assertEqual(
            self.script.conversation_history[0]["content"], 'Char emotes, "waves at Helper."'
        )
        self.assertEqual(self.journal(), [], "a pose is no statement of fact")

    def test_lines_the_quality_gate_kept_in_a_summary_are_answered_as_their_speakers(self):
        """A summary's restored lines read ``- <speaker> said: <fact> (journal <id>)`` and
        ``- <speaker>: "<words>"``: the answer credits the speaker, without the list mark,
        the citation or the quotes."""
        summary = "\n".join(
            [
                SUMMARY_MARKER,
                SUMMARY_PREAMBLE,
                "Char: I buried 40 gold coins under the old oak.",
                RESTORED_HEADER,
                "- Char said: My horse is called Thunder. (journal journal_20260101_120000)",
                SAID_HEADER,
                '- Char2: "The toll at the bridge is 3 copper."',
            ]
        )
        self.script.append_message(
            {"role": "system", "content": summary, "metadata": {"type": "compaction"}}
        )
        self.char2.execute_cmd("say What is Char's horse called?")
        self.assertEqual(self.tick()["reply"], "Char told me: My horse is called Thunder.")
        self.char1.execute_cmd("say What is the toll at the bridge?")
        self.assertEqual(self.tick()["reply"], "Char2 told me: The toll at the bridge is 3 copper.")

    def test_a_greeting_or_the_assistant_s_name_is_no_answer(self):
        self.char1.execute_cmd("say Hello Helper! My horse is called Thunder.")
        self.tick()
        self.char2.execute_cmd("say Helper, what is the cellar password?")
        reply = self.tick()["reply"]
        self.assertTrue(reply.startswith("I don't know that yet"), reply)
        self.char2.execute_cmd("say What is Char's horse called?")
        self.assertEqual(self.tick()["reply"], "Char told me: My horse is called Thunder.")
        tags = self.journal_entries()[0]["tags"]
        self.assertNotIn("helper", tags)
