"""A dangerous call that waits for a builder: what its players hear, what builders hear,
and what each of aiconfirm's answers tells them, played on the offline engine.

The offline engine answers "Please give me the <thing>." with ``say`` ("The <thing>?
Here, <name>.") and ``give``: before a builder allowed it, the assistant must not say it
gave anything.
"""

import json

from evennia.utils import create
from evennia.utils.ansi import strip_ansi

from ai.commands import AssistantCmdSet

from .support import AssistantTestCase, record_messages
from .test_commands import words
from .test_honest_speech import LONG_FACT, PROMISE

CONFIRM_IN_CONVERSATION = {"tick_event": {"dangerous_requires_confirm": True}}


class TestHeldCall(AssistantTestCase):
    def setUp(self):
        super().setUp()
        self.char1.cmdset.add(AssistantCmdSet)
        self.lantern = create.create_object(key="lantern", location=self.assistant)
        self.script.set_config("context_overrides", CONFIRM_IN_CONVERSATION)
        self.char1_heard = record_messages(self.char1)
        self.char2_heard = record_messages(self.char2)
        self.builders_heard = record_messages(self.account)

    def heard(self, received, since=0):
        return strip_ansi("\n".join(map(str, received[since:])))

    def ask(self, line="talk Helper = Please give me the lantern.", by=None):
        (by or self.char1).execute_cmd(line)
        return self.tick()

    def test_the_player_hears_that_a_builder_was_asked_not_that_it_was_done(self):
        result = self.ask()
        self.assertEqual(result["loop"].stop_reason, "awaiting_confirmation")
        self.assertEqual(self.lantern.location, self.assistant)
        heard = words(self.heard(self.char1_heard))  # wrapped to 78 columns
        self.assertNotIn("Here, Char", heard)
        self.assertIn(
            "Helper has asked a builder to allow this first: give (item: lantern, "
            "recipient: Char).",
            heard,
        )
        self.assertEqual(result.get("reply"), "", "nothing was said as done")
        history = self.script.conversation_history
        said = [m["content"] for m in history if m["role"] == "assistant" and m["content"]]
        self.assertNotIn("Here, Char", str(said), "its history does not claim it either")
        results = [m["content"] for m in history if m["role"] == "tool"]
        self.assertEqual(
            results,
            [
                "Not run: said once a builder allows give",
                "Not run: give is dangerous and awaits a builder's confirmation; you were heard "
                "asking a builder for it.",
            ],
        )

    def test_builders_are_told_on_the_log_channel_how_to_run_or_drop_it(self):
        self.ask()
        notice = self.heard(self.builders_heard)
        self.assertIn("[AIlog]", notice)
        self.assertIn("Helper waits for a builder: give (item: lantern, recipient: Char)", notice)
        self.assertIn("(asked by Char)", " ".join(notice.split()))
        self.assertIn("aiconfirm Helper = 1", " ".join(notice.split()))
        self.assertIn("aiconfirm/discard Helper = 1", " ".join(notice.split()))
        self.assertNotIn("AIlog", self.heard(self.char2_heard), "players are not told")
        for line in notice.splitlines():
            self.assertLessEqual(len(line), 78, line)

    def test_once_allowed_it_is_done_and_the_player_hears_it_then_the_words(self):
        self.ask()
        before = len(self.char1_heard)
        self.char1.execute_cmd("aiconfirm Helper = 1")
        self.assertEqual(self.lantern.location, self.char1)
        heard = words(self.heard(self.char1_heard, before))  # wrapped to 78 columns
        done = "A builder allowed it, and Helper did it: give (item: lantern, recipient: Char)."
        self.assertIn(done, heard)
        self.assertIn('Helper says, "The lantern? Here, Char."', heard)
        self.assertLess(heard.index(done), heard.index("Here, Char"))
        self.assertEqual(self.script.db.awaiting_confirmation, [])
        told, said = self.script.conversation_history[-2:]
        self.assertIn("allowed your call give(", told["content"])
        self.assertNotIn("complete_goal", told["content"], "a player's request is no goal")
        self.assertEqual((said["role"], said["content"]), ("assistant", "The lantern? Here, Char."))

    def test_once_dropped_the_player_hears_it_was_not_done(self):
        self.ask()
        before = len(self.char1_heard)
        self.char1.execute_cmd("aiconfirm/discard Helper = 1")
        self.assertEqual(self.lantern.location, self.assistant)
        heard = words(self.heard(self.char1_heard, before))  # wrapped to 78 columns
        self.assertIn(
            "A builder did not allow it, so Helper did not do it: give (item: lantern, "
            "recipient: Char).",
            heard,
        )
        self.assertNotIn("Here, Char", heard)
        self.assertIn(
            "did not allow your call give(", self.script.conversation_history[-1]["content"]
        )

    def test_a_call_whose_arguments_hold_braces_is_told_as_written_when_dropped(self):
        """Qwen2.5-Coder-1.5B's arguments came as a JSON string inside a string; told to the
        room, their braces raised a KeyError in Evennia's msg_contents and no one heard."""
        self.ask()
        (entry,) = self.script.db.awaiting_confirmation
        arguments = json.dumps(json.dumps({"item": "lantern", "recipient": "$you() {Char}"}))
        entry["function"] = dict(entry["function"], arguments=arguments)
        self.script.db.awaiting_confirmation = [entry]
        before = len(self.char2_heard)
        self.char1.execute_cmd("aiconfirm/discard Helper = 1")
        heard = words(self.heard(self.char2_heard, before))
        self.assertIn('give ({"item": "lantern", "recipient": "$you() {Char}"})', heard)
        self.assertEqual(self.script.db.awaiting_confirmation, [])

    def test_allowed_but_failed_the_player_hears_it_failed_and_no_words(self):
        self.ask()
        self.lantern.location = self.room1  # dropped meanwhile: there is nothing to give
        before = len(self.char1_heard)
        self.char1.execute_cmd("aiconfirm Helper = 1")
        heard = words(self.heard(self.char1_heard, before))  # wrapped to 78 columns
        self.assertIn(
            "A builder allowed it, but Helper could not do it: give (item: lantern, "
            "recipient: Char).",
            heard,
        )
        self.assertIn("Ran give(", heard, "the builder reads why")
        self.assertNotIn("Here, Char", heard)

    def test_a_whispered_request_is_answered_to_the_whisperer_alone(self):
        self.ask("whisper Helper = Please give me the lantern.")
        self.char1.execute_cmd("aiconfirm Helper = 1")
        self.assertEqual(self.lantern.location, self.char1)
        mine = self.heard(self.char1_heard)
        self.assertIn("Helper has asked a builder to allow this first", mine)
        self.assertIn("A builder allowed it, and Helper did it", mine)
        self.assertIn("The lantern? Here, Char.", mine)
        theirs = self.heard(self.char2_heard)
        self.assertNotIn("asked a builder", theirs)
        self.assertNotIn("A builder allowed it", theirs)
        self.assertNotIn("Here, Char", theirs)
        self.assertIn("(whispered by Char)", " ".join(self.heard(self.builders_heard).split()))

    def test_without_confirmation_it_is_given_and_said_at_once(self):
        self.script.set_config("context_overrides", {})
        self.ask()
        self.assertEqual(self.lantern.location, self.char1)
        heard = self.heard(self.char1_heard)
        self.assertIn('Helper says, "The lantern? Here, Char."', heard)
        self.assertNotIn("builder", heard)


