"""The contrib chooses how to offer tools: natively until a model shows it needs them as text."""

import json
from unittest import mock

from evennia.utils import logger

from ai.commands import CmdAiHistory
from ai.helpers.journal import journal_entries
from ai.models import ToolOffering
from ai.tool_offering import _as_text, load_tool_offerings, offers_as_text

from .support import (
    AssistantCommandTestCase,
    AssistantTestCase,
    ScriptedLLM,
    make_assistant,
    record_messages,
    wait_for,
)

ANNOUNCEMENT = 'I will add the cellar code "4417" to my journal.'
ANSWER = "The cellar code is 4417, Char. Noted in my journal."


def fenced(*calls):
    """A model's text answer holding ``calls`` (name, arguments) in a fenced JSON block."""
    listed = [{"name": name, "arguments": arguments} for name, arguments in calls]
    return f"```json\n{json.dumps(listed if len(listed) > 1 else listed[0])}\n```"


def natively_announces(messages, request):
    """A small local model: offered tools natively it only announces; listed, it calls them."""
    if request.get("tools"):
        return ANNOUNCEMENT
    return fenced(
        ("add_journal_entry", {"content": "Char: the cellar code is 4417."}),
        ("say", {"message": ANSWER}),
    )


def tools_were_listed(llm, call):
    """Tell whether call number ``call`` listed the tools in the prompt instead of the API."""
    return "tools" not in llm.requests[call] and "Tools: to use one" in str(llm.calls[call][0])


def speech(speaker, text):
    """The event of ``speaker`` saying ``text`` in the room."""
    return {"type": "speech", "speaker": speaker.dbref, "speaker_name": speaker.key, "text": text}


class TestTheContribChooses(AssistantTestCase):
    def setUp(self):
        super().setUp()
        self.heard = record_messages(self.char2)

    def heard_text(self):
        return "\n".join(str(line) for line in self.heard)

    def test_a_model_that_announces_natively_is_switched_and_the_player_hears_the_answer(self):
        result = self.tick_on(
            natively_announces, natively_announces, text="Remember this: the cellar code is 4417."
        )
        self.assertIn(ANSWER, self.heard_text())
        self.assertNotIn("I will add", self.heard_text())
        self.assertEqual(result["reply"], ANSWER)
        self.assertEqual(result["loop"].intention_retries, 1)
        self.assertEqual(result["loop"].intentions_withheld, [])
        self.assertIn("tools", self.llm.requests[0])
        self.assertTrue(tools_were_listed(self.llm, 1))  # the retry, in the same turn
        self.assertEqual(
            [entry["content"] for entry in journal_entries(self.assistant)],
            ["Char: the cellar code is 4417."],
        )
        stored = ToolOffering.objects.get(model=self.llm.model)
        self.assertIn("announced a tool use", stored.reason)

    def test_the_switch_holds_for_a_second_assistant_on_the_same_model_and_a_restart(self):
        self.tick_on(natively_announces, natively_announces, text="The ferry leaves at dawn.")
        _as_text.clear()  # what a restart forgets
        load_tool_offerings()
        script = make_assistant("Scribe", self.room1).assistant_script
        with ScriptedLLM(natively_announces) as llm:
            script.set_config("llm_model", llm.model)
            script.queue_event(speech(self.char1, "Remember this: the cellar code is 4417."))
            result = wait_for(script.at_repeat())
        self.assertTrue(tools_were_listed(llm, 0))
        self.assertEqual(len(llm.calls), 1)
        self.assertEqual(result["loop"].intention_retries, 0)
        self.assertIn(ANSWER, self.heard_text())

    def test_a_model_that_writes_its_calls_as_text_is_switched_once(self):
        said = fenced(("say", {"message": "A fine horse, Char."}))
        with mock.patch.object(logger, "log_info", wraps=logger.log_info) as log_info:
            first = self.tick_on(said, text="My horse is called Thunder.")
            self.assertIn("tools", self.llm.requests[0])
            second = self.tick_on(said, text="It is a grey horse.")
        self.assertEqual(first["reply"], "A fine horse, Char.")
        self.assertEqual(second["reply"], "A fine horse, Char.")
        self.assertTrue(tools_were_listed(self.llm, 0))  # the second tick's call
        logged = [str(call.args[0]) for call in log_info.call_args_list]
        switches = [line for line in logged if "now listed in the prompt as text" in line]
        self.assertEqual(len(switches), 1)
        self.assertIn("wrote its tool calls as text", switches[0])

    def test_tools_as_text_false_keeps_them_native(self):
        self.script.set_config("llm_options", {"tools_as_text": False})
        result = self.tick_on(natively_announces, natively_announces, text="Where is the cellar?")
        self.assertEqual(offers_as_text(self.llm.model), (False, False))
        self.assertFalse(ToolOffering.objects.exists())
        self.assertEqual([bool(r.get("tools")) for r in self.llm.requests], [True, True])
        # Still an announcement after the retry: not said.
        self.assertEqual(result["loop"].intentions_withheld, [ANNOUNCEMENT])
        self.assertNotIn("I will add", self.heard_text())

    def test_tools_as_text_true_lists_them_from_the_first_call(self):
        self.script.set_config("llm_options", {"tools_as_text": True})
        result = self.tick_on(natively_announces, text="Remember this: the cellar code is 4417.")
        self.assertTrue(tools_were_listed(self.llm, 0))
        self.assertEqual(result["reply"], ANSWER)
        self.assertFalse(ToolOffering.objects.exists())


class TestBuildersSeeTheChoice(AssistantCommandTestCase):
    def test_aihistory_says_how_tools_are_offered_and_who_chose(self):
        with ScriptedLLM(natively_announces, natively_announces) as llm:
            self.script.set_config("llm_model", llm.model)
            self.assertIn(
                "Tools: offered natively (chosen automatically",
                self.call(CmdAiHistory(), "Helper"),
            )
            self.script.queue_event(speech(self.char1, "Remember this: the cellar code is 4417."))
            wait_for(self.script.at_repeat())
        shown = self.call(CmdAiHistory(), "Helper")
        self.assertIn("Tools: listed as text (chosen automatically: it announced a tool use", shown)
        self.script.set_config("llm_options", {"tools_as_text": False})
        self.assertIn(
            "Tools: offered natively (its tools_as_text option)",
            self.call(CmdAiHistory(), "Helper"),
        )
