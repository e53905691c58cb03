"""In-game commands: talk, aimode, aiconfig, aiconfirm, their locks, and the switches of
every command."""

from evennia.utils.utils import display_len

from ai.commands import AssistantCmdSet, CmdAiConfig, CmdAiConfirm, CmdAiMode, CmdTalk
from ai.config import SCRIPT_CONFIG, ConfigError
from ai.prompt_contexts import CONVERSATION_TOOLS
from ai.tool_execution import run_react_loop
from ai.tools import Tool, ToolResult, register_tool, unregister_tool

from .support import (
    AssistantCommandTestCase,
    ScriptedLLM,
    make_assistant,
    record_messages,
    wait_for,
)


class TestTalk(AssistantCommandTestCase):
    def test_talk_queues_an_event_and_is_answered(self):
        self.call(
            CmdTalk(), "Helper = where is the forge?", 'You say to Helper, "where is the forge?"'
        )
        event = self.script.pending_events()[0]
        self.assertEqual((event["type"], event["text"]), ("talk", "where is the forge?"))
        result = wait_for(self.script.at_repeat())
        self.assertEqual(result["status"], "replied")

    def test_talk_without_a_name_finds_the_only_assistant(self):
        self.call(CmdTalk(), "hello", 'You say to Helper, "hello"')
        self.assertEqual(len(self.script.pending_events()), 1)

    def test_talk_to_an_absent_assistant(self):
        self.assistant.location = self.room2
        self.call(CmdTalk(), "Helper = hi", "Helper is not here.")
        self.call(CmdTalk(), "", "Usage: talk <assistant> = <message>")

    def test_braces_and_dollar_signs_are_heard_as_written(self):
        """Evennia's msg_contents reads {key} fields and $func() calls: a player's words
        holding them raised a KeyError, and no one heard them."""
        heard = record_messages(self.char2)
        line = "my code is {abc} and $you()"
        self.call(CmdTalk(), f"Helper = {line}", f'You say to Helper, "{line}"')
        self.assertIn(f'Char says to Helper, "{line}"', " ".join(map(str, heard)))

    def test_everyone_may_talk(self):
        self.assertTrue(CmdTalk().access(self.char2, "cmd"))

    def test_a_switch_is_refused_and_nothing_is_said(self):
        self.assertEqual(
            words(self.call(CmdTalk(), "/loud Helper = hi")),
            "talk has no switch /loud: it takes none (see help talk).",
        )
        self.assertEqual(self.script.pending_events(), [])


class TestWhichAssistant(AssistantCommandTestCase):
    def setUp(self):
        super().setUp()
        self.sage = make_assistant("Sage", self.room1)

    def test_builders_are_told_the_assistants_here_and_how_to_pick_one(self):
        self.assertEqual(
            words(self.call(CmdAiMode(), "")),
            f"Which assistant? Helper ({self.assistant.dbref}) and Sage ({self.sage.dbref}) are "
            "here: name one exactly, or give its #dbref.",
        )
        self.call(CmdAiMode(), self.sage.dbref, "Sage is awake.")
        self.assertEqual(
            words(self.call(CmdAiMode(), "Nobody")),
            f"No assistant is called 'Nobody'; here: Helper ({self.assistant.dbref}) and Sage "
            f"({self.sage.dbref}): name one exactly, or give its #dbref.",
        )

    def test_a_name_that_several_match_lists_them_and_where_they_are(self):
        other = make_assistant("Helper", self.room2)
        shown = words(self.call(CmdAiMode(), "Helper"))
        self.assertTrue(shown.startswith("Which assistant? 'Helper' could be "), shown)
        self.assertIn(f"Helper ({self.assistant.dbref})", shown)
        self.assertIn(f"Helper ({other.dbref}, in Room2)", shown)
        self.assertTrue(shown.endswith(": name one exactly, or give its #dbref."), shown)
        self.call(CmdAiMode(), other.dbref, "Helper is awake.")

    def test_players_are_told_names_alone(self):
        shown = words(self.call(CmdTalk(), "hello", caller=self.char2))
        self.assertEqual(shown, "Which assistant? Helper and Sage are here: name one exactly.")
        self.assertNotIn("#", shown)
        self.call(CmdTalk(), "Sage = hello", 'You say to Sage, "hello"', caller=self.char2)


