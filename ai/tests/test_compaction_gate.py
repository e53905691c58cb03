"""The compaction's quality gate (journaled facts survive it) and its stall guard."""

import random

from django.test import SimpleTestCase

from ai.helpers.journal import add_entry, journal_entries
from ai.sleep.common import is_stuck
from ai.sleep.compaction import compact_conversation_history
from ai.sleep.extraction import run_pre_compaction_extraction
from ai.utils.facts import LaterStatements, plain_words, statement_replaces
from ai.utils.grounding import key_terms, survives
from ai.utils.markers import RESTORED_HEADER, SUMMARY_MARKER, SUMMARY_PREAMBLE
from ai.utils.message_format import is_summary, summary_text
from ai.utils.token_counter import count_message_tokens

from .support import AssistantTestCase, ScriptedLLM, store_window, wait_for
from .test_context_compaction import FACTS, fill, live_snapshot

WHISPERER = "#99"


class CompactionGateTestCase(AssistantTestCase):
    """Manual compactions keep the last four messages, whatever the window."""

    def setUp(self):
        super().setUp()
        self.script.set_config("compact_preserve_window", 4)

    def compact(self, *steps, kind="manual"):
        """Compact with a scripted summary model (kept as ``self.llm``)."""
        with ScriptedLLM(*steps) as llm:
            self.script.set_config("compact_model", llm.model)
            self.llm = llm
            return wait_for(
                compact_conversation_history(self.script, self.assistant, force=True, kind=kind)
            )

    def summaries(self):
        return [m for m in self.script.conversation_history if is_summary(m)]


class TestSurvives(SimpleTestCase):
    def test_names_and_numbers_must_survive_exactly_and_half_the_other_words(self):
        fact = "Char said: The blacksmith Gorm lives by the north gate of Dale."
        self.assertEqual(
            key_terms(fact), ({"gorm", "dale"}, {"blacksmith", "lives", "north", "gate"})
        )
        kept = set(plain_words("Gorm, a blacksmith, keeps the north gate of Dale."))
        self.assertTrue(survives(fact, kept))
        self.assertFalse(
            survives(fact, set(plain_words("A smith lives by the north gate of Dale.")))
        )
        self.assertFalse(survives(fact, set(plain_words("Gorm is somewhere in Dale."))))
        coins = "I buried 40 gold coins under the old oak in Mirkwood."
        self.assertFalse(
            survives(coins, set(plain_words("Char buried 41 gold coins in Mirkwood.")))
        )
        self.assertTrue(survives(coins, set(plain_words("Char buried 40 gold coins in Mirkwood."))))


class TestStatementsReplacedLater(SimpleTestCase):
    """The gate keeps a player's statement unless a later one replaces it; it compares each
    only with the later ones that could (``utils.facts.LaterStatements``)."""

    def test_the_same_statements_are_kept_as_when_every_pair_is_compared(self):
        subjects = ["the gate", "the old gate", "the gate password", "the north gate password"]
        subjects += ["the ferry", "my falcon", "Dana", "it"]
        verbs = ["is", "leaves at", "lives in", "is called", "owes", "moved to", "keeps"]
        values = ["dawn", "dusk", "swordfish", "marmalade", "the pier", "40 gold coins"]
        chosen, replaced = random.Random(7), 0
        for _ in range(400):
            said = []
            for _ in range(chosen.randint(2, 6)):
                verb, _, rest = chosen.choice(verbs).partition(" ")
                change = chosen.choice(["", "", "now ", "instead "])
                words = " ".join(filter(None, [verb, change.strip(), rest, chosen.choice(values)]))
                sentence = f"{chosen.choice(subjects).capitalize()} {words}."
                said.append((chosen.choice(["Bob", "Dana"]), sentence))
            pairwise = [
                statement
                for at, statement in enumerate(said)
                if not any(statement_replaces(later, statement) for later in said[at + 1 :])
            ]
            kept, later = [], LaterStatements()
            for statement in reversed(said):
                if not later.replace(statement):
                    kept.append(statement)
                later.add([statement])
            self.assertEqual(kept[::-1], pairwise, said)
            replaced += len(said) - len(pairwise)
        self.assertGreater(replaced, 100, "the statements replace each other often")


