"""Figures that read true: counts that agree with their noun, percentages that agree with the
comparison beside them (``ai.utils.wording``), where builders read them."""

import math
from unittest import TestCase

from ai.commands import CmdAiHistory
from ai.sleep.common import stalled
from ai.sleep.compaction import compact_conversation_history
from ai.utils.wording import percent, percent_against, plural

from .support import AssistantCommandTestCase, store_window, wait_for


class TestPlural(TestCase):
    def test_one_takes_the_singular_any_other_count_the_plural(self):
        self.assertEqual(plural(1, "message"), "1 message")
        self.assertEqual(plural(0, "message"), "0 messages")
        self.assertEqual(plural(2, "entry", "entries"), "2 entries")
        self.assertEqual(plural(1, "entry", "entries"), "1 entry")
        self.assertEqual(plural(12000, "token"), "12,000 tokens")
        self.assertEqual(plural(None, "message"), "? messages")


class TestPercent(TestCase):
    def test_a_threshold_is_shown_as_set(self):
        self.assertEqual(percent(0.7), "70%")
        self.assertEqual(percent(0.855), "85.5%")
        self.assertEqual(percent(0.05), "5%")

    def test_a_share_never_rounds_onto_or_across_its_bound(self):
        self.assertEqual(percent_against(0.0496, 0.05), "4.96%")
        self.assertEqual(percent_against(0.69996, 0.7), "69.996%")
        self.assertEqual(percent_against(0.7, 0.7), "70.0%")
        self.assertEqual(percent_against(0.7996, 0.8, places=0), "79.96%")
        self.assertEqual(percent_against(0.8551, 0.855, places=0), "86%")
        self.assertEqual(percent_against(0.412, 0.7, 0.8), "41.2%")
        self.assertEqual(percent_against(0.7996, 0.7, 0.8), "79.96%")


class TestFiguresBuildersRead(AssistantCommandTestCase):
    def test_a_stall_under_five_percent_never_reads_five_percent(self):
        refused = stalled(self.script, "manual", 496, 10_000)
        self.assertIn(
            "it would remove 496 of the history's 10000 tokens (4.96%, under 5%)", refused["error"]
        )

    def fill(self):
        for number in range(40):
            self.script.append_message(
                {"role": "user", "content": f'Char says, "Entry {number} of a long talk."'}
            )

    def test_usage_just_under_a_threshold_reads_under_it(self):
        self.fill()
        total = self.script.context_usage().total_tokens
        # A window in which the context holds 69.95% to 70% of it.
        store_window(self.script, math.floor(total / 0.6995))
        usage = self.script.context_usage().usage
        self.assertTrue(0.6995 <= usage < 0.7, usage)
        skipped = wait_for(compact_conversation_history(self.script, self.assistant))
        self.assertRegex(skipped["reason"], r"^below threshold \(69\.9\d+% < 70%\)$")
        output = " ".join(self.call(CmdAiHistory(), "Helper").split())
        self.assertRegex(output, r"tokens \(69\.9\d+%\); thresholds: sleep 70% \(not reached\)")
