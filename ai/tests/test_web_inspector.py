"""The assistant inspector in the game's website (``ai.web``) and the Django admin of the
contrib's tables, through Django's test client on the test database."""

import re

from django.conf import settings
from django.shortcuts import resolve_url
from django.test import Client, override_settings
from django.urls import reverse

from ai.helpers.entity_context import add_observation
from ai.helpers.goals import GoalLimits, add_goal
from ai.helpers.journal import add_entry
from ai.models import (
    CompactionRecord,
    ConversationMessage,
    EntityObservation,
    Goal,
    HistoryCounter,
    JournalEntry,
    JournalWord,
    MemoryLink,
    TickUsage,
    TokenCalibration,
    ToolOffering,
    WorkingMemory,
)
from ai.sleep.compaction import compact_conversation_history
from ai.usage_history import flush_usage

from .support import AssistantTestCase, ScriptedLLM, wait_for
from .test_compaction_commands import FACTS

SUMMARY = (
    "Char buried 40 gold coins under the old oak in Mirkwood. Char's sister Elena is a "
    "blacksmith in Riverdale. The northern bridge collapsed in last winter's storm."
)
SECRET = "Char2 whispered that the vault code is 4417."


@override_settings(ROOT_URLCONF="ai.tests.web_urls")
class InspectorTestCase(AssistantTestCase):
    """An assistant with a history, a journal (a whispered entry too), memories, profiles
    and goals; ``self.account`` is a Developer (a builder), ``self.account2`` a player."""

    def setUp(self):
        super().setUp()
        for fact in FACTS:
            self.script.append_message({"role": "user", "content": fact})
            self.script.append_message({"role": "assistant", "content": "Noted, thank you."})
        self.script.set_config("compact_preserve_window", 2)
        self.script.set_config("pre_compact_extraction_enabled", False)
        self.whisper = self.script.append_message(
            {
                "role": "user",
                "content": "Char2 whispers, 'The vault code is 4417.'",
                "metadata": {"audience": [self.char2.dbref]},
            }
        )
        self.private = add_entry(
            self.assistant, SECRET, "conversation", audience=[self.char2.dbref]
        )
        add_entry(self.assistant, "Char likes the old oak.", "conversation")
        add_entry(
            self.assistant, "Char cares about Mirkwood.", "reflection", cites=[self.private["id"]]
        )
        old = MemoryLink.objects.create(
            db_object=self.assistant, memory_id="m1", text="The gate opens at dawn."
        )
        new = MemoryLink.objects.create(
            db_object=self.assistant, memory_id="m2", text="The gate opens at noon."
        )
        MemoryLink.objects.filter(id=old.id).update(invalid_at=new.created_at, superseded_by=new)
        add_observation(self.assistant, self.char1, "Char carries a lantern.")
        add_goal(self.assistant, "Learn the names of the regulars", "builder", self.limits())
        self.builder = Client()
        self.builder.force_login(self.account)
        self.page = reverse("ai:assistant", args=[self.assistant.id])

    def limits(self):
        return GoalLimits.of(self.script)

    def compact(self, summary=SUMMARY):
        """Compact all but the last two messages with a scripted summary model."""
        with ScriptedLLM(summary) as llm:
            self.script.set_config("compact_model", llm.model)
            result = wait_for(
                compact_conversation_history(self.script, self.assistant, force=True, kind="manual")
            )
        self.assertTrue(result.get("success"), result)
        return CompactionRecord.objects.get(id=result["compaction_id"])

    def text(self, response):
        """Return a page's text with its whitespace runs made single spaces."""
        return " ".join(response.content.decode().split())


class TestPermissions(InspectorTestCase):
    def urls(self):
        return [reverse("ai:assistants"), self.page, reverse("ai:assistant-json", args=[1])]

    def test_anonymous_visitors_are_sent_to_log_in(self):
        for url in self.urls()[:2]:
            with self.subTest(url=url):
                response = Client().get(url)
                self.assertRedirects(
                    response,
                    f"{resolve_url(settings.LOGIN_URL)}?next={url}",
                    fetch_redirect_response=False,
                )

    def test_players_are_refused(self):
        player = Client()
        player.force_login(self.account2)
        for url in self.urls():
            with self.subTest(url=url):
                self.assertEqual(player.get(url).status_code, 403)
        response = player.post(reverse("ai:undo", args=[self.assistant.id]), {"record": "1"})
        self.assertEqual(response.status_code, 403)

    def test_a_player_never_sees_the_whisper(self):
        player = Client()
        player.force_login(self.account2)
        for url in (self.page, reverse("ai:assistant-json", args=[self.assistant.id])):
            with self.subTest(url=url):
                response = player.get(url)
                self.assertNotIn("4417", response.content.decode())

    def test_the_json_endpoint_answers_anonymous_visitors_403_in_json(self):
        response = Client().get(reverse("ai:assistant-json", args=[self.assistant.id]))
        self.assertEqual(response.status_code, 403)
        self.assertEqual(response.json(), {"error": "Only builders may inspect assistants."})

    def test_a_builder_below_developer_may_look(self):
        self.account2.permissions.add("Builder")
        builder = Client()
        builder.force_login(self.account2)
        self.assertEqual(builder.get(self.page).status_code, 200)

    def test_an_object_that_is_no_assistant_is_not_found(self):
        url = reverse("ai:assistant", args=[self.char1.id])
        self.assertEqual(self.builder.get(url).status_code, 404)


