"""Context types, their overrides, and the three-layer execution pattern (seed 004)."""

import itertools
from copy import deepcopy
from unittest import TestCase
from unittest.mock import patch

from django.test import override_settings

from ai.config import ConfigError
from ai.prompt_components import (
    COMPONENT_CHARACTER_CONTEXT,
    COMPONENT_CONTEXT_BUFFER,
    COMPONENT_CONVERSATION_HISTORY,
    COMPONENT_ENTITY_CONTEXT,
    COMPONENT_GOALS,
    COMPONENT_PENDING_EVENT,
    COMPONENT_SEMANTIC_MEMORIES,
    COMPONENT_SYSTEM_PROMPT,
    COMPONENT_TOOL_RESULT,
)
from ai.prompt_contexts import (
    CONTEXT_GOAL_DECOMPOSE,
    CONTEXT_PRE_COMPACTION,
    CONTEXT_REFLECTION,
    CONTEXT_REFLECTION_CONT,
    CONTEXT_SLEEP_CONSOLIDATE,
    CONTEXT_TICK_AUTONOMOUS,
    CONTEXT_TICK_EVENT,
    CONVERSATION_TOOLS,
    DEFAULT_CONTEXT_CONFIGS,
    DEFAULT_PRE_COMPACTION_PROMPT,
    EXECUTION_MODES,
    PRE_COMPACTION_TOOLS,
    REFLECTION_TOOLS,
    SLEEP_TOOLS,
    TOKEN_PRESSURE_CRITICAL,
    TOKEN_PRESSURE_HIGH,
    ContextConfig,
    get_context_config,
    select_execution_pattern,
    token_pressure_level,
)
from ai.tools.registry import tools_for

from .support import AssistantTestCase

FULL = [
    COMPONENT_SYSTEM_PROMPT,
    COMPONENT_CHARACTER_CONTEXT,
    COMPONENT_ENTITY_CONTEXT,
    COMPONENT_SEMANTIC_MEMORIES,
    COMPONENT_CONTEXT_BUFFER,
    COMPONENT_GOALS,
    COMPONENT_CONVERSATION_HISTORY,
    COMPONENT_PENDING_EVENT,
    COMPONENT_TOOL_RESULT,
]
JOURNAL_CATEGORIES = ["journal", "safe", "terminal"]

# context: (components, tool filter, mode, max iterations, multi tool, sub agents,
#           categories, confirm dangerous, records history)
EXPECTED = {
    CONTEXT_TICK_EVENT: (
        FULL,
        CONVERSATION_TOOLS + ["add_goal"],
        "react_loop",
        5,
        True,
        True,
        None,
        False,
        True,
    ),
    CONTEXT_TICK_AUTONOMOUS: (
        FULL,
        CONVERSATION_TOOLS + ["add_goal", "complete_goal", "block_goal"],
        "react_loop",
        5,
        True,
        True,
        None,
        True,
        True,
    ),
    CONTEXT_REFLECTION: (
        [COMPONENT_SYSTEM_PROMPT, COMPONENT_PENDING_EVENT, COMPONENT_TOOL_RESULT],
        REFLECTION_TOOLS,
        "react_loop",
        3,
        True,
        False,
        JOURNAL_CATEGORIES,
        False,
        False,
    ),
    CONTEXT_REFLECTION_CONT: (
        [COMPONENT_SYSTEM_PROMPT, COMPONENT_TOOL_RESULT],
        REFLECTION_TOOLS,
        "react_loop",
        2,
        True,
        False,
        JOURNAL_CATEGORIES,
        False,
        False,
    ),
    # The seed's table has no tool result here; without it the model never saw what its
    # recall_memories call found and asked again every iteration.
    CONTEXT_SLEEP_CONSOLIDATE: (
        [COMPONENT_SYSTEM_PROMPT, COMPONENT_SEMANTIC_MEMORIES, COMPONENT_TOOL_RESULT],
        SLEEP_TOOLS,
        "react_loop",
        10,
        True,
        False,
        ["memory", "journal", "safe", "terminal"],
        False,
        False,
    ),
    CONTEXT_GOAL_DECOMPOSE: (
        [
            COMPONENT_SYSTEM_PROMPT,
            COMPONENT_CHARACTER_CONTEXT,
            COMPONENT_GOALS,
            COMPONENT_PENDING_EVENT,
        ],
        [],
        "single_action",
        1,
        False,
        False,
        None,
        False,
        False,
    ),
    CONTEXT_PRE_COMPACTION: (
        [
            COMPONENT_SYSTEM_PROMPT,
            COMPONENT_CONVERSATION_HISTORY,
            COMPONENT_PENDING_EVENT,
            COMPONENT_TOOL_RESULT,
        ],
        PRE_COMPACTION_TOOLS,
        "react_loop",
        5,
        True,
        False,
        JOURNAL_CATEGORIES,
        False,
        False,  # its calls stay out of the live history
    ),
}

