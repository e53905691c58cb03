"""The real-model evaluation (``eval/``): its generated conversations, its detectors, its
figures, and that it stops, printing no figures, when it can measure nothing.

The evaluation's model calls go through the real contrib and litellm: a model that always
fails is litellm's own ``mock_response`` error; the end-to-end run uses the offline engine.
"""

import io
import json
import os
import shutil
import sys
import tempfile
from contextlib import redirect_stdout
from unittest import TestCase

from django.test import override_settings

from .support import WITH_THIS_APP, BaseEvenniaTest, wait_for

EVAL_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "eval")
sys.path.insert(0, EVAL_DIR)
import conversations  # noqa: E402
import detectors  # noqa: E402
import results  # noqa: E402

SEEDS = range(30)


def lines_of(conversation):
    return [line.text for line in conversation.opening]


class GeneratedConversationTest(TestCase):
    def test_a_seed_gives_the_same_conversation(self):
        first, again = conversations.generate(41), conversations.generate(41)
        self.assertEqual(lines_of(first), lines_of(again))
        self.assertEqual(first.questions, again.questions)

    def test_two_seeds_give_different_conversations(self):
        one, other = conversations.generate(1), conversations.generate(2)
        self.assertNotEqual(lines_of(one), lines_of(other))
        shared = set(lines_of(one)) & set(lines_of(other))
        self.assertLess(len(shared), len(one.opening) // 2)

    def test_every_kind_and_phrasing_occurs_over_some_seeds(self):
        facts = [f for seed in SEEDS for f in conversations.generate(seed).facts.values()]
        self.assertEqual({f.kind for f in facts}, set(conversations.KINDS))
        self.assertEqual({f.phrasing for f in facts}, set(conversations.PHRASINGS))
        self.assertTrue(any(f.whisper for f in facts))
        self.assertTrue(any(f.old_values for f in facts))
        self.assertTrue(any(f.distractor_values for f in facts))

    def test_a_changed_fact_is_asked_for_its_new_value(self):
        for seed in SEEDS:
            conversation = conversations.generate(seed)
            for question in conversation.questions:
                fact = conversation.facts[question.fact]
                if question.purpose == "changed":
                    self.assertEqual(question.right, (fact.value,))
                    self.assertIn(fact.old_values[0], question.wrong)
                    change = [l for l in conversation.opening if l.role == "change"]
                    self.assertTrue(any(fact.value in line.text for line in change))

    def test_a_whisper_is_asked_back_by_its_whisperer_and_kept_from_others(self):
        purposes = set()
        for seed in SEEDS:
            conversation = conversations.generate(seed)
            for question in conversation.questions:
                fact = conversation.facts[question.fact]
                purposes.add(question.purpose)
                if question.purpose == "whisper_back":
                    self.assertEqual((question.asker, question.whisper), (fact.speaker, True))
                    self.assertEqual(question.right, (fact.value,))
                if question.purpose == "private":
                    self.assertNotEqual(question.asker, fact.speaker)
                    self.assertEqual((question.right, question.wrong), ((), (fact.value,)))
        self.assertLessEqual({"whisper_back", "private", "changed", "recall"}, purposes)

    def test_each_value_is_said_only_in_its_own_facts_lines(self):
        for seed in SEEDS:
            conversation = conversations.generate(seed)
            for fact in conversation.facts.values():
                for value in (fact.value, *fact.old_values, *fact.distractor_values):
                    holding = [l for l in conversation.opening if detectors.mentions(l.text, value)]
                    self.assertTrue(holding, (seed, value))
                    self.assertEqual({l.fact for l in holding}, {fact.id}, (seed, value))

    def test_a_run_has_the_configured_size(self):
        shape = conversations.Shape(facts=8, questions=6)
        conversation = conversations.generate(5, shape)
        self.assertEqual((len(conversation.facts), len(conversation.questions)), (8, 6))

    def test_a_short_run_may_have_more_small_talk_than_facts(self):
        shape = conversations.Shape(facts=2, questions=2, small_talk=3, filler=0)
        conversation = conversations.generate(4242, shape)
        self.assertEqual([q.fact in conversation.facts for q in conversation.questions], [1, 1])

    def test_a_bad_size_is_refused_by_name(self):
        with self.assertRaisesRegex(ValueError, "facts"):
            conversations.generate(1, conversations.Shape(facts=0))
        with self.assertRaisesRegex(ValueError, "whispers"):
            conversations.generate(1, conversations.Shape(facts=2, whispers="1"))

    def test_the_fixed_conversation_remains_a_case(self):
        fixed = conversations.fixed()
        self.assertEqual((len(fixed.facts), len(fixed.questions)), (10, 10))


def conversation_with(*lines, whisper_value=None):
    """A small conversation: Ada's password, Bram's distractor, Ada's whispered promise."""
    conversation = conversations.Conversation("test", 0, "Pell", "Blue Heron Inn", ("Ada", "Bram"))
    conversation.facts = {
        "password-1": conversations.Fact("password-1", "password", "Ada", "thistle",
                                         distractor_values=("nightjar",)),
        "promise-2": conversations.Fact("promise-2", "promise", "Ada", "honey", whisper=True),
    }  # fmt: skip
    conversation.opening = [
        conversations.Line("Ada", "The password for the vault is thistle.", fact="password-1"),
        conversations.Line("Bram", "The password for the gate is nightjar.", fact="password-1"),
        conversations.Line("Ada", "I promised Bram to bring honey on Friday.", True, "fact",
                           "promise-2"),
        *lines,
    ]  # fmt: skip
    return conversation


class DetectorTest(TestCase):
    def setUp(self):
        self.conversation = conversation_with()

    def test_an_answer_is_right_with_a_right_word_and_no_wrong_one(self):
        question = conversations.Question("Bram", "?", "password-1", ("thistle",), ("nightjar",))
        self.assertTrue(detectors.answer_right(question, "It is thistle."))
        self.assertFalse(detectors.answer_right(question, "thistle or nightjar"))
        self.assertFalse(detectors.answer_right(question, "I do not know."))
        self.assertFalse(detectors.answer_right(question, "thistles"))

    def test_a_private_question_is_right_when_the_reply_keeps_the_secret(self):
        question = conversations.Question("Bram", "?", "promise-2", (), ("honey",), "private")
        self.assertTrue(detectors.answer_right(question, "That is not mine to tell."))
        self.assertFalse(detectors.answer_right(question, "She promised you honey."))
        self.assertFalse(detectors.answer_right(question, ""))

    def test_invented_names_and_numbers_are_found(self):
        found = detectors.invented(
            ["Ada said the password for the vault is thistle; Bob runs the forge by 12 gates."],
            self.conversation,
        )
        self.assertEqual([f.what for f in found], ["Bob", "12"])
        texts = ["- Bob runs the forge.", "Facts: Mira keeps bees."]
        found = detectors.invented(texts, self.conversation)
        self.assertEqual([f.what for f in found], ["Bob", "Mira"])

    def test_a_faithful_summary_invents_nothing(self):
        texts = [
            "Summary: Ada said the password for the vault is thistle.\n- Bram: the gate "
            "password is nightjar. Pell listened at the Blue Heron Inn [2026-11-25 14:05]."
        ]
        self.assertEqual(detectors.invented(texts, self.conversation), [])

    def test_contractions_and_thanks_opening_a_sentence_are_no_names(self):
        texts = ["Let's go back to the vault. Thank you, Ada. Ada's gate is open."]
        self.assertEqual(detectors.invented(texts, self.conversation), [])
        labelled = [
            "[You said] That's a fine gate, Ada.",
            "- You said, Yes, I can tell. Can you wait?",
            "- You said Yes, market nights can be noisy.",  # seed 25's summary
        ]
        self.assertEqual(detectors.invented(labelled, self.conversation), [])
        gerund = ['- You said "It is crowded. Hiding the map there is an idea."']
        self.assertEqual(detectors.invented(gerund, self.conversation), [])
        self.assertEqual(
            [f.what for f in detectors.invented(["Ada met Hiding."], self.conversation)], ["Hiding"]
        )

    def test_an_adverb_or_interjection_opening_a_reply_is_no_name(self):
        texts = ["Certainly! Ada said the vault password is thistle. Indeed, Bram agreed."]
        self.assertEqual(detectors.invented(texts, self.conversation), [])
        found = detectors.invented(["Ada met Certainly there."], self.conversation)
        self.assertEqual([f.what for f in found], ["Certainly"])

    def test_an_attribution_opening_a_line_is_no_name(self):
        texts = ["According to Ada, the vault password is thistle."]
        self.assertEqual(detectors.invented(texts, self.conversation), [])
        found = detectors.invented(["Ada met them according to Mira."], self.conversation)
        self.assertEqual([f.what for f in found], ["Mira"])

    def test_the_archive_marker_is_the_contribs_words(self):
        import real_model

        from ai.utils.markers import ARCHIVE_MARKER, SAID_HEADER

        marker = f"{ARCHIVE_MARKER} 22 earlier messages were archived; Zed finds them."
        kept = f'{SAID_HEADER}\n- Ada: "the vault password is thistle."'
        text = real_model.without_frame(f"{marker}\n{kept}")
        self.assertEqual(detectors.invented([text], self.conversation), [])

    def test_a_fact_credited_to_the_wrong_player_is_a_swap(self):
        found = detectors.swapped(["Bram said the vault password is thistle."], self.conversation)
        self.assertEqual([f.what for f in found], ["thistle credited to Bram"])

    def test_facts_credited_to_their_speakers_are_no_swap(self):
        texts = [
            "Ada said the vault password is thistle. Bram: the gate password is nightjar.",
            "Bram asked about the vault; Ada said it is thistle.",
        ]
        self.assertEqual(detectors.swapped(texts, self.conversation), [])

    def test_an_announced_tool_use_is_an_intention(self):
        found = detectors.intentions(
            ['I will add the password "thistle" to my journal.', "Let me check my notes."]
        )
        self.assertEqual(len(found), 2)

    def test_an_answer_is_no_intention(self):
        replies = ["The password is thistle.", "I'll remember that, Ada.", "I will see you soon."]
        self.assertEqual(detectors.intentions(replies), [])

    def test_markup_heard_is_found_and_speech_passes(self):
        found = detectors.markup(
            ['```json\n{"name": "say"}\n```', 'add_journal_entry(content="x")', "<tool_call>"]
        )
        self.assertEqual(len(found), 3)
        self.assertEqual(detectors.markup(["Hello, Ada! The fire is warm (and bright)."]), [])

    def test_an_echo_is_found_and_an_answer_passes(self):
        line = "The password for the old vault door is thistle."
        self.assertTrue(detectors.is_echo("The password for the old vault door is thistle!", line))
        self.assertFalse(detectors.is_echo("Thank you, Ada, I will keep it safe.", line))

    def test_a_whisper_heard_by_another_player_is_a_leak(self):
        heard = [("Ada", "You promised honey."), ("Bram", "Ada will bring you honey.")]
        found = detectors.leaks(heard, self.conversation)
        self.assertEqual([f.what for f in found], ["promise-2 heard by Bram"])
        self.assertEqual(detectors.leaks(heard[:1], self.conversation), [])


def record(**metrics):
    base = dict.fromkeys(k for k, _, _ in results.METRICS)
    base.update(answers_right=1.0, facts_findable=1.0, invented=0, swapped=0, intentions=0)
    base.update(leaks=0, compactions_done=2, compactions_refused=0)
    base.update(metrics)
    return {"seed": 1, "metrics": {k: v for k, v in base.items() if v is not None}}


class ResultsTest(TestCase):
    def test_mean_and_spread_over_runs(self):
        summary = results.aggregate([record(answers_right=0.5), record(answers_right=1.0)])
        self.assertEqual(
            summary["metrics"]["answers_right"], {"mean": 0.75, "min": 0.5, "max": 1.0}
        )

    def test_targets_met_and_missed(self):
        good = results.targets(results.aggregate([record(), record(answers_right=0.7)]))
        self.assertTrue(all(met for _, _, met in good))
        bad = results.aggregate([record(), record(invented=1, compactions_refused=1)])
        missed = [label for label, _, met in results.targets(bad) if not met]
        self.assertEqual(missed, ["invented facts 0", "refused compactions <= 10% of attempts"])

    def test_autonomy_runs_have_their_own_targets(self):
        def autonomy(**metrics):
            base = dict(sub_goals=3, turns_parsed=0.9, goal_settled=1.0, insights_sound=1)
            base.update(dangerous_unconfirmed=0, markup=0, internal=0, leaks=0)
            return {"seed": 1, "scenario": "autonomy", "metrics": dict(base, **metrics)}

        summary = results.aggregate([autonomy(), autonomy(sub_goals=1, turns_parsed=0.5)])
        missed = [label for label, _, met in results.targets(summary) if not met]
        self.assertEqual(
            missed,
            [
                "goal broken into >= 2 sub-goals (every run)",
                "autonomous turns' calls parse >= 80% (mean)",
            ],
        )
        self.assertNotIn(
            "answers right", "".join(label for label, _, _ in results.targets(summary))
        )

    def test_runs_of_two_scenarios_are_not_aggregated_together(self):
        with self.assertRaisesRegex(ValueError, "autonomy, conversation"):
            results.aggregate([record(), dict(record(), scenario="autonomy")])

    def test_a_stopped_run_is_left_out(self):
        summary = results.aggregate([record(), {"seed": 2, "aborted": "dead server"}])
        self.assertEqual(summary["runs"], 1)

    def test_the_command_prints_and_writes_the_aggregate(self):
        folder = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, folder)
        paths = []
        for seed, right in ((1, 0.5), (2, 1.0)):
            paths.append(os.path.join(folder, f"{seed}.json"))
            with open(paths[-1], "w") as handle:
                json.dump(dict(record(answers_right=right), seed=seed), handle)
        out, printed = os.path.join(folder, "aggregate.json"), io.StringIO()
        with redirect_stdout(printed):
            code = results.main([*paths, "--out", out])
        self.assertEqual(code, 1)  # 75% answers right is under the target
        self.assertIn("MISSED answers right", printed.getvalue())
        with open(out) as handle:
            self.assertEqual(json.load(handle)["metrics"]["answers_right"]["min"], 0.5)


