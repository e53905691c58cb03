"""Prompt components and their assembly: order, slots, overrides and budgets."""

import random
from unittest import TestCase

from evennia.utils import create

from ai.prompt_assembly import assemble_prompt, history_units, select_history
from ai.prompt_components import (
    STATIC_COMPONENTS,
    ComponentSlotError,
    PromptComponent,
    free_slot_after,
    register_component,
    unregister_component,
)
from ai.prompt_contexts import get_context_config

from .support import AssistantTestCase

MODEL = "offline/assistant"


def tool_pair(call_id, text="x"):
    call = {"id": call_id, "type": "function", "function": {"name": "noop", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call], "token_count": 20},
        {"role": "tool", "tool_call_id": call_id, "content": text, "token_count": 10},
    ]


class TestStaticComponents(TestCase):
    def test_nine_static_components_at_the_seed_ids(self):
        self.assertEqual(
            [(c.id, c.key) for c in STATIC_COMPONENTS],
            [
                (0, "system_prompt"),
                (1000, "character_context"),
                (1500, "entity_context"),
                (2000, "semantic_memories"),
                (3000, "context_buffer"),
                (4000, "goals"),
                (5000, "conversation_history"),
                (6000, "pending_event"),
                (7000, "tool_result"),
            ],
        )
        self.assertTrue(all(c.is_static for c in STATIC_COMPONENTS))


class TestPluggableSlots(TestCase):
    def tearDown(self):
        for key in ("weather", "weather2", "lore"):
            try:
                unregister_component(key)
            except ComponentSlotError:
                pass

    def test_slots_between_static_ids(self):
        self.assertEqual(free_slot_after("character_context"), 1001)
        register_component(PromptComponent(1001, "weather", "Weather", "Sky", "It rains."))
        self.assertEqual(free_slot_after("character_context"), 1002)

    def test_refusals_name_the_problem(self):
        register_component(PromptComponent(1001, "weather", "Weather", "Sky", "It rains."))
        cases = [
            (PromptComponent(1000, "lore", "L", "d"), "belongs to a static component"),
            (PromptComponent(1001, "lore", "L", "d"), "ID 1001 is taken by 'weather'"),
            (PromptComponent(9000, "lore", "L", "d"), "outside 1-7999"),
            (PromptComponent(1002, "weather", "L", "d"), "key 'weather' is already registered"),
        ]
        for component, message in cases:
            with self.subTest(message=message):
                with self.assertRaisesRegex(ComponentSlotError, message):
                    register_component(component)
        with self.assertRaisesRegex(ComponentSlotError, "no static component 'nope'"):
            free_slot_after("nope")


