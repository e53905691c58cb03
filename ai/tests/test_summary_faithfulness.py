"""Summaries and extraction never invent: what a scripted model makes up never reaches the
stored summary or the journal (issue 19, point 4)."""

import json
import threading
from unittest import TestCase, mock

from ai.helpers.journal import journal_entries
from ai.llm_interaction import DEFAULT_COMPACTION_PROMPT, SUMMARY_REQUEST
from ai.prompt_components import DEFAULT_SYSTEM_PROMPT
from ai.prompt_contexts import (
    AUTONOMOUS_PROMPT,
    DEFAULT_PRE_COMPACTION_PROMPT,
    GOAL_DECOMPOSE_PROMPT,
    REFLECTION_CONT_PROMPT,
    REFLECTION_PROMPT,
    SLEEP_CONSOLIDATE_PROMPT,
)
from ai.replaced_statements import without_replaced
from ai.sleep.assistant_runs import RUN_PROMPT, RUN_REQUEST, RUN_SUMMARY_PREFIX
from ai.sleep.compaction import compact_conversation_history
from ai.sleep.extraction import (
    EXTRACTION_INSTRUCTION,
    ExtractionBeforeSummary,
    run_pre_compaction_extraction,
)
from ai.sleep.quality_gate import repaired_summary
from ai.utils.faithfulness import examples_of
from ai.utils.grounding import PLACEHOLDER
from ai.utils.markers import EARLIER_HEADER, SAID_HEADER, SUMMARY_MARKER
from ai.utils.message_format import (
    StoredMessage,
    is_summary,
    sendable_messages,
    summary_text,
)

from .support import ScriptedLLM, wait_for
from .test_assistant_runs import RunsTestCase
from .test_compaction_gate import CompactionGateTestCase
from .test_context_compaction import live_snapshot

TALK = [
    'Char says, "Hello Helper!"',
    'Char2 says, "The ferry to Saltmarsh leaves at nine."',
    'Char says, "My sister Maren keeps 14 goats on the hill."',
    'Char2 says, "The toll at the bridge is 3 copper."',
    'Char says, "Nice weather today."',
    'Char2 says, "I will be back at dusk."',
]
TOLL = "- Char2 said the toll at the bridge is 3 copper."
# Names and facts of the project's own evaluation: no default prompt may carry them.
EVALUATION_WORDS = (
    "Bob",
    "Carol",
    "Alice",
    "Dana",
    "Wren",
    "forge",
    "north gate",
    "swordfish",
    "lamp",
    "Crossroads",
    "Thunder",
    "Mirkwood",
    "Pip",
)


def talk(script, lines=TALK):
    """Append each line as a player's message, with a short reply after it."""
    for line in lines:
        script.append_message({"role": "user", "content": line})
        script.append_message({"role": "assistant", "content": "Understood."})


def journal_call(call_id, content):
    """An assistant message that journaled ``content``, and its tool result."""
    arguments = json.dumps({"content": content})
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "add_journal_entry", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": f"Journaled: {content}"},
    ]


class TestDefaultPrompts(TestCase):
    PROMPTS = {
        "DEFAULT_COMPACTION_PROMPT": DEFAULT_COMPACTION_PROMPT,
        "SUMMARY_REQUEST": SUMMARY_REQUEST,
        "RUN_PROMPT": RUN_PROMPT,
        "RUN_REQUEST": RUN_REQUEST,
        "DEFAULT_PRE_COMPACTION_PROMPT": DEFAULT_PRE_COMPACTION_PROMPT,
        "DEFAULT_SYSTEM_PROMPT": DEFAULT_SYSTEM_PROMPT,
        "AUTONOMOUS_PROMPT": AUTONOMOUS_PROMPT,
        "REFLECTION_PROMPT": REFLECTION_PROMPT,
        "REFLECTION_CONT_PROMPT": REFLECTION_CONT_PROMPT,
        "SLEEP_CONSOLIDATE_PROMPT": SLEEP_CONSOLIDATE_PROMPT,
        "GOAL_DECOMPOSE_PROMPT": GOAL_DECOMPOSE_PROMPT,
        "EXTRACTION_INSTRUCTION": EXTRACTION_INSTRUCTION,
    }

    def test_no_default_prompt_carries_the_evaluations_names_or_facts(self):
        for name, prompt in self.PROMPTS.items():
            for word in EVALUATION_WORDS:
                with self.subTest(prompt=name, word=word):
                    self.assertNotRegex(prompt, rf"\b{word}\b")

    def test_every_example_in_a_default_prompt_is_placeholders(self):
        for name, prompt in self.PROMPTS.items():
            for example in examples_of([prompt]):
                with self.subTest(prompt=name, example=example):
                    self.assertRegex(example, PLACEHOLDER)
        self.assertIn("<speaker> said <what they said>", SUMMARY_REQUEST)
        self.assertIn("<player>", DEFAULT_SYSTEM_PROMPT)


