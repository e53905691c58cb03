"""An intention is not an answer: a reply that only announces a tool use is never said."""

import json

import pytest

from ai.utils.intentions import only_announces

from .support import AssistantTestCase, ScriptedLLM, record_messages

ANNOUNCING = [
    'I will add the cellar code "4417" to my journal.',
    "I will add the ferry time to my journal.",
    "I'll note that down.",
    "Let me remember that.",
    "I will look at the board.",
    "Sure! I'll jot that down, Char.",
    "I am going to record this in my journal.",
    "Let me check my journal.",
    "I'll make a note of it.",
    "Understood, Char. I'll write it down.",
    "I will use the add_journal_entry tool to save this.",
    "I'll save that to my notes.",
    "Let me search my memory for that.",
    "I will keep that in mind.",
    "Got it! I’ll add that to the journal right away.",
    "I will now add the name of the horse to my journal.",
    "Let's look it up.",
    "I'm going to look around.",
    "Okay. Let me just quickly check the notes for you.",
    "I shall put the <thing> in my notebook.",
    'You can use the "recall_memories" tool to search your long-term memory for that.',
    'You will use the "search_history" tool to find out what Char said about it.',
    "We could call the review_journal tool for that.",
    "I see. I'll add that information as a journal entry to my context.",
    'I have added a journal entry with the content "The roads were quiet."',
    "I've noted that, Char.",
]
ANSWERING = [
    "I will meet you at the gate.",
    "I remember: it is 12.",
    "The code is 4417. I'll note that down.",
    "It is 12, Char, and I will add it to my journal.",
    "I don't know that yet, Char. Tell me and I will remember it.",
    "Let me know if you need anything else.",
    "I look forward to it!",
    "I will look after your horse, Char, while you are away.",
    "Shall I add it to my journal?",
    "What a fine horse! I'll remember that.",
    "You told me: the ferry leaves at six bells.",
    "I won't forget.",
    "Hello there!",
    "",
    "I will not note that.",
    'The password is "<word>", Char.',
    "I'll be at the inn until dusk.",
    "You can use the old_mill road to get there.",
    "The password is swift_river, Char.",
    "I have added salt to the stew.",
]


@pytest.mark.parametrize("text", ANNOUNCING)
def test_an_announcement_alone_is_no_answer(text):
    assert only_announces(text)


@pytest.mark.parametrize("text", ANSWERING)
def test_answers_and_other_intentions_are_not_announcements(text):
    assert not only_announces(text)


def say(message):
    return f'```json\n{json.dumps({"name": "say", "arguments": {"message": message}})}\n```'


