"""Prompt caching: the prompt layouts, the stable parts of the prompt, and cache hints."""

import json
import os
import re
from unittest import TestCase, mock

from ai.config import ConfigError, check_value, parse_value
from ai.helpers.entity_context import add_observation
from ai.helpers.goals import GoalLimits, add_goal
from ai.helpers.journal import add_entry
from ai.helpers.working_memory import note_conversation
from ai.litellm_loader import load_litellm
from ai.llm_interaction import call_llm
from ai.prompt_assembly import AssembledPrompt
from ai.prompt_contexts import CONTEXT_TICK_EVENT, get_context_config
from ai.prompt_layout import cache_points
from ai.prompt_rendering import PromptState, render_entity_context

from .support import AssistantTestCase, ScriptedLLM, make_assistant, wait_for

CLAUDE = "anthropic/claude-sonnet-4-20250514"
# How each part of a tick's prompt that is not history begins.
OPENINGS = {
    r"You are \w+, a friendly": "system_prompt",
    r"You are \w+, currently": "character_context",
    "What you know of those present": "entity_context",
    "Things you remember": "semantic_memories",
    "Recently around you": "context_buffer",
    "Your goals": "goals",
}
VOLATILE = ("entity_context", "semantic_memories", "context_buffer", "goals")


def component_of(message):
    """Name the component a message of a tick's prompt came from (history by default)."""
    content = message.get("content") or ""
    return next((key for opening, key in OPENINGS.items() if re.match(opening, content)), "history")


def collapsed(messages):
    """Return the components of ``messages`` in order, one entry per run of history."""
    order = []
    for message in messages:
        key = component_of(message)
        if not order or key != order[-1] or key != "history":
            order.append(key)
    return order


def shared_prefix(previous, current):
    """Return how many characters of ``current`` (messages as JSON) ``previous`` begins with."""
    before, now = json.dumps(previous), json.dumps(current)
    return len(os.path.commonprefix([before, now]))


class TestLayoutOption(TestCase):
    def test_a_bad_layout_is_refused_naming_the_attribute_and_the_layouts(self):
        with self.assertRaisesRegex(
            ConfigError, r"prompt_layout='fast' refused: must be one of 'seed', 'cache_friendly'"
        ):
            check_value("prompt_layout", "fast")
        self.assertEqual(parse_value("prompt_layout", "cache_friendly"), "cache_friendly")


class WithLivelyPrompt:
    """An assistant whose prompt has every part: observations, memories, ambience, goals."""

    def furnish(self, assistant, speaker):
        add_observation(assistant, speaker, "Runs the forge by the north gate.")
        add_entry(assistant, "Char2 said: the cellar password is swordfish.", "conversation")
        add_entry(assistant, "Char2 said: the ferry leaves at nine bells.", "conversation")
        assistant.remember_ambience("A bell rings in the distance.")
        add_goal(
            assistant,
            "Keep the tavern cheerful",
            "builder",
            GoalLimits.of(assistant.assistant_script),
        )

    def say(self, script, speaker, text):
        script.queue_event(
            {"type": "speech", "speaker": speaker.dbref, "speaker_name": speaker.key, "text": text}
        )
        return wait_for(script.at_repeat())