STATIC = {"multi_action_enabled": True, "max_iterations_per_tick": 5}


def open_context(**changes):
    """A context that restricts nothing: composing with it leaves the static layer alone."""
    values = dict(
        context_type="open",
        name="Open",
        description="Restricts nothing",
        enabled_components=[COMPONENT_SYSTEM_PROMPT],
        execution_mode="react_loop",
        max_iterations=10,
        allows_sub_agents=True,
    )
    values.update(changes)
    return ContextConfig(**values)


class TestDefaults(TestCase):
    def test_the_seven_context_types(self):
        self.assertEqual(set(DEFAULT_CONTEXT_CONFIGS), set(EXPECTED))
        self.assertEqual(
            [
                CONTEXT_TICK_EVENT,
                CONTEXT_TICK_AUTONOMOUS,
                CONTEXT_REFLECTION,
                CONTEXT_REFLECTION_CONT,
                CONTEXT_SLEEP_CONSOLIDATE,
                CONTEXT_GOAL_DECOMPOSE,
                CONTEXT_PRE_COMPACTION,
            ],
            [
                "tick_event",
                "tick_autonomous",
                "reflection",
                "reflection_cont",
                "sleep_consolidate",
                "goal_decompose",
                "pre_compaction",
            ],
        )
        for context_type, config in DEFAULT_CONTEXT_CONFIGS.items():
            self.assertEqual(config.context_type, context_type)
            self.assertTrue(config.name and config.description, context_type)

    def test_each_context_as_the_seed_tables_say(self):
        for context_type, expected in EXPECTED.items():
            with self.subTest(context_type=context_type):
                config = get_context_config(context_type)
                actual = (
                    config.enabled_components,
                    config.tool_filter,
                    config.execution_mode,
                    config.max_iterations,
                    config.allows_multi_tool,
                    config.allows_sub_agents,
                    config.allowed_tool_categories,
                    config.dangerous_requires_confirm,
                    config.records_history,
                )
                self.assertEqual(actual, expected)
                self.assertIs(config.terminal_ends_loop, True)
                self.assertIsNone(config.token_budget)

    def test_each_context_offers_existing_tools_fit_for_its_work(self):
        registered = {tool.name for tool in tools_for(sub_agents=True)}
        for context_type in EXPECTED:
            with self.subTest(context_type=context_type):
                offered = get_context_config(context_type).tool_filter or []
                # A misspelt name would silently offer one tool fewer.
                self.assertLessEqual(set(offered), registered)
                config = get_context_config(context_type)
                # Only the turns that act in the room offer speech: the conversation says
                # its text, an autonomous turn (only calls act there) calls say. Reflection
                # also acts only through calls, and says nothing.
                talks = context_type in (CONTEXT_TICK_EVENT, CONTEXT_TICK_AUTONOMOUS)
                self.assertEqual("say" in offered, talks)
                self.assertEqual(config.speaks, context_type == CONTEXT_TICK_EVENT)
        for tools in (CONVERSATION_TOOLS, REFLECTION_TOOLS, SLEEP_TOOLS, PRE_COMPACTION_TOOLS):
            self.assertIn("add_journal_entry", tools)
        self.assertEqual(EXECUTION_MODES, ("single_action", "react_loop"))

    def test_focused_contexts_replace_the_system_prompt(self):
        for context_type in EXPECTED:
            with self.subTest(context_type=context_type):
                prompt = get_context_config(context_type).get_component_content_override(
                    "system_prompt"
                )
                if context_type == CONTEXT_TICK_EVENT:
                    self.assertIsNone(prompt)
                else:
                    self.assertTrue(prompt.strip())

    def test_prompts_name_only_tools_their_context_offers(self):
        every_tool = set(SLEEP_TOOLS) | set(PRE_COMPACTION_TOOLS)
        for context_type in EXPECTED:
            config = get_context_config(context_type)
            prompt = config.get_component_content_override("system_prompt") or ""
            with self.subTest(context_type=context_type):
                named = {tool for tool in every_tool if tool in prompt}
                self.assertLessEqual(named, set(config.tool_filter or ()))

    def test_pre_compaction_prompt_is_the_default_extraction_prompt(self):
        config = get_context_config(CONTEXT_PRE_COMPACTION)
        self.assertEqual(
            config.get_component_content_override("system_prompt"), DEFAULT_PRE_COMPACTION_PROMPT
        )
        for word in ("names", "numbers", "places", "promises", "decisions", "open tasks"):
            self.assertIn(word, DEFAULT_PRE_COMPACTION_PROMPT)
        for tool in PRE_COMPACTION_TOOLS:
            self.assertIn(tool, DEFAULT_PRE_COMPACTION_PROMPT)

    def test_get_component_content_override(self):
        config = open_context(
            component_overrides={
                "goals": {"content": "Climb the tower."},
                "odd": "not a dict",
                "empty": {},
            }
        )
        self.assertEqual(config.get_component_content_override("goals"), "Climb the tower.")
        self.assertIsNone(config.get_component_content_override("odd"))
        self.assertIsNone(config.get_component_content_override("empty"))
        self.assertIsNone(config.get_component_content_override("system_prompt"))

    def test_each_call_returns_a_fresh_copy(self):
        config = get_context_config(CONTEXT_REFLECTION)
        config.tool_filter.append("say")
        config.component_overrides["system_prompt"]["content"] = "changed"
        config.max_iterations = 9
        again = get_context_config(CONTEXT_REFLECTION)
        self.assertEqual(again.tool_filter, REFLECTION_TOOLS)
        self.assertNotEqual(again.get_component_content_override("system_prompt"), "changed")
        self.assertEqual(again.max_iterations, 3)
        self.assertEqual(DEFAULT_CONTEXT_CONFIGS[CONTEXT_REFLECTION].max_iterations, 3)

    def test_unknown_context_type_is_refused(self):
        with self.assertRaisesRegex(
            ConfigError, r"unknown context type 'dreaming'; known: tick_event, tick_autonomous"
        ):
            get_context_config("dreaming")