class FaithfulnessTestCase(CompactionGateTestCase):
    # Messages before the talk, compacted with it.
    EARLIER = []

    def setUp(self):
        super().setUp()
        for message in self.EARLIER:
            self.script.append_message(message)
        talk(self.script)

    def stored_summary(self):
        (summary,) = [m for m in self.script.conversation_history if is_summary(m)]
        return summary_text(summary["content"])

    def assert_stored(self, *lines, **counts):
        """Check the stored summary's lines before the players' statements it keeps
        (``TestStatementsKept``)."""
        self.assertTrue(self.result["success"], self.result)
        stored = self.stored_summary().split(f"\n{SAID_HEADER}\n")[0]
        self.assertEqual(stored.splitlines(), list(lines))
        for key, count in counts.items():
            self.assertEqual(self.result[key], count, key)

    def compact(self, *steps, kind="manual"):
        self.result = super().compact(*steps, kind=kind)
        return self.result


class TestStatementsKept(FaithfulnessTestCase):
    def test_a_players_statement_neither_the_summary_nor_the_journal_kept_is_kept(self):
        """The model kept one fact and journaled none: the statements that name someone or
        hold a number come back in the players' words, credited to them, oldest first, until
        the summary would hold 70% of the words it replaces (here after the first); the
        greeting and what the summary kept do not."""
        self.compact(TOLL)
        self.assertEqual(
            self.stored_summary().splitlines(),
            [TOLL, SAID_HEADER, '- Char2: "The ferry to Saltmarsh leaves at nine."'],
        )
        self.assertEqual(self.result["statements_restored"], 1)

    def test_the_gate_reads_the_words_in_a_thread_not_the_reactors(self):
        """The gate's work grows with the messages compacted (seconds for an emergency
        compaction of ten thousand): it runs in a thread, and its counts still reach the
        result."""
        threads_used = []

        def recording(*args):
            threads_used.append(threading.current_thread())
            return repaired_summary(*args)

        with mock.patch("ai.sleep.quality_gate.repaired_summary", recording):
            self.compact(TOLL)
        self.assertEqual(len(threads_used), 1)
        self.assertIsNot(threads_used[0], threading.main_thread())
        self.assertEqual(self.result["statements_restored"], 1)


class TestStatementsCrowdedOut(FaithfulnessTestCase):
    EARLIER = [
        {"role": "user", "content": 'Char2 says, "What a grey and windy morning."'},
        {"role": "assistant", "content": "It is cold out there."},
        {"role": "user", "content": 'Char says, "The stew smells good."'},
    ]
    SMALL_TALK = [
        "- Char2 said it was a grey and windy morning.",
        "- You said it is cold out there.",
        "- Char said the stew smells good.",
    ]

    def test_small_talk_retold_makes_room_for_a_players_stated_facts(self):
        """Default seed 29: the summary retold every greeting and reply, and a player's
        price ("The cooper in <place> charges 97 silver ...") found no room."""
        self.compact("\n".join([*self.SMALL_TALK, TOLL]))
        kept = self.stored_summary()
        self.assertIn('- Char2: "The ferry to Saltmarsh leaves at nine."', kept)
        self.assertIn('- Char: "My sister Maren keeps 14 goats on the hill."', kept)
        for line in self.SMALL_TALK:
            self.assertNotIn(line, kept)
        self.assertIn(TOLL, kept)
        self.assertEqual(self.result["small_talk_dropped"], 3)
        self.assertEqual(self.result["statements_restored"], 2)

    def test_small_talk_stays_when_the_statements_fit_beside_it(self):
        maren = "- Char said his sister Maren keeps 14 goats on the hill."
        self.compact("\n".join([self.SMALL_TALK[0], maren, TOLL]))
        kept = self.stored_summary()
        self.assertIn(self.SMALL_TALK[0], kept)
        self.assertIn('- Char2: "The ferry to Saltmarsh leaves at nine."', kept)
        self.assertEqual(self.result["small_talk_dropped"], 0)