class TestAiMode(AssistantCommandTestCase):
    def test_builders_switch_modes(self):
        self.call(CmdAiMode(), "Helper", "Helper is awake.")
        self.call(
            CmdAiMode(), "Helper = sleep", "Helper drifts off to sleep.|Helper is asleep (dozing)."
        )
        self.assertEqual(self.script.db.operating_mode, "sleep")
        self.call(CmdAiMode(), "Helper = awake", "Helper wakes up.|Helper is awake.")
        self.call(CmdAiMode(), "Helper = dance", "Unknown mode 'dance'")

    def test_the_sleep_and_wake_emotes_follow_their_attributes(self):
        self.script.set_config("sleep_emote", "{name} curls up by the fire.")
        self.script.set_config("wake_emote", None)
        self.call(
            CmdAiMode(), "Helper = sleep", "Helper curls up by the fire.|Helper is asleep (dozing)."
        )
        self.call(CmdAiMode(), "Helper = awake", "Helper is awake.")
        self.script.set_config("sleep_emote", None)
        self.call(CmdAiMode(), "Helper = sleep", "Helper is asleep (dozing).")
        for value, refused in (("{nme} naps.", "not {nme}"), (5, "=5 refused"), ("", "text")):
            with self.subTest(value=value), self.assertRaises(ConfigError) as raised:
                self.script.set_config("wake_emote", value)
            self.assertIn("wake_emote", str(raised.exception))
            self.assertIn(refused, str(raised.exception))

    def test_a_switch_is_refused_and_the_mode_stays(self):
        self.assertEqual(
            words(self.call(CmdAiMode(), "/sleep Helper = sleep")),
            "aimode has no switch /sleep: it takes none (see help aimode).",
        )
        self.assertNotEqual(self.script.db.operating_mode, "sleep")

    def test_locked_to_builders(self):
        self.assertTrue(CmdAiMode().access(self.char1, "cmd"))  # Developer
        self.assertFalse(CmdAiMode().access(self.char2, "cmd"))


LONG_OPTIONS = {
    "api_base": "http://127.0.0.1:8080/v1",
    "api_key_env": "LOCAL_KEY",
    "timeout": 600,
    "temperature": 0.2,
    "max_tokens": 300,
    "tools_as_text": True,
}
LONG_PROMPT = (
    "Summarize the conversation for |rlater|n.\n\nKeep every fact: "
    + "names, numbers, promises and places, " * 6
)


def words(text):
    """Return ``text`` with its whitespace runs made single spaces (wrapping undone)."""
    return " ".join(text.split())