class TestSettingsOverrides(TestCase):
    def test_setting_overrides_fields_of_its_context_only(self):
        overrides = {CONTEXT_REFLECTION: {"max_iterations": 2, "tool_filter": ["noop"]}}
        with override_settings(AI_CONTEXT_OVERRIDES=overrides):
            reflection = get_context_config(CONTEXT_REFLECTION)
            other = get_context_config(CONTEXT_REFLECTION_CONT)
        self.assertEqual((reflection.max_iterations, reflection.tool_filter), (2, ["noop"]))
        self.assertEqual(reflection.execution_mode, "react_loop")
        self.assertEqual(other.max_iterations, 2)
        self.assertEqual(other.tool_filter, REFLECTION_TOOLS)
        self.assertEqual(get_context_config(CONTEXT_REFLECTION).max_iterations, 3)

    def test_setting_is_read_at_call_time(self):
        for budget in (1000, 2000):
            with override_settings(
                AI_CONTEXT_OVERRIDES={CONTEXT_TICK_EVENT: {"token_budget": budget}}
            ):
                self.assertEqual(get_context_config(CONTEXT_TICK_EVENT).token_budget, budget)

    def test_component_overrides_merge_per_key(self):
        overrides = {CONTEXT_REFLECTION: {"component_overrides": {"goals": {"content": "G"}}}}
        with override_settings(AI_CONTEXT_OVERRIDES=overrides):
            config = get_context_config(CONTEXT_REFLECTION)
        self.assertEqual(config.get_component_content_override("goals"), "G")
        self.assertEqual(
            config.get_component_content_override("system_prompt"),
            DEFAULT_CONTEXT_CONFIGS[CONTEXT_REFLECTION].get_component_content_override(
                "system_prompt"
            ),
        )
        replace = {CONTEXT_REFLECTION: {"component_overrides": {"system_prompt": {"content": "S"}}}}
        with override_settings(AI_CONTEXT_OVERRIDES=replace):
            config = get_context_config(CONTEXT_REFLECTION)
        self.assertEqual(config.get_component_content_override("system_prompt"), "S")

    def test_returned_config_does_not_share_the_setting(self):
        overrides = {CONTEXT_TICK_EVENT: {"tool_filter": ["noop"]}}
        with override_settings(AI_CONTEXT_OVERRIDES=overrides):
            get_context_config(CONTEXT_TICK_EVENT).tool_filter.append("say")
        self.assertEqual(overrides[CONTEXT_TICK_EVENT]["tool_filter"], ["noop"])

    REFUSALS = [
        (["reflection"], r"^AI_CONTEXT_OVERRIDES must be a dict of context type"),
        (
            {"dreaming": {}},
            r"^AI_CONTEXT_OVERRIDES: unknown context type 'dreaming'; known: tick_event, ",
        ),
        ({"reflection": 3}, r"^AI_CONTEXT_OVERRIDES\['reflection'\] must be a dict of field"),
        (
            {"reflection": {"speed": 1}},
            r"^AI_CONTEXT_OVERRIDES\['reflection'\]: unknown field 'speed'; allowed: name, ",
        ),
        ({"reflection": {"context_type": "tick_event"}}, r"unknown field 'context_type'"),
        (
            {"reflection": {"execution_mode": "turbo"}},
            r"^AI_CONTEXT_OVERRIDES\['reflection'\]\['execution_mode'\]='turbo' refused: "
            r"must be one of single_action, react_loop$",
        ),
        (
            {"reflection": {"execution_mode": "plan_execute"}},
            r"^AI_CONTEXT_OVERRIDES\['reflection'\]\['execution_mode'\]='plan_execute' refused: "
            r"is not built \(react_loop runs a task step by step\); must be one of "
            r"single_action, react_loop$",
        ),
        (
            {"reflection": {"max_iterations": 0}},
            r"\['max_iterations'\]=0 refused: must be a whole number from 1 to 10$",
        ),
        ({"reflection": {"max_iterations": 11}}, r"=11 refused: must be a whole number from 1"),
        ({"reflection": {"max_iterations": 2.5}}, r"=2.5 refused: must be a whole number from 1"),
        ({"reflection": {"max_iterations": True}}, r"=True refused: must be a whole number"),
        ({"reflection": {"tool_filter": "noop"}}, r"must be a list of non-empty strings"),
        (
            {"reflection": {"allowed_tool_categories": ["wizardry"]}},
            r"\['allowed_tool_categories'\]=\['wizardry'\] refused: must be a list of tool "
            r"categories from safe, terminal, dangerous",
        ),
        (
            {"reflection": {"enabled_components": ["system_prompt"]}},
            r"must be a list of component IDs from 0 to 7999",
        ),
        ({"reflection": {"enabled_components": [8000]}}, r"component IDs from 0 to 7999"),
        (
            {"reflection": {"component_overrides": {"system_prompt": "Be brief."}}},
            r"\['component_overrides'\].* refused: must map component keys to \{'content'",
        ),
        (
            {"reflection": {"component_overrides": {"goals": {"content": " "}}}},
            r"must map component keys to",
        ),
        (
            {"reflection": {"component_overrides": {"goals": {"content": "G", "role": "user"}}}},
            r"must map component keys to",
        ),
        ({"reflection": {"token_budget": 0}}, r"must be a whole number of at least 1"),
        ({"reflection": {"allows_sub_agents": "yes"}}, r"must be True or False"),
        ({"reflection": {"records_history": 1}}, r"\['records_history'\]=1 refused"),
        ({"reflection": {"records_history": None}}, r"=None refused: must be True or False"),
        ({"reflection": {"name": ""}}, r"must be a non-empty string"),
    ]

    def test_a_refused_setting_falls_back_to_no_overrides_naming_context_and_field(self):
        for overrides, message in self.REFUSALS:
            with self.subTest(overrides=overrides):
                with override_settings(AI_CONTEXT_OVERRIDES=overrides):
                    with patch("ai.utils.checked_settings.logger.log_err") as log_err:
                        config = get_context_config(CONTEXT_REFLECTION)
                        get_context_config(CONTEXT_REFLECTION)
                self.assertEqual(config, DEFAULT_CONTEXT_CONFIGS[CONTEXT_REFLECTION])
                log_err.assert_called_once()
                logged = log_err.call_args.args[0]
                self.assertTrue(logged.startswith("AI: setting "), logged)
                self.assertTrue(logged.endswith("; using the default {}"), logged)
                problem = logged.removeprefix("AI: setting ").removesuffix("; using the default {}")
                self.assertRegex(problem, message)

    def test_a_bad_entry_is_refused_whichever_context_is_asked_for(self):
        # A typo in one context's overrides surfaces at the first call, not the first
        # call of that context; the setting's good entries go with it.
        overrides = {"reflection": {"max_iterations": 0}, "tick_event": {"max_iterations": 2}}
        with override_settings(AI_CONTEXT_OVERRIDES=overrides):
            with patch("ai.utils.checked_settings.logger.log_err") as log_err:
                config = get_context_config(CONTEXT_TICK_EVENT)
        self.assertEqual(config.max_iterations, 5)
        self.assertIn("['reflection']['max_iterations']=0 refused", log_err.call_args.args[0])


