"""``make demo`` as a newcomer reads it: an assistant that looks healthy from the first line.

The demo's own scenario (``demo/play.py``) is played in the test game through the real
typeclasses, script, offline engine and long-term memory, and what it prints is read line by
line, as in a terminal of 78 columns.
"""

import io
import os
import re
import sys
from contextlib import redirect_stderr, redirect_stdout
from unittest import skipIf

from ai.helpers.journal import journal_entries

from .support import WITH_THIS_APP, BaseEvenniaTest, wait_for

DEMO_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "demo")
if os.path.isdir(DEMO_DIR):  # a checkout; an installed package has no demo
    sys.path.insert(0, DEMO_DIR)
    import play  # noqa: E402  (demo/play.py, importable without side effects)
else:
    play = None

# How full the context is after each step: "     context: ... of 4,096 = 48.19%".
USAGE = re.compile(r"^ +context: .* = (?P<percent>\d+\.\d+)%$")
# A row of the journal listing: "  12 a[ 7] <the entry on one line>".
JOURNAL_ROW = re.compile(r"^ +\d+ [ a]\[ ?\d+\] (?P<text>.*)$")


@skipIf(play is None, "demo/ is not shipped with an installed package")
@WITH_THIS_APP
class DemoTest(BaseEvenniaTest):
    def test_the_demo_reads_as_a_healthy_assistant_within_78_columns(self):
        printed, problems = io.StringIO(), io.StringIO()
        with redirect_stdout(printed), redirect_stderr(problems):
            players, assistant = play.build_cast()
            outcome = wait_for(play.play(players, assistant))
            code = play.report(assistant, outcome)
        lines = printed.getvalue().splitlines()
        self.assertEqual((code, problems.getvalue()), (0, ""), "the demo's own checks")
        self.assertEqual([line for line in lines if len(line) > 78], [])
        self.assertEqual([line for line in lines if "fail" in line.lower()], [])
        # The goal a builder gives last is broken into steps and pursued to its end.
        self.assertIn(">> broken into 3 steps:", "\n".join(lines))
        self.assertRegex("\n".join(lines), r">> autonomous turn: complete_goal, noop\n")
        self.assertRegex("\n".join(lines), r">> goal #\d+ is done")

        usages = [float(match["percent"]) for match in map(USAGE.match, lines) if match]
        self.assertEqual(len(usages), len(play.SCENARIO), "one usage line a step")
        self.assertLessEqual(max(usages), 100.0)
        window = assistant.assistant_script.get_config("max_context_tokens")
        frame = assistant.assistant_script.context_usage()
        frame_tokens = frame.total_tokens - frame.history_tokens
        # History keeps most of a window a deployment would use: the frame (1,039 tokens at
        # the end, 794 of them tool schemas, add_goal's 67 included) is 25.4% of 4,096.
        self.assertLessEqual(frame_tokens / window, 0.3, "a window a deployment would use")

        listing = [match["text"] for match in map(JOURNAL_ROW.match, lines) if match]
        syntheses = [text for text in listing if text.startswith("[CONTEXT SYNTHESIS]")]
        self.assertGreaterEqual(len(syntheses), 4, "a synthesis a compaction")
        self.assertEqual(len(set(syntheses)), len(syntheses), syntheses)

        journal = {entry["id"]: entry for entry in journal_entries(assistant)}
        insights = journal_entries(assistant, "reflection")
        self.assertTrue(insights, "a reflection wrote an insight")
        for insight in insights:
            self.assertGreaterEqual(len(insight["cites"]), 2, "an insight joins entries")
            for cited in insight["cites"]:
                self.assertIn(cited, journal, "it cites real entries of the journal")
                self.assertNotEqual(journal[cited]["content"], insight["content"])
            shown = [line.strip() for line in lines if line.strip().startswith("cites ")]
            for cited in insight["cites"]:
                self.assertTrue([line for line in shown if line.startswith(f"cites {cited}:")])
