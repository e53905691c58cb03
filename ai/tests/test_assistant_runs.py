"""Compaction strategy ``assistant_runs``: only the assistant's long stretches are summarized."""

import json
from unittest import TestCase

from ai.models import CompactionRecord, ConversationMessage
from ai.sleep.assistant_runs import RUN_PROMPT, RUN_SUMMARY_PREFIX, find_runs
from ai.sleep.compaction import compact_conversation_history

from .support import AssistantTestCase, During, ScriptedLLM, store_window, wait_for

LONG_RESULT = (
    "The forge of Dale stands by the north gate. Its smith, Gorm, works the bellows from dawn "
    "to dusk and sells iron ingots at 3 silver each; his apprentice Tilda keeps the ledger."
)


def said(text, **extra):
    return {"role": "user", "content": f'Char says, "{text}"', **extra}


def reply(text, **extra):
    return {"role": "assistant", "content": text, **extra}


def call(call_id, name="look", arguments=None, **extra):
    function = {"name": name, "arguments": json.dumps(arguments or {"target": "forge"})}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
        **extra,
    }


def result(call_id, text="Done.", **extra):
    return {"role": "tool", "tool_call_id": call_id, "content": text, **extra}


def private(audience):
    return {"metadata": {"audience": audience}}


def contents(runs):
    return [[m.get("content") or m["tool_calls"][0]["id"] for m in run] for run in runs]


class TestFindRuns(TestCase):
    def test_nothing_to_find(self):
        self.assertEqual(find_runs([]), [])
        self.assertEqual(find_runs([said("hi"), said("hello")]), [])
        history = [said("hi"), reply("Hello."), said("bye"), reply("Farewell."), said("!")]
        self.assertEqual(find_runs(history), [], "single assistant messages stay")

    def test_runs_between_players_at_the_start_and_at_the_end(self):
        history = [
            reply("a1"),
            reply("a2"),
            said("u1"),
            reply("b1"),
            said("u2"),
            reply("c1"),
            call("c2"),
            result("c2", "r"),
        ]
        self.assertEqual(contents(find_runs(history)), [["a1", "a2"], ["c1", "c2", "r"]])

    def test_a_run_holds_whole_tool_call_units(self):
        two_results = call("x")
        two_results["tool_calls"].append(dict(two_results["tool_calls"][0], id="y"))
        history = [said("u"), two_results, result("x", "rx"), result("y", "ry"), said("v")]
        self.assertEqual(find_runs(history), [], "one call and its results is one message")
        history[-1:] = [call("z"), result("z", "rz"), said("v")]
        self.assertEqual(contents(find_runs(history)), [["x", "rx", "ry", "z", "rz"]])

    def test_a_pinned_unit_is_never_in_a_run_and_ends_it(self):
        pinned = {"pinned": True}
        history = [reply("a1"), call("p", **pinned), result("p", "rp", **pinned), reply("a2")]
        self.assertEqual(find_runs(history), [])
        history += [reply("a3")]
        self.assertEqual(contents(find_runs(history)), [["a2", "a3"]])

    def test_runs_split_where_the_audience_changes(self):
        whisper = private(["#6"])
        history = [reply("p1"), reply("w1", **whisper), reply("p2")]
        self.assertEqual(find_runs(history), [], "no whisper is summarized with the room")
        history = [reply("p1"), reply("p2"), call("w", **whisper), result("w", "rw", **whisper)]
        history += [reply("w2", **whisper)]
        self.assertEqual(contents(find_runs(history)), [["p1", "p2"], ["w", "rw", "w2"]])

    def test_summaries_and_notes_end_runs(self):
        earlier_run = reply(f"{RUN_SUMMARY_PREFIX} I did things.", metadata={"type": "compaction"})
        for stop in (
            {
                "role": "system",
                "content": "[CONTEXT SUMMARY]\nx",
                "metadata": {"type": "compaction"},
            },
            {"role": "system", "content": "A note."},
            earlier_run,
        ):
            with self.subTest(stop=stop["content"]):
                self.assertEqual(find_runs([reply("a1"), stop, reply("a2")]), [])
                found = find_runs([stop, reply("a1"), reply("a2")])
                self.assertEqual(contents(found), [["a1", "a2"]])