class TestAssembly(AssistantTestCase):
    def assemble(self, context="tick_event", budget=100000, history=(), **kwargs):
        config = get_context_config(context, self.script)
        return assemble_prompt(
            self.script, self.assistant, config, MODEL, budget, list(history), **kwargs
        )

    def test_the_character_context_names_what_the_assistant_carries(self):
        self.assertNotIn("You carry", self.assemble().messages[1]["content"])
        for key in ("brass key", "lantern"):
            create.create_object(
                "evennia.objects.objects.DefaultObject",
                key=key,
                location=self.assistant,
                home=self.room1,
            )
        self.assertIn("You carry: brass key, lantern.", self.assemble().messages[1]["content"])

    def test_components_come_in_id_order_and_empty_ones_add_nothing(self):
        self.assistant.ndb.context_buffer = ["Char waves."]
        event = {"type": "speech", "speaker_name": "Char", "text": "hi", "in_history": True}
        prompt = self.assemble(
            history=[{"role": "user", "content": 'Char says, "hi"'}], event=event
        )
        self.assertEqual(
            list(prompt.components),
            [
                "system_prompt",
                "character_context",
                "context_buffer",
                "conversation_history",
            ],
        )
        self.assertIn("You are Helper", prompt.messages[0]["content"])
        self.assertIn("Present: Char, Char2", prompt.messages[1]["content"])
        # The event is the last message: nothing after it (an instruction there made a
        # small model repeat the player).
        self.assertEqual(prompt.messages[-1], {"role": "user", "content": 'Char says, "hi"'})

    def test_an_event_not_yet_in_history_is_the_pending_event(self):
        event = {"type": "speech", "speaker_name": "Char", "text": "hi"}
        prompt = self.assemble(event=event)
        self.assertEqual(prompt.messages[-1]["content"], 'Handle this now: Char says, "hi"')

    def test_braces_in_an_override_are_kept_and_placeholders_filled(self):
        override = 'You are {name} in {location}. Answer like {"name": "say"} and {unknown}.'
        self.script.set_config(
            "context_overrides",
            {"tick_event": {"component_overrides": {"system_prompt": {"content": override}}}},
        )
        prompt = self.assemble()
        self.assertEqual(
            prompt.messages[0]["content"],
            'You are Helper in Room. Answer like {"name": "say"} and {unknown}.',
        )

    def test_a_pluggable_component_lands_after_its_static_neighbour(self):
        register_component(
            PromptComponent(1001, "weather", "Weather", "Sky"),
            render=lambda state: f"It rains on {state.character.key}.",
        )
        self.addCleanup(unregister_component, "weather")
        prompt = self.assemble()
        self.assertEqual(
            list(prompt.components)[:3], ["system_prompt", "character_context", "weather"]
        )
        self.assertEqual(prompt.messages[2]["content"], "It rains on Helper.")
        reflection = self.assemble("reflection_cont")
        self.assertNotIn("weather", reflection.components)

    def test_a_disabled_component_never_reaches_the_prompt(self):
        weather = PromptComponent(1001, "weather", "Weather", "Sky", enabled=False)
        register_component(weather, render=lambda state: "It rains.")
        self.addCleanup(unregister_component, "weather")
        static = {component.key: component for component in STATIC_COMPONENTS}
        for key in ("context_buffer", "conversation_history"):
            self.addCleanup(setattr, static[key], "enabled", True)
        static["context_buffer"].enabled = False
        self.assistant.ndb.context_buffer = ["Char waves."]
        history = [{"role": "user", "content": 'Char says, "hi"', "token_count": 10}]
        prompt = self.assemble(history=history)
        self.assertEqual(
            list(prompt.components), ["system_prompt", "character_context", "conversation_history"]
        )
        self.assertNotIn("It rains.", str(prompt.messages))
        self.assertNotIn("Char waves.", str(prompt.messages))
        weather.enabled = True
        self.assertIn("weather", self.assemble(history=history).components)
        static["conversation_history"].enabled = False
        prompt = self.assemble(history=history)
        self.assertNotIn("conversation_history", prompt.components)
        self.assertNotIn('Char says, "hi"', str(prompt.messages))
        self.assertEqual(prompt.history_included, 0)

    def test_a_context_override_replaces_the_system_prompt(self):
        prompt = self.assemble("pre_compaction")
        config = get_context_config("pre_compaction", self.script)
        self.assertEqual(
            prompt.messages[0]["content"],
            config.get_component_content_override("system_prompt").replace("{name}", "Helper"),
        )

    def test_history_is_loaded_newest_first_within_its_share(self):
        history = [
            {"role": "user", "content": f'Char says, "line {i}"', "token_count": 10}
            for i in range(10)
        ]
        whole = self.assemble(history=history)
        fixed = whole.total_tokens - 100
        prompt = self.assemble(history=history, budget=fixed + 35)
        self.assertEqual(prompt.history_included, 3)
        self.assertEqual(prompt.history_omitted, 7)
        self.assertEqual(prompt.messages[-1]["content"], 'Char says, "line 9"')
        self.assertLessEqual(prompt.total_tokens, prompt.budget)
        self.assertEqual(prompt.cuts[-1]["how"], "oldest 7 messages omitted")

    def test_a_tool_call_never_travels_without_its_results(self):
        history = tool_pair("a") + [{"role": "user", "content": "u", "token_count": 5}]
        history += tool_pair("b")
        chosen, used = select_history(history, 34, MODEL)
        self.assertEqual([m.get("tool_call_id") for m in chosen], [None, "b"])
        self.assertEqual(used, 30)
        chosen, used = select_history(history, 35, MODEL)
        self.assertEqual([m["role"] for m in chosen], ["user", "assistant", "tool"])
        chosen, _ = select_history(history, 29, MODEL)
        self.assertEqual(chosen, [], "half a pair is never sent")
        self.assertEqual([len(unit) for unit in history_units(history)], [2, 1, 2])

    def test_low_priority_parts_shrink_first_and_cuts_are_recorded(self):
        self.assistant.ndb.context_buffer = [f"Noise line {i} " * 20 for i in range(10)]
        whole = self.assemble()
        budget = whole.total_tokens - 200
        prompt = self.assemble(budget=budget)
        self.assertLessEqual(prompt.total_tokens, budget)
        self.assertEqual(prompt.cuts[0]["component"], "context_buffer")
        self.assertEqual(prompt.components["system_prompt"], whole.components["system_prompt"])
        self.assertEqual(
            prompt.components["character_context"], whole.components["character_context"]
        )


