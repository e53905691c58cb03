"""Only conversation speaks: what a real model's text answers do in each context."""

from ai.helpers.journal import journal_entries
from ai.prompt_rendering import whereabouts
from ai.sleep.extraction import run_pre_compaction_extraction, stated_facts
from ai.tool_execution import run_react_loop

from .support import AssistantTestCase, ScriptedLLM, record_messages, wait_for
from .test_context_compaction import FACTS, fill

FENCED_SAY = 'Sure!\n```json\n{"name": "say", "arguments": {"message": "The oak, Char."}}\n```'
PROSE_AND_JOURNAL = (
    '<tool_call>{"name": "add_journal_entry", "arguments": {"content": "Char has a horse '
    'called Thunder."}}</tool_call>\nWhat a fine name for a horse!'
)


class SpeakingTestCase(AssistantTestCase):
    def setUp(self):
        super().setUp()
        self.heard = record_messages(self.char2)

    def heard_text(self):
        return "\n".join(str(line) for line in self.heard)

    def tick_on(self, *steps, text="My horse is called Thunder."):
        return super().tick_on(*steps, text=text)


class TestConversationSpeaks(SpeakingTestCase):
    def test_a_plain_text_answer_is_said(self):
        result = self.tick_on("A fine horse!")
        self.assertEqual(result["reply"], "A fine horse!")
        self.assertIn("A fine horse!", self.heard_text())

    def test_the_assistant_never_says_its_own_name_as_a_speaker_tag(self):
        result = self.tick_on("Helper: A fine horse, Char!")
        self.assertEqual(result["reply"], "A fine horse, Char!")
        self.assertNotIn("Helper:", self.heard_text())
        self.assertNotIn("Helper:", str(self.script.conversation_history))
        self.tick_on([("say", {"message": "**Helper**: Thunder, Char."})], text="His name?")
        self.assertIn("Thunder, Char.", self.heard_text())
        self.assertNotIn("Helper**:", self.heard_text())
        self.tick_on("You: I see, Char.", text="Nice weather.")
        self.assertIn("I see, Char.", self.heard_text())
        self.assertNotIn("You:", self.heard_text())

    def test_a_tool_call_written_as_text_runs_and_only_its_message_is_heard(self):
        result = self.tick_on(FENCED_SAY, text="Where are the coins?")
        self.assertEqual(result["reply"], "The oak, Char.")
        self.assertEqual(result["loop"].text_tool_calls, 1)
        self.assertIn("The oak, Char.", self.heard_text())
        self.assertNotIn("```", self.heard_text())
        self.assertNotIn('"name"', self.heard_text())
        stored = self.script.conversation_history[-2]
        self.assertEqual(stored["tool_calls"][0]["function"]["name"], "say")

    def test_prose_beside_a_recovered_journal_call_is_said_and_the_fact_kept(self):
        result = self.tick_on(PROSE_AND_JOURNAL)
        self.assertEqual(result["reply"], "What a fine name for a horse!")
        self.assertEqual(
            [e["content"] for e in journal_entries(self.assistant)],
            ["Char has a horse called Thunder."],
        )
        self.assertNotIn("tool_call", self.heard_text())

    def test_markup_that_is_no_call_is_withheld_and_kept_out_of_history(self):
        result = self.tick_on('{"reply": "yes", "mood": "happy"}')
        self.assertEqual(result["status"], "acted")
        self.assertEqual(len(result["loop"].withheld), 1)
        self.assertNotIn("mood", self.heard_text())
        self.assertNotIn("mood", str(self.script.conversation_history))

    def test_an_unknown_tool_written_as_text_is_reported_and_never_said(self):
        result = self.tick_on('```json\n{"name": "cast_fireball", "arguments": {}}\n```')
        self.assertEqual(len(result["loop"].malformed_tool_calls), 1)
        self.assertNotIn("fireball", self.heard_text())

    def test_the_say_tool_refuses_markup_too(self):
        message = '{"name": "say", "arguments": {"message": "hi"}}'
        result = self.tick_on([("say", {"message": message})], [("noop", {})])
        self.assertEqual(result["loop"].said, [])
        self.assertNotIn("arguments", self.heard_text())
        self.assertIn("Not said: that looks like code", str(self.script.conversation_history))