class TestPages(InspectorTestCase):
    def test_the_list_shows_each_assistant_and_its_state(self):
        self.script.fall_asleep()
        response = self.builder.get(reverse("ai:assistants"))
        self.assertEqual(response.status_code, 200)
        self.assertTemplateUsed(response, "website/base.html")
        usage = self.script.context_usage()
        text = self.text(response)
        self.assertIn(f'href="{self.page}">Helper</a>', text)
        self.assertIn(
            f"<td>Room</td> <td>dozing</td> <td> {usage.total_tokens} / 100000 tokens", text
        )
        self.assertIn("<td> never </td> <td>3</td> <td>2</td>", text)

    def test_the_page_breaks_the_context_down_against_both_thresholds(self):
        response = self.builder.get(self.page)
        self.assertEqual(response.status_code, 200)
        usage = self.script.context_usage()
        text = self.text(response)
        self.assertIn(f"{usage.total_tokens} of 100000 tokens", text)
        self.assertIn("sleep 70% (70000 tokens, not reached)", text)
        self.assertIn("emergency 80% (80000 tokens, not reached)", text)
        context = response.context["assistant"]["context"]
        parts = {part["name"]: part["tokens"] for part in context["parts"]}
        self.assertEqual(sum(parts.values()), 100000, "the parts and the free space fill it")
        self.assertEqual(parts["history"], usage.history_tokens)
        self.assertEqual(parts["tool schemas"], usage.frame_parts["tool schemas"])
        self.assertEqual(parts["system prompt"], usage.frame_parts["system_prompt"])
        self.assertIn(f"<td>free</td> <td>{parts['free']}</td>", text)
        self.assertIn('class="ai-mark" style="left: 70.00%"', text)

    def test_crossed_thresholds_are_marked(self):
        self.script.set_config("compact_sleep_threshold", 0.001)
        text = self.text(self.builder.get(self.page))
        self.assertIn("sleep 0.1% (100 tokens, <strong>crossed</strong>)", text)
        self.assertIn("emergency 80% (80000 tokens, not reached)", text)

    def test_every_item_shows_its_audience(self):
        self.script.history.set_pinned([self.whisper["id"]])
        text = self.text(self.builder.get(self.page))
        private = f"private to Char2 ({self.char2.dbref})"
        self.assertIn(f'{self.private["id"]}, ', text)
        self.assertIn(f'badge-warning ai-audience">{private}</span> <pre>{SECRET}</pre>', text)
        self.assertIn(
            f'badge-warning ai-audience">{private}</span> <pre>Char2 whispers, '
            "&#x27;The vault code is 4417.&#x27;</pre>",
            text,
            "the pinned whisper",
        )
        self.assertIn('ai-audience">public</span> <pre>Char likes the old oak.</pre>', text)
        self.assertIn(f"on {self.private['id']}</small>", text)
        self.assertIn("Char cares about Mirkwood.", text)
        self.assertIn("<del>The gate opens at dawn.</del>", text)
        self.assertRegex(text, r"Superseded [\d: -]+ by link \d+: The gate opens at noon\.")
        self.assertIn("Char carries a lantern.", text)
        self.assertIn("Learn the names of the regulars", text)
        self.assertIn("No usage recorded yet</text></svg>", text)

    def test_a_compaction_shows_its_summary_its_originals_and_an_undo_button(self):
        record = self.compact()
        text = self.text(self.builder.get(self.page))
        self.assertRegex(
            text,
            rf"#{record.id}</strong> [\d: -]+: manual, summary; 11 messages, "
            rf"{record.result['original_tokens']} → {record.result['new_tokens']} tokens; "
            "in effect",
        )
        self.assertIn("Char buried 40 gold coins under the old oak in Mirkwood.", text)
        self.assertIn("<summary>The 11 archived messages it replaced</summary>", text)
        self.assertIn(f"<pre>{FACTS[1]}</pre>".replace('"', "&quot;"), text)
        self.assertIn(f'name="record" value="{record.id}"', text)
        self.assertIn('name="csrfmiddlewaretoken"', text)