def random_history(rng, length):
    """Return ``length`` messages: lines, tool calls with their results, stray results."""
    history = []
    while len(history) < length:
        kind = rng.choice(("line", "pair", "pair", "stray"))
        if kind == "pair":
            history += tool_pair(f"c{len(history)}")[: rng.choice((1, 2, 2))]
        else:
            role = "tool" if kind == "stray" else "user"
            message = {"role": role, "content": "u", "token_count": rng.randint(1, 30)}
            history.append({**message, "tool_call_id": "gone"} if kind == "stray" else message)
    return history


class TestSelectHistory(TestCase):
    def test_it_takes_what_taking_whole_units_from_the_newest_takes(self):
        rng = random.Random(11)
        for _ in range(300):
            history = random_history(rng, rng.randint(0, 40))
            budget = rng.randint(0, 600)
            chosen, used = [], 0
            for unit in reversed(history_units(history)):  # the unit by unit reference
                cost = sum(m["token_count"] for m in unit)
                if used + cost > budget:
                    break
                chosen[:0], used = unit, used + cost
            with self.subTest(history=history, budget=budget):
                self.assertEqual(select_history(history, budget, MODEL), (chosen, used))


class TestLiveState(AssistantTestCase):
    def assemble(self, history=(), event=None):
        config = get_context_config("tick_event", self.script)
        return assemble_prompt(
            self.script, self.assistant, config, MODEL, 100000, list(history), event=event
        )

    def test_room_ambience_reaches_the_context_buffer_but_speech_does_not(self):
        self.room1.msg_contents("A bell rings in the distance.")
        self.char1.execute_cmd("say hello")
        self.assistant.execute_cmd("look")  # what it sees itself is no news of the room
        prompt = self.assemble()
        buffer = next(m for m in prompt.messages if m["content"].startswith("Recently around"))
        self.assertIn("A bell rings in the distance.", buffer["content"])
        self.assertNotIn("hello", buffer["content"])
        self.assertNotIn(self.room1.key, buffer["content"].replace("Recently around you", ""))

    def test_journal_entries_relevant_to_the_event_are_recalled_unless_history_shows_them(self):
        from ai.helpers.journal import add_entry

        add_entry(
            self.assistant,
            "Char said: the cellar password is swordfish",
            "conversation",
            source_message_ids=[41],
        )
        add_entry(self.assistant, "Char2 said: the horse is called Thunder", "conversation")
        event = {"type": "speech", "speaker_name": "Char2", "text": "what is the cellar password?"}
        prompt = self.assemble(event=event)
        self.assertIn("swordfish", prompt.messages[2]["content"])
        self.assertEqual(list(prompt.components)[2], "semantic_memories")
        still_live = [{"id": 41, "role": "user", "content": 'Char says, "..."', "token_count": 9}]
        prompt = self.assemble(history=still_live, event=event)
        self.assertNotIn("swordfish", " ".join(m["content"] or "" for m in prompt.messages[:3]))

    def test_a_recalled_synthesis_gives_its_relevant_lines_one_memory_each(self):
        from ai.helpers.journal import add_entry

        summary = ["Char: The ferry leaves at nine.", "Char2: The cellar password is swordfish."]
        add_entry(self.assistant, "\n".join(["[CONTEXT SYNTHESIS]", *summary]), "compaction")
        event = {"type": "speech", "speaker_name": "Char2", "text": "what is the cellar password?"}
        memories = self.assemble(event=event).messages[2]["content"]
        self.assertEqual(
            memories, "Things you remember:\n- Char2: The cellar password is swordfish."
        )