class TestScriptOverrides(AssistantTestCase):
    def test_without_overrides_the_script_gets_the_defaults(self):
        for context_type in EXPECTED:
            self.assertEqual(
                get_context_config(context_type, self.script), DEFAULT_CONTEXT_CONFIGS[context_type]
            )

    def test_script_overrides_apply_and_come_out_plain(self):
        self.script.db.context_overrides = {
            CONTEXT_TICK_EVENT: {
                "max_iterations": 3,
                "tool_filter": ["say", "noop"],
                "component_overrides": {"goals": {"content": "Guard the gate."}},
            }
        }
        config = get_context_config(CONTEXT_TICK_EVENT, self.script)
        self.assertEqual(config.max_iterations, 3)
        self.assertEqual(config.get_component_content_override("goals"), "Guard the gate.")
        self.assertIs(type(config.tool_filter), list)
        self.assertIs(type(config.component_overrides), dict)
        self.assertIs(type(config.component_overrides["goals"]), dict)
        config.tool_filter.append("look")
        self.assertEqual(
            self.script.db.context_overrides["tick_event"]["tool_filter"], ["say", "noop"]
        )

    def test_script_overrides_apply_after_the_setting(self):
        self.script.db.context_overrides = {
            CONTEXT_REFLECTION: {
                "max_iterations": 1,
                "component_overrides": {"system_prompt": {"content": "Script prompt."}},
            }
        }
        setting = {
            CONTEXT_REFLECTION: {
                "max_iterations": 2,
                "description": "From settings",
                "component_overrides": {"goals": {"content": "Setting goals."}},
            }
        }
        with override_settings(AI_CONTEXT_OVERRIDES=setting):
            config = get_context_config(CONTEXT_REFLECTION, self.script)
        self.assertEqual(config.max_iterations, 1)
        self.assertEqual(config.description, "From settings")
        self.assertEqual(config.get_component_content_override("system_prompt"), "Script prompt.")
        self.assertEqual(config.get_component_content_override("goals"), "Setting goals.")

    def test_script_refusal_names_the_attribute(self):
        with self.assertRaisesRegex(
            ConfigError,
            r"context_overrides\['tick_event'\]\['max_iterations'\]=50 refused: "
            r"must be a whole number from 1 to 10",
        ):
            self.script.set_config(
                "context_overrides", {CONTEXT_TICK_EVENT: {"max_iterations": 50}}
            )
        self.assertEqual(self.script.db.context_overrides, {})

    def test_a_bad_stored_override_falls_back_with_a_logged_error(self):
        self.script.db.context_overrides = {CONTEXT_TICK_EVENT: {"max_iterations": 50}}
        with patch("ai.assistant_script.logger.log_err") as log_err:
            config = get_context_config(CONTEXT_TICK_EVENT, self.script)
        self.assertEqual(config.max_iterations, 5)
        self.assertIn("max_iterations']=50 refused", log_err.call_args.args[0])


