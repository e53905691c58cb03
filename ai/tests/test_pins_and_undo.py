"""Pins and undo in game: aicompact/pin, /unpin, /pinfact, /undo, the pin_fact tool, and
what aihistory shows of pins, masked tool outputs and compaction records."""

from unittest.mock import patch

from ai.commands import AssistantCmdSet, CmdAiCompact, CmdAiHistory
from ai.helpers.journal import journal_entries
from ai.log_channel import log_channel
from ai.models import CompactionRecord, JournalEntry
from ai.sleep.common import is_stuck, record_outcome

from .support import (
    AssistantTestCase,
    ScriptedLLM,
    record_messages,
    store_window,
    wait_for,
)
from .test_compaction_commands import FACTS, CompactionCommandTestCase, summary

MASKED_CONTENT = "[TOOL OUTPUT ARCHIVED - search history for details]"
LOOK_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_look",
            "type": "function",
            "function": {"name": "look", "arguments": '{"target": "oak"}'},
        }
    ],
}
PROMISE = "Char promised to bring the map of Mirkwood tomorrow."
WHISPER = "whisper Helper = Keep this between us: the vault code is 4417."


def live_ids(script):
    return [message["id"] for message in script.history.messages()]


class PinUndoTestCase(CompactionCommandTestCase):
    def tool_unit(self, output="An old oak. " * 20):
        call = self.script.append_message(LOOK_CALL)
        result = self.script.append_message(
            {"role": "tool", "tool_call_id": "call_look", "content": output}
        )
        return call, result

    def compact_through_command(self, summary_text="Char buried coins and named his sister."):
        """Run aicompact on a scripted model (no extraction); return its report."""
        self.script.set_config("pre_compact_extraction_enabled", False)
        with ScriptedLLM(summary_text) as llm:
            self.script.set_config("llm_model", llm.model)
            heard = record_messages(self.char1)
            self.said(CmdAiCompact(), "Helper", "Helper starts compacting")
            wait_for(self.script.ndb.manual_compaction)
        return heard[-1]

    def said(self, cmd, args, expected=None):
        """Run ``cmd``; return its output on one line (as wrapped to 78 columns, undone),
        checked to start with ``expected``."""
        output = " ".join(self.call(cmd, args).split())
        if expected is not None:
            self.assertTrue(output.startswith(expected), f"{output!r} does not start {expected!r}")
        return output

    def player_types(self, line):
        """Type ``line`` as Char2, a player, through the cmdhandler; return what Char2 saw."""
        self.char2.cmdset.add(AssistantCmdSet)
        heard = record_messages(self.char2)
        self.char2.execute_cmd(line)
        return "\n".join(map(str, heard))


