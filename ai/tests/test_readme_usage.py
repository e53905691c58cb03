"""The README's usage section, played word for word on the offline engine.

The player's block is typed by Char with Char2 beside it, the builder's by Char (a
Developer); the assistant ticks after each line, as it would on a server.
"""

import re
from pathlib import Path

from evennia.utils.ansi import strip_ansi

from ai.commands import AssistantCmdSet
from ai.models import Goal

from .support import AssistantTestCase, record_messages, wait_for

README = Path(__file__).resolve().parents[2] / "README.md"
ANSWER = "40 gold coins under the old oak"


def usage_blocks():
    """Return the command blocks of the README's Usage section, each a list of lines."""
    text = README.read_text()
    section = text[text.index("\n## Usage\n") : text.index("\n## ", text.index("\n## Usage\n") + 1)]
    return [block.strip().splitlines() for block in re.findall(r"```\n(.*?)```", section, re.S)]


class TestReadmeUsage(AssistantTestCase):
    def setUp(self):
        if not README.exists():
            self.skipTest("README.md is not shipped with an installed package")
        super().setUp()
        self.char1.cmdset.add(AssistantCmdSet)  # as the README's installation has it
        self.player, self.builder, self.dangerous, self.goals, self.memory = usage_blocks()
        self.char1_heard = record_messages(self.char1)
        self.char2_heard = record_messages(self.char2)

    def play(self, line):
        """Type ``line`` as Char, let a compaction or memory search it started finish, tick;
        return the reply."""
        self.char1.execute_cmd(line)
        for running in (self.script.ndb.manual_compaction, self.char1.ndb.aimemory_search):
            if running is not None:
                wait_for(running)
        return self.tick().get("reply", "")

    def test_the_player_and_builder_blocks_work_as_the_readme_says(self):
        replies = {line: self.play(line) for line in self.player}
        question = next(line for line in self.player if line.startswith("talk"))
        self.assertIn(ANSWER, replies[question])
        whisper = next(line for line in self.player if line.startswith("whisper"))
        secret = whisper.rpartition(" ")[2].rstrip(".")
        self.assertIn("Helper whispers", "\n".join(map(str, self.char1_heard)))
        self.assertNotIn(secret, "\n".join(map(str, self.char2_heard)))
        self.assertTrue(replies[next(line for line in self.player if line.startswith("pose"))])

        replies = {line: self.play(line) for line in self.builder}
        heard = "\n".join(map(str, self.char1_heard))
        self.assertRegex(heard, r"Helper(\|n)? context: \d+/100000 tokens")
        self.assertIn("compact_preserve_window = 4", heard)
        self.assertRegex(heard, r"Helper: \d+ facts journaled; compacted \d+ messages")
        self.assertIn(ANSWER, replies[self.builder[-1]], "forgotten after the compaction")

    def test_a_dangerous_call_waits_for_aiconfirm_as_the_readme_says(self):
        for line in self.dangerous:
            self.play(line)
            if line.startswith("talk"):
                lantern = self.assistant.search("lantern", location=self.assistant, quiet=True)
                self.assertEqual(len(lantern), 1, "given before anyone confirmed it")
                self.assertEqual(len(self.script.db.awaiting_confirmation), 1)
        self.assertEqual(lantern[0].location, self.char1)
        heard = strip_ansi("\n".join(map(str, self.char1_heard)))
        self.assertRegex(heard, r'1 +give\(\{"item": "lantern", "recipient": "Char"\}\)')
        self.assertIn("Helper gives lantern to Char.", heard)

    def test_the_memory_block_shows_what_a_sleep_consolidated(self):
        for line in self.player:
            self.play(line)
        for line in self.memory:
            self.play(line)
        heard = strip_ansi("\n".join(map(str, self.char1_heard)))
        self.assertRegex(heard, r"Last sleep: began \d{4}-\d\d-\d\d")
        search = heard[heard.index("Searching") :]
        self.assertIn("40 gold coins", search)
        self.assertEqual(self.script.db.operating_mode, "awake")

    def test_the_goal_block_shows_a_goal_broken_down_and_pursued(self):
        self.script.set_config("sleep_after_idle_ticks", 0)
        for line in self.player:
            self.play(line)
        since = len(self.char1_heard)
        for line in self.goals:
            self.play(line)
        heard = strip_ansi("\n".join(map(str, self.char1_heard[since:])))
        listing = heard[heard.index("Keep the room tidy") :]
        self.assertRegex(listing, r"#\d+ done")
        self.assertIn("Do it: Keep the room tidy", " ".join(listing.split()))
        calls = heard[heard.index("goal_decompose") :]
        self.assertRegex(calls, r"tick_autonomous: 2 calls, noop")
        steps = Goal.objects.filter(db_object_id=self.assistant.id, parent__isnull=False)
        self.assertEqual(steps.count(), 3)
        self.assertEqual(steps.filter(status="done").count(), 3)
        journal = " ".join(heard[heard.index("Journal of Helper") :].split())
        self.assertRegex(journal, r"reflection; cites journal_\S+, journal_\S+; tags")