def rank(mode):
    return EXECUTION_MODES.index(mode)


class TestExecutionPattern(TestCase):
    def pattern(self, context_type=CONTEXT_TICK_EVENT, static=STATIC, assessment=None):
        return select_execution_pattern(static, get_context_config(context_type), assessment)

    def test_seed_composition_example(self):
        pattern = self.pattern(CONTEXT_REFLECTION)
        self.assertEqual(pattern.mode, "react_loop")
        self.assertEqual(pattern.max_iterations, 3)
        self.assertEqual(pattern.source_layers["mode"], "context")
        self.assertEqual(pattern.source_layers["max_iterations"], "context")
        self.assertEqual(pattern.allowed_categories, JOURNAL_CATEGORIES)
        self.assertEqual(pattern.source_layers["allowed_categories"], "context")
        self.assertFalse(pattern.sub_agents_enabled)

    def test_unrestricted_values_keep_the_static_source(self):
        pattern = self.pattern(CONTEXT_TICK_EVENT)
        self.assertEqual(
            (pattern.mode, pattern.max_iterations, pattern.allowed_categories),
            ("react_loop", 5, None),
        )
        self.assertEqual(pattern.source_layers["max_iterations"], "static")
        self.assertEqual(pattern.source_layers["allowed_categories"], "static")
        self.assertEqual(pattern.source_layers["terminal_ends_loop"], "context")
        self.assertTrue(pattern.multi_tool_enabled)
        self.assertFalse(pattern.dangerous_requires_confirm)

    def test_static_multi_action_off_forces_single_action(self):
        static = dict(STATIC, multi_action_enabled=False)
        for context_type in EXPECTED:
            with self.subTest(context_type=context_type):
                pattern = self.pattern(context_type, static)
                self.assertEqual((pattern.mode, pattern.max_iterations), ("single_action", 1))
                self.assertEqual(pattern.source_layers["mode"], "static")
                self.assertEqual(pattern.source_layers["max_iterations"], "static")

    def test_static_iteration_cap(self):
        pattern = self.pattern(CONTEXT_SLEEP_CONSOLIDATE, dict(STATIC, max_iterations_per_tick=4))
        self.assertEqual(pattern.max_iterations, 4)
        self.assertEqual(pattern.source_layers["max_iterations"], "static")

    def test_static_sub_agents_switch(self):
        on = dict(STATIC, sub_agents_enabled=True)
        self.assertTrue(self.pattern(CONTEXT_TICK_EVENT, on).sub_agents_enabled)
        off = self.pattern(CONTEXT_TICK_EVENT, dict(STATIC, sub_agents_enabled=False))
        self.assertFalse(off.sub_agents_enabled)
        self.assertEqual(off.source_layers["sub_agents_enabled"], "static")
        reflection = self.pattern(CONTEXT_REFLECTION, on)
        self.assertFalse(reflection.sub_agents_enabled)
        self.assertEqual(reflection.source_layers["sub_agents_enabled"], "context")

    def test_missing_static_keys_take_their_defaults(self):
        pattern = self.pattern(CONTEXT_SLEEP_CONSOLIDATE, {})
        self.assertEqual((pattern.mode, pattern.max_iterations), ("react_loop", 5))
        self.assertFalse(self.pattern(CONTEXT_TICK_EVENT, {}).sub_agents_enabled)

    def test_invalid_static_config_is_refused(self):
        with self.assertRaisesRegex(ConfigError, r"max_iterations_per_tick'\] must be a whole"):
            self.pattern(static={"max_iterations_per_tick": 0})

    def test_context_layer(self):
        goal = self.pattern(CONTEXT_GOAL_DECOMPOSE)
        self.assertEqual((goal.mode, goal.max_iterations), ("single_action", 1))
        self.assertFalse(goal.multi_tool_enabled)
        self.assertEqual(goal.source_layers["multi_tool_enabled"], "context")
        autonomous = self.pattern(CONTEXT_TICK_AUTONOMOUS)
        self.assertTrue(autonomous.dangerous_requires_confirm)
        self.assertEqual(autonomous.source_layers["dangerous_requires_confirm"], "context")
        quiet = select_execution_pattern(STATIC, open_context(terminal_ends_loop=False))
        self.assertFalse(quiet.terminal_ends_loop)

    def test_context_cannot_widen_the_mode(self):
        pattern = select_execution_pattern(STATIC, open_context())
        self.assertEqual(pattern.mode, "react_loop")
        self.assertEqual(pattern.source_layers["mode"], "context")
        single = select_execution_pattern(dict(STATIC, multi_action_enabled=False), open_context())
        self.assertEqual((single.mode, single.max_iterations), ("single_action", 1))

    def test_plan_execute_is_refused_by_name(self):
        """plan_execute is not built: a context configured with it in code is refused with the
        accepted modes, never run as a react_loop."""
        with self.assertRaisesRegex(
            ConfigError,
            r"^open\.execution_mode='plan_execute' refused: is not built .*; must be one of "
            r"single_action, react_loop$",
        ):
            select_execution_pattern(STATIC, open_context(execution_mode="plan_execute"))

    def test_categories_come_from_the_context_as_a_copy(self):
        context = open_context(allowed_tool_categories=["journal", "dangerous"])
        pattern = select_execution_pattern(STATIC, context)
        self.assertEqual(pattern.allowed_categories, ["journal", "dangerous"])
        pattern.allowed_categories.append("memory")
        self.assertEqual(context.allowed_tool_categories, ["journal", "dangerous"])
        none = select_execution_pattern(STATIC, open_context(allowed_tool_categories=[]))
        self.assertEqual(none.allowed_categories, [])

    def test_assessment_layer(self):
        fewer = self.pattern(assessment={"recommended_iterations": 2})
        self.assertEqual(fewer.max_iterations, 2)
        self.assertEqual(fewer.source_layers["max_iterations"], "assessment")
        single = self.pattern(assessment={"recommended_mode": "single_action"})
        self.assertEqual((single.mode, single.max_iterations), ("single_action", 1))
        self.assertEqual(single.source_layers["mode"], "assessment")
        # single_action is one call whose tool calls all run.
        self.assertTrue(single.multi_tool_enabled)
        confirm = self.pattern(assessment={"recommend_confirm_dangerous": True})
        self.assertTrue(confirm.dangerous_requires_confirm)
        self.assertEqual(confirm.source_layers["dangerous_requires_confirm"], "assessment")

    def test_assessment_cannot_widen(self):
        more = self.pattern(CONTEXT_REFLECTION, assessment={"recommended_iterations": 9})
        self.assertEqual(more.max_iterations, 3)
        wider = self.pattern(assessment={"recommended_mode": "plan_execute"})
        self.assertEqual(wider.mode, "react_loop")
        keep = self.pattern(
            CONTEXT_TICK_AUTONOMOUS, assessment={"recommend_confirm_dangerous": False}
        )
        self.assertTrue(keep.dangerous_requires_confirm)

    def test_invalid_assessment_values_are_ignored(self):
        baseline = self.pattern(CONTEXT_REFLECTION)
        for assessment in (
            {"recommended_iterations": 0},
            {"recommended_iterations": -2},
            {"recommended_iterations": 1.5},
            {"recommended_iterations": True},
            {"recommended_iterations": "1"},
            {"recommended_mode": "turbo"},
            {"recommended_mode": None},
            {"recommend_confirm_dangerous": "yes"},
            {"context_signals": "panic"},
            {"context_signals": {"token_pressure": "extreme", "recent_errors": "many"}},
            {"context_signals": {"recent_errors": True, "event_class": "dancing"}},
            "not a dict",
        ):
            with self.subTest(assessment=assessment):
                self.assertEqual(self.pattern(CONTEXT_REFLECTION, assessment=assessment), baseline)

    SIGNALS = [
        # signals, mode, max iterations, confirm dangerous, source of the change
        ({"token_pressure": "critical"}, "single_action", 1, False, "signal:token_pressure"),
        ({"token_pressure": "high"}, "react_loop", 2, False, "signal:token_pressure"),
        ({"token_pressure": None}, "react_loop", 5, False, None),
        ({"recent_errors": 3}, "single_action", 1, True, "signal:recent_errors"),
        ({"recent_errors": 7}, "single_action", 1, True, "signal:recent_errors"),
        ({"recent_errors": 2}, "react_loop", 2, False, "signal:recent_errors"),
        ({"recent_errors": 1}, "react_loop", 5, False, None),
        ({"event_class": "communication"}, "single_action", 1, False, "signal:event_class"),
        ({"event_class": "building"}, "react_loop", 5, True, "signal:event_class"),
        ({"goal_urgency": "low"}, "react_loop", 2, False, "signal:goal_urgency"),
        ({"goal_urgency": "normal"}, "react_loop", 5, False, None),
        ({"goal_urgency": "high"}, "react_loop", 5, False, None),
    ]

    def test_each_context_signal(self):
        for signals, mode, iterations, confirm, source in self.SIGNALS:
            with self.subTest(signals=signals):
                pattern = self.pattern(assessment={"context_signals": signals})
                self.assertEqual(
                    (pattern.mode, pattern.max_iterations, pattern.dangerous_requires_confirm),
                    (mode, iterations, confirm),
                )
                changed = {
                    layer for layer in pattern.source_layers.values() if layer.startswith("signal")
                }
                self.assertEqual(changed, {source} if source else set())

    def test_a_signal_that_tightens_nothing_keeps_the_earlier_source(self):
        pattern = self.pattern(
            assessment={"recommended_iterations": 1, "context_signals": {"token_pressure": "high"}}
        )
        self.assertEqual(pattern.max_iterations, 1)
        self.assertEqual(pattern.source_layers["max_iterations"], "assessment")

    def test_token_pressure_level(self):
        self.assertEqual((TOKEN_PRESSURE_HIGH, TOKEN_PRESSURE_CRITICAL), (0.6, 0.8))
        for usage, level in [
            (0.0, None),
            (0.59, None),
            (0.6, "high"),
            (0.79, "high"),
            (0.8, "critical"),
            (1.3, "critical"),
        ]:
            with self.subTest(usage=usage):
                self.assertEqual(token_pressure_level(usage), level)


