"""Everything builders and players read from the assistant fits a 78-column client: every
command (each switch, refusal, usage and help text) with long names, long values and four-
and five-digit token counts, the poses the assistant's own fixed text makes, and the AIlog
channel's lines as Evennia renders them (after its ``[AIlog]`` prefix).

Model speech is left out: a player's client wraps what was said, as Evennia's ``say``.
"""

from evennia.utils import create
from evennia.utils.ansi import strip_ansi
from evennia.utils.utils import display_len

from ai.commands import (
    AssistantCmdSet,
    CmdAiCompact,
    CmdAiConfig,
    CmdAiConfirm,
    CmdAiHistory,
    CmdAiMemory,
    CmdAiMode,
    CmdTalk,
)
from ai.config import SCRIPT_CONFIG
from ai.helpers.entity_context import add_observation
from ai.helpers.journal import add_entry
from ai.log_channel import post_to_log_channel
from ai.models import MemoryLink
from ai.sleep.compaction import compact_conversation_history
from ai.sleep.consolidation import consolidate_memories_to_semantic

from .support import (
    AssistantCommandTestCase,
    ScriptedLLM,
    make_assistant,
    record_messages,
    store_window,
    wait_for,
)
from .test_model_refusals import refused_key

WIDTH = 78
# Names without a space to break at, as long as a builder is likely to give.
ASSISTANT = "Keeper-of-the-Long-Winding-Archive-Stacks"
PLAYER = "Maximiliana-Featherstonehaugh"
STRANGER = "Someone-Else-Entirely-Who-Is-Not-Here-At-All"
# About 1,600 and 12,000 tokens: four- and five-digit counts in every table and figure.
LONG_WORDS = " ".join(f"Ship {n} came into the harbour on day {n + 3}." for n in range(130))
HUGE_WORDS = " ".join(f"Cart {n} left the market on day {n + 5}." for n in range(1100))
FACTS = [
    "I buried 40 gold coins under the old oak by the mill.",
    "My sister works as a blacksmith in the river village.",
    "The library closes early every Thursday for cleaning.",
]
# Values every attribute refuses (or takes): each kind of refusal, and long ones.
VALUES = [
    "hot",
    "10**40",
    str(10**40),
    "-12345",
    "{'temperature': 'hot', 'timeout': '30', 'max_tokens': 'many'}",
    "[" + ", ".join(["'a-long-list-item'"] * 20) + "]",
    "x" * 300,
    "{nme} " + "ponders the question at great length " * 5,
]


def too_wide(text, width=WIDTH):
    """Return the lines of ``text`` (markup stripped) wider than ``width``."""
    return [line for line in strip_ansi(str(text)).splitlines() if display_len(line) > width]


class ColumnsTestCase(AssistantCommandTestCase):
    """Runs commands and keeps every line wider than the client: what the caller (Char), a
    player in the room (Char2) and a builder on the AIlog channel (the account) receive."""

    def setUp(self):
        super().setUp()
        self.assistant.key = ASSISTANT
        self.char1.key = PLAYER
        # A tall client: EvMore sends each answer whole, so that every line is checked.
        self.session.protocol_flags["SCREENHEIGHT"] = {0: 10_000}
        self.heard = record_messages(self.char1)
        self.room_heard = record_messages(self.char2)
        self.channel_heard = record_messages(self.account)
        self.wide = []

    def run_command(self, cmd, args, **kwargs):
        """Run ``cmd`` with ``args``; keep each line it sent wider than the client."""
        output = self.call(cmd, args, **kwargs)
        self.wide += [(f"{cmd.key}{args}", line) for line in too_wide(output)]
        return output

    def assert_all_fit(self):
        """Assert that nothing anyone received had a line wider than the client."""
        for who, received in (
            ("the caller, later", self.heard),
            ("the room", self.room_heard),
            ("the channel", self.channel_heard),
        ):
            self.wide += [(who, line) for line in too_wide("\n".join(map(str, received)))]
        report = "\n".join(f"{display_len(line):4} {what!r}: {line}" for what, line in self.wide)
        self.assertEqual(self.wide, [], f"lines over {WIDTH} columns:\n{report}")

    def channel_lines(self):
        return [strip_ansi(str(text)) for text in self.channel_heard]