class TestPinCommands(PinUndoTestCase):
    def test_a_pinned_message_outlives_a_compaction_in_its_place(self):
        self.tell_facts()
        self.make_compactable()
        self.script.set_config("compact_pin_max_share", 1)
        pinned = self.script.history.messages()[4]  # the third fact
        self.said(
            CmdAiCompact(),
            f"/pin Helper = {pinned['id']}",
            f"Pinned 1 message of Helper ({pinned['id']}). Pins hold {pinned['token_count']} "
            "of 1,000 tokens (compact_pin_max_share 1 of max_context_tokens 1000).",
        )
        before = live_ids(self.script)
        report = self.compact_through_command()
        self.assertRegex(report, r"compacted 9 messages")
        live = self.script.history.messages()
        self.assertEqual(live[0]["metadata"]["type"], "compaction")
        self.assertEqual(
            [m["id"] for m in live[1:]], [pinned["id"]] + before[-2:], "pin kept, in order"
        )
        self.assertEqual(live[1]["content"], FACTS[2])
        output = self.call(CmdAiHistory(), "Helper")
        self.assertRegex(
            output, rf"\n {pinned['id']} +user +\d+ +\[pinned\] Char says, \"The north"
        )

    def test_a_pin_takes_the_whole_tool_call_unit(self):
        self.tell_facts(FACTS[:1])
        call, result = self.tool_unit("A small oak.")
        self.said(
            CmdAiCompact(),
            f"/pin Helper = {result['id']}",
            f"Pinned 2 messages of Helper ({call['id']}, {result['id']}: with their tool calls "
            "or results).",
        )
        self.assertEqual(
            [m["id"] for m in self.script.history.pinned_messages()], [call["id"], result["id"]]
        )
        self.said(CmdAiCompact(), f"/unpin Helper = {call['id']}", "Unpinned 2 messages of Helper")
        self.assertEqual(self.script.history.pinned_messages(), [])

    def test_pin_and_unpin_say_what_really_changed(self):
        first, second = (
            self.script.append_message({"role": "user", "content": fact}) for fact in FACTS[:2]
        )
        one, two = first["id"], second["id"]
        self.said(CmdAiCompact(), f"/pin Helper = {one}", f"Pinned 1 message of Helper ({one}).")
        self.said(
            CmdAiCompact(),
            f"/pin Helper = {one}",
            f"Nothing changed: Helper's message {one} was pinned already. Pins hold",
        )
        self.said(
            CmdAiCompact(),
            f"/pin Helper = {one}, {two}",
            f"Pinned 1 message of Helper ({two}). Message {one} was pinned already. Pins hold",
        )
        self.said(
            CmdAiCompact(), f"/unpin Helper = {one}", f"Unpinned 1 message of Helper ({one})."
        )
        self.said(
            CmdAiCompact(),
            f"/unpin Helper = {one}",
            f"Nothing changed: Helper's message {one} was unpinned already.",
        )
        self.assertEqual([m["id"] for m in self.script.history.pinned_messages()], [two])

    def test_a_pin_over_the_cap_is_refused_with_the_figures(self):
        store_window(self.script, 1000)
        small = self.script.append_message({"role": "user", "content": FACTS[0]})
        self.said(CmdAiCompact(), f"/pin Helper = {small['id']}", "Pinned 1 message")
        big = self.script.append_message({"role": "user", "content": "Char says, " + "oak " * 200})
        total = small["token_count"] + big["token_count"]
        self.said(
            CmdAiCompact(),
            f"/pin Helper = {big['id']}",
            f"Helper: pinning this would hold {total:,} tokens, over the cap of 100 "
            "(compact_pin_max_share 0.1 of max_context_tokens 1000); unpin something first.",
        )
        self.assertEqual([m["id"] for m in self.script.history.pinned_messages()], [small["id"]])

    def test_pinfact_appends_a_pinned_system_message(self):
        self.tell_facts(FACTS[:1])
        output = self.said(CmdAiCompact(), f"/pinfact Helper = {PROMISE}")
        fact = self.script.history.messages()[-1]
        self.assertEqual(
            output,
            f"Pinned a fact for Helper as message {fact['id']} ({fact['token_count']} tokens). "
            f"Pins hold {fact['token_count']} of 10,000 tokens (compact_pin_max_share 0.1 of "
            "max_context_tokens 100000).",
        )
        self.assertEqual(fact["content"], f"[PINNED FACT] {PROMISE}")
        self.assertEqual(fact["role"], "system")
        self.assertTrue(fact["pinned"])
        self.assertEqual(fact["metadata"], {"type": "pinned_fact", "by": "Char"})
        pins = self.call(CmdAiHistory(), "/pins Helper")
        self.assertIn("Pinned messages of Helper (1, oldest first):", pins)
        self.assertRegex(pins, rf"\n {fact['id']} +system +\d+ +\[pinned\] \[PINNED FACT\] Char")

    def test_pinfact_over_the_cap_changes_nothing(self):
        store_window(self.script, 256)
        before = len(self.script.history)
        output = self.said(CmdAiCompact(), f"/pinfact Helper = {PROMISE} " * 3)
        self.assertRegex(
            output,
            r"^Helper: pinning this would hold \d+ tokens, over the cap of 25 \(compact_pin_max_share"
            r" 0.1 of max_context_tokens 256\); unpin something first\.$",
        )
        self.assertEqual(len(self.script.history), before)

    def test_wrong_ids_and_forms_are_refused(self):
        self.said(
            CmdAiCompact(),
            "/pin Helper = 9999",
            "Helper has no live message 9999; aihistory Helper lists the row ids.",
        )
        self.said(
            CmdAiCompact(),
            "/pin Helper = twelve",
            "Usage: aicompact/pin <assistant> = <row id>[, <row id>...]",
        )
        self.said(
            CmdAiCompact(), "/pinfact Helper", "Usage: aicompact/pinfact <assistant> = <fact>"
        )
        self.said(CmdAiCompact(), "/pin/unpin Helper = 1", "Use one of /undo (with /force")
        self.said(CmdAiCompact(), "/force Helper", "Use one of /undo (with /force")
        self.said(CmdAiCompact(), "Helper = 3", "Usage: aicompact [<assistant>]")
        self.said(
            CmdAiHistory(),
            "/pins Helper",
            "Helper has no pinned messages. Pins hold 0 of 10,000 tokens",
        )

    def test_a_player_cannot_pin_or_undo(self):
        message = self.script.append_message({"role": "user", "content": FACTS[0]})
        for line in (
            f"aicompact/pin Helper = {message['id']}",
            "aicompact/pinfact Helper = x",
            "aicompact/undo Helper",
        ):
            with self.subTest(line=line):
                self.assertIn("Command 'aicompact", self.player_types(line))
        self.assertEqual(self.script.history.pinned_messages(), [])
        self.assertEqual(live_ids(self.script), [message["id"]])