class TestLayouts(WithLivelyPrompt, AssistantTestCase):
    def tick_under(self, layout):
        self.script.set_config("prompt_layout", layout)
        self.furnish(self.assistant, self.char1)
        with ScriptedLLM("Hello!", "Hello again!") as llm:
            self.script.set_config("llm_model", llm.model)
            self.say(self.script, self.char1, "Hello Helper!")
            self.say(self.script, self.char1, "What is the cellar password?")
        return llm.calls[-1]

    def test_seed_is_the_default_and_sends_the_component_id_order(self):
        self.assertEqual(self.script.get_config("prompt_layout"), "seed")
        self.assertEqual(
            collapsed(self.tick_under("seed")),
            [
                "system_prompt",
                "character_context",
                "entity_context",
                "semantic_memories",
                "context_buffer",
                "goals",
                "history",
            ],
        )

    def test_cache_friendly_sends_what_changes_after_the_history_and_the_question_last(self):
        messages = self.tick_under("cache_friendly")
        self.assertEqual(
            collapsed(messages),
            [
                "system_prompt",
                "character_context",
                "history",
                "entity_context",
                "semantic_memories",
                "context_buffer",
                "goals",
                "history",
            ],
        )
        history = [m for m in messages if component_of(m) == "history"]
        self.assertEqual(len(history), 3, "both events and the first answer are history")
        # The model answers the last thing it reads: the player's question, not a note.
        self.assertIn("What is the cellar password?", messages[-1]["content"])
        self.assertIn("swordfish", messages[-4]["content"], "memories come before the event")

    def test_the_offline_engine_answers_the_same_under_both_layouts(self):
        replies = {}
        for layout in ("seed", "cache_friendly"):
            assistant = make_assistant(f"Helper_{layout}", self.room2)
            assistant.assistant_script.set_config("prompt_layout", layout)
            self.furnish(assistant, self.char2)
            result = self.say(assistant.assistant_script, self.char2, "What is the password?")
            replies[layout] = result["reply"]
        self.assertIn("swordfish", replies["seed"], "recalled from the journal")
        self.assertEqual(replies["cache_friendly"], replies["seed"])

    def test_the_next_call_repeats_the_history_under_cache_friendly(self):
        calls = {}
        for layout in ("seed", "cache_friendly"):
            script = make_assistant("Tess", self.room1).assistant_script
            script.set_config("prompt_layout", layout)
            self.furnish(script.obj, self.char1)
            with ScriptedLLM("Hello!", "Swordfish.", "Nine bells.") as llm:
                script.set_config("llm_model", llm.model)
                self.say(script, self.char1, "Good evening!")
                self.say(script, self.char1, "What is the cellar password?")
                self.room1.msg_contents("The fire crackles.")
                self.say(script, self.char2, "When does the ferry leave?")
            calls[layout] = llm.calls[1:]
        seed = shared_prefix(*calls["seed"])
        # Under seed the prefix ends before the history (the memories changed); under
        # cache_friendly the next call begins with the lead and all the history sent, the
        # newest message (sent last) included.
        self.assertLess(seed, json.dumps(calls["seed"][1]).index('"role": "user"'))
        first, second = calls["cache_friendly"]
        lead_and_history = [m for m in first if component_of(m) not in VOLATILE]
        self.assertEqual(second[: len(lead_and_history)], lead_and_history)


class TestStableParts(AssistantTestCase):
    def test_conversations_are_listed_in_the_order_they_began_whoever_spoke_last(self):
        for speaker in (self.char1, self.char2, self.char1):
            note_conversation(
                self.assistant,
                {
                    "type": "speech",
                    "speaker": speaker.dbref,
                    "speaker_name": speaker.key,
                    "text": "hi",
                },
            )
        config = get_context_config(CONTEXT_TICK_EVENT, self.script)
        rendered = render_entity_context(PromptState(self.script, self.assistant, config))
        lines = [line.split(" since")[0] for line in rendered.splitlines()]
        self.assertEqual(lines, ["Talking with Char", "Talking with Char2"])


def assembled(*keys, history=0):
    """An assembled prompt of ``keys`` in order, with ``history`` history messages."""
    return AssembledPrompt(
        messages=[],
        total_tokens=0,
        budget=0,
        components=dict.fromkeys(keys, 1),
        history_included=history,
    )


class TestCachePoints(TestCase):
    SEED = ("system_prompt", "character_context", "semantic_memories", "conversation_history")
    FRIENDLY = ("system_prompt", "character_context", "conversation_history", "goals")

    def test_the_stable_lead_ends_a_prefix(self):
        self.assertEqual(cache_points(assembled(*self.SEED, history=4), False), [1])

    def test_history_after_a_part_that_changes_ends_one_only_if_the_loop_calls_again(self):
        self.assertEqual(cache_points(assembled(*self.SEED, history=4), True), [1, 6])

    def test_history_after_the_stable_lead_always_ends_one(self):
        self.assertEqual(cache_points(assembled(*self.FRIENDLY, history=4), False), [1, 5])

    def test_the_newest_message_sent_last_is_not_part_of_the_history_s_prefix(self):
        friendly = (*self.FRIENDLY, "newest_message")
        self.assertEqual(cache_points(assembled(*friendly, history=4), False), [1, 4])

    def test_a_pluggable_component_counts_as_one_that_changes(self):
        prompt = assembled(
            "system_prompt", "character_context", "weather", "conversation_history", history=2
        )
        self.assertEqual(cache_points(prompt, False), [1])