class TestUsageOverTime(InspectorTestCase):
    def test_the_page_charts_each_ticks_usage_and_marks_the_compactions(self):
        before = self.text(self.builder.get(self.page))
        self.assertIn("No usage recorded yet", before)
        for _ in range(3):
            self.tick()
        self.compact()
        self.tick()
        text = self.text(self.builder.get(self.page))
        self.assertIn('class="ai-usage-chart"', text)
        (points,) = re.findall(r'<polyline class="tokens" points="([^"]+)"', text)
        self.assertEqual(len(points.split()), 4)
        chart = re.search(r"<svg.*?</svg>", text).group(0)
        self.assertIn("manual", " ".join(re.findall(r"<title>([^<]*)</title>", chart)))
        data = self.builder.get(reverse("ai:assistant-json", args=[self.assistant.id])).json()
        statuses = [row["status"] for row in data["usage_over_time"]]
        self.assertEqual(statuses[0], "decomposed", "the fixture's goal is broken down first")
        self.assertEqual(len(statuses), 4)
        self.assertTrue(all(row["tokens"] > 0 for row in data["usage_over_time"]))


class TestJson(InspectorTestCase):
    def test_the_json_has_what_the_page_shows(self):
        record = self.compact()
        data = self.builder.get(reverse("ai:assistant-json", args=[self.assistant.id])).json()
        self.assertEqual((data["name"], data["room"], data["state"]), ("Helper", "Room", "awake"))
        self.assertEqual(data["context"]["max_tokens"], 100000)
        self.assertEqual(
            [(t["name"], t["setting"]) for t in data["context"]["thresholds"]],
            [("sleep", "compact_sleep_threshold"), ("emergency", "compact_emergency_threshold")],
        )
        (compaction,) = data["compactions"]
        self.assertEqual((compaction["id"], compaction["undoable"]), (record.id, True))
        self.assertEqual(len(compaction["written"][0]["replaced"]), 11)
        secret = [entry for entry in data["journal"] if entry["text"] == SECRET]
        self.assertEqual(secret[0]["audience"], f"private to Char2 ({self.char2.dbref})")
        self.assertEqual(data["reflections"][0]["cites"], [self.private["id"]])
        self.assertEqual(
            [
                (m["text"], m["superseded_by"] and m["superseded_by"]["text"])
                for m in data["long_term_memories"]
            ],
            [
                ("The gate opens at noon.", None),
                ("The gate opens at dawn.", "The gate opens at noon."),
            ],
        )
        self.assertEqual(data["usage_over_time"], [])


class TestUndo(InspectorTestCase):
    def undo_url(self):
        return reverse("ai:undo", args=[self.assistant.id])

    def test_undo_puts_the_messages_back_and_says_so(self):
        before = self.script.history.messages()
        record = self.compact()
        response = self.builder.post(self.undo_url(), {"record": record.id}, follow=True)
        self.assertRedirects(response, self.page)
        self.assertEqual(self.script.history.messages(), before)
        text = self.text(response)
        self.assertIn(
            f"Helper: undid the manual compaction #{record.id} of "
            f"{record.created_at.isoformat()[:19].replace('T', ' ')}: 11 messages are live again",
            text,
        )
        self.assertRegex(text, rf"#{record.id}</strong> [\d: -]+: manual, .* undone [\d: -]+")
        self.assertNotIn("Undo compaction", text)

    def test_undo_refused_says_why(self):
        record = self.compact()
        self.script.set_config("compact_sleep_threshold", 0.01)
        self.script.set_config("compact_emergency_threshold", 0.01)
        after = self.script.history.messages()
        text = self.text(self.builder.post(self.undo_url(), {"record": record.id}, follow=True))
        self.assertRegex(
            text,
            rf"alert-warning\"> Helper: undoing compaction #{record.id} would bring the context "
            r"to [\d,]+ of 100,000 tokens \(\d+\.\d%\), at or over compact_emergency_threshold "
            r"1%: the next awake tick would compact again\. Tick &#x27;even if it compacts "
            r"again&#x27; to undo anyway\.",
        )
        self.assertEqual(self.script.history.messages(), after)
        text = self.text(
            self.builder.post(self.undo_url(), {"record": record.id, "force": "on"}, follow=True)
        )
        self.assertIn(f"Helper: undid the manual compaction #{record.id}", text)

    def test_undo_with_nothing_to_undo_says_so(self):
        text = self.text(self.builder.post(self.undo_url(), {"record": "1"}, follow=True))
        self.assertIn('alert-warning"> Helper: no compaction to undo. </div>', text)

    def test_undo_of_a_compaction_no_longer_the_last_is_refused(self):
        first = self.compact()
        for fact in FACTS:
            self.script.append_message({"role": "user", "content": fact})
        second = self.compact("Char buried coins in Mirkwood; the bridge fell.")
        text = self.text(self.builder.post(self.undo_url(), {"record": first.id}, follow=True))
        self.assertIn(
            f"Helper: the last compaction is now #{second.id}, not #{first.id}: see it first.",
            text,
        )
        self.assertIsNone(CompactionRecord.objects.get(id=second.id).undone_at)

    def test_undo_needs_the_csrf_token_and_a_post(self):
        record = self.compact()
        strict = Client(enforce_csrf_checks=True)
        strict.force_login(self.account)
        self.assertEqual(strict.post(self.undo_url(), {"record": record.id}).status_code, 403)
        self.assertIsNone(CompactionRecord.objects.get(id=record.id).undone_at)
        self.assertEqual(self.builder.get(self.undo_url()).status_code, 405)
        page = strict.get(self.page)
        token = str(page.context["csrf_token"])
        response = strict.post(self.undo_url(), {"record": record.id, "csrfmiddlewaretoken": token})
        self.assertRedirects(response, self.page, fetch_redirect_response=False)
        self.assertIsNotNone(CompactionRecord.objects.get(id=record.id).undone_at)