class TestHeldCallBesideAFailedWrite(AssistantTestCase):
    """An answer whose write failed (see test_honest_speech) and whose dangerous call waits:
    its words may claim the write, so they do not wait with the call."""

    def test_once_allowed_the_words_that_claim_a_failed_write_are_not_said(self):
        lantern = create.create_object(key="lantern", location=self.assistant)
        self.char1.cmdset.add(AssistantCmdSet)
        self.script.set_config("context_overrides", CONFIRM_IN_CONVERSATION)
        heard = record_messages(self.char1)
        answer = [
            ("add_journal_entry", {"content": LONG_FACT}),
            ("say", {"message": PROMISE}),
            ("give", {"item": "lantern", "recipient": "Char"}),
        ]
        result = self.tick_on(answer, text=f"Please give me the lantern. {LONG_FACT}")
        self.assertEqual(result["loop"].stop_reason, "awaiting_confirmation")
        self.assertEqual(result["loop"].held, [PROMISE])
        self.char1.execute_cmd("aiconfirm Helper = 1")
        self.assertEqual(lantern.location, self.char1)
        heard = strip_ansi("\n".join(map(str, heard)))
        self.assertIn("Helper has asked a builder to allow this first: give", heard)
        self.assertIn("A builder allowed it, and Helper did it: give", heard)
        self.assertNotIn("remember", heard)
        said = [m["content"] or "" for m in self.script.conversation_history if m["role"] != "user"]
        self.assertFalse([text for text in said if "remember" in text], "nor its history")