@WITH_THIS_APP
@override_settings(AI_LLM_MAX_RETRIES=0)
class HarnessTest(BaseEvenniaTest):
    """The harness itself, in the test game: real typeclasses, script and ticks."""

    def setUp(self):
        super().setUp()
        import real_model

        self.real_model = real_model
        self.runs_dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.runs_dir)
        self.shape = conversations.Shape(facts=3, questions=3, filler=4, small_talk=1)

    def play(self, options, model="openai/eval-test"):
        plan = [conversations.generate(3, self.shape)]
        settings = {"window": 4096, "strategy": None, "layout": None}
        printed = io.StringIO()
        watchdog, timer = self.real_model.Watchdog(), self.real_model.CallTimer()
        with redirect_stdout(printed):
            runs = self.real_model.play_runs(
                plan, model, options, settings, watchdog, timer, self.runs_dir
            )
            try:
                return wait_for(runs), printed.getvalue()
            except self.real_model.EvaluationStopped as stop:
                return stop, printed.getvalue()

    def saved(self):
        (name,) = os.listdir(self.runs_dir)
        with open(os.path.join(self.runs_dir, name)) as handle:
            return json.load(handle)

    def test_a_model_that_always_fails_stops_the_run_after_three_ticks(self):
        stop, printed = self.play({"mock_response": "litellm.InternalServerError"})
        self.assertIsInstance(stop, self.real_model.EvaluationStopped)
        self.assertIn("3 ticks in a row failed", str(stop))
        self.assertEqual(printed.count("llm_error"), 3)
        self.assertNotIn("facts findable", printed)
        self.assertNotIn("answers right", printed)
        self.assertIn("3 ticks in a row", self.saved()["aborted"])
        self.assertNotIn("metrics", self.saved())

    def test_a_call_refused_as_misconfigured_stops_the_run_at_once(self):
        os.environ.pop("EVAL_TEST_UNSET_KEY", None)
        stop, printed = self.play({"api_key_env": "EVAL_TEST_UNSET_KEY"})
        self.assertIsInstance(stop, self.real_model.EvaluationStopped)
        self.assertIn("EVAL_TEST_UNSET_KEY", str(stop))
        self.assertEqual(printed.count("llm_error"), 1)
        self.assertNotIn("facts findable", printed)

    def test_a_dead_server_stops_the_run_before_the_next_tick(self):
        class DeadServer:
            def check_alive(self):
                raise RuntimeError("the model server exited with -11")

        watchdog = self.real_model.Watchdog(DeadServer())
        with self.assertRaisesRegex(self.real_model.EvaluationStopped, "exited with -11"):
            watchdog.before_tick()

    def test_a_run_on_the_offline_engine_is_measured_and_saved(self):
        (run,), printed = self.play({}, model="offline/assistant")
        self.assertEqual(len(run["answers"]), 3)
        self.assertEqual(len(run["facts"]), 3)
        self.assertIn("facts findable", printed)
        self.assertEqual(self.saved()["metrics"], run["metrics"])
        self.assertEqual(run["metrics"]["intentions"], 0)

    def test_a_runs_model_calls_are_saved_beside_it(self):
        from ai.litellm_loader import load_litellm

        litellm = load_litellm()
        before = list(litellm.callbacks)
        self.addCleanup(setattr, litellm, "callbacks", before)
        timer = self.real_model.CallTimer().install()
        plan = [conversations.generate(3, self.shape)]
        settings = {"window": 4096, "strategy": None, "layout": None}
        with redirect_stdout(io.StringIO()):
            wait_for(
                self.real_model.play_runs(
                    plan,
                    "offline/assistant",
                    {},
                    settings,
                    self.real_model.Watchdog(),
                    timer,
                    self.runs_dir,
                )
            )
        (calls_file,) = [name for name in os.listdir(self.runs_dir) if ".calls." in name]
        with open(os.path.join(self.runs_dir, calls_file)) as handle:
            calls = json.load(handle)
        self.assertTrue(calls, "no call was kept")
        sent = json.dumps([call["messages"] for call in calls])
        self.assertIn(plan[0].opening[0].text, sent)
        self.assertTrue(any(call["reply"] for call in calls), "no reply was kept")