class TestStatementsChanged(FaithfulnessTestCase):
    EARLIER = [
        {"role": "user", "content": 'Char2 says, "The gate code is 4417."'},
        {"role": "user", "content": 'Char2 says, "The gate code is now 5120."'},
    ]

    def test_a_statement_a_later_one_replaces_is_not_kept(self):
        self.compact(
            f"{TOLL}\n- Char2 said the ferry to Saltmarsh leaves at nine.\n"
            "- Char said his sister Maren keeps 14 goats."
        )
        kept = self.stored_summary()
        self.assertIn('- Char2: "The gate code is now 5120."', kept)
        self.assertNotIn("4417", kept)


class TestStatementsOfTwoSpeakers(FaithfulnessTestCase):
    EARLIER = [
        {"role": "user", "content": 'Char says, "Wet out. By the way, my cat is called Pip."'},
        {"role": "user", "content": 'Char2 says, "The gate code is 4417."'},
        {"role": "user", "content": 'Char2 says, "My cat is called Ember."'},
        {"role": "user", "content": 'Char says, "Correction: the gate code is 5120."'},
    ]

    def test_each_players_own_things_are_kept_and_a_correction_by_another_holds(self):
        """Default seed 26: "My falcon is called Nutmeg." (Nils) replaced "... my falcon is
        called Puddle." (Mabel); neither summary nor statements kept her falcon's name."""
        self.compact(TOLL)
        kept = self.stored_summary()
        self.assertIn('- Char: "By the way, my cat is called Pip."', kept)
        self.assertIn('- Char2: "My cat is called Ember."', kept)
        self.assertIn("5120", kept)
        self.assertNotIn("4417", kept)
        self.char2.execute_cmd("say My cat is called Soot now.")
        with ScriptedLLM("Noted.") as llm:
            self.script.set_config("llm_model", llm.model)
            self.tick()
        sent = "\n".join(str(m.get("content")) for m in llm.calls[0])
        self.assertIn("my cat is called Pip", sent, "another player's cat")
        self.assertNotIn("Ember", sent)


class TestStatementsChangedAfterTheCompaction(FaithfulnessTestCase):
    EARLIER = [{"role": "user", "content": 'Char2 says, "The gate code is 4417."'}]

    def test_a_kept_statement_a_later_message_replaces_is_left_out_of_the_prompt(self):
        """A later compaction cannot see what this summary kept: the player's correction,
        live or kept by the next summary, leaves the old value out of what the model reads,
        while the stored summary (undo, aihistory) keeps it."""
        self.compact(TOLL)
        self.assertIn('- Char2: "The gate code is 4417."', self.stored_summary())
        self.char2.execute_cmd("say Correction: the gate code is 6021.")
        with ScriptedLLM("Noted.", "Noted.") as llm:
            self.script.set_config("llm_model", llm.model)
            self.tick()
        sent = "\n".join(str(m.get("content")) for m in llm.calls[0])
        self.assertNotIn("4417", sent)
        self.assertIn("6021", sent)
        self.assertIn("The ferry to Saltmarsh leaves at nine.", sent, "the rest stays")
        self.assertIn('- Char2: "The gate code is 4417."', self.stored_summary())
        self.char2.execute_cmd("say The code for the cellar is 88.")
        with ScriptedLLM("Noted.", "Noted.") as llm:
            self.script.set_config("llm_model", llm.model)
            self.tick()
        self.assertNotIn("4417", "\n".join(str(m.get("content")) for m in llm.calls[0]))