READ_ONLY = (
    ConversationMessage,
    CompactionRecord,
    HistoryCounter,
    TokenCalibration,
    ToolOffering,
    JournalEntry,
    JournalWord,
    EntityObservation,
    MemoryLink,
    WorkingMemory,
)


class TestAdmin(InspectorTestCase):
    def setUp(self):
        super().setUp()
        self.account.is_superuser = self.account.is_staff = True
        self.account.save()
        self.compact()
        TokenCalibration.objects.create(model="openai/x", factor=1.1)
        ToolOffering.objects.create(model="openai/x", reason="wrote tool calls as text")
        WorkingMemory.objects.create(db_object=self.assistant, speaker="#1", speaker_name="Char")

    def admin_url(self, model, view, *args):
        return reverse(f"admin:ai_{model._meta.model_name}_{view}", args=args)

    def test_every_table_has_a_changelist(self):
        for model in (*READ_ONLY, Goal):
            with self.subTest(model=model.__name__):
                response = self.builder.get(self.admin_url(model, "changelist"))
                self.assertEqual(response.status_code, 200)
                self.assertEqual(response.context["cl"].result_count, model.objects.count())
                self.assertGreater(model.objects.count(), 0)

    def test_the_usage_rows_are_listed_read_only(self):
        self.tick()
        flush_usage(self.script)
        (row,) = TickUsage.objects.all()
        response = self.builder.get(self.admin_url(TickUsage, "changelist"))
        self.assertEqual(response.context["cl"].result_count, 1)
        change = self.builder.post(self.admin_url(TickUsage, "change", row.id), {"tokens": 1})
        self.assertEqual(change.status_code, 403)

    def test_the_audience_filter_keeps_the_whispered(self):
        response = self.builder.get(
            self.admin_url(JournalEntry, "changelist") + "?audience=private"
        )
        self.assertEqual([entry.content for entry in response.context["cl"].result_list], [SECRET])

    def test_history_records_and_counters_cannot_be_changed(self):
        for model in READ_ONLY:
            row = model.objects.first()
            with self.subTest(model=model.__name__):
                self.assertEqual(self.builder.get(self.admin_url(model, "add")).status_code, 403)
                change = self.admin_url(model, "change", row.pk)
                self.assertEqual(self.builder.post(change, {}).status_code, 403)
                delete = self.admin_url(model, "delete", row.pk)
                self.assertEqual(self.builder.post(delete, {"post": "yes"}).status_code, 403)
                self.assertTrue(model.objects.filter(pk=row.pk).exists())

    def test_a_goal_changes_only_its_priority(self):
        goal = Goal.objects.get()
        change = self.admin_url(Goal, "change", goal.pk)
        response = self.builder.post(change, {"priority": 8, "text": "Something else"})
        self.assertEqual(response.status_code, 302)
        goal.refresh_from_db()
        self.assertEqual((goal.priority, goal.text), (8, "Learn the names of the regulars"))