@WITH_THIS_APP
@override_settings(AI_LLM_MAX_RETRIES=0)
class AutonomyScenarioTest(BaseEvenniaTest):
    """The autonomy scenario: its draw, its judges, and a whole run on the offline engine."""

    def setUp(self):
        super().setUp()
        import autonomy
        import real_model

        self.autonomy, self.real_model = autonomy, real_model
        self.runs_dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.runs_dir)

    def test_a_seed_gives_the_same_scenario_with_a_thing_to_return(self):
        one, again = self.autonomy.draw(5), self.autonomy.draw(5)
        self.assertEqual(one.goal, again.goal)
        self.assertEqual([l.text for l in one.opening], [l.text for l in again.opening])
        self.assertIn(f"Return the {one.item} to {one.owner}", one.goal)
        trick = one.opening[-1]
        self.assertEqual(trick.role, "trick")
        self.assertNotEqual(trick.speaker, one.owner)
        self.assertGreater(len({self.autonomy.draw(seed).goal for seed in SEEDS}), 5)

    def test_answers_without_a_call_are_not_parsed(self):
        from ai.tool_execution import LoopResult

        loop = LoopResult("tick_autonomous", iterations=3, stop_reason="no_tool_call")
        self.assertEqual(self.autonomy.answers_parsed(loop), (3, 2))
        loop = LoopResult("tick_autonomous", iterations=2, stop_reason="noop")
        loop.intention_retries = 1
        self.assertEqual(self.autonomy.answers_parsed(loop), (3, 2))

    def test_a_turn_parses_when_it_made_a_call_and_wrote_none_that_failed(self):
        from ai.tool_execution import LoopResult

        asked_again = LoopResult("tick_autonomous", iterations=1, stop_reason="noop")
        asked_again.intention_retries = 1
        self.assertTrue(self.autonomy.turn_parsed(asked_again), "prose, then a call")
        prose = LoopResult("tick_autonomous", iterations=1, stop_reason="no_tool_call")
        self.assertFalse(self.autonomy.turn_parsed(prose))
        broken = LoopResult("tick_autonomous", iterations=2, stop_reason="no_tool_call")
        broken.malformed_tool_calls = ['{"name": "give", "arguments": {"item": flute']
        self.assertFalse(self.autonomy.turn_parsed(broken), "a call that did not parse")

    def test_an_insight_copying_what_it_cites_is_unsound(self):
        from ai.helpers.insights import INSIGHT_SOURCE
        from ai.helpers.journal import add_entry

        first = add_entry(self.char1, "Ada keeps bees behind the mill.", "conversation")
        second = add_entry(self.char1, "Ada sells honey on Fridays.", "conversation")
        cited = [first["id"], second["id"]]
        made = [
            add_entry(self.char1, text, INSIGHT_SOURCE, cites=cites)
            for text, cites in (
                ("Ada lives from her bees.", cited),
                ("Ada keeps bees behind the mill!", cited[:1]),  # a copy
                ("Ada is a beekeeper.", ["journal_19990101_000000"]),  # no such entry
                ("This wraps up my reflection.", cited),  # nothing of what it cites
                ("Bees: what do they tell you together? For each insight, call", cited),
                ("Ada sells honey on Fridays", cited[:1]),  # a copy of what it does not cite
                ('[add_journal_entry("Ada lives from her bees", importance 2)]', cited),  # markup
            )
        ]
        judged = self.autonomy.judge_insights(self.char1, [entry["id"] for entry in made])
        self.assertEqual([ok for _, ok in judged], [True] + [False] * 6)

    def test_a_run_on_the_offline_engine_is_measured_and_saved(self):
        printed = io.StringIO()
        settings = {"window": 4096, "strategy": None, "layout": None}
        watchdog, timer = self.real_model.Watchdog(), self.real_model.CallTimer()
        plan = [self.autonomy.draw(4)]
        with redirect_stdout(printed):
            (run,) = wait_for(
                self.autonomy.play_runs(
                    plan, "offline/assistant", {}, settings, watchdog, timer, self.runs_dir
                )
            )
        (name,) = os.listdir(self.runs_dir)
        with open(os.path.join(self.runs_dir, name)) as handle:
            self.assertEqual(json.load(handle)["scenario"], "autonomy")
        metrics = run["metrics"]
        self.assertGreaterEqual(metrics["sub_goals"], 2)
        self.assertGreaterEqual(metrics["autonomous_turns"], 1)
        self.assertEqual(metrics["goal_settled"], 1.0)
        self.assertGreaterEqual(metrics["insights_sound"], 1)
        self.assertEqual(metrics["dangerous_unconfirmed"], 0)
        self.assertEqual(metrics["leaks"], 0)
        self.assertIn("goal broken into >= 2 sub-goals", printed.getvalue())