class TestUndoCommand(PinUndoTestCase):
    def compacted(self):
        """Compact the facts but the last two messages, well within the window."""
        self.tell_facts()
        self.script.set_config("compact_preserve_window", 2)
        before = self.script.history.messages()
        result = self.compact()
        return before, result

    def test_undo_restores_the_messages_and_drops_the_synthesis(self):
        before, result = self.compacted()
        synthesis = journal_entries(self.assistant, "compaction")[-1]
        with patch.object(type(log_channel()), "msg") as channel_msg:
            output = self.said(CmdAiCompact(), "/undo Helper")
        usage = self.script.context_usage()
        self.assertEqual(
            output,
            f"Helper: undid the manual compaction #{result['compaction_id']} of "
            f"{CompactionRecord.objects.get().created_at.isoformat()[:19].replace('T', ' ')}: "
            f"{result['compacted_messages']} messages are live again; the context holds "
            f"{usage.total_tokens:,} of 100,000 tokens ({usage.usage:.1%}). Journal: 1 synthesis "
            "entry deleted.",
        )
        self.assertEqual(self.script.history.messages(), before)
        self.assertFalse(JournalEntry.objects.filter(entry_id=synthesis["id"]).exists())
        self.assertIsNotNone(CompactionRecord.objects.get().undone_at)
        self.said(CmdAiCompact(), "/undo Helper", "Helper: no compaction to undo.")
        self.assertEqual(
            " ".join(channel_msg.call_args.args[0].split()),
            f"Char undid Helper's manual compaction #{result['compaction_id']}: "
            f"{result['compacted_messages']} messages restored, context at {usage.usage:.0%}",
        )

    def test_after_an_undo_aihistory_shows_the_compaction_before_and_the_undone_one(self):
        self.compacted()
        self.tell_facts(FACTS[:2])
        first, second = CompactionRecord.objects.get(), self.compact()
        second = CompactionRecord.objects.get(id=second["compaction_id"])

        def stamp(moment):
            return moment.isoformat()[:19].replace("T", " ")

        self.assertIn(
            f"Last compaction: {stamp(second.created_at)}.", self.said(CmdAiHistory(), "Helper")
        )
        self.said(
            CmdAiCompact(), "/undo Helper", f"Helper: undid the manual compaction #{second.id}"
        )
        second.refresh_from_db()
        self.assertIn(
            f"Last compaction: {stamp(first.created_at)} (#{second.id} of "
            f"{stamp(second.created_at)} was undone {stamp(second.undone_at)}).",
            self.said(CmdAiHistory(), "Helper"),
        )
        self.said(
            CmdAiCompact(), "/undo Helper", f"Helper: undid the manual compaction #{first.id}"
        )
        first.refresh_from_db()
        self.assertIn(
            f"Last compaction: never (#{second.id} of {stamp(second.created_at)} was undone",
            self.said(CmdAiHistory(), "Helper"),
        )

    def test_a_consolidated_synthesis_is_archived_not_deleted(self):
        self.compacted()
        JournalEntry.objects.filter(source_type="compaction").update(consolidated=True)
        output = self.said(CmdAiCompact(), "/undo Helper")
        self.assertIn("Journal: 1 synthesis entry archived.", output)
        self.assertTrue(JournalEntry.objects.get(source_type="compaction").archived)

    def test_undo_that_would_compact_again_needs_force(self):
        before, result = self.compacted()
        after = self.script.history.messages()
        self.script.set_config("compact_sleep_threshold", 0.01)
        self.script.set_config("compact_emergency_threshold", 0.01)
        output = self.said(CmdAiCompact(), "/undo Helper")
        self.assertRegex(
            output,
            rf"^Helper: undoing compaction #{result['compaction_id']} would bring the context to "
            r"[\d,]+ of 100,000 tokens \(\d\.\d%\), at or over compact_emergency_threshold 1%: the "
            r"next awake tick would compact again\. Add /force to undo anyway\.$",
        )
        self.assertEqual(self.script.history.messages(), after)
        self.said(CmdAiCompact(), "/undo/force Helper", "Helper: undid the manual compaction")
        self.assertEqual(self.script.history.messages(), before)

    def test_undo_clears_the_stuck_state(self):
        self.compacted()
        record_outcome(self.script, "emergency", still_over=True)
        self.assertTrue(is_stuck(self.script, "emergency"))
        self.said(CmdAiCompact(), "/undo Helper", "Helper: undid")
        self.assertFalse(is_stuck(self.script, "emergency"))

    def test_undo_says_why_not(self):
        old = self.script.append_message(summary(1))
        self.said(
            CmdAiCompact(),
            "/undo Helper",
            f"Helper: no compaction to undo: summary {old['id']} was made before compactions "
            "were recorded and cannot be undone.",
        )
        _, result = self.compacted()
        (summary_row,) = [
            m for m in self.script.history.messages() if m["id"] == result["summary_id"]
        ]
        # Replaced without a record (as a compaction from before records would have been).
        self.script.history.replace_each([(summary(1), [summary_row])])
        after = self.script.history.messages()
        self.said(
            CmdAiCompact(),
            "/undo Helper",
            "Helper: a later compaction replaced what this one wrote: undo that one first.",
        )
        self.assertEqual(self.script.history.messages(), after)

    def test_undo_waits_for_a_running_compaction(self):
        self.compacted()
        self.script.ndb.compacting = True
        self.said(
            CmdAiCompact(), "/undo Helper", "Helper is already compacting; wait until it is done."
        )
        self.assertIsNone(CompactionRecord.objects.get().undone_at)