class TestQualityGate(CompactionGateTestCase):
    def test_facts_the_extraction_journaled_and_the_summary_dropped_are_appended(self):
        fill(self.script)
        extraction = wait_for(run_pre_compaction_extraction(self.script, self.assistant))
        self.assertEqual(extraction["facts_recorded"], 5)
        entries = journal_entries(self.assistant)
        result = self.compact("Char buried 40 gold coins under the old oak in Mirkwood.")
        self.assertTrue(result["success"], result)
        self.assertEqual((result["facts_checked"], result["facts_appended"]), (5, 4))
        self.assertEqual(result["appended_entries"], [entry["id"] for entry in entries[1:]])
        summary = summary_text(self.summaries()[0]["content"])
        lines = [f"- {entry['content']} (journal {entry['id']})" for entry in entries[1:]]
        self.assertEqual(
            summary.splitlines(),
            ["Char buried 40 gold coins under the old oak in Mirkwood.", RESTORED_HEADER, *lines],
        )
        # The appended facts are part of the summary: its tokens, and its synthesis entry.
        self.assertEqual(result["summary_tokens"], self.summaries()[0]["token_count"])
        self.assertIn("swordfish", journal_entries(self.assistant)[-1]["content"])

    def test_a_summary_that_keeps_every_fact_gets_nothing_appended(self):
        fill(self.script)
        wait_for(run_pre_compaction_extraction(self.script, self.assistant))
        result = self.compact(
            "Char buried 40 gold coins under an oak in Mirkwood. Char2: the cellar door "
            "password is swordfish. Char promised Char2 12 iron ingots by Friday. Char2's "
            "horse Thunder is seven years old. The blacksmith Gorm lives by Dale's north gate."
        )
        self.assertEqual((result["facts_checked"], result["facts_appended"]), (5, 0))
        self.assertNotIn(RESTORED_HEADER, self.summaries()[0]["content"])

    def test_only_entries_citing_compacted_messages_are_checked_and_never_syntheses(self):
        fill(self.script)
        history = self.script.conversation_history
        add_entry(
            self.assistant,
            "Gorm owes Bob 7 copper.",
            "conversation",
            source_message_ids=[history[0]["id"]],
        )
        add_entry(
            self.assistant,
            "Hobb sells 9 pies.",
            "conversation",
            source_message_ids=[history[-1]["id"]],
        )
        add_entry(
            self.assistant,
            "[CONTEXT SYNTHESIS]\nAn older summary.",
            "compaction",
            source_message_ids=[history[1]["id"]],
        )
        add_entry(self.assistant, "Uncited fact about Zed.", "conversation")
        result = self.compact("Char buried coins.")
        self.assertEqual((result["facts_checked"], result["facts_appended"]), (1, 1))
        summary = self.summaries()[0]["content"]
        self.assertIn("- Gorm owes Bob 7 copper.", summary)
        for absent in ("Hobb", "older summary", "Zed"):
            self.assertNotIn(absent, summary)

    def test_a_whispered_fact_is_never_appended_to_the_public_summary(self):
        public = {"role": "user", "content": 'Char says, "The ferry leaves at nine."'}
        secret = {
            "role": "user",
            "content": 'Char whispers, "My vault code is 4417."',
            "metadata": {"audience": [WHISPERER]},
        }
        for message in [public, secret] * 8 + [public] * 4:
            self.script.append_message(message)
        history = self.script.conversation_history
        public_id, secret_id = history[0]["id"], history[1]["id"]
        add_entry(
            self.assistant,
            "The ferry leaves at nine.",
            "pre_compaction",
            source_message_ids=[public_id],
        )
        add_entry(
            self.assistant,
            "Char's vault code is 4417.",
            "pre_compaction",
            source_message_ids=[secret_id],
            audience=[WHISPERER],
        )
        # The whisperer's extraction run sees the room too: its entries stay private.
        add_entry(
            self.assistant,
            "Char heard the ferry leaves at nine sharp.",
            "pre_compaction",
            source_message_ids=[public_id],
            audience=[WHISPERER],
        )
        result = self.compact("Talk.", "Talk.")
        self.assertTrue(result["success"], result)
        room, private = self.summaries()
        self.assertNotIn("audience", room["metadata"])
        self.assertIn("- The ferry leaves at nine.", room["content"])
        self.assertNotIn("4417", room["content"])
        self.assertNotIn("sharp", room["content"])
        self.assertEqual(private["metadata"]["audience"], [WHISPERER])
        self.assertIn("- Char's vault code is 4417.", private["content"])
        self.assertEqual(result["facts_checked"], 2)

    def test_appended_facts_count_toward_the_summary_not_being_smaller(self):
        fill(self.script)
        first = self.script.conversation_history[0]["id"]
        for number in range(3):
            long_fact = f"Ledger {number}: " + " ".join(f"item{number}x{i}" for i in range(120))
            add_entry(self.assistant, long_fact, "conversation", source_message_ids=[first])
        before = live_snapshot(self.script)
        result = self.compact("Char buried coins.")
        self.assertFalse(result["success"])
        self.assertIn("is not smaller than", result["error"])
        self.assertEqual(live_snapshot(self.script), before)