class TestCommandsFit(ColumnsTestCase):
    def fill_history(self):
        """Give the assistant a history of every kind of message, some of them thousands of
        tokens long, a compaction of over ten thousand tokens, a pin, journal entries and
        entity profiles, some of them private."""
        script = self.script
        script.set_config("max_context_tokens", 200_000)
        script.set_config("compact_preserve_window", 2)
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "search_history", "arguments": f'{{"query": "{LONG_WORDS}"}}'},
        }
        for fact in FACTS:
            script.append_message({"role": "user", "content": f'{PLAYER} says, "{fact}"'})
        whispered = {"audience": [self.char1.dbref]}
        script.append_message(
            {"role": "user", "content": f'{PLAYER} whispers, "{FACTS[0]}"', "metadata": whispered}
        )
        script.append_message({"role": "assistant", "content": None, "tool_calls": [call]})
        script.append_message({"role": "tool", "tool_call_id": "call_1", "content": HUGE_WORDS})
        for text in ("Noted, thank you.", "You are welcome.", "Good day."):
            script.append_message({"role": "assistant", "content": text})
        result = wait_for(
            compact_conversation_history(script, self.assistant, force=True, kind="manual")
        )
        self.assertTrue(result.get("success"), result)
        self.assertGreater(result["original_tokens"], 10_000)
        script.append_message({"role": "assistant", "content": None, "tool_calls": [call]})
        script.append_message({"role": "tool", "tool_call_id": "call_1", "content": HUGE_WORDS})
        for text in (HUGE_WORDS, LONG_WORDS):
            script.append_message({"role": "user", "content": f'{PLAYER} says, "{text}"'})
            script.append_message({"role": "assistant", "content": LONG_WORDS})
        pinned = script.history.messages()[-1]["id"]
        self.call(CmdAiCompact(), f"/pin {ASSISTANT} = {pinned}")
        add_entry(
            self.assistant,
            LONG_WORDS[:1900],
            "conversation",
            tags=["harbour-ledger-of-every-ship"] * 6,
            audience=[self.char1.dbref],
        )
        add_observation(self.assistant, self.char1, LONG_WORDS[:500], audience=[self.char1.dbref])
        add_observation(self.assistant, self.char1, LONG_WORDS[:300])

    def test_aihistory_every_switch_and_refusal(self):
        self.fill_history()
        summary = next(row for row in self.script.history.messages() if row["role"] == "system")
        tokens = [row["token_count"] for row in self.script.history.messages()]
        self.assertTrue(any(count > 10_000 for count in tokens), tokens)
        self.assertTrue(any(1_000 < count < 10_000 for count in tokens), tokens)
        for args in (
            f" {ASSISTANT}",
            f"/journal {ASSISTANT}",
            f"/compactions {ASSISTANT}",
            f"/archived {ASSISTANT} {summary['id']}",
            f"/archived {ASSISTANT} 99999",
            f"/archived {ASSISTANT}",
            f"/pins {ASSISTANT}",
            f"/calls {ASSISTANT}",
            f"/subagents {ASSISTANT}",
            f"/bogus {ASSISTANT}",
            f"/journal/pins {ASSISTANT}",
            f" {STRANGER}",
        ):
            self.run_command(CmdAiHistory(), args)
        self.assert_all_fit()

    def test_aicompact_every_switch_and_refusal(self):
        self.fill_history()
        rows = self.script.history.messages()
        ids = ", ".join(str(row["id"]) for row in rows[-3:])
        for args in (
            f"/pin {ASSISTANT} = {ids}, 99998, 99999",
            f"/unpin {ASSISTANT} = {ids}, 99998, 99999",
            f"/pinfact {ASSISTANT} = {LONG_WORDS[:600]}",
            f"/pin {ASSISTANT} = {rows[-5]['id']}, {rows[-4]['id']}",  # over the cap
            f"/pin {ASSISTANT} = some, thing",
            f"/pin {ASSISTANT}",
            f"/un {ASSISTANT}",
            f"/undo/pin {ASSISTANT}",
            f"/bogus {ASSISTANT}",
            f" {STRANGER}",
            f" {ASSISTANT}",  # a compaction, reported when it is done
        ):
            self.run_command(CmdAiCompact(), args)
        wait_for(self.script.ndb.manual_compaction)
        self.script.set_config("max_context_tokens", 14_000)
        for args in (f"/undo {ASSISTANT}", f"/undo/force {ASSISTANT}", f"/undo {ASSISTANT}"):
            self.run_command(CmdAiCompact(), args)
        self.assert_all_fit()

    def test_aiconfig_every_attribute_value_and_refusal(self):
        self.script.set_config(
            "llm_options",
            {"api_base": "http://127.0.0.1:8080/v1/" + "a-very-long-path/" * 8, "timeout": 600},
        )
        for args in (
            ASSISTANT,
            f"{ASSISTANT}/no_such_attribute_with_a_rather_long_name",
            f"{ASSISTANT}/compact_treshold",
            f"{ASSISTANT} = 3",
            f"/verbose {ASSISTANT}",
            STRANGER,
        ):
            self.run_command(CmdAiConfig(), args)
        for name in SCRIPT_CONFIG:
            self.run_command(CmdAiConfig(), f"{ASSISTANT}/{name}")
            for value in VALUES:
                self.run_command(CmdAiConfig(), f"{ASSISTANT}/{name} = {value}")
                self.script.attributes.remove(name)
        self.assert_all_fit()

    def test_aimode_and_why_the_assistant_cannot_answer(self):
        for args in (
            ASSISTANT,
            f"{ASSISTANT} = sleep",
            f"{ASSISTANT} = awake",
            f"{ASSISTANT} = dance-the-night-away-in-the-great-hall",
            f"/sleep {ASSISTANT}",
            STRANGER,
        ):
            self.run_command(CmdAiMode(), args)
        with ScriptedLLM(refused_key()) as llm:
            self.script.set_config("llm_model", llm.model)
            self.script.queue_event(
                {
                    "type": "speech",
                    "speaker": self.char1.dbref,
                    "speaker_name": PLAYER,
                    "text": "Hello?",
                }
            )
            wait_for(self.script.at_repeat())
        self.run_command(CmdAiMode(), ASSISTANT)
        self.assertIn("refused its key", " ".join(" ".join(self.channel_lines()).split()))
        self.assert_all_fit()

    def test_talk_refusals(self):
        make_assistant("Another-Keeper-of-the-Long-Winding-Stacks", self.room1)
        for args in ("", "hello", f"{STRANGER} = hi", "/loud hi"):
            self.run_command(CmdTalk(), args)
        self.assert_all_fit()

    def test_help_of_every_command(self):
        from evennia.commands.default.help import CmdHelp  # only once Evennia is set up

        for cmd in AssistantCmdSet().commands:
            self.run_command(CmdHelp(), f" {cmd.key}", cmdset=AssistantCmdSet())
        self.assert_all_fit()


