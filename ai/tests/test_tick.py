"""A full tick: a player's words reach the assistant, which answers in the room."""

from unittest.mock import patch

from .support import AssistantTestCase


class TestFullTick(AssistantTestCase):
    def test_player_speech_is_answered_in_the_room(self):
        self.char1.execute_cmd("say My sword is called Dawnbringer.")
        self.assertEqual(len(self.script.db.pending_events), 1)
        self.assertEqual(self.script.db.pending_events[0]["speaker_name"], "Char")
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

    def test_no_event_is_an_idle_tick(self):
        self.assertEqual(self.tick()["status"], "idle")
        self.assertEqual(self.script.conversation_history, [])