class RunsTestCase(AssistantTestCase):
    """A small window whose preserve window keeps the last four messages."""

    def setUp(self):
        super().setUp()
        store_window(self.script, 400)
        self.script.set_config("compact_preserve_window", 4)
        self.script.set_config("compact_strategy", "assistant_runs")

    def append(self, *messages):
        return [self.script.append_message(message) for message in messages]

    def tool_turn(self, name, text, audience=None):
        """One turn of the assistant: a look with a long result, then what it said."""
        extra = private(audience) if audience else {}
        first, second = f"{name}_look", f"{name}_say"
        return self.append(
            call(first, **extra),
            result(first, LONG_RESULT, **extra),
            call(second, "say", {"text": text}, **extra),
            result(second, f"You say, {text}", **extra),
        )

    def fill(self):
        """Two tool turns and a single reply among players, then the preserve window."""
        self.append(said("Where is the forge of Dale?"))
        self.first = self.tool_turn("one", "The forge is by the north gate.")
        self.append(said("Thanks. And the inn?"), reply("South, past the well."))
        self.append(said("What do ingots cost?"))
        self.second = self.tool_turn("two", "Gorm sells ingots at 3 silver.")
        self.preserved = self.append(
            said("I will buy twelve ingots from Gorm on Friday, I promise you that."),
            reply("Then I will tell Gorm to keep twelve ingots for you until Friday."),
            said("Good. Tell Tilda to write it in her ledger as well, please."),
            reply("I will ask Tilda to write your twelve ingots in the ledger."),
        )

    def compact(self, *answers, kind=None):
        with ScriptedLLM(*answers) as llm:
            self.script.set_config("compact_model", llm.model)
            outcome = wait_for(
                compact_conversation_history(self.script, self.assistant, force=True, kind=kind)
            )
        self.llm = llm
        return outcome

    def live(self):
        return [(m["id"], m["role"], m["content"]) for m in self.script.history.messages()]