class TestAiHistoryShowsMaskingAndRecords(PinUndoTestCase):
    def mask(self, result):
        """Put a masked placeholder in place of the tool output ``result``, as masking does."""
        record = CompactionRecord.objects.create(
            db_script_id=self.script.id,
            kind="sleep",
            strategy="masking",
            result={"counted_for": self.script.history.counted_for, "compacted_messages": 1},
        )
        placeholder = {
            "role": "tool",
            "tool_call_id": "call_look",
            "content": MASKED_CONTENT,
            "metadata": {
                "type": "masked",
                "original_tool": "look",
                "archived_at": "2026-05-01T10:20:30+00:00",
                "original_token_count": result["token_count"],
            },
        }
        (stored,) = self.script.history.replace_each([(placeholder, [result])], record)
        return stored, record

    def test_a_masked_output_is_shown_as_such_and_archived_shows_the_original(self):
        _, result = self.tool_unit()
        stored, _ = self.mask(result)
        output = self.call(CmdAiHistory(), "Helper")
        self.assertRegex(
            output,
            rf"\n {stored['id']} +tool +\d+ +\[masked look, {result['token_count']} tokens, "
            r"2026-05-01",
        )
        self.assertNotIn("An old oak", output)
        archived = self.call(CmdAiHistory(), f"/archived Helper {stored['id']}")
        self.assertTrue(archived.startswith(f"Message {stored['id']}: [masked look, "))
        self.assertIn(f"Messages replaced by message {stored['id']}:", archived)
        self.assertRegex(archived, rf"\n {result['id']} +tool +\d+ +An old oak\. An old oak")

    def test_compactions_lists_records_undone_or_not_and_older_summaries(self):
        old = self.script.append_message(summary(1))
        _, result = self.tool_unit()
        _, masking = self.mask(result)
        self.tell_facts()
        self.script.set_config("compact_preserve_window", 2)
        compacted = self.compact()
        self.said(CmdAiCompact(), "/undo Helper", "Helper: undid")
        output = self.call(CmdAiHistory(), "/compactions Helper")
        self.assertLessEqual(max(len(line) for line in output.splitlines()), 78)
        self.assertIn(f"aicompact/undo Helper undoes #{masking.id}.", output)
        output = " ".join(output.split())
        self.assertRegex(
            output,
            rf" #{masking.id} sleep masking, \S+ \S+: 1 message, \? → \? tokens; in effect",
        )
        self.assertRegex(
            output,
            rf" #{compacted['compaction_id']} manual summary, \S+ \S+: "
            rf"{compacted['compacted_messages']} messages, {compacted['original_tokens']} → "
            rf"{compacted['new_tokens']} tokens; undone \S+ \S+",
        )
        self.assertIn(
            f"Made before compactions were recorded (no undo): summary {old['id']}.", output
        )
        self.assertRegex(
            output, rf"Summaries \(oldest first\): id .* {old['id']} live sleep never 7"
        )

    def test_archived_refuses_a_message_that_replaced_nothing(self):
        message = self.script.append_message({"role": "user", "content": FACTS[0]})
        self.said(
            CmdAiHistory(),
            f"/archived Helper {message['id']}",
            f"{message['id']} is not a summary or masked output of Helper's history; "
            "see aihistory/compactions.",
        )