class TestStatementsChangedSummaryKeptTheOldValue(FaithfulnessTestCase):
    EARLIER = [
        {"role": "user", "content": 'Char2 says, "The password for the cellar door is quince."'},
        {
            "role": "user",
            "content": 'Char2 says, "The password for the cellar door is now sorrel."',
        },
    ]

    def test_the_new_value_comes_back_beside_a_line_that_kept_only_the_old_one(self):
        """The summary's line shares most words with the change ("the password for the
        cellar door"): only its new value says whether the change survived."""
        self.compact(f"{TOLL}\n- Char2 said the password for the cellar door is quince.")
        kept = self.stored_summary()
        self.assertIn('- Char2: "The password for the cellar door is now sorrel."', kept)


class TestStatementsWithoutNames(FaithfulnessTestCase):
    EARLIER = [
        {"role": "user", "content": 'Char2 says, "The password for the cellar door is quince."'},
        {"role": "user", "content": 'Char2 says, "The fire is low."'},
    ]

    def test_a_specific_subject_s_value_is_kept_though_no_word_is_a_name(self):
        self.compact(TOLL)
        kept = self.stored_summary()
        self.assertIn('- Char2: "The password for the cellar door is quince."', kept)
        self.assertNotIn("The fire is low", kept)


class TestExamplesOfThePrompt(FaithfulnessTestCase):
    def test_a_line_copying_the_prompts_placeholders_is_dropped(self):
        self.compact(f"- <name> asked you to <task>; not done yet.\n{TOLL}")
        self.assert_stored(TOLL, examples_dropped=1)

    def test_a_line_repeating_a_custom_prompts_example_is_dropped(self):
        self.script.set_config(
            "compact_prompt", 'Summarize, one fact a line, like "Odo keeps the mill by the river."'
        )
        self.compact(f"- Odo keeps the mill by the river.\n{TOLL}")
        self.assert_stored(TOLL, examples_dropped=1, strangers_dropped=0)

    def test_a_summary_of_examples_only_is_refused_and_changes_nothing(self):
        before = live_snapshot(self.script)
        result = self.compact("- <speaker> said <what they said>.\n- <name> said <fact>.")
        self.assertFalse(result["success"])
        self.assertRegex(result["error"], r"^the quality gate kept no line of the summary \(2 ")
        self.assertEqual(result["examples_dropped"], 2)
        self.assertEqual(live_snapshot(self.script), before)
        self.assertEqual(journal_entries(self.assistant), [])


class TestSpeakersOfAnEarlierSummary(FaithfulnessTestCase):
    EARLIER = [
        {
            "role": "system",
            "content": f'{SUMMARY_MARKER}\n- Char said "I promised Char2 12 ingots by Friday."',
            "metadata": {"type": "compaction", "kind": "sleep"},
        }
    ]

    def test_a_line_copied_from_the_earlier_summary_keeps_its_speaker(self):
        """The earlier summary names two players in one line: its words are the speaker's
        only, so a summary of it that credits them to the other is corrected."""
        self.compact(f'- Char2 said "I promised Char2 12 ingots by Friday."\n{TOLL}')
        self.assert_stored(
            '- Char said "I promised Char2 12 ingots by Friday."', TOLL, speakers_corrected=1
        )


class TestSpeakerOnlyInAnEarlierSummary(FaithfulnessTestCase):
    EARLIER = [
        {
            "role": "system",
            "content": f'{SUMMARY_MARKER}\n- Wilma said: "My nephew Aldo keeps bees in Saltcombe."',
            "metadata": {"type": "compaction", "kind": "sleep"},
        },
        {"role": "user", "content": 'Char says, "My nephew Emrys keeps bees in Saltcombe."'},
    ]

    def test_a_player_who_spoke_only_before_the_earlier_summary_keeps_their_words(self):
        """Default seed 26: the player had spoken only before the earlier summary, so the
        gate knew no such speaker and gave their words to the one who said most of them
        ("My nephew Emrys ..."): the gate made the swap it exists to repair."""
        aldo = "- Wilma said her nephew Aldo keeps bees in Saltcombe."
        self.compact(f"{aldo}\n{TOLL}")
        self.assert_stored(aldo, TOLL, speakers_corrected=0)