class TestAiConfig(AssistantCommandTestCase):
    def assert_fits(self, output, width=78):
        for line in output.splitlines():
            self.assertLessEqual(display_len(line), width, line)

    def test_lists_every_attribute_within_78_columns(self):
        self.script.set_config("llm_options", LONG_OPTIONS)
        self.script.set_config("compact_prompt", LONG_PROMPT)
        output = self.call(CmdAiConfig(), "Helper", "Configuration of Helper (aiconfig Helper/")
        self.assert_fits(output)
        lines = output.splitlines()
        self.assertIn("compact_sleep_threshold = 0.7", lines)
        self.assertIn("execution_config = {'multi_action_enabled': True, ", output)
        options = next(line for line in lines if line.startswith("llm_options = "))
        self.assertTrue(options.startswith("llm_options = {'api_base': 'http://127.0.0.1:8080"))
        self.assertTrue(options.endswith("…"), "a long value is cut with a marker")
        prompt = next(line for line in lines if line.startswith("compact_prompt = "))
        self.assertIn("'Summarize the conversation for |rlater|n.\\n\\nKeep", prompt)
        for name, option in SCRIPT_CONFIG.items():
            with self.subTest(name=name):
                self.assertTrue(any(line.startswith(f"{name} = ") for line in lines))
                self.assertIn(words(option.description), words(output))

    def test_shows_one_attribute_in_full_with_its_default_range_and_meaning(self):
        self.script.set_config("llm_options", LONG_OPTIONS)
        output = self.call(CmdAiConfig(), "Helper/llm_options", "Helper/llm_options =\n")
        self.assert_fits(output)
        for key, value in LONG_OPTIONS.items():
            self.assertIn(f"{key!r}: {value!r}", output)
        self.assertIn("\ndefault: {}\n", output)
        self.assertIn(
            "allowed: a dict of litellm options such as {'api_base': "
            "'http://127.0.0.1:11434', 'temperature': 0.3}",
            words(output),
        )
        self.assertIn(f"meaning: {SCRIPT_CONFIG['llm_options'].description}", words(output))
        self.call(
            CmdAiConfig(),
            "Helper/compact_sleep_threshold",
            "Helper/compact_sleep_threshold = 0.7\ndefault: 0.7\nallowed: a number in (0, 1]\n"
            "meaning: Compact during sleep at this usage",
        )
        self.call(
            CmdAiConfig(),
            "Helper/compact_enabled",
            "Helper/compact_enabled = True\ndefault: True\n"
            "allowed: yes or no (or true/false, on/off)",
        )

    def test_shows_long_text_whole_wrapped_and_uncoloured(self):
        self.script.set_config("compact_prompt", LONG_PROMPT)
        output = self.call(
            CmdAiConfig(),
            "Helper/compact_prompt",
            "Helper/compact_prompt =\n    Summarize the conversation for |rlater|n.\n\n",
        )
        self.assert_fits(output)
        self.assertIn(words(LONG_PROMPT), words(output))
        self.assertIn("\ndefault: None\nallowed: None or a non-empty string\n", output)

    def test_an_unknown_attribute_is_named_with_close_matches(self):
        self.assertTrue(
            words(self.call(CmdAiConfig(), "Helper/compact_sleep")).startswith(
                "Helper has no configuration attribute 'compact_sleep'. Did you mean: "
                "compact_sleep_threshold"
            )
        )
        self.call(
            CmdAiConfig(),
            "Helper/xyzzy = 1",
            "Helper has no configuration attribute 'xyzzy'. aiconfig Helper lists them all.",
        )
        self.assertFalse(self.script.attributes.has("xyzzy"))
        self.call(CmdAiConfig(), "Helper = 3", "Usage: aiconfig <assistant>/<attribute> = <value>")

    def test_sets_a_valid_value(self):
        self.call(
            CmdAiConfig(),
            "Helper/compact_preserve_window = 12",
            "Helper: compact_preserve_window = 12",
        )
        self.assertEqual(self.script.db.compact_preserve_window, 12)

    def test_reads_yes_no_for_switches_and_plain_text_for_text(self):
        for word, expected in (("no", False), ("YES", True), ("off", False), ("On", True)):
            with self.subTest(word=word):
                self.call(
                    CmdAiConfig(),
                    f"Helper/compact_enabled = {word}",
                    f"Helper: compact_enabled = {expected}",
                )
                self.assertIs(self.script.db.compact_enabled, expected)
        self.call(CmdAiConfig(), "Helper/compact_notify_room = true")
        self.assertIs(self.script.db.compact_notify_room, True)
        self.call(CmdAiConfig(), "Helper/compact_notify_room = False")
        self.assertIs(self.script.db.compact_notify_room, False)
        self.call(
            CmdAiConfig(),
            "Helper/llm_model = openai/gpt-4o-mini",
            "Helper: llm_model = 'openai/gpt-4o-mini'",
        )
        self.assertEqual(self.script.db.llm_model, "openai/gpt-4o-mini")
        self.call(CmdAiConfig(), "Helper/llm_model = 'offline/assistant'")
        self.assertEqual(self.script.db.llm_model, "offline/assistant")
        self.call(CmdAiConfig(), "Helper/thinking_emote = {name} hums, then 42.")
        self.assertEqual(self.script.db.thinking_emote, "{name} hums, then 42.")
        self.call(CmdAiConfig(), "Helper/thinking_emote = 42")
        self.assertEqual(self.script.db.thinking_emote, "42")
        self.call(CmdAiConfig(), "Helper/thinking_emote = None", "Helper: thinking_emote = None")
        self.assertIsNone(self.script.db.thinking_emote)
        self.call(CmdAiConfig(), "Helper/llm_options = {'temperature': 0.3}")
        self.assertEqual(self.script.db.llm_options, {"temperature": 0.3})
        self.call(CmdAiConfig(), "Helper/compact_sleep_threshold = 0.6")
        self.assertEqual(self.script.db.compact_sleep_threshold, 0.6)

    def test_refuses_a_bad_value_once_naming_the_range_and_changes_nothing(self):
        cases = [
            (
                "compact_sleep_threshold = 2",
                "compact_sleep_threshold=2 refused: must be a number in (0, 1]; nothing changed.",
            ),
            (
                "compact_enabled = maybe",
                "compact_enabled='maybe' refused: must be yes or no (or true/false, on/off); "
                "nothing changed.",
            ),
            (
                "compact_preserve_window = many",
                "compact_preserve_window='many' refused: must be a whole number from 1 to "
                "10,000; nothing changed.",
            ),
            (
                "context_overrides = {'tick_event': {'max_iterations': 0}}",
                "context_overrides['tick_event']['max_iterations']=0 refused: must be a whole "
                "number from 1 to 10; nothing changed.",
            ),
            ("llm_model = gpt nope", "llm_model='gpt nope' refused: litellm knows no provider"),
            (
                'llm_options = {"temperature": "hot"}',
                "llm_options={'temperature': 'hot'} refused: ['temperature'] must be a number in "
                "[0, 2], not text: write it without quotes; nothing changed.",
            ),
            (
                'compact_options = {"timeout": "30"}',
                "compact_options={'timeout': '30'} refused: ['timeout'] must be a number in "
                "(0, 86400], not text: write it without quotes; nothing changed.",
            ),
            (
                "thinking_emote = {nme} ponders.",
                "thinking_emote='{nme} ponders.' refused: must be text in which {name} (the "
                "assistant's name) is the only field in braces, not {nme}; nothing changed.",
            ),
            (
                f"max_context_tokens = {10**38}",
                f"max_context_tokens={10**38} refused: must be a whole number up to 10,000,000,",
            ),
            (
                "max_context_tokens = 1000",
                "max_context_tokens=1000 refused: the prompt without any history is already ",
            ),
        ]
        before = {name: self.script.attributes.get(name) for name in SCRIPT_CONFIG}
        for args, message in cases:
            with self.subTest(args=args):
                output = self.call(CmdAiConfig(), f"Helper/{args}")
                self.assert_fits(output)
                self.assertTrue(words(output).startswith(message), output)
                self.assertEqual(output.lower().count("refused"), 1, output)
                self.assertTrue(words(output).endswith("; nothing changed."), output)
        self.assertEqual({name: self.script.attributes.get(name) for name in SCRIPT_CONFIG}, before)

    def test_locked_to_builders(self):
        self.assertFalse(CmdAiConfig().access(self.char2, "cmd"))