class TestStallGuard(CompactionGateTestCase):
    def setUp(self):
        super().setUp()
        # A small window: an emergency keeps the recent 20% of it, here under four messages.
        store_window(self.script, 1000)

    def fill_with_a_large_recent_message(self):
        fill(self.script, FACTS[:4])
        self.script.append_message({"role": "user", "content": "Char says, " + "word " * 3000})
        fill(self.script, FACTS[4:5])

    def test_too_little_to_compact_stalls_before_any_model_call(self):
        self.fill_with_a_large_recent_message()
        before = live_snapshot(self.script)
        result = self.compact("unused", kind="emergency")
        self.assertEqual((result["success"], result["stalled"]), (False, True))
        self.assertRegex(
            result["error"],
            r"^stalled: it would remove \d+ of the history's \d+ tokens \(\d\.\d%, under 5%\)$",
        )
        self.assertEqual(self.llm.calls, [])
        self.assertEqual(live_snapshot(self.script), before)
        self.assertTrue(is_stuck(self.script, "emergency"))

    def test_a_stalled_automatic_compaction_waits_for_the_history_to_change(self):
        self.fill_with_a_large_recent_message()
        self.compact(kind="emergency")
        again = self.compact(kind="emergency")
        self.assertEqual(
            again,
            {
                "skipped": True,
                "reason": "the last emergency compaction did not help; history unchanged",
            },
        )
        # A builder's compaction runs anyway, and reports the stall.
        self.assertTrue(self.compact(kind="manual")["stalled"])
        self.script.append_message({"role": "user", "content": 'Char says, "Hello."'})
        self.assertFalse(is_stuck(self.script, "emergency"))
        self.assertNotIn("skipped", self.compact(kind="emergency"))

    def test_the_emergency_check_does_not_loop_on_a_stall(self):
        self.fill_with_a_large_recent_message()
        config = self.script.effective_config()
        first = wait_for(self.script.emergency_compaction(self.assistant, config))
        self.assertTrue(first["context_compaction"]["stalled"])
        second = wait_for(self.script.emergency_compaction(self.assistant, config))
        self.assertTrue(second["skipped"])

    def test_a_summary_removing_under_five_percent_changes_nothing(self):
        fill(self.script)
        history = self.script.conversation_history
        compacted = sum(m["token_count"] for m in history[:12])
        total = sum(m["token_count"] for m in history)
        text = self.summary_of(compacted - int(0.05 * total) + 1, compacted - 1)
        before = live_snapshot(self.script)
        result = self.compact(text, kind="emergency")
        self.assertEqual((result["success"], result["stalled"]), (False, True))
        self.assertEqual(len(self.llm.calls), 1)
        self.assertEqual(live_snapshot(self.script), before)
        self.assertFalse(
            any(e["source_type"] == "compaction" for e in journal_entries(self.assistant))
        )

    def summary_of(self, low, high):
        """Return a summary text whose message counts between ``low`` and ``high`` tokens."""
        model = self.script.history.model
        for count in range(1, 400):
            text = " ".join(["ledger"] * count)
            content = f"{SUMMARY_MARKER}\n{SUMMARY_PREAMBLE}\n{text}"
            if low <= count_message_tokens({"role": "system", "content": content}, model) <= high:
                return text
        raise AssertionError(f"no summary of {low} to {high} tokens")