class TestLayersNeverWiden(TestCase):
    """Every combination: no layer allows more than the layer before it."""

    STATICS = [
        {},
        STATIC,
        {"multi_action_enabled": False, "max_iterations_per_tick": 10},
        {"max_iterations_per_tick": 1, "sub_agents_enabled": True},
        {"max_iterations_per_tick": 3, "sub_agents_enabled": True},
        {"max_iterations_per_tick": 10, "sub_agents_enabled": True},
    ]
    ASSESSMENTS = [
        None,
        {"recommended_iterations": 10, "recommended_mode": "plan_execute"},
        {"recommended_iterations": 2},
        {"recommended_iterations": 0, "recommended_mode": "turbo"},
        {"recommended_mode": "single_action"},
        {"recommend_confirm_dangerous": False},
        {"recommend_confirm_dangerous": True},
        {"context_signals": {"token_pressure": "high", "event_class": "building"}},
        {"context_signals": {"token_pressure": "critical"}},
        {"context_signals": {"recent_errors": 2}},
        {"context_signals": {"recent_errors": 3, "event_class": "communication"}},
    ]

    def contexts(self):
        yield open_context()
        yield open_context(execution_mode="react_loop", allowed_tool_categories=["safe", "memory"])
        yield open_context(execution_mode="single_action", max_iterations=1)
        for context_type in EXPECTED:
            yield get_context_config(context_type)

    def assertNoWider(self, narrow, wide):
        self.assertLessEqual(rank(narrow.mode), rank(wide.mode))
        self.assertLessEqual(narrow.max_iterations, wide.max_iterations)
        if wide.allowed_categories is not None:
            self.assertIsNotNone(narrow.allowed_categories)
            self.assertLessEqual(set(narrow.allowed_categories), set(wide.allowed_categories))
        self.assertGreaterEqual(narrow.dangerous_requires_confirm, wide.dangerous_requires_confirm)
        self.assertLessEqual(narrow.multi_tool_enabled, wide.multi_tool_enabled)
        self.assertLessEqual(narrow.sub_agents_enabled, wide.sub_agents_enabled)

    def test_no_layer_widens(self):
        combinations = itertools.product(self.STATICS, self.contexts(), self.ASSESSMENTS)
        for static, context, assessment in combinations:
            with self.subTest(static=static, context=context.context_type, assessment=assessment):
                given = deepcopy(assessment)
                layer1 = select_execution_pattern(static, open_context())
                layer2 = select_execution_pattern(static, context)
                layer3 = select_execution_pattern(static, context, assessment)
                self.assertEqual(assessment, given)

                limit = static.get("max_iterations_per_tick", 5)
                self.assertLessEqual(layer1.max_iterations, limit)
                if static.get("multi_action_enabled") is False:
                    self.assertEqual(layer1.mode, "single_action")
                self.assertLessEqual(
                    layer1.sub_agents_enabled, static.get("sub_agents_enabled", False)
                )

                self.assertNoWider(layer2, layer1)
                self.assertLessEqual(rank(layer2.mode), rank(context.execution_mode))
                self.assertLessEqual(layer2.max_iterations, context.max_iterations)
                if context.allowed_tool_categories is not None:
                    self.assertLessEqual(
                        set(layer2.allowed_categories), set(context.allowed_tool_categories)
                    )
                self.assertGreaterEqual(
                    layer2.dangerous_requires_confirm, context.dangerous_requires_confirm
                )
                self.assertLessEqual(layer2.multi_tool_enabled, context.allows_multi_tool)
                self.assertLessEqual(layer2.sub_agents_enabled, context.allows_sub_agents)

                self.assertNoWider(layer3, layer2)
                for layer in (layer1, layer2, layer3):
                    if layer.mode == "single_action":
                        self.assertEqual(layer.max_iterations, 1)