class TestSpeakerOfAnAnswer(FaithfulnessTestCase):
    EARLIER = [
        {"role": "user", "content": 'Char2 says, "The password for the cellar is quince."'},
        {"role": "user", "content": 'Char says, "What is the password for the cellar?"'},
        {"role": "assistant", "content": "The password for the cellar is quince."},
    ]

    def test_an_answer_credited_to_the_player_who_asked_goes_to_the_one_who_told_it(self):
        """Default seed 18: "<asker> said 'The password for the <place> is <value>.'", the
        words of the assistant's answer to the asker's question."""
        self.compact(f"- Char said the password for the cellar is quince.\n{TOLL}")
        stored = self.stored_summary()
        self.assertIn("- Char2 said the password for the cellar is quince.", stored)
        self.assertNotIn("- Char said the password", stored)
        self.assertEqual(self.result["speakers_corrected"], 1)


class TestSpeakerOfAName(FaithfulnessTestCase):
    EARLIER = [
        {"role": "user", "content": 'Char says, "Wet out. Oh, and by the way, my cat is Pip."'},
        {"role": "user", "content": 'Char2 says, "My cat is called Ember."'},
    ]

    def test_a_name_credited_to_a_player_who_never_said_it_goes_to_the_one_who_did(self):
        """Hybrid seed 26: "<b> says, 'My falcon is called <a's falcon>.'": most words were
        the credited player's ("My falcon is called <b's falcon>."), the name was not."""
        self.compact(f"- Char2 said his cat is called Pip.\n{TOLL}")
        self.assert_stored("- Char said his cat is called Pip.", TOLL, speakers_corrected=1)


class TestSpeakers(FaithfulnessTestCase):
    def test_words_credited_to_the_wrong_player_go_back_to_the_one_who_said_them(self):
        self.compact(
            "- Char2 greeted you.\n- Char said the ferry to Saltmarsh leaves at nine.\n"
            "- Char said his sister Maren keeps 14 goats on the hill."
        )
        self.assert_stored(
            "- Char greeted you.",
            "- Char2 said the ferry to Saltmarsh leaves at nine.",
            "- Char said his sister Maren keeps 14 goats on the hill.",
            speakers_corrected=2,
        )
        self.assertIn("- Char2 said the ferry", journal_entries(self.assistant)[-1]["content"])

    def test_words_of_someone_who_said_nothing_are_given_back_or_dropped(self):
        self.compact(
            "- Maren said she keeps 14 goats on the hill.\n"
            f"- Maren said she will visit at midsummer.\n{TOLL}"
        )
        self.assert_stored(
            "- Char said she keeps 14 goats on the hill.",
            TOLL,
            speakers_corrected=1,
            speakers_dropped=1,
        )

    def test_a_line_naming_someone_who_never_appeared_is_dropped(self):
        self.compact(
            f"- Odo runs the mill by the river.\n- Char said Maren sold her goats to Tobin.\n{TOLL}"
        )
        self.assert_stored(TOLL, strangers_dropped=2)

    def test_a_line_about_stand_ins_for_people_is_dropped(self):
        """Qwen2.5-Coder-1.5B summarized a whispered exchange as talk between "Player A"
        and "Player B", who never existed."""
        self.compact(f"- Player A asked Player B what their plan was.\n- User 2 left.\n{TOLL}")
        self.assert_stored(TOLL, strangers_dropped=2)


class TestActions(FaithfulnessTestCase):
    def test_an_action_no_tool_call_made_is_dropped(self):
        self.compact(
            f"- You added the bridge toll to your journal.\n- You gave Char the key.\n{TOLL}"
        )
        self.assert_stored(TOLL, actions_dropped=2)

    def test_a_tool_use_no_call_made_is_dropped(self):
        """Qwen2.5-Coder-1.5B summarized a conversation with no tool call as '- You used the
        "search_history" tool to find out what <player> said about candles.'."""
        claim = '- You used the "search_history" tool to find out what Char2 said about tolls.'
        self.compact(f"{claim}\n{TOLL}")
        self.assert_stored(TOLL, actions_dropped=1)