class TestEchoGuard(SpeakingTestCase):
    def test_a_reply_that_repeats_the_player_is_asked_for_again(self):
        result = self.tick_on("My horse is called Thunder.", "What a fine name, Char!")
        self.assertEqual(result["reply"], "What a fine name, Char!")
        self.assertEqual(result["loop"].echo_retries, 1)
        self.assertNotIn('Helper says, "My horse', self.heard_text())

    def test_the_retry_tells_the_model_what_went_wrong(self):
        result = self.tick_on([("say", {"message": "My horse is called Thunder."})], "Lovely!")
        llm = self.llm
        self.assertEqual(len(llm.calls), 2)
        self.assertIn("only repeated what Char said", llm.calls[1][-1]["content"])
        self.assertIn("not from Char; never mention it", llm.calls[1][-1]["content"])
        self.assertEqual(result["reply"], "Lovely!")
        self.assertEqual(len(self.script.conversation_history), 2, "the echo was not kept")

    def test_a_second_echo_is_withheld(self):
        result = self.tick_on("My horse is called Thunder.", "Your horse is called Thunder.")
        self.assertEqual(result["status"], "acted")
        self.assertEqual(result["loop"].withheld, ["Your horse is called Thunder."])
        self.assertNotIn("Thunder", self.heard_text())

    def test_a_reply_that_restates_where_the_assistant_is_is_asked_for_again(self):
        where = whereabouts(self.assistant)
        self.assertIn("Present:", where)
        result = self.tick_on(where, "A fine name, Char!", text="My horse is called Thunder.")
        self.assertEqual(result["reply"], "A fine name, Char!")
        self.assertEqual(result["loop"].echo_retries, 1)
        self.assertIn("only restated where you are", self.llm.calls[1][-1]["content"])
        self.assertNotIn("Present:", self.heard_text())
        again = self.tick_on(where, where, text="My horse is called Thunder.")
        self.assertEqual(again["loop"].withheld, [where], "a second one is withheld")

    def test_a_reply_said_before_is_asked_for_again_once(self):
        stock = "I'm glad you're doing well, {}! Let me know if you need anything else."
        self.tick_on(stock.format("Char"), text="Hello Helper, how are you?")
        result = self.tick_on(stock.format("Char"), "Fine, Char: Thunder is a grand name!")
        self.assertEqual(result["loop"].repeat_retries, 1)
        self.assertIn("almost the same as a reply you gave", self.llm.calls[1][-1]["content"])
        self.assertEqual(result["reply"], "Fine, Char: Thunder is a grand name!")
        again = self.tick_on(
            stock.format("Char"), stock.format("Char"), text="Are you doing well today?"
        )
        self.assertEqual(again["reply"], stock.format("Char"), "a second repeat is said")

    def test_a_short_stock_reply_to_every_line_is_asked_for_again_then_withheld(self):
        """Qwen2.5-Coder-1.5B answered 19 lines in a row, questions too, with one
        seven-word line; the same words to a line they share nothing with are no answer."""
        stock = [("say", {"message": "You can thank Helper for sharing this."})]
        self.tick_on(stock, text="My grandmother keeps bees in the hills.")
        said = self.tick_on(stock, text="My horse is called Thunder.")
        self.assertEqual(said["loop"].repeat_retries, 0, "the same acknowledgement may do")
        result = self.tick_on(stock, "Thunder, Char.", text="What is my horse called?")
        self.assertEqual(result["loop"].repeat_retries, 1)
        self.assertEqual(result["reply"], "Thunder, Char.")
        heard = len(self.heard_text())
        again = self.tick_on(stock, stock, text="Where did I hide the compass?")
        self.assertEqual(again["loop"].withheld, ["You can thank Helper for sharing this."])
        self.assertNotIn("thank Helper", self.heard_text()[heard:])
        self.assertIn("Helper hesitates, and does not answer.", self.heard_text()[heard:])
        self.assertEqual(self.script.conversation_history[-1]["role"], "user", "none recorded")

    def test_a_three_word_stock_reply_to_what_is_asked_for_is_asked_for_again(self):
        """Qwen2.5-Coder-1.5B answered every question "I remember that." from the 16th line
        of a conversation on: under any floor of words, and no answer to "what"."""
        stock = [("say", {"message": "I remember that."})]
        self.tick_on(stock, text="The ferry leaves at dawn.")
        result = self.tick_on(stock, "At dawn, Char.", text="When does the ferry leave?")
        self.assertEqual(result["loop"].repeat_retries, 1)
        self.assertEqual(result["reply"], "At dawn, Char.")

    def test_the_same_yes_to_two_questions_of_yes_or_no_is_said(self):
        self.tick_on("Yes.", text="Is the ferry running today?")
        again = self.tick_on("Yes.", text="Can I bring my horse aboard?")
        self.assertEqual((again["reply"], again["loop"].repeat_retries), ("Yes.", 0))

    def test_not_knowing_may_be_said_to_every_question(self):
        unknown = "I don't know that yet, Char. Tell me and I will remember it."
        self.tick_on(unknown, text="Where did I hide the compass?")
        again = self.tick_on(unknown, unknown, text="What is my horse called?")
        self.assertEqual((again["reply"], again["loop"].withheld), (unknown, []))

    def test_the_same_short_answer_to_the_same_question_is_said(self):
        answer = [("say", {"message": "The compass is under the shed."})]
        self.tick_on(answer, text="Where is the compass hidden?")
        again = self.tick_on(answer, text="Where is the compass hidden?")
        self.assertEqual(again["loop"].repeat_retries, 0)
        self.assertEqual(again["reply"], "The compass is under the shed.")

    def test_a_template_said_around_a_new_noun_is_asked_for_again(self):
        template = "What a lovely thing to hear about {}, Char! Tell me more about it."
        self.tick_on(template.format("your horse"), text="My horse is called Thunder.")
        result = self.tick_on(
            template.format("the ferry to the island"),
            "The ferry to the island is a fine way to travel, Char.",
            text="The ferry to the island leaves at dawn.",
        )
        self.assertEqual(result["loop"].repeat_retries, 1)
        self.assertEqual(result["reply"], "The ferry to the island is a fine way to travel, Char.")
        self.assertNotIn("the ferry to the island, Char! Tell me", self.heard_text())

    def test_answers_and_short_lines_are_no_echo(self):
        result = self.tick_on("Your horse is called Thunder.", text="What is my horse called?")
        self.assertEqual(
            (result["reply"], result["loop"].echo_retries), ("Your horse is called Thunder.", 0)
        )
        result = self.tick_on("Hello there!", text="Hello there!")
        self.assertEqual(result["loop"].echo_retries, 0)


