"""The README's configuration tables say what the code does."""

import re
from pathlib import Path
from unittest import TestCase

from ai.config import AI_SETTINGS, SCRIPT_CONFIG, SMALLEST_WINDOW_AT_DEFAULTS
from ai.llm_interaction import DEFAULT_COMPACTION_PROMPT, SUMMARY_MAX_WORDS, SUMMARY_REQUEST
from ai.utils.markers import TRANSCRIPT_END, TRANSCRIPT_HEADER

README = Path(__file__).resolve().parents[2] / "README.md"
CONTEXT_DOC = README.parent / "docs" / "context.md"
COMPACTION_DOC = README.parent / "docs" / "compaction.md"
ROW = re.compile(r"^\| `(?P<name>\w+)` \| (?P<default>[^|]+) \|(?P<rest>.*)\|$")


def table_rows():
    """Return ``{name: (default cell, last cell)}`` for every backticked table row."""
    rows = {}
    for line in README.read_text().splitlines():
        match = ROW.match(line.strip())
        if match:
            rows[match["name"]] = (match["default"].strip(), match["rest"].split("|")[-1].strip())
    return rows


class TestReadmeConfiguration(TestCase):
    def setUp(self):
        if not README.exists():
            self.skipTest("README.md is not shipped with an installed package")
        self.rows = table_rows()

    def test_every_script_attribute_is_documented_with_its_default(self):
        for name, option in SCRIPT_CONFIG.items():
            with self.subTest(name=name):
                self.assertIn(name, self.rows)
                default, meaning = self.rows[name]
                if not isinstance(option.default, dict):
                    self.assertEqual(default, f"`{option.default!r}`")
                self.assertEqual(meaning, option.description)

    def test_every_setting_is_documented_with_its_default(self):
        for name, setting in AI_SETTINGS.items():
            with self.subTest(name=name):
                self.assertEqual(
                    self.rows.get(name), (f"`{setting.default!r}`", setting.description)
                )

    def test_the_smallest_window_is_the_one_the_code_accepts(self):
        smallest = f"{SMALLEST_WINDOW_AT_DEFAULTS:,}"
        row = next(
            line for line in README.read_text().splitlines() if "| `max_context_tokens`" in line
        )
        self.assertIn(f"at least {smallest} at the defaults", row)
        context_doc = " ".join(CONTEXT_DOC.read_text().split())
        self.assertRegex(
            context_doc, rf"the smallest window `set_config` accepts is\W*{smallest}\b"
        )

    def test_nothing_undocumented_in_code_is_in_the_table(self):
        known = set(SCRIPT_CONFIG) | set(AI_SETTINGS)
        self.assertEqual(set(self.rows) - known, set())


class TestCompactionDoc(TestCase):
    def setUp(self):
        if not COMPACTION_DOC.exists():
            self.skipTest("docs/ are not shipped with an installed package")
        self.doc = " ".join(COMPACTION_DOC.read_text().split())

    def test_the_summary_call_is_documented_as_the_code_sends_it(self):
        cap = f"Write at most {SUMMARY_MAX_WORDS} words."
        self.assertTrue(DEFAULT_COMPACTION_PROMPT.format(max_words=SUMMARY_MAX_WORDS).endswith(cap))
        self.assertIn(f'DEFAULT_COMPACTION_PROMPT, which ends "{cap}"', self.doc)
        self.assertIn(f"[user: {TRANSCRIPT_HEADER} <the transcript", self.doc)
        self.assertIn(f"{TRANSCRIPT_END} SUMMARY_REQUEST]", self.doc)
        shape = re.search(r'"(- <speaker> said <what they said>\.)"', SUMMARY_REQUEST)[1]
        self.assertIn(f"shaped `{shape}`", self.doc)
        self.assertIn(f"at most {SUMMARY_MAX_WORDS} words (`SUMMARY_MAX_WORDS`", self.doc)
        self.assertIn(
            "the user message is the transcript alone, with no request after it", self.doc
        )