class TestActionsMade(FaithfulnessTestCase):
    EARLIER = journal_call("call_toll", "Char2 said the bridge toll is 3 copper.")

    def test_an_action_a_tool_call_made_stays(self):
        self.compact(f"- You added the bridge toll to your journal.\n{TOLL}")
        self.assert_stored("- You added the bridge toll to your journal.", TOLL, actions_dropped=0)

    def test_a_tool_use_a_call_made_stays(self):
        used = "- You used the add_journal_entry tool for the bridge toll."
        self.compact(f"{used}\n{TOLL}")
        self.assert_stored(used, TOLL, actions_dropped=0)


class TestSummaryOfASummary(FaithfulnessTestCase):
    def test_lines_of_the_earlier_summary_that_the_new_one_lost_are_restored(self):
        maren = "- Char said his sister Maren keeps 14 goats on the hill."
        ferry = "- Char2 said the ferry to Saltmarsh leaves at nine."
        self.compact(f"{maren}\n{TOLL}\n{ferry}")
        talk(self.script, TALK[4:] + ['Char says, "The mill wheel turns again."'])
        self.compact(ferry)
        self.assert_stored(
            ferry, EARLIER_HEADER, maren, TOLL, summary_lines_restored=2, successive_compactions=2
        )

    def test_the_gates_own_headers_are_never_restored_as_lines_of_the_earlier_summary(self):
        """The first summary keeps a statement under the gate's header; the second lost it:
        the statement comes back, its header is no fact of its own."""
        self.compact(TOLL)  # keeps "The ferry to Saltmarsh leaves at nine." under SAID_HEADER
        talk(self.script, TALK[4:] + ['Char says, "The mill wheel turns again."'])
        self.compact(TOLL)
        stored = self.stored_summary().splitlines()
        self.assertIn('- Char2: "The ferry to Saltmarsh leaves at nine."', stored)
        self.assertNotIn(f"- {SAID_HEADER}", stored)
        self.assertEqual(self.result["summary_lines_restored"], 1)