class TestCacheHints(WithLivelyPrompt, AssistantTestCase):
    MESSAGES = [
        {"role": "system", "content": "You are Helper."},
        {"role": "system", "content": "You are in the Room."},
        {"role": "user", "content": 'Char says, "hello"'},
        {"role": "system", "content": "Things you remember:\n- the ferry leaves at nine"},
    ]

    def sent(self, model, points=(1, 2), **options):
        """Call ``model`` (mocked) and return the keyword arguments litellm received."""
        litellm = load_litellm()
        self.script.set_config("llm_model", model)
        self.script.set_config("llm_options", {"mock_response": "Hello!", **options})
        with mock.patch.object(litellm, "completion", wraps=litellm.completion) as completion:
            wait_for(call_llm(self.script, self.MESSAGES, cache_points=points))
        return completion.call_args.kwargs

    def test_claude_gets_cache_control_on_the_marked_messages(self):
        from litellm.types.utils import CallTypes
        from litellm.utils import return_raw_request

        kwargs = self.sent(CLAUDE)
        self.assertEqual(
            kwargs["cache_control_injection_points"],
            [{"location": "message", "index": 1}, {"location": "message", "index": 2}],
        )
        self.assertNotIn("prompt_cache_key", kwargs)
        kwargs.pop("mock_response")
        body = return_raw_request(CallTypes.completion, kwargs)["raw_request_body"]
        self.assertEqual(
            [block.get("cache_control") for block in body["system"]], [None, {"type": "ephemeral"}]
        )
        event = body["messages"][0]["content"][0]
        self.assertEqual(event["cache_control"], {"type": "ephemeral"})

    def test_openai_gets_a_prompt_cache_key_of_the_assistant(self):
        kwargs = self.sent("openai/gpt-4o-mini")
        self.assertEqual(kwargs["prompt_cache_key"], f"evennia-ai-{self.script.id}")
        self.assertNotIn("cache_control_injection_points", kwargs)

    def test_an_openai_model_that_takes_breakpoints_gets_them_too(self):
        from litellm.types.utils import CallTypes
        from litellm.utils import return_raw_request

        kwargs = self.sent("openai/gpt-5.6")
        self.assertEqual(kwargs["prompt_cache_key"], f"evennia-ai-{self.script.id}")
        kwargs.pop("mock_response")
        body = return_raw_request(CallTypes.completion, kwargs)["raw_request_body"]
        marked = [
            index
            for index, message in enumerate(body["messages"])
            if isinstance(message["content"], list)
            and "prompt_cache_breakpoint" in message["content"][-1]
        ]
        self.assertEqual(marked, [1, 2])

    def test_the_options_win_over_the_hints(self):
        kwargs = self.sent("openai/gpt-4o-mini", prompt_cache_key="tavern")
        self.assertEqual(kwargs["prompt_cache_key"], "tavern")

    def test_other_servers_and_providers_get_no_hint(self):
        for model, options in (
            ("openai/qwen", {"api_base": "http://127.0.0.1:8080/v1"}),
            ("offline/assistant", {}),
            ("openai/gpt-4o-mini", {"api_base": "http://127.0.0.1:8080/v1"}),
        ):
            with self.subTest(model=model):
                kwargs = self.sent(model, **options)
                self.assertNotIn("cache_control_injection_points", kwargs)
                self.assertNotIn("prompt_cache_key", kwargs)

    def test_no_hint_when_switched_off_or_the_prompt_is_not_expected_to_repeat(self):
        self.assertNotIn("cache_control_injection_points", self.sent(CLAUDE, points=None))
        self.script.set_config("prompt_cache_hints", False)
        self.assertNotIn("cache_control_injection_points", self.sent(CLAUDE))

    def test_a_tick_marks_the_stable_lead_and_under_cache_friendly_the_history(self):
        # Seed: system prompt, character context, entity context ("Talking with Char"), the
        # event. cache_friendly sends the history before the entity context, but its newest
        # message (here the only one) last: the lead alone is a prefix the next call repeats.
        litellm = load_litellm()
        for layout, points in (("seed", [1]), ("cache_friendly", [1])):
            with self.subTest(layout=layout):
                script = make_assistant(f"Helper_{layout}", self.room1).assistant_script
                script.set_config("prompt_layout", layout)
                script.set_config("llm_model", CLAUDE)
                script.set_config("llm_options", {"mock_response": "Hello!"})
                with mock.patch.object(litellm, "completion", wraps=litellm.completion) as sent:
                    self.assertEqual(self.say(script, self.char1, "Hello!")["status"], "replied")
                marks = sent.call_args.kwargs["cache_control_injection_points"]
                self.assertEqual([mark["index"] for mark in marks], points)
        # A second exchange: cache_friendly marks the end of the history before the newest
        # message (the first event and its answer, after the lead).
        with mock.patch.object(litellm, "completion", wraps=litellm.completion) as sent:
            self.assertEqual(self.say(script, self.char1, "And you?")["status"], "replied")
        marks = sent.call_args.kwargs["cache_control_injection_points"]
        self.assertEqual([mark["index"] for mark in marks], [1, 3])
