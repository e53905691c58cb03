"""Usage history: one TickUsage row a tick, a bounded table, and the SVG chart drawn from it.

Ticks are real ticks of a real AssistantScript on the offline engine; the rows are read
back from the test database.
"""

from datetime import datetime, timedelta, timezone
from xml.etree import ElementTree

from django.db import connection
from django.test.utils import CaptureQueriesContext

from ai.models import CompactionRecord, TickUsage
from ai.usage_chart import (
    CompactionMark,
    UsagePoint,
    assistant_usage_chart,
    render_usage_chart,
)
from ai.usage_history import prune_interval
from ai.utils.value_checks import ConfigError

from .support import AssistantTestCase, make_assistant, wait_for
from .test_context_compaction import FACTS, fill, size_window

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '"><script>alert(1)</script>&amp; ]]>'


def rows_of(script):
    return list(TickUsage.objects.filter(db_script_id=script.id))


class TestRecording(AssistantTestCase):
    def test_a_tick_writes_one_row_with_the_context_tokens_and_its_status(self):
        self.hear("Hello, Helper.")
        result = self.tick()
        (row,) = rows_of(self.script)
        self.assertEqual(row.status, result["status"])
        self.assertEqual(row.status, "replied")
        self.assertFalse(row.asleep)
        now = self.script.context_usage()  # measured afresh, after the tick
        self.assertEqual(row.tokens, now.total_tokens)
        self.assertEqual(row.max_tokens, now.max_tokens)

    def test_an_idle_tick_and_a_sleeping_one_are_recorded_too(self):
        self.script.set_config("sleep_after_idle_ticks", 1)
        statuses = [self.tick()["status"] for _ in range(2)]
        rows = rows_of(self.script)
        self.assertEqual([row.status for row in rows], statuses)
        self.assertEqual(statuses, ["idle", "slept"])
        self.assertEqual([row.asleep for row in rows], [True, True], "asleep after each")

    def test_recording_renders_nothing_it_costs_one_read_and_one_insert(self):
        self.tick()  # the first tick loads what later ticks reuse, and prunes
        self.script.set_config("usage_history_rows", 0)
        self.tick()
        with CaptureQueriesContext(connection) as without:
            self.tick()
        self.script.set_config("usage_history_rows", 2000)
        self.tick()  # the first recorded tick after recording was off prunes
        with CaptureQueriesContext(connection) as recorded:
            self.tick()
        added = [query["sql"] for query in recorded.captured_queries[len(without) :]]
        self.assertEqual(len(recorded), len(without) + 2, added)
        self.assertIn('INSERT INTO "ai_tickusage"', added[-1])

    def test_zero_records_nothing(self):
        self.script.set_config("usage_history_rows", 0)
        self.hear("Hello, Helper.")
        self.tick()
        self.tick()
        self.assertEqual(rows_of(self.script), [])

    def test_the_table_keeps_the_newest_rows_of_each_assistant(self):
        other = make_assistant("Other", self.room1).assistant_script
        wait_for_ticks(other, 3)
        self.script.set_config("usage_history_rows", 3)
        statuses = []
        for index in range(8):
            if index % 2:
                self.hear(f"Line {index}.")
            statuses.append(self.tick()["status"])
            self.assertLessEqual(len(rows_of(self.script)), 3)
        self.assertEqual([row.status for row in rows_of(self.script)], statuses[-3:])
        self.assertEqual(len(rows_of(other)), 3, "another assistant's rows are its own")

    def test_the_bound_holds_between_prunes(self):
        kept = 20
        self.script.set_config("usage_history_rows", kept)
        self.script.set_config("sleep_after_idle_ticks", 0)
        bound = kept + prune_interval(kept) - 1
        counts = []
        for _ in range(kept * 2):
            self.tick()
            counts.append(len(rows_of(self.script)))
        self.assertLessEqual(max(counts), bound)
        self.assertEqual(max(counts), bound, "the table fills up to its bound")
        self.assertGreaterEqual(counts[-1], kept)

    def test_a_bad_value_is_refused_naming_the_key(self):
        for value, message in (
            (-1, r"^usage_history_rows=-1 refused: must be a whole number from 0 to 1,000,000"),
            ("many", r"^usage_history_rows='many' refused: must be a whole number"),
            (2.5, r"^usage_history_rows=2.5 refused"),
        ):
            with self.subTest(value=value):
                with self.assertRaisesRegex(ConfigError, message):
                    self.script.set_config("usage_history_rows", value)
                self.assertEqual(self.script.get_config("usage_history_rows"), 2000)

    def test_a_bad_stored_value_falls_back_to_the_default_and_ticks_are_recorded(self):
        self.script.attributes.add("usage_history_rows", "lots")
        self.tick()
        self.assertEqual(len(rows_of(self.script)), 1)


def wait_for_ticks(script, count):
    """Run ``count`` ticks of another assistant's script."""
    for _ in range(count):
        wait_for(script.at_repeat())


def parsed(svg):
    return ElementTree.fromstring(svg)