class TestCompactAssistantRuns(RunsTestCase):
    def test_each_run_becomes_one_summary_in_its_place_and_players_keep_theirs(self):
        self.fill()
        before = self.script.history.messages()
        outcome = self.compact("I looked up the forge: north gate.", "I told Char: 3 silver.")
        self.assertTrue(outcome["success"], outcome)
        self.assertEqual(len(self.llm.calls), 2, "one summary call per run")
        first_call, second_call = (call[1]["content"] for call in self.llm.calls)
        self.assertEqual(self.llm.calls[0][0]["content"], RUN_PROMPT)
        self.assertIn("north gate", first_call)
        self.assertNotIn("Where is the forge", first_call, "players' words are not summarized")
        self.assertNotIn("3 silver.", first_call)
        self.assertIn("3 silver.", second_call)
        after = self.script.history.messages()
        kept = [m["id"] for m in before if m not in self.first + self.second]
        self.assertEqual([m["id"] for m in after if not m["metadata"].get("type")], kept)
        self.assertEqual(
            [m["role"] for m in after],
            ["user", "assistant", "user", "assistant", "user", "assistant"]
            + ["user", "assistant"] * 2,
        )
        summary = after[1]
        self.assertEqual(
            summary["content"], f"{RUN_SUMMARY_PREFIX} I looked up the forge: north gate."
        )
        self.assertEqual(after[5]["content"], f"{RUN_SUMMARY_PREFIX} I told Char: 3 silver.")
        metadata = summary["metadata"]
        self.assertEqual((metadata["type"], metadata["strategy"]), ("compaction", "assistant_runs"))
        self.assertEqual(metadata["compacted_count"], 4)
        self.assertEqual(
            metadata["original_token_count"], sum(m["token_count"] for m in self.first)
        )
        self.assertEqual(metadata["summary_token_count"], summary["token_count"])
        self.assertNotIn("audience", metadata)
        self.assertEqual(self.script.history.archived_by(summary["id"]), self.first)
        self.assertEqual(outcome["strategy"], "assistant_runs")
        self.assertEqual((outcome["runs"], outcome["runs_kept"]), (2, 0))
        self.assertEqual(outcome["compacted_messages"], 8)
        self.assertEqual(outcome["summary_ids"], [after[1]["id"], after[5]["id"]])
        self.assertLess(outcome["new_tokens"], outcome["original_tokens"])
        self.assertEqual(self.script.history.totals()[0], sum(m["token_count"] for m in after))

    def test_the_offline_engine_tells_a_run_in_the_first_person(self):
        self.fill()
        self.script.set_config("compact_model", "offline/assistant")
        outcome = wait_for(compact_conversation_history(self.script, self.assistant, force=True))
        self.assertTrue(outcome["success"], outcome)
        summaries = [m["content"] for m in self.script.history.messages() if m["metadata"]]
        self.assertEqual(len(summaries), 2)
        self.assertIn("I used look.", summaries[0])
        self.assertIn("It showed: The forge of Dale stands by the north gate.", summaries[0])

    def test_runs_that_would_remove_too_little_of_the_history_are_a_stall(self):
        self.append(*(said(f"The well by the inn is number {i}.") for i in range(300)))
        self.fill()
        before = self.script.history.messages()
        outcome = self.compact("I looked up the forge.", "I told Char the price.")
        self.assertEqual((outcome["success"], outcome["stalled"]), (False, True), outcome)
        self.assertEqual(outcome["strategy"], "assistant_runs")
        self.assertEqual(self.script.history.messages(), before)
        self.assertFalse(CompactionRecord.objects.exists())

    def test_undo_restores_exactly_the_original_history(self):
        self.fill()
        before = self.script.history.messages()
        outcome = self.compact("I looked up the forge.", "I told Char the price.")
        record = CompactionRecord.objects.get(id=outcome["compaction_id"])
        self.assertEqual((record.kind, record.strategy), ("emergency", "assistant_runs"))
        self.assertEqual(record.result["runs"], 2)
        self.assertEqual(self.script.history.undo(record), 8)
        self.assertEqual(self.script.history.messages(), before)
        self.assertEqual(self.script.history.totals()[0], sum(m["token_count"] for m in before))

    def test_nothing_to_compact_is_a_skip_without_a_model_call(self):
        self.append(said("Hello there."), reply("Hello, Char."))
        self.append(said("Where is the inn?"), reply("South, past the well."))
        self.preserved = self.append(*[said(f"line {i}") for i in range(4)])
        before = self.live()
        outcome = self.compact()
        self.assertEqual(
            outcome,
            {
                "skipped": True,
                "reason": "no run of two or more assistant messages to compact",
                "token_usage": outcome["token_usage"],
            },
        )
        self.assertEqual(self.llm.calls, [])
        self.assertEqual(self.live(), before)

    def test_a_whispered_run_is_summarized_apart_and_kept_for_the_whisperer(self):
        self.append(said("Where is the forge of Dale?"))
        self.tool_turn("public", "The forge is by the north gate.")
        self.tool_turn("secret", "The vault code is 4711.", audience=[self.char1.dbref])
        self.append(*[said(f"a long enough line of the preserve window {i}") for i in range(4)])
        outcome = self.compact("I told the room where the forge is.", "I whispered the code.")
        self.assertTrue(outcome["success"], outcome)
        public_call, secret_call = (call[1]["content"] for call in self.llm.calls)
        self.assertNotIn("4711", public_call)
        self.assertIn("4711", secret_call)
        summaries = [m for m in self.script.history.messages() if m["metadata"].get("type")]
        self.assertEqual(
            [m["metadata"].get("audience") for m in summaries], [None, [self.char1.dbref]]
        )

    def test_a_failed_or_empty_summary_of_any_run_changes_nothing(self):
        self.fill()
        before = self.live()
        cases = [
            ((ValueError("model exploded"),), "summary call failed (api_error)", 1),
            (("I looked up the forge.", "   "), "the summary came back empty", 2),
        ]
        for answers, error, calls in cases:
            with self.subTest(error=error), self.settings(AI_LLM_MAX_RETRIES=0):
                outcome = self.compact(*answers)
                self.assertEqual(
                    outcome,
                    {"success": False, "kind": "emergency", "strategy": "assistant_runs"}
                    | {"error": outcome["error"]},
                )
                self.assertIn(error, outcome["error"])
                self.assertEqual(len(self.llm.calls), calls, "no call after the failed one")
                self.assertEqual(self.live(), before)
        self.assertFalse(ConversationMessage.objects.filter(is_live=False).exists())
        self.assertFalse(CompactionRecord.objects.exists())
        self.assertFalse(self.script.ndb.compacting, "a later compaction may run")

    def test_a_run_whose_summary_is_not_smaller_is_kept_as_it_is(self):
        self.fill()
        too_long = " ".join(["I looked up the forge and read every word of it again."] * 20)
        outcome = self.compact(too_long, "I told Char the price.")
        self.assertTrue(outcome["success"], outcome)
        self.assertEqual((outcome["runs"], outcome["runs_kept"]), (1, 1))
        live_ids = [m["id"] for m in self.script.history.messages()]
        self.assertTrue(all(m["id"] in live_ids for m in self.first))
        self.assertFalse(any(m["id"] in live_ids for m in self.second))

    def test_when_no_summary_is_smaller_nothing_changes(self):
        self.fill()
        before = self.live()
        too_long = " ".join(["I looked up the forge and read every word of it again."] * 20)
        outcome = self.compact(too_long, too_long)
        self.assertFalse(outcome["success"])
        self.assertEqual(outcome["error"], "no run's summary is smaller than the run")
        self.assertEqual(self.live(), before)

    def compact_while(self, meanwhile):
        """Compact, running ``meanwhile()`` during the first summary call; return the
        outcome and what ``meanwhile`` returned."""
        during = During(meanwhile, "I told Char the price.")
        with ScriptedLLM(during, "I told Char the price.") as llm:
            self.script.set_config("compact_model", llm.model)
            outcome = wait_for(
                compact_conversation_history(self.script, self.assistant, force=True)
            )
        return outcome, during.result()

    def test_messages_appended_during_the_summary_calls_stay(self):
        self.fill()
        outcome, late = self.compact_while(lambda: self.script.append_message(said("Late.")))
        self.assertTrue(outcome["success"], outcome)
        after = self.script.history.messages()
        self.assertEqual(after[-1]["id"], late["id"])
        self.assertEqual([m["id"] for m in after[-5:-1]], [m["id"] for m in self.preserved])
        self.assertEqual(self.script.history.totals(), (sum(m["token_count"] for m in after), 11))

    def test_a_run_pinned_during_the_summary_calls_fails_the_compaction_and_changes_nothing(self):
        self.fill()

        def pin():
            self.script.history.set_pinned([self.second[0]["id"]])
            return self.live()

        outcome, before = self.compact_while(pin)
        self.assertFalse(outcome["success"])
        self.assertEqual(outcome["error"], "the messages to replace are no longer the live ones")
        self.assertEqual(self.live(), before)
        self.assertFalse(CompactionRecord.objects.exists())

    def test_a_manual_compaction_keeps_only_the_preserve_window(self):
        self.fill()
        self.script.set_config("compact_preserve_window", 2)
        self.append(call("late_one"), result("late_one", LONG_RESULT), reply("Told Char."))
        self.append(*[said(f"line {i}") for i in range(2)])
        outcome = self.compact("one", "two", "three", kind="manual")
        self.assertTrue(outcome["success"], outcome)
        self.assertEqual(outcome["runs"], 3, "the run right before the preserve window too")