class TestPinFactTool(AssistantTestCase):
    def test_the_assistant_pins_a_fact_after_its_tool_results(self):
        self.tick_on([("pin_fact", {"fact": PROMISE}), ("noop", {})], text="I will bring the map.")
        *_, call, pin_result, noop_result, fact = self.script.history.messages()
        self.assertEqual([c["function"]["name"] for c in call["tool_calls"]], ["pin_fact", "noop"])
        self.assertEqual(pin_result["content"], f"Pinned: {PROMISE}")
        self.assertEqual(noop_result["role"], "tool")
        self.assertEqual(fact["content"], f"[PINNED FACT] {PROMISE}")
        self.assertEqual(
            fact["metadata"], {"type": "pinned_fact", "by": "assistant", "context": "tick_event"}
        )
        self.assertTrue(fact["pinned"])

    def test_a_pin_over_the_cap_is_refused_to_the_model(self):
        self.script.set_config("compact_pin_max_share", 0.0001)
        self.tick_on([("pin_fact", {"fact": PROMISE}), ("noop", {})], text="I will bring the map.")
        results = [m["content"] for m in self.script.history.messages() if m["role"] == "tool"]
        self.assertRegex(
            results[0],
            r"^Not pinned: pinning this would hold \d+ tokens, over the cap of 10 "
            r"\(compact_pin_max_share 0.0001 of max_context_tokens 100000\)\. Save it with "
            "add_journal_entry instead.$",
        )
        self.assertEqual(self.script.history.pinned_messages(), [])

    def test_a_fact_pinned_in_a_whisper_stays_with_the_whisperer(self):
        with ScriptedLLM(
            [("pin_fact", {"fact": "Char's vault code is 4417."}), ("noop", {})]
        ) as llm:
            self.script.set_config("llm_model", llm.model)
            self.char1.execute_cmd(WHISPER)
            self.tick()
        (fact,) = self.script.history.pinned_messages()
        self.assertEqual(fact["metadata"]["audience"], [self.char1.dbref])
        with ScriptedLLM("Hello.") as llm:
            self.script.set_config("llm_model", llm.model)
            self.char2.execute_cmd("say Helper, what is Char's vault code?")
            self.tick()
        sent = "\n".join(str(m.get("content")) for call in llm.calls for m in call)
        self.assertIn("vault code?", sent)
        self.assertNotIn("4417", sent)
