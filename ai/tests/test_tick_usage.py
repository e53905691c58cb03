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
from ai.usage_history import FLUSH_TICKS, PRUNE_SHARE, prune_interval, usage_rows
from ai.utils.value_checks import ConfigError

from .support import AssistantTestCase, make_assistant, wait_for
from .test_context_compaction import FACTS, fill, size_window

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '"><script>alert(1)</script>&amp; ]]>'


def written(script):
    return list(TickUsage.objects.filter(db_script_id=script.id))


def statuses(rows):
    return [row[3] for row in rows]


class TestRecording(AssistantTestCase):
    def test_a_tick_keeps_one_row_with_the_context_tokens_and_its_status(self):
        result = self.tick()
        ((_, tokens, max_tokens, status, asleep),) = usage_rows(self.script)
        self.assertEqual((status, asleep), (result["status"], False))
        self.assertEqual(status, "idle")
        now = self.script.context_usage()  # measured afresh, after the tick
        self.assertEqual((tokens, max_tokens), (now.total_tokens, now.max_tokens))

    def test_a_turn_keeps_the_usage_it_measured_before_its_reply(self):
        self.hear("Hello, Helper.")
        result = self.tick()
        self.assertEqual(result["status"], "replied")
        tokens, status = usage_rows(self.script)[-1][1:4:2]
        self.assertEqual(status, "replied")
        history = self.script.conversation_history
        (heard,) = [index for index, message in enumerate(history) if message["role"] == "user"]
        reply_tokens = sum(message["token_count"] for message in history[heard + 1 :])
        # The frame is measured once a tick, before the turn notes whom it talks with in
        # working memory (a dozen tokens); history is read again after the player's line.
        expected = self.script.context_usage().total_tokens - reply_tokens
        self.assertLessEqual(tokens, expected)
        self.assertGreater(tokens, expected - 30)

    def test_rows_are_written_a_batch_at_a_time_and_the_rest_at_a_reload(self):
        results = [self.tick() for _ in range(FLUSH_TICKS + 2)]
        self.assertEqual(len(written(self.script)), FLUSH_TICKS)
        self.script.at_server_reload()  # as Evennia calls it before a reload
        rows = written(self.script)
        self.assertEqual([row.status for row in rows], [result["status"] for result in results])
        self.assertEqual(
            usage_rows(self.script),
            [(row.created_at, row.tokens, row.max_tokens, row.status, row.asleep) for row in rows],
        )

    def test_an_idle_tick_and_a_sleeping_one_are_recorded_too(self):
        self.script.set_config("sleep_after_idle_ticks", 1)
        ticked = [self.tick()["status"] for _ in range(2)]
        rows = usage_rows(self.script)
        self.assertEqual(statuses(rows), ticked)
        self.assertEqual(ticked, ["idle", "slept"])
        self.assertEqual([row[4] for row in rows], [True, True], "asleep after each")

    def test_a_tick_recorded_costs_no_query(self):
        self.tick()  # the first tick loads what later ticks reuse
        self.script.set_config("usage_history_rows", 0)
        self.tick()
        with CaptureQueriesContext(connection) as without:
            self.tick()
        self.script.set_config("usage_history_rows", 2000)
        self.tick()
        with CaptureQueriesContext(connection) as recorded:
            self.tick()  # not the last of a batch: nothing written yet
        self.assertEqual(len(recorded), len(without))
        self.assertEqual(len(usage_rows(self.script)), 2, "the first went when it was 0")

    def test_zero_records_nothing_and_drops_what_waits(self):
        self.tick()
        self.script.set_config("usage_history_rows", 0)
        self.script.at_server_reload()  # turned off before the next tick: nothing written
        self.assertEqual(written(self.script), [])
        self.hear("Hello, Helper.")
        for _ in range(FLUSH_TICKS):
            self.tick()
        self.script.at_server_reload()
        self.assertEqual(usage_rows(self.script), [])

    def test_the_table_keeps_the_newest_rows_of_each_assistant(self):
        other = make_assistant("Other", self.room1).assistant_script
        for _ in range(3):
            wait_for(other.at_repeat())
        other.at_server_shutdown()
        self.script.set_config("usage_history_rows", 3)
        ticked = []
        for index in range(2 * FLUSH_TICKS):
            if index % 2:
                self.hear(f"Line {index}.")
            ticked.append(self.tick()["status"])
        self.assertEqual([row.status for row in written(self.script)], ticked[-3:])
        self.assertEqual(statuses(usage_rows(self.script)), ticked[-3:])
        self.assertEqual(len(written(other)), 3, "another assistant's rows are its own")

    def test_the_bound_holds_between_prunes(self):
        kept = PRUNE_SHARE * 2 * FLUSH_TICKS  # a prune every other batch
        self.script.set_config("usage_history_rows", kept)
        self.script.set_config("sleep_after_idle_ticks", 0)
        self.script.set_config("compact_enabled", False)  # the cheapest ticks
        every = prune_interval(kept)
        self.assertEqual(every, 2 * FLUSH_TICKS)
        table, held = [], []
        for _ in range(kept + 2 * every + FLUSH_TICKS):  # the last batch prunes
            self.tick()
            table.append(TickUsage.objects.filter(db_script_id=self.script.id).count())
            held.append(table[-1] + len(self.script.ndb.usage_buffer))
        self.assertEqual(max(table), kept + every - FLUSH_TICKS, "it fills up to its bound")
        self.assertLessEqual(max(held), kept + every + FLUSH_TICKS)
        self.assertEqual(table[-1], kept)

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
        self.assertEqual(len(usage_rows(self.script)), 1)


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
        rows = usage_rows(self.script)
        root = parsed(assistant_usage_chart(self.script))
        self.assertEqual(len(polyline_points(root)), len(rows))
        (title,) = compaction_titles(root)
        self.assertTrue(title.startswith("emergency compaction (summary) at "), title)
        self.assertLess(rows[1][1] / rows[1][2], 0.8, "recorded after compacting")
        self.assertEqual(len(polyline_points(parsed(assistant_usage_chart(self.script, 2)))), 2)
