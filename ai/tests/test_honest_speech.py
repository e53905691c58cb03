"""What players hear is true and plain: no claim of a write that failed, no answer lost to a
length limit, no control characters, escape sequences or internal formats."""

import json

from ai.helpers.journal import journal_entries
from ai.tools.communication import SPEECH_LIMIT
from ai.utils.speech import CUT_MARK, plain_speech

from .support import ScriptedLLM
from .test_speaking import SpeakingTestCase

# A statement of about 5.9 KB: more than a journal entry holds.
LONG_FACT = "My horse is called Thunder. " + "He likes apples and long rides by the river. " * 130
PROMISE = "Understood, Char. I'll remember that."
TOO_LONG = "That was too long for my journal, Char. Tell me in a sentence or two?"


def tool_results(call):
    """Return the tool results a model call was sent, in order."""
    return [message["content"] for message in call if message["role"] == "tool"]


def heard_lines(lines):
    """Return the lines a listener heard, as text."""
    return [str(line) for line in lines]


class TestNoClaimOfAFailedWrite(SpeakingTestCase):
    def tick_on(self, *steps, text=LONG_FACT):
        return super().tick_on(*steps, text=text)

    def assert_promise_held(self, result):
        self.assertNotIn("remember", self.heard_text())
        self.assertIn(TOO_LONG, self.heard_text())
        self.assertEqual(journal_entries(self.assistant), [])
        self.assertEqual(result["loop"].held, [PROMISE])
        said = [m["content"] or "" for m in self.script.conversation_history if m["role"] != "user"]
        self.assertFalse([text for text in said if "remember" in text], "nothing tells it was said")

    def test_a_reply_beside_a_refused_entry_is_held_and_the_model_told_why(self):
        note = [("add_journal_entry", {"content": LONG_FACT}), ("say", {"message": PROMISE})]
        result = self.tick_on(note, [("say", {"message": TOO_LONG})])
        self.assert_promise_held(result)
        refused, held = tool_results(self.llm.calls[1])
        self.assertEqual(
            refused,
            f"Invalid arguments for add_journal_entry: content: {len(LONG_FACT):,} "
            "characters, at most 2,000. Nothing was done.",
        )
        self.assertRegex(held, r"^Not run: add_journal_entry failed \(see its result\)")

    def test_a_reply_asked_for_before_the_write_is_held_too(self):
        note = [("say", {"message": PROMISE}), ("add_journal_entry", {"content": LONG_FACT})]
        self.assert_promise_held(self.tick_on(note, [("say", {"message": TOO_LONG})]))

    def test_text_beside_a_refused_entry_is_held_and_kept_out_of_history(self):
        call = json.dumps({"name": "add_journal_entry", "arguments": {"content": LONG_FACT}})
        result = self.tick_on(f"<tool_call>{call}</tool_call>\n{PROMISE}", TOO_LONG)
        self.assert_promise_held(result)

    def test_a_noop_beside_the_held_reply_does_not_end_the_turn(self):
        note = [("add_journal_entry", {"content": LONG_FACT}), ("say", {"message": PROMISE})]
        result = self.tick_on(note + [("noop", {})], [("say", {"message": TOO_LONG})])
        self.assert_promise_held(result)

    def test_the_held_reply_is_asked_for_again_even_at_the_iteration_limit(self):
        self.script.set_config("execution_config", {"max_iterations_per_tick": 1})
        note = [("add_journal_entry", {"content": LONG_FACT}), ("say", {"message": PROMISE})]
        result = self.tick_on(note, [("say", {"message": TOO_LONG})])
        self.assert_promise_held(result)
        self.assertEqual(result["loop"].iterations, 2)

    def test_a_reply_beside_a_write_that_worked_is_said_at_once(self):
        note = [("add_journal_entry", {"content": "Char has a horse called Thunder."})]
        result = self.tick_on(note + [("say", {"message": PROMISE})], text="My horse is Thunder.")
        self.assertIn(PROMISE, self.heard_text())
        self.assertEqual((len(self.llm.calls), result["loop"].held), (1, []))

    def test_the_offline_engine_says_the_note_failed_and_later_answers_in_full(self):
        self.hear(LONG_FACT)
        self.tick()
        self.assertNotIn("remember", self.heard_text())
        self.assertIn("I'm sorry, Char: I could not note that down.", self.heard_text())
        self.heard.clear()
        self.hear("What does my horse like?")
        self.tick()
        said = [line for line in heard_lines(self.heard) if line.startswith("Helper says")]
        self.assertEqual(len(said), 3, "5.9 KB said in three lines")
        self.assertTrue(said[0].startswith('Helper says, "You told me: My horse is called'))
        told = " ".join(line.split('"', 1)[1].rstrip('"') for line in said)
        self.assertEqual(told.count("He likes apples"), 130)