class TestAiConfirm(AssistantCommandTestCase):
    def setUp(self):
        super().setUp()
        self.demolished = []
        register_tool(
            Tool(
                name="demolish",
                description="Tear down a building",
                parameters={"type": "object", "properties": {"what": {"type": "string"}}},
                categories=frozenset({"dangerous"}),
                handler=lambda ctx, what: self.demolished.append(what)
                or ToolResult(True, f"{what} is rubble"),
            )
        )
        self.addCleanup(unregister_tool, "demolish")
        # A game's own tool joins a turn through the context's tool_filter.
        offered = {"tool_filter": [*CONVERSATION_TOOLS, "demolish"]}
        self.script.set_config("context_overrides", {"tick_event": offered})
        calls = [[("demolish", {"what": "the old mill"})], [("demolish", {"what": "the bridge"})]]
        with ScriptedLLM(*calls) as llm:
            self.script.set_config("llm_model", llm.model)
            for _ in calls:
                loop = wait_for(
                    run_react_loop(
                        self.script,
                        self.assistant,
                        "tick_event",
                        signals={"event_class": "building"},
                    )
                )
                self.assertEqual(loop.stop_reason, "awaiting_confirmation")
        self.assertEqual(self.demolished, [])

    def test_lists_the_waiting_calls(self):
        output = self.call(CmdAiConfirm(), "Helper")
        self.assertIn("Tool calls Helper waits on:", output)
        self.assertRegex(output, r'1 +demolish\(\{"what": "the old mill"\}\)')
        self.assertRegex(output, r'2 +demolish\(\{"what": "the bridge"\}\)')

    def test_confirming_runs_the_call_and_tells_the_assistant(self):
        self.call(
            CmdAiConfirm(),
            "Helper = 2",
            # The builder, in the room, hears what the room hears first.
            "A builder allowed it, and Helper did it: demolish (what: the bridge).|"
            'Ran demolish({"what": "the bridge"}) for Helper: the bridge is rubble',
        )
        self.assertEqual(self.demolished, ["the bridge"])
        self.assertEqual(len(self.script.db.awaiting_confirmation), 1)
        told = self.script.conversation_history[-1]
        self.assertEqual(
            (told["role"], told["content"]),
            (
                "user",
                'Char allowed your call demolish({"what": "the bridge"}); it returned: '
                "the bridge is rubble",
            ),
        )

    def test_discarding_drops_the_call_unrun_and_tells_the_assistant(self):
        self.assertTrue(
            words(self.call(CmdAiConfirm(), "/discard Helper = 1")).startswith(
                "A builder did not allow it, so Helper did not do it: demolish (what: the old "
                "mill). Discarded demolish("
            )
        )
        self.assertEqual(self.demolished, [])
        remaining = self.script.db.awaiting_confirmation
        self.assertEqual(
            [call["function"]["arguments"] for call in remaining], ['{"what": "the bridge"}']
        )
        self.assertIn(
            "Char did not allow your call demolish(",
            self.script.conversation_history[-1]["content"],
        )

    def test_a_call_made_in_a_whispered_turn_runs_for_the_whisperer_alone(self):
        with ScriptedLLM([("demolish", {"what": "the vault"})]) as llm:
            self.script.set_config("llm_model", llm.model)
            event = {"type": "whisper", "speaker": self.char2.dbref, "speaker_name": "Char2"}
            wait_for(
                run_react_loop(
                    self.script,
                    self.assistant,
                    "tick_event",
                    event=dict(event, text="Tear down the vault."),
                    signals={"event_class": "building"},
                )
            )
        self.call(CmdAiConfirm(), "Helper = 3", 'Ran demolish({"what": "the vault"})')
        told = self.script.conversation_history[-1]
        self.assertEqual(told["metadata"]["audience"], [self.char2.dbref])
        self.assertIn("the vault is rubble", told["content"])

    def test_a_wrong_number_changes_nothing(self):
        for wrong in ("0", "3", "two"):
            self.call(CmdAiConfirm(), f"Helper = {wrong}", f"Helper has no waiting call '{wrong}'")
        self.assertEqual(len(self.script.db.awaiting_confirmation), 2)
        self.assertEqual(self.demolished, [])

    def test_a_misspelt_discard_runs_nothing_and_drops_nothing(self):
        for args, refusal in (
            ("/dicsard Helper = 1", "aiconfirm has no switch /dicsard. Its switches: /discard."),
            ("/discard/run Helper = 1", "aiconfirm has no switch /run. Its switches: /discard."),
        ):
            with self.subTest(args):
                self.assertEqual(words(self.call(CmdAiConfirm(), args)), refusal)
        self.assertEqual(self.demolished, [])
        self.assertEqual(len(self.script.db.awaiting_confirmation), 2)
        self.assertIn("Discarded demolish(", self.call(CmdAiConfirm(), "/disc Helper = 1"))
        self.assertEqual(len(self.script.db.awaiting_confirmation), 1)

    def test_nothing_waiting(self):
        self.script.db.awaiting_confirmation = []
        self.call(CmdAiConfirm(), "Helper", "Helper waits on no dangerous tool call.")

    def test_locked_to_builders(self):
        self.assertTrue(CmdAiConfirm().access(self.char1, "cmd"))
        self.assertFalse(CmdAiConfirm().access(self.char2, "cmd"))


class TestSwitches(AssistantCommandTestCase):
    def test_aiconfig_takes_no_switch_and_changes_nothing(self):
        self.assertEqual(
            words(self.call(CmdAiConfig(), "/compact_enabled Helper = no")),
            "aiconfig has no switch /compact_enabled: it takes none (see help aiconfig).",
        )
        self.assertIs(self.script.get_config("compact_enabled"), True)

    def test_every_command_refuses_an_unknown_switch_and_its_help_names_those_it_has(self):
        cmdset = AssistantCmdSet()
        cmdset.at_cmdset_creation()
        for command in cmdset.commands:
            with self.subTest(command.key):
                output = self.call(type(command)(), "/bogus Helper = 1")
                self.assertTrue(output.startswith(f"{command.key} has no switch /bogus"), output)
                for switch in command.switch_options:
                    self.assertIn(f"/{switch}", command.__doc__)
        self.assertEqual(self.script.pending_events(), [])