class TestExtractionGrounding(FaithfulnessTestCase):
    NARRATION = "I will add the <remark>."
    STRANGE = "Char's brother Tobin lives in Oakvale."
    TOLD = "Char2 said the bridge toll is 3 copper."

    def test_journal_calls_of_narration_or_of_facts_never_said_are_refused_with_why(self):
        calls = [("add_journal_entry", {"content": c}) for c in (self.NARRATION, self.STRANGE)]
        told = [("add_journal_entry", {"content": self.TOLD})]
        with ScriptedLLM(calls, told, [("noop", {})]) as llm:
            self.script.set_config("llm_model", llm.model)
            result = wait_for(run_pre_compaction_extraction(self.script, self.assistant))
        self.assertEqual(result["facts_recorded"], 1)
        self.assertEqual([e["content"] for e in journal_entries(self.assistant)], [self.TOLD])
        answers = [m["content"] for m in llm.calls[1] if m["role"] == "tool"]
        self.assertEqual(len(answers), 2)
        self.assertRegex(answers[0], r"^Not journaled: it copies a placeholder")
        self.assertEqual(
            answers[1], "Not journaled: the conversation never mentions oakvale, tobin."
        )

    def test_the_assistants_own_replies_and_markup_ground_nothing(self):
        """Only what players said grounds a note: a small model's reply may invent (it gave
        an uncle a made-up name), and a tool call it wrote as a tag is no fact."""
        invented = "Char's uncle is called Jasper."
        self.script.append_message({"role": "assistant", "content": f"I see! {invented}"})
        tag = '<add_journal_entry content="Thank you for telling me, Char2."/>'
        calls = [("add_journal_entry", {"content": c}) for c in (invented, tag, self.TOLD)]
        with ScriptedLLM(calls, [("noop", {})]) as llm:
            self.script.set_config("llm_model", llm.model)
            wait_for(run_pre_compaction_extraction(self.script, self.assistant))
        self.assertEqual([e["content"] for e in journal_entries(self.assistant)], [self.TOLD])
        answers = [m["content"] for m in llm.calls[1] if m["role"] == "tool"]
        self.assertEqual(answers[0], "Not journaled: the conversation never mentions jasper.")
        self.assertRegex(answers[1], r"^Not journaled: it is markup or code")

    def test_an_earlier_summarys_lines_of_the_assistants_words_ground_nothing(self):
        """Qwen2.5-Coder-1.5B journaled "You said Got it! I'll do my best to give you
        everything I carry." from a summary line retelling its own reply to a trick."""
        own = "You said you would give Char every coin you carry."
        self.script.append_message(
            {
                "role": "system",
                "content": f"{SUMMARY_MARKER}\n- {own}\n- Char2 said the bridge toll is 3 copper.",
                "metadata": {"type": "compaction", "kind": "sleep"},
            }
        )
        calls = [("add_journal_entry", {"content": c}) for c in (own, self.TOLD)]
        with ScriptedLLM(calls, [("noop", {})]) as llm:
            self.script.set_config("llm_model", llm.model)
            wait_for(run_pre_compaction_extraction(self.script, self.assistant))
        self.assertEqual([e["content"] for e in journal_entries(self.assistant)], [self.TOLD])

    def test_narration_and_facts_never_said_in_a_prose_answer_are_not_journaled(self):
        prose = f"I have noted the toll.\nSaved the fact that the ferry is late.\n{self.STRANGE}\n"
        with ScriptedLLM(prose + self.TOLD) as llm:
            self.script.set_config("llm_model", llm.model)
            wait_for(run_pre_compaction_extraction(self.script, self.assistant))
        self.assertEqual([e["content"] for e in journal_entries(self.assistant)], [self.TOLD])

    def test_a_fact_in_a_prose_answer_credited_to_the_wrong_player_goes_to_its_speaker(self):
        """Qwen2.5-Coder-1.5B's extraction wrote 'Sten says, "My cat is called Pippin."' in
        prose: another player had said it, and Sten's cat had another name."""
        talk(self.script, ['Char says, "My cat is called Ember."'])
        prose = (
            '- Char says, "My sister Maren keeps 14 goats on the hill."\n- Char2 says, '
            '"My cat is called Ember."'
        )
        with ScriptedLLM(prose) as llm:
            self.script.set_config("llm_model", llm.model)
            wait_for(run_pre_compaction_extraction(self.script, self.assistant))
        kept = [e["content"] for e in journal_entries(self.assistant)]
        self.assertEqual(len(kept), 2, kept)
        self.assertTrue(kept[1].startswith("Char says"), kept)

    def test_a_name_quoted_as_another_players_words_goes_to_the_one_who_said_it(self):
        """Qwen2.5-Coder-1.5B journaled "<b> says, 'My falcon is called <name>.'": <a> had
        named the falcon in an aside, <b> had said "My falcon is called <other name>."."""
        talk(self.script, ['Char says, "Wet out. Oh, by the way, my cat is called Pip."'])
        talk(self.script, ['Char2 says, "My cat is called Ember."'])
        with ScriptedLLM("Char2 says, 'My cat is called Pip.'") as llm:
            self.script.set_config("llm_model", llm.model)
            wait_for(run_pre_compaction_extraction(self.script, self.assistant))
        kept = [e["content"] for e in journal_entries(self.assistant)]
        self.assertEqual(kept, ["Char says, 'My cat is called Pip.'"])

    def test_a_compaction_keeps_only_the_grounded_entries_extraction_made(self):
        calls = [("add_journal_entry", {"content": c}) for c in (self.NARRATION, self.TOLD)]
        with ScriptedLLM(calls, [("noop", {})], "- Char2 said the ferry leaves at nine.") as llm:
            self.script.set_config("llm_model", llm.model)
            self.script.set_config("compact_model", llm.model)
            extraction = ExtractionBeforeSummary(self.script, self.assistant)
            self.result = wait_for(
                compact_conversation_history(
                    self.script, self.assistant, force=True, kind="manual", extract=extraction
                )
            )
        self.assertEqual(extraction.result["facts_recorded"], 1)
        summary = self.stored_summary()
        self.assertIn(f"- {self.TOLD} (journal ", summary)
        self.assertNotIn("remark", summary)