class TestACallThatCannotRunIsNotHeld(AssistantTestCase):
    """A dangerous call that would fail now is refused at once, with why, not held for a
    builder: Qwen2.5-Coder-1.5B asked to give a flute to "Kira, Sten, or Birk", a builder
    could only drop it, and the turn ended waiting for nothing."""

    def setUp(self):
        super().setUp()
        self.lantern = create.create_object(key="lantern", location=self.assistant)
        self.script.set_config("context_overrides", CONFIRM_IN_CONVERSATION)
        self.char1_heard = record_messages(self.char1)
        self.builders_heard = record_messages(self.account)

    def test_a_recipient_who_is_not_one_person_here_is_refused_and_the_model_tries_again(self):
        wrong = [
            ("say", {"message": "Here it is, Char."}),
            ("give", {"item": "lantern", "recipient": "Kira, Sten, or Birk"}),
        ]
        right = [("give", {"item": "lantern", "recipient": "Char"})]
        result = self.tick_on(wrong, right, text="Please give me the lantern.")
        self.assertEqual(result["loop"].stop_reason, "awaiting_confirmation")
        (waiting,) = self.script.db.awaiting_confirmation
        self.assertIn('"recipient": "Char"', waiting["function"]["arguments"])
        self.assertEqual(self.lantern.location, self.assistant)
        results = [m["content"] for m in self.script.conversation_history if m["role"] == "tool"]
        self.assertIn("No one and nothing called 'Kira, Sten, or Birk' is here; here:", results[1])
        self.assertIn("Char2", results[1], "it reads who is here to choose from")
        self.assertIn("give failed", results[0], "its words are held back, not said")
        heard = strip_ansi("\n".join(map(str, self.char1_heard)))
        self.assertNotIn("Here it is", heard)
        self.assertEqual(heard.count("asked a builder to allow this first"), 1, heard)
        notices = strip_ansi("\n".join(map(str, self.builders_heard)))
        self.assertNotIn("Kira", notices, "no builder is asked for a call that cannot run")

    def test_arguments_that_do_not_validate_are_refused_before_a_builder_is_asked(self):
        answer = [("give", {"item": "lantern"})]
        result = self.tick_on(answer, [("noop", {})], text="Please give me the lantern.")
        self.assertNotEqual(result["loop"].stop_reason, "awaiting_confirmation")
        self.assertFalse(self.script.db.awaiting_confirmation)
        results = [m["content"] for m in self.script.conversation_history if m["role"] == "tool"]
        self.assertIn("recipient", results[0])
        self.assertNotIn("asked a builder", strip_ansi("\n".join(map(str, self.char1_heard))))