class TestTheLoopNeverSaysAnIntention(AssistantTestCase):
    def setUp(self):
        super().setUp()
        self.heard = record_messages(self.char2)

    def heard_text(self):
        return "\n".join(str(line) for line in self.heard)

    def test_an_announcement_is_asked_for_again_with_a_clear_nudge(self):
        result = self.tick_on("I'll note that down.", "Noted: the ferry leaves at dawn.", text="x")
        self.assertEqual(result["reply"], "Noted: the ferry leaves at dawn.")
        self.assertEqual(result["loop"].intention_retries, 1)
        nudge = self.llm.calls[1][-1]
        self.assertEqual(nudge["role"], "user")
        self.assertIn("use it now, or answer Char directly", nudge["content"])
        self.assertNotIn("note that down", self.heard_text())

    def test_advice_to_use_a_tool_is_asked_for_again_not_said(self):
        """Qwen2.5-Coder-1.5B answered three of six questions of a conversation with
        'You can use the "recall_memories" tool to search your long-term memory ...'."""
        advice = 'You can use the "recall_memories" tool to search your long-term memory.'
        result = self.tick_on(advice, "Under the boat shed, Char.", text="Where is the map?")
        self.assertEqual(result["reply"], "Under the boat shed, Char.")
        self.assertEqual(result["loop"].intention_retries, 1)
        self.assertNotIn("recall_memories", self.heard_text())

    def test_a_model_that_keeps_announcing_says_nothing_of_it(self):
        result = self.tick_on(
            "I will add the ferry time to my journal.",
            "Let me check my journal.",
            text="When does the ferry leave?",
        )
        loop = result["loop"]
        self.assertEqual(loop.intention_retries, 1)
        self.assertEqual(loop.intentions_withheld, ["Let me check my journal."])
        self.assertEqual(loop.said, [])
        heard = self.heard_text()
        self.assertNotIn("journal", heard)
        self.assertIn("Helper hesitates, and does not answer.", heard)
        history = str(self.script.conversation_history)
        self.assertNotIn("journal", history)
        self.assertNotIn("hesitates", history)

    def test_an_announcement_through_say_is_not_said_either(self):
        self.script.set_config("llm_options", {"tools_as_text": True})
        result = self.tick_on(
            say("I'll write that down, Char."), say("I'll write that down."), text="x"
        )
        self.assertEqual(result["loop"].intentions_withheld, ["I'll write that down."])
        self.assertNotIn("write that down", self.heard_text())
        self.assertNotIn("write that down", str(self.script.conversation_history))

    def test_an_answer_that_also_says_it_will_note_it_is_said_at_once_without_that(self):
        """Said whole, "I'll note that down" would claim a note no call made."""
        answer = "The ferry leaves at dawn, Char. I'll note that down."
        result = self.tick_on(answer, text="When does the ferry leave?")
        self.assertEqual(result["reply"], "The ferry leaves at dawn, Char.")
        self.assertNotIn("note that", self.heard_text())
        self.assertEqual(len(self.llm.calls), 1)
        self.assertEqual(result["loop"].intention_retries, 0)

    def test_an_announcement_at_the_end_of_a_sentence_is_cut_from_what_is_said(self):
        """Qwen2.5-Coder-1.5B, default seed 30: "I'll inform everyone about the change in
        price ..., and I'll add that information as a journal entry to my context."."""
        message = "It is 12 copper, Char, and I'll add that as a journal entry to my context."
        result = self.tick_on([("say", {"message": message})], text="What does it cost?")
        self.assertEqual(result["reply"], "It is 12 copper, Char.")
        self.assertNotIn("journal", self.heard_text())
        self.assertNotIn("journal entry", str(self.script.conversation_history))

    def test_an_announcement_beside_the_call_it_announces_is_no_intention(self):
        answer = [
            ("add_journal_entry", {"content": "Char: the ferry leaves at dawn."}),
            ("say", {"message": "I'll note that down, Char."}),
        ]
        result = self.tick_on(answer, text="The ferry leaves at dawn.")
        self.assertEqual(result["reply"], "I'll note that down, Char.")
        self.assertEqual(result["loop"].intention_retries, 0)
        self.assertEqual(len(self.llm.calls), 1)

    def test_a_claim_of_a_note_is_said_only_in_a_turn_that_made_it(self):
        """Qwen2.5-Coder-1.5B, asked again after "I'll remember that fact.", answered "I
        have added a journal entry with the content ..." with no call (default seed 26)."""
        claim = 'I have added a journal entry with the content "The ferry leaves at dawn."'
        result = self.tick_on(claim, "Dawn it is, Char.", text="The ferry leaves at dawn.")
        self.assertEqual(result["loop"].intention_retries, 1)
        self.assertEqual(result["reply"], "Dawn it is, Char.")
        self.assertNotIn("journal entry", self.heard_text())
        # Seed 28 (issue 19), to "The fire is burning low again.": a claim of a tool.
        result = self.tick_on(
            "I have already used the tool.", "Shall I add a log?", text="The fire is low."
        )
        self.assertEqual(result["reply"], "Shall I add a log?")
        self.assertNotIn("the tool", self.heard_text())
        noted = [
            ("add_journal_entry", {"content": "Char: the ferry leaves at nine."}),
            ("say", {"message": "I've noted that, Char."}),
        ]
        result = self.tick_on(noted, text="The ferry leaves at nine.")
        self.assertEqual(result["reply"], "I've noted that, Char.")
        self.assertEqual(result["loop"].intention_retries, 0)

    def test_a_whispered_turn_shows_the_hesitation_to_the_whisperer_alone(self):
        heard_by_char1 = record_messages(self.char1)
        with ScriptedLLM("I'll note that.", "I'll note that.") as llm:
            self.script.set_config("llm_model", llm.model)
            self.script.queue_event(
                {
                    "type": "whisper",
                    "speaker": self.char1.dbref,
                    "speaker_name": self.char1.key,
                    "text": "The key is under the mat.",
                }
            )
            self.tick()
        self.assertIn("hesitates", "\n".join(map(str, heard_by_char1)))
        self.assertNotIn("hesitates", self.heard_text())
