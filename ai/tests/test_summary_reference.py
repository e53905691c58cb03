"""A summary is a record of the past: the model is never asked to act on what it holds."""

from unittest.mock import patch

from ai.llm_interaction import format_message_for_compaction
from ai.sleep.compaction import compact_conversation_history
from ai.utils.markers import SUMMARY_MARKER
from ai.utils.message_format import is_summary, summary_text

from .support import AssistantTestCase, ScriptedLLM, wait_for
from .test_context_compaction import fill

ORDER = "give the sword to Char2"


class LiteralReader(ScriptedLLM):
    """A model that obeys an order wherever it reads one presented as a request.

    An order counts as a request in a player's (user) message, or in a system message that
    does not say it is a record for reference only. It then gives the sword; otherwise it
    says hello. ``acted`` tells which it did.
    """

    acted = None

    def answer(self, messages, model_response):
        self.acted = any(ORDER in (m.get("content") or "") and requested(m) for m in messages)
        order = ("give", {"item": "sword", "recipient": "Char2"})
        step = [order if self.acted else ("say", {"message": "Hello!"})]
        self.steps.insert(0, step)
        return super().answer(messages, model_response)


def requested(message):
    content = message.get("content") or ""
    reference = "for reference only" in content and "not a request" in content
    return message["role"] == "user" or not reference


class TestSummariesAreReference(AssistantTestCase):
    def setUp(self):
        super().setUp()
        self.script.set_config("compact_preserve_window", 4)
        fill(self.script)
        with ScriptedLLM(f"Char asked: {ORDER}.") as llm:
            self.script.set_config("compact_model", llm.model)
            result = wait_for(
                compact_conversation_history(self.script, self.assistant, force=True, kind="manual")
            )
        self.assertTrue(result["success"], result)

    def reply_to_a_greeting(self):
        with LiteralReader() as reader:
            self.script.set_config("llm_model", reader.model)
            self.hear("Hello there!")
            self.tick()
        return reader

    def test_an_order_inside_a_summary_is_not_acted_on(self):
        reader = self.reply_to_a_greeting()
        self.assertFalse(reader.acted)
        sent = reader.calls[0]
        index = next(
            i for i, m in enumerate(sent) if (m.get("content") or "").startswith(SUMMARY_MARKER)
        )
        self.assertEqual(sent[index]["role"], "system")
        self.assertLess(index, len(sent) - 1, "the summary is never the last message")

    def test_without_the_reference_wording_the_same_model_obeys_it(self):
        # What the first test guards against: the reference line is what stops the order.
        with patch("ai.sleep.compaction.SUMMARY_PREAMBLE", ""):
            fill(self.script)
            with ScriptedLLM(f"Char asked: {ORDER}. Char asked again: {ORDER}.") as llm:
                self.script.set_config("compact_model", llm.model)
                wait_for(
                    compact_conversation_history(
                        self.script, self.assistant, force=True, kind="manual"
                    )
                )
        self.assertTrue(self.reply_to_a_greeting().acted)


class TestOlderSummaries(AssistantTestCase):
    def test_a_summary_stored_before_the_reference_line_is_still_one(self):
        old = {
            "role": "system",
            "content": f"{SUMMARY_MARKER}\nChar: I buried 40 gold coins.",
            "metadata": {"type": "compaction", "kind": "sleep", "compacted_count": 3},
        }
        stored = self.script.append_message(old)
        self.assertTrue(is_summary(stored))
        self.assertEqual(summary_text(stored["content"]), "Char: I buried 40 gold coins.")
        self.assertEqual(
            format_message_for_compaction(stored),
            f"{SUMMARY_MARKER}\n  Char: I buried 40 gold coins.",
        )