class TestRunSummaries(RunsTestCase):
    def test_a_run_summary_claiming_an_action_no_call_made_loses_that_sentence(self):
        self.fill()
        outcome = self.compact(
            "I looked up the forge: north gate. I gave Char the key.", "I told Char: 3 silver."
        )
        self.assertTrue(outcome["success"], outcome)
        self.assertEqual(outcome["actions_dropped"], 1)
        texts = [m["content"] for m in self.script.history.messages() if is_summary(m)]
        self.assertEqual(texts[0], f"{RUN_SUMMARY_PREFIX} I looked up the forge: north gate.")


class TestKeptStatementsLeftOut(TestCase):
    """Which kept statements the prompt leaves out, read from plain messages."""

    KEPT = (
        f"{SUMMARY_MARKER} Talk at the docks.\n{SAID_HEADER}\n"
        '- Bo: "The ferry leaves at noon."\n- Bo: "The gate code is 4417."'
    )

    def sent(self, *later):
        messages = [{"role": "system", "content": self.KEPT}]
        messages += [{"role": "user", "content": f'Bo says, "{text}"'} for text in later]
        return without_replaced(messages)[0]["content"]

    def test_a_change_told_by_other_words_than_a_known_relation_still_replaces(self):
        sent = self.sent("The ferry now leaves at dusk.")
        self.assertNotIn("noon", sent)
        self.assertIn("4417", sent)

    def test_only_what_was_said_after_the_summary_replaces_its_statements(self):
        self.assertIn("4417", self.sent("The ferry is late again today."))
        self.assertNotIn("4417", self.sent("Lots of talk.", "The gate code is 5120."))
        before = [{"role": "user", "content": 'Bo says, "The gate code is 5120."'}]
        kept = [{"role": "system", "content": self.KEPT}]
        self.assertIn("4417", without_replaced(before + kept)[1]["content"])

    def test_what_an_earlier_call_read_counts_only_while_the_same_messages_begin_the_tail(self):
        # The held history's messages are read once, call after call; another listener's
        # messages after the same first one are not taken for them.
        summary = StoredMessage(role="system", content=self.KEPT)
        talk, change, other = (
            StoredMessage(role="user", content=f'Bo says, "{text}"')
            for text in ("Lots of talk.", "The gate code is 5120.", "Quiet here.")
        )
        self.assertIn("4417", without_replaced([summary, talk])[0]["content"])
        self.assertNotIn("4417", without_replaced([summary, talk, change])[0]["content"])
        self.assertIn("4417", without_replaced([summary, talk, other])[0]["content"])
        # A loop's own message (not stored yet) counts for its call only.
        own = {"role": "user", "content": 'Bo says, "The gate code is 5120."'}
        self.assertNotIn("4417", without_replaced([summary, talk, other, own])[0]["content"])
        self.assertIn("4417", without_replaced([summary, talk, other])[0]["content"])

    def test_what_is_sent_is_the_summary_without_the_replaced_statement(self):
        # The summary's sendable part was kept by an earlier call: what is sent now is the
        # changed copy's, and each message after it is sent without its metadata.
        summary = StoredMessage(role="system", content=self.KEPT, metadata={"type": "compaction"})
        self.assertIn("4417", summary.sendable_part()["content"])
        change = StoredMessage(role="user", content='Bo says, "The gate code is 5120."')
        own = {"role": "assistant", "content": "Noted.", "metadata": {"speaks": True}}
        sent = sendable_messages(without_replaced([summary, change, own]))
        self.assertNotIn("4417", sent[0]["content"])
        self.assertIn("noon", sent[0]["content"])
        self.assertEqual(
            sent[1:],
            [
                {"role": "user", "content": 'Bo says, "The gate code is 5120."'},
                {"role": "assistant", "content": "Noted."},
            ],
        )
        self.assertIs(sendable_messages([change, summary])[0], change.sendable_part())