class TestConfirmationFits(ColumnsTestCase):
    def test_a_held_call_its_notice_listing_running_and_discarding(self):
        self.script.set_config(
            "context_overrides", {"tick_event": {"dangerous_requires_confirm": True}}
        )
        lantern = "the " + "very " * 30 + "old lantern"
        create.create_object(key=lantern, location=self.assistant)  # a call that can run
        give = ("give", {"item": lantern, "recipient": PLAYER})
        with ScriptedLLM([give], [give]) as llm:
            self.script.set_config("llm_model", llm.model)
            for _ in range(2):
                self.script.queue_event(
                    {
                        "type": "speech",
                        "speaker": self.char1.dbref,
                        "speaker_name": PLAYER,
                        "text": "Please give me the lantern.",
                    }
                )
                wait_for(self.script.at_repeat())
        self.assertEqual(len(self.script.db.awaiting_confirmation), 2)
        self.assertIn("waits for a builder", " ".join(" ".join(self.channel_lines()).split()))
        for args in (
            ASSISTANT,
            f"{ASSISTANT} = 7",
            f"/bogus {ASSISTANT} = 1",
            f"/discard {ASSISTANT} = 2",
            f"{ASSISTANT} = 1",
            ASSISTANT,
        ):
            self.run_command(CmdAiConfirm(), args)
        self.assert_all_fit()


class TestMemoryFits(ColumnsTestCase):
    def test_aimemory_every_switch_and_refusal(self):
        entry = add_entry(
            self.assistant, LONG_WORDS[:1500], "conversation", audience=[self.char1.dbref]
        )
        add_observation(self.assistant, self.char1, LONG_WORDS[:500], audience=[self.char1.dbref])
        wait_for(consolidate_memories_to_semantic(self.script, self.assistant, 20))
        link = MemoryLink.objects.get(entry__entry_id=entry["id"])
        for args in (
            f" {ASSISTANT}",
            f"/show {ASSISTANT} = {link.id}",
            f"/show {ASSISTANT} = 99999",
            f"/show {ASSISTANT} = not-a-number-at-all-but-a-long-word-instead",
            f"/profiles {ASSISTANT}",
            f"/profiles {ASSISTANT} = {STRANGER}",
            f"/search {ASSISTANT}",
            f" {ASSISTANT} = what",
            f"/bogus {ASSISTANT}",
            f" {ASSISTANT}/search harbour ledger",
            f" {STRANGER}",
            f"/search {ASSISTANT} = {LONG_WORDS[:200]}",
        ):
            self.run_command(CmdAiMemory(), args)
        wait_for(self.char1.ndb.aimemory_search)
        self.assert_all_fit()


class TestLogChannelFits(ColumnsTestCase):
    def test_a_long_notice_is_wrapped_under_the_channel_prefix_and_loses_nothing(self):
        text = f"{ASSISTANT}: {LONG_WORDS[:400]}\n{PLAYER} {HUGE_WORDS[:200]}"
        post_to_log_channel(self.script, text)
        (received,) = self.channel_lines()
        lines = received.splitlines()
        self.assertTrue(lines[0].startswith(f"[AIlog] {ASSISTANT}: Ship 0"), lines[0])
        self.assertTrue(all(line.startswith(" " * 8) for line in lines[1:]), lines)
        self.assertEqual(" ".join(received.split()), "[AIlog] " + " ".join(text.split()))
        self.assert_all_fit()

    def test_compaction_and_no_room_notices(self):
        self.script.set_config("compact_notify_room", True)
        for fact in FACTS * 4:
            self.script.append_message({"role": "user", "content": f'{PLAYER} says, "{fact}"'})
            self.script.append_message({"role": "assistant", "content": LONG_WORDS})
        store_window(self.script, 600)
        wait_for(compact_conversation_history(self.script, self.assistant, force=True))
        said = " ".join(" ".join(self.channel_lines()).split())
        self.assertIn(f"{ASSISTANT} compacted its context (emergency)", said)
        self.assertIn(f"{ASSISTANT} cannot make room in its context", said)
        self.assert_all_fit()