def polyline_points(root):
    (line,) = root.iter(f"{SVG}polyline")
    return line.get("points").split()


def compaction_titles(root):
    return [
        group.find(f"{SVG}title").text
        for group in root.iter(f"{SVG}g")
        if group.get("class", "").startswith("compaction")
    ]


class TestChart(AssistantTestCase):
    START = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)

    def points(self, count=5):
        return [
            UsagePoint(self.START + timedelta(seconds=5 * index), 1000 * index)
            for index in range(count)
        ]

    def test_the_chart_draws_each_tick_both_thresholds_and_each_compaction(self):
        marks = [
            CompactionMark(self.START + timedelta(seconds=5), "sleep", "summary"),
            CompactionMark(self.START + timedelta(seconds=10), "emergency", "hybrid"),
            CompactionMark(self.START + timedelta(seconds=15), "manual", "masking", undone=True),
        ]
        root = parsed(render_usage_chart(self.points(), 10000, 0.7, 0.8, marks))
        self.assertEqual(root.get("width"), "100%")
        self.assertEqual(root.get("viewBox"), "0 0 600 260")
        self.assertEqual(len(polyline_points(root)), 5)
        thresholds = {
            group.get("class"): group
            for group in root.iter(f"{SVG}g")
            if group.get("class", "").startswith("threshold")
        }
        self.assertEqual(set(thresholds), {"threshold sleep", "threshold emergency"})
        for name, group in thresholds.items():
            self.assertTrue(group.find(f"{SVG}line").get("stroke-dasharray"))
        self.assertEqual(
            thresholds["threshold sleep"].find(f"{SVG}text").text, "sleep threshold 70%"
        )
        self.assertEqual(
            compaction_titles(root),
            [
                "sleep compaction (summary) at 2026-11-26 12:00:05",
                "emergency compaction (hybrid) at 2026-11-26 12:00:10",
                "manual compaction (masking) at 2026-11-26 12:00:15, undone",
            ],
        )
        styles = {
            group.get("class"): group.find(f"{SVG}line").get("stroke")
            for group in root.iter(f"{SVG}g")
            if group.get("class", "").startswith("compaction")
        }
        self.assertEqual(len(set(styles.values())), 3, "each kind its own colour")
        texts = [text.text for text in root.iter(f"{SVG}text")]
        self.assertIn("tokens", texts)
        self.assertIn("time", texts)

    def test_hostile_text_is_escaped(self):
        marks = [CompactionMark(self.START + timedelta(seconds=5), HOSTILE, HOSTILE)]
        svg = render_usage_chart(self.points(), 10000, 0.7, 0.8, marks)
        root = parsed(svg)
        self.assertNotIn("<script>", svg)
        self.assertEqual(list(root.iter(f"{SVG}script")), [])
        (title,) = compaction_titles(root)
        self.assertEqual(title, f"{HOSTILE} compaction ({HOSTILE}) at 2026-11-26 12:00:05")
        (group,) = [g for g in root.iter(f"{SVG}g") if g.get("class", "").startswith("compaction")]
        self.assertEqual(group.get("class"), "compaction other")

    def test_no_history_gives_a_chart_that_says_so(self):
        root = parsed(render_usage_chart([], 10000, 0.7, 0.8))
        self.assertEqual(list(root.iter(f"{SVG}polyline")), [])
        self.assertIn("No usage recorded yet", [text.text for text in root.iter(f"{SVG}text")])

    def test_one_tick_and_compactions_outside_the_ticks_are_drawn_safely(self):
        marks = [CompactionMark(self.START - timedelta(hours=1), "sleep", "summary")]
        root = parsed(render_usage_chart(self.points(1), 10000, 0.7, 0.8, marks))
        self.assertEqual(len(polyline_points(root)), 1)
        self.assertEqual(compaction_titles(root), [])


class TestAssistantChart(AssistantTestCase):
    def test_an_assistant_without_ticks_has_an_empty_chart(self):
        root = parsed(assistant_usage_chart(self.script))
        self.assertIn("No usage recorded yet", [text.text for text in root.iter(f"{SVG}text")])

    def test_the_chart_of_an_assistant_marks_the_emergency_compaction_of_a_tick(self):
        CompactionRecord.objects.create(
            db_script_id=self.script.id, kind="manual", strategy="summary"
        )  # before the first recorded tick: not drawn
        self.tick()
        fill(self.script, FACTS * 3)
        size_window(self.script, 0.82)
        self.hear("Where did I bury the gold coins?")
        result = self.tick()
        self.assertEqual(result["emergency"]["context_compaction"]["kind"], "emergency")
        self.tick()
        rows = rows_of(self.script)
        root = parsed(assistant_usage_chart(self.script))
        self.assertEqual(len(polyline_points(root)), len(rows))
        (title,) = compaction_titles(root)
        self.assertTrue(title.startswith("emergency compaction (summary) at "), title)
        self.assertLess(rows[1].tokens / rows[1].max_tokens, 0.8, "recorded after compacting")
        self.assertEqual(len(polyline_points(parsed(assistant_usage_chart(self.script, 2)))), 2)