class TestScratchWorkStaysQuiet(SpeakingTestCase):
    def extract(self, *steps):
        fill(self.script, FACTS[:3])
        self.heard.clear()
        before = len(self.script.conversation_history)
        with ScriptedLLM(*steps) as llm:
            self.script.set_config("llm_model", llm.model)
            result = wait_for(run_pre_compaction_extraction(self.script, self.assistant))
        self.llm = llm
        return result, self.script.conversation_history[before:]

    def test_extraction_text_is_never_said_but_its_facts_are_journaled(self):
        notes = (
            "Here are the facts:\n1. Char buried 40 gold coins under the old oak.\n"
            "2. Char2 said the cellar door password is swordfish.\nAll facts are journaled now."
        )
        result, added = self.extract(notes)
        self.assertEqual(self.heard, [])
        self.assertEqual(result["facts_recorded"], 2)
        self.assertEqual(
            [e["content"] for e in journal_entries(self.assistant)],
            [
                "Char buried 40 gold coins under the old oak.",
                "Char2 said the cellar door password is swordfish.",
            ],
        )
        self.assertTrue(journal_entries(self.assistant)[0]["source_message_ids"])
        self.assertEqual(added, [], "scratch text joined the live history")

    def test_extraction_calls_written_as_text_run_and_the_loop_sees_them_without_prose(self):
        text = (
            "Let me save this.\n```json\n"
            '{"name": "add_journal_entry", "arguments": {"content": "Char buried 40 coins."}}'
            "\n```"
        )
        result, added = self.extract(text, [("noop", {})])
        self.assertEqual(result["facts_recorded"], 1)
        self.assertEqual(result["text_tool_calls"], 1)
        self.assertEqual(self.heard, [])
        self.assertEqual(added, [], "extraction's calls joined the live history")
        seen = [m for m in self.llm.calls[1] if m.get("tool_calls")]
        self.assertEqual(seen[0]["content"], "")
        self.assertEqual(seen[0]["tool_calls"][0]["function"]["name"], "add_journal_entry")

    def test_no_context_but_conversation_speaks(self):
        event = {"type": "speech", "speaker_name": "Char", "text": "How did the day go?"}
        for context in ("reflection", "sleep_consolidate", "goal_decompose", "pre_compaction"):
            with self.subTest(context=context), ScriptedLLM("I think the day went well.") as llm:
                self.script.set_config("llm_model", llm.model)
                result = wait_for(run_react_loop(self.script, self.assistant, context, event=event))
                self.assertEqual(result.said, [])
                self.assertEqual(result.unspoken, ["I think the day went well."])
        self.assertEqual(self.heard, [])

    def test_what_counts_as_a_stated_fact(self):
        self.assertEqual(
            stated_facts(
                "- Bob runs the forge by the north gate.\n* Who owns the horse?\n"
                "Facts:\nNothing more to journal.\nok\n3) Carol's horse is called Thunder."
            ),
            ["Bob runs the forge by the north gate.", "Carol's horse is called Thunder."],
        )