class TestLongAnswers(SpeakingTestCase):
    def test_a_say_over_the_line_limit_is_said_in_parts(self):
        long = "The river road is long. " * 200  # 4,800 characters
        result = self.tick_on([("say", {"message": long})], text="Tell me of the road.")
        said = [line for line in heard_lines(self.heard) if line.startswith("Helper says")]
        self.assertEqual(len(said), 3)
        self.assertTrue(all(len(line) < SPEECH_LIMIT + 20 for line in said))
        self.assertEqual(" ".join(said).count("The river road is long."), 200)
        self.assertIn("You said, in 3 parts: The river road", str(self.script.conversation_history))
        self.assertEqual(result["reply"].count("The river road is long."), 200)

    def test_a_text_answer_over_the_limit_is_said_in_parts(self):
        self.tick_on("Far away. " * 300, text="Where is it?")
        said = [line for line in heard_lines(self.heard) if line.startswith("Helper says")]
        self.assertEqual(len(said), 2)
        self.assertEqual(" ".join(said).count("Far away."), 300)

    def test_what_is_beyond_four_lines_is_cut_with_a_mark_and_the_model_told(self):
        self.tick_on([("say", {"message": "Word " * 3000})], text="Talk.")
        said = [line for line in heard_lines(self.heard) if line.startswith("Helper says")]
        self.assertEqual(len(said), 4)
        self.assertTrue(said[-1].endswith(f'{CUT_MARK}"'), said[-1][-20:])
        result = [m for m in self.script.conversation_history if m["role"] == "tool"][-1]
        self.assertRegex(result["content"], r"^You said, in 4 parts \(too long: the last \d+ char")


class TestPlayersHearPlainText(SpeakingTestCase):
    RAW = "Ask Char (#6) \x07about\x1b]0;pwned\x07 the \x1b[31mred\x1b[0m gate.\r\n\x00Bye."
    PLAIN = "Ask Char about the red gate.\nBye."

    def test_control_characters_escapes_and_dbrefs_never_reach_players(self):
        result = self.tick_on([("say", {"message": self.RAW})], text="Who knows?")
        self.assertEqual(result["reply"], self.PLAIN)
        self.assertIn(self.PLAIN, self.heard_text())
        for raw in ("\x07", "\x1b", "\x00", "pwned", "#6", "\r"):
            self.assertNotIn(raw, self.heard_text())
            self.assertNotIn(raw, str(self.script.conversation_history[-1]["content"]))

    def test_the_same_holds_for_an_answer_in_text(self):
        result = self.tick_on(self.RAW, text="Who knows?")
        self.assertEqual(result["reply"], self.PLAIN)
        self.assertIn(self.PLAIN, self.heard_text())
        self.assertEqual(self.script.conversation_history[-1]["content"], self.PLAIN)

    def test_words_of_another_assistant_are_repeated_without_escaped_quotes(self):
        with ScriptedLLM([("say", {"message": r"Sage said: \"The bridge is out.\""})]) as llm:
            self.script.set_config("llm_model", llm.model)
            self.hear("What did Sage say?")
            self.tick()
        self.assertIn('Sage said: "The bridge is out."', self.heard_text())
        self.assertNotIn("\\", self.heard_text())

    def test_evennia_colour_markup_is_the_game_s_and_is_kept(self):
        self.tick_on([("say", {"message": "|rBeware|n the gate."})], text="Any news?")
        self.assertIn("|rBeware|n the gate.", self.heard_text())

    def test_every_kind_of_escape_sequence_is_removed(self):
        cases = {
            "a\x9b31mb": "ab",  # an 8-bit control sequence
            "a\x1b]2;title\x1b\\b": "ab",  # OSC ended by ST
            "a\x1b]8;;http://x\x07link\x1b]8;;\x07b": "alinkb",  # a hyperlink
            "a\x1b(Bb\x1bcc": "abc",  # a charset, a reset
            "a\x7fb\x85c\x1b": "abc",  # DEL, a C1 character, a lone escape
            "tab\there\nnext": "tab\there\nnext",
        }
        for raw, plain in cases.items():
            with self.subTest(raw=raw):
                self.assertEqual(plain_speech(raw), plain)
