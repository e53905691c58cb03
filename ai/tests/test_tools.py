"""The tool registry, argument validation, and each built-in tool on real Evennia objects."""

import json
from datetime import datetime
from unittest.mock import patch

from ai.helpers.entity_context import entity_profiles
from ai.helpers.journal import add_entry, journal_entries
from ai.tools import (
    Tool,
    ToolContext,
    ToolResult,
    all_tools,
    execute_tool,
    get_tool,
    register_tool,
    tools_for,
    unregister_tool,
)

from .support import AssistantTestCase, record_messages

ENTRY_KEYS = {"id", "timestamp", "content", "source_type", "importance", "tags"}


def call(name, arguments, call_id="call_1"):
    """An OpenAI-style tool call; ``arguments`` is a dict or a raw string."""
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def make_tool(name, handler=None, categories=("safe",)):
    return Tool(
        name=name,
        description=f"Test tool {name}.",
        parameters={"type": "object", "properties": {}},
        categories=frozenset(categories),
        handler=handler or (lambda ctx: ToolResult(ok=True, content=name)),
    )


class ToolTestCase(AssistantTestCase):
    def setUp(self):
        super().setUp()
        self.ctx = ToolContext(
            script=self.script,
            character=self.assistant,
            context_type="tick_event",
            source_message_ids=[3, 4],
        )

    def run_tool(self, name, arguments=None):
        return execute_tool(call(name, arguments or {}), self.ctx)

    def add_temporary_tool(self, tool):
        register_tool(tool)
        self.addCleanup(unregister_tool, tool.name)


class TestRegistry(ToolTestCase):
    def test_builtin_tools_are_registered_with_their_categories(self):
        categories = {tool.name: set(tool.categories) for tool in all_tools()}
        self.assertEqual(categories["noop"], {"terminal", "safe"})
        self.assertEqual(categories["say"], {"terminal", "communication"})
        self.assertEqual(categories["add_journal_entry"], {"journal"})
        self.assertEqual(categories["review_journal"], {"journal", "safe"})
        self.assertEqual(categories["update_entity_observation"], {"journal"})
        self.assertEqual(categories["give"], {"dangerous", "world"})
        self.assertTrue(get_tool("say").is_terminal)
        self.assertFalse(get_tool("review_journal").is_terminal)
        self.assertIsNone(get_tool("fly"))

    def test_duplicate_name_is_refused(self):
        noop = get_tool("noop")
        with self.assertRaisesRegex(ValueError, "'noop'"):
            register_tool(make_tool("noop"))
        self.assertIs(get_tool("noop"), noop)

    def test_replace_overrides_deliberately(self):
        self.add_temporary_tool(make_tool("probe"))
        replacement = make_tool("probe", lambda ctx: ToolResult(ok=True, content="new"))
        register_tool(replacement, replace=True)
        self.assertIs(get_tool("probe"), replacement)
        self.assertEqual(self.run_tool("probe").content, "new")

    def test_unregister_removes_the_tool(self):
        register_tool(make_tool("probe"))
        unregister_tool("probe")
        self.assertIsNone(get_tool("probe"))
        self.assertNotIn("probe", [tool.name for tool in all_tools()])

    def test_tools_for_a_name_filter_keeps_registration_order(self):
        self.add_temporary_tool(make_tool("first"))
        self.add_temporary_tool(make_tool("second"))
        names = [tool.name for tool in tools_for(["second", "noop", "first"])]
        self.assertEqual(names, ["noop", "first", "second"])
        self.assertEqual(len(tools_for(sub_agents=True)), len(all_tools()))
        self.assertNotIn("delegate", [tool.name for tool in tools_for()], "no sub-agents")

    def test_tools_for_categories(self):
        journal = {tool.name for tool in tools_for(allowed_categories=["journal"])}
        self.assertEqual(
            journal, {"add_journal_entry", "review_journal", "update_entity_observation"}
        )
        terminal = {tool.name for tool in tools_for(allowed_categories=["terminal", "dangerous"])}
        self.assertEqual(terminal, {"noop", "say", "give"})
        pre_compaction = ["noop", "add_journal_entry", "update_entity_observation"]
        both = {tool.name for tool in tools_for(pre_compaction, allowed_categories=["journal"])}
        self.assertEqual(both, {"add_journal_entry", "update_entity_observation"})

    def test_schema_is_the_openai_tool_format(self):
        schema = get_tool("say").schema()
        self.assertEqual(schema["type"], "function")
        self.assertEqual(set(schema["function"]), {"name", "description", "parameters"})
        self.assertEqual(schema["function"]["name"], "say")
        self.assertEqual(schema["function"]["parameters"]["type"], "object")
        self.assertEqual(schema["function"]["parameters"]["required"], ["message"])

    def test_unknown_category_and_non_object_parameters_are_refused(self):
        with self.assertRaisesRegex(ValueError, "unknown categories flying"):
            make_tool("probe", categories=("safe", "flying"))
        with self.assertRaisesRegex(ValueError, "type object"):
            Tool("probe", "d", {"type": "array"}, frozenset({"safe"}), lambda ctx: None)


class TestArgumentValidation(ToolTestCase):
    def assert_refused(self, arguments, *expected):
        result = self.run_tool("add_journal_entry", arguments)
        self.assertFalse(result.ok)
        for text in expected:
            self.assertIn(text, result.content)
        self.assertEqual(journal_entries(self.assistant), [])
        return result

    def test_bad_json(self):
        self.assert_refused('{"content": "unfinished', "add_journal_entry", "not valid JSON")

    def test_not_an_object(self):
        self.assert_refused('["a fact"]', "must be a JSON object, got list")

    def test_missing_required(self):
        result = self.assert_refused({})
        self.assertEqual(
            result.content,
            "Invalid arguments for add_journal_entry: 'content' is a required property. "
            "Nothing was done.",
        )

    def test_wrong_type(self):
        self.assert_refused({"content": "A fact", "tags": ["ok", 5]}, "tags/1: ", "string")

    def test_a_bad_optional_argument_with_a_default_is_left_out_and_the_fact_kept(self):
        """A small model rates a fact "high" or 11: the fact is journaled at the default
        importance, and the model is told what was left out."""
        for number, (importance, problem) in enumerate(
            (
                ("high", "'high' is not of type 'integer'"),
                (11, "11 is greater than the maximum of 10"),
                (0, "0 is less than the minimum of 1"),
            )
        ):
            content = f"Char's fact number {number}."
            result = self.run_tool(
                "add_journal_entry", {"content": content, "importance": importance}
            )
            self.assertTrue(result.ok, result.content)
            self.assertIn(f"(Argument importance {problem}", result.content)
            self.assertIn("left out, 5 used.)", result.content)
            entry = journal_entries(self.assistant)[-1]
            self.assertEqual((entry["content"], entry["importance"]), (content, 5))

    def test_unexpected_argument(self):
        self.assert_refused({"content": "A fact", "mood": "glad"}, "'mood' was unexpected")


class TestExecuteTool(ToolTestCase):
    def test_unknown_tool_lists_the_available_ones(self):
        result = self.run_tool("fly")
        self.assertFalse(result.ok)
        self.assertTrue(result.content.startswith("Unknown tool 'fly'. Available: "))
        self.assertIn("noop", result.content)

    def test_a_failing_handler_is_logged_and_reported(self):
        def explode(ctx):
            raise RuntimeError("boom")

        self.add_temporary_tool(make_tool("explode", explode))
        with patch("ai.tools.registry.logger.log_trace") as log_trace:
            result = self.run_tool("explode")
        self.assertFalse(result.ok)
        self.assertEqual(result.content, "Tool explode failed: boom")
        log_trace.assert_called_once()


class TestControlAndCommunication(ToolTestCase):
    def test_noop(self):
        result = self.run_tool("noop")
        self.assertEqual((result.ok, result.content), (True, "Done."))

    def test_say_reaches_others_in_the_room(self):
        with patch.object(self.char2, "msg") as char2_msg:
            result = self.run_tool("say", {"message": "The bridge is out."})
        self.assertTrue(result.ok)
        self.assertEqual(result.content, "You said: The bridge is out.")
        self.assertEqual(result.data, {"message": "The bridge is out."})
        heard = " ".join(str(c.kwargs.get("text") or c.args) for c in char2_msg.mock_calls)
        self.assertIn("Helper says", heard)
        self.assertIn("The bridge is out.", heard)

    def test_say_refuses_an_empty_message(self):
        with patch.object(self.char2, "msg") as char2_msg:
            result = self.run_tool("say", {"message": ""})
        self.assertFalse(result.ok)
        self.assertIn("message", result.content)
        char2_msg.assert_not_called()


class TestJournalTools(ToolTestCase):
    def test_add_journal_entry_writes_a_seed_format_entry(self):
        result = self.run_tool(
            "add_journal_entry",
            {"content": "Char's sword is called Dawnbringer.", "importance": 7, "tags": ["char"]},
        )
        self.assertTrue(result.ok)
        [entry] = journal_entries(self.assistant)
        self.assertEqual(result.data["entry"], entry)
        self.assertTrue(ENTRY_KEYS <= set(entry))
        self.assertTrue(entry["id"].startswith("journal_"))
        datetime.fromisoformat(entry["timestamp"])
        self.assertEqual(entry["content"], "Char's sword is called Dawnbringer.")
        self.assertEqual(entry["source_type"], "conversation")
        self.assertEqual((entry["importance"], entry["tags"]), (7, ["char"]))
        self.assertEqual(entry["source_message_ids"], [3, 4])
        self.assertEqual(result.content, f"Journaled {entry['id']}: {entry['content']}")

    def test_pre_compaction_entries_say_so_and_default_to_importance_5(self):
        self.ctx.context_type = "pre_compaction"
        self.ctx.source_messages = [{"role": "user", "content": 'Char says, "A fact."'}]
        self.assertTrue(self.run_tool("add_journal_entry", {"content": "A fact."}).ok)
        [entry] = journal_entries(self.assistant)
        self.assertEqual((entry["source_type"], entry["importance"]), ("pre_compaction", 5))

    def test_blank_content_is_refused(self):
        result = self.run_tool("add_journal_entry", {"content": "   "})
        self.assertFalse(result.ok)
        self.assertIn("needs content", result.content)
        self.assertEqual(journal_entries(self.assistant), [])

    def test_a_question_is_not_journaled_as_a_fact(self):
        for context in ("conversation", "pre_compaction"):
            self.ctx.context_type = context
            self.ctx.source_messages = [
                {"role": "user", "content": 'Char says, "What is the toll at the bridge?"'}
            ]
            result = self.run_tool(
                "add_journal_entry", {"content": "What is the toll at the bridge?"}
            )
            self.assertFalse(result.ok, context)
            self.assertIn("a question holds no fact", result.content)
        self.assertEqual(journal_entries(self.assistant), [])
        self.ctx.context_type = "conversation"
        asked = "Char asked what the toll at the bridge is. Nobody knew?"
        self.assertTrue(self.run_tool("add_journal_entry", {"content": asked}).ok)

    def test_review_an_empty_journal(self):
        self.assertEqual(self.run_tool("review_journal").content, "The journal is empty.")

    def test_review_by_query(self):
        add_entry(self.assistant, "Char's sword is Dawnbringer.", "conversation", 7, ["weapons"])
        add_entry(self.assistant, "The bridge north is out.", "conversation", 4, ["travel"])
        add_entry(self.assistant, "A dragon lairs past the bridge.", "conversation", 9)
        ids = [entry["id"] for entry in journal_entries(self.assistant)]

        by_substring = self.run_tool("review_journal", {"query": "DAWN"}).content
        self.assertEqual(by_substring, f"[{ids[0]}] (importance 7) Char's sword is Dawnbringer.")
        self.assertIn(ids[0], self.run_tool("review_journal", {"query": "weapons"}).content)
        by_word = self.run_tool("review_journal", {"query": "Where is the bridge?"}).content
        self.assertEqual(
            by_word.splitlines(),
            [
                f"[{ids[2]}] (importance 9) A dragon lairs past the bridge.",
                f"[{ids[1]}] (importance 4) The bridge north is out.",
            ],
        )
        self.assertEqual(
            self.run_tool("review_journal", {"query": "goblins"}).content,
            "No entries match 'goblins'.",
        )

    def test_review_limit_gives_the_newest(self):
        for number in range(6):
            add_entry(self.assistant, f"Fact {number}.", "conversation")
        lines = self.run_tool("review_journal", {"limit": 2}).content.splitlines()
        self.assertEqual(len(lines), 2)
        self.assertTrue(lines[0].endswith("Fact 5."))
        self.assertTrue(lines[1].endswith("Fact 4."))
        self.assertEqual(len(self.run_tool("review_journal").content.splitlines()), 5)
        over = self.run_tool("review_journal", {"limit": 21}).content
        self.assertEqual(len(over.splitlines()), 5, "the default limit")
        self.assertIn("limit 21 is greater than the maximum of 20: left out, 5 used", over)


class TestEntityObservations(ToolTestCase):
    def observe(self, entity, observation="Carries a lantern."):
        return self.run_tool(
            "update_entity_observation", {"entity": entity, "observation": observation}
        )

    def profiles(self):
        return entity_profiles(self.assistant)

    def test_by_dbref(self):
        result = self.observe(self.char1.dbref)
        self.assertTrue(result.ok, result.content)
        profile = self.profiles()[self.char1.dbref]
        self.assertEqual(profile["name"], "Char")
        [observation] = profile["observations"]
        self.assertEqual(observation["text"], "Carries a lantern.")
        self.assertEqual(observation["source_message_ids"], [3, 4])
        datetime.fromisoformat(observation["timestamp"])
        datetime.fromisoformat(profile["updated"])

    def test_by_name_in_the_room(self):
        self.assertTrue(self.observe("char2", "Hums while walking.").ok)
        self.assertTrue(self.observe("Char", "Tall.").ok)
        profiles = self.profiles()
        self.assertEqual(profiles[self.char2.dbref]["name"], "Char2")
        self.assertEqual(
            profiles[self.char2.dbref]["observations"][0]["text"], "Hums while walking."
        )
        self.assertEqual(profiles[self.char1.dbref]["observations"][0]["text"], "Tall.")

    def test_unknown_entities_are_refused(self):
        for entity in ("Nobody", "#99999"):
            result = self.observe(entity)
            self.assertFalse(result.ok)
            self.assertIn(entity, result.content)
        self.assertEqual(self.profiles(), {})

    def test_keeps_every_observation(self):
        # Nothing is dropped on write: the entity consolidation of a sleep marks what is
        # out of date, and the prompt shows the newest current ones.
        for number in range(25):
            self.assertTrue(self.observe(self.char1.dbref, f"Observation {number}.").ok)
        texts = [obs["text"] for obs in self.profiles()[self.char1.dbref]["observations"]]
        self.assertEqual(texts, [f"Observation {number}." for number in range(25)])


class TestGive(ToolTestCase):
    def setUp(self):
        super().setUp()
        from evennia.utils import create

        self.lantern = create.create_object(key="lantern", location=self.assistant)

    def test_gives_what_it_carries_to_someone_here(self):
        result = self.run_tool("give", {"item": "lantern", "recipient": "Char2"})
        self.assertTrue(result.ok, result.content)
        self.assertEqual(self.lantern.location, self.char2)
        self.assertTrue(get_tool("give").is_dangerous)

    def test_refuses_what_it_does_not_carry_or_someone_not_here(self):
        refused = self.run_tool("give", {"item": "sword", "recipient": "Char2"})
        self.assertEqual(refused.content, "You carry no single 'sword'; you carry: lantern.")
        refused = self.run_tool("give", {"item": "lantern", "recipient": "Nobody"})
        self.assertFalse(refused.ok)
        self.assertIn("No one and nothing called 'Nobody' is here; here:", refused.content)
        self.assertIn("Char2", refused.content, "it names who is here to choose from")
        refused = self.run_tool("give", {"item": "lantern", "recipient": "Helper"})
        self.assertEqual(refused.content, "You carry lantern already: name someone else here.")
        self.assertEqual(self.lantern.location, self.assistant, "nothing moved")


class TestLook(ToolTestCase):
    BOARD = "A notice board. Wanted: a courier for the Dunmere road, 30 silver a trip."

    def setUp(self):
        super().setUp()
        from evennia.utils import create

        self.board = create.create_object(key="notice board", location=self.room1)
        self.board.db.desc = self.BOARD

    def test_describes_what_is_here_as_a_player_sees_it(self):
        result = self.run_tool("look", {"target": "notice board"})
        self.assertTrue(result.ok, result.content)
        self.assertIn(self.BOARD, result.content)
        self.assertNotIn("|", result.content, "colour codes stripped")
        room = self.run_tool("look", {})
        self.assertIn(self.room1.key, room.content)
        self.assertIn("notice board", room.content)

    def test_refuses_what_is_not_here_naming_what_is(self):
        from evennia.utils import create

        far = create.create_object(key="secret map", location=self.room2)
        for target in ("dragon", far.dbref):
            with self.subTest(target=target):
                result = self.run_tool("look", {"target": target})
                self.assertFalse(result.ok)
                self.assertTrue(result.content.startswith("Not seen: nothing here matches"))
                self.assertIn("notice board", result.content)

    def test_nowhere_there_is_nothing_to_see(self):
        self.assistant.location = None
        for arguments in ({}, {"target": "notice board"}):
            with self.subTest(arguments=arguments):
                result = self.run_tool("look", arguments)
                self.assertFalse(result.ok)
                self.assertTrue(result.content.startswith("Not seen:"), result.content)

    def test_the_offline_engine_looks_and_answers_from_what_it_saw(self):
        heard = record_messages(self.char2)
        self.hear("Helper, could you read the notice board?")
        self.assertEqual(self.tick()["reply"], "Let me look at the notice board.")
        calls = [
            call["function"]["name"]
            for message in self.script.conversation_history
            for call in message.get("tool_calls") or ()
        ]
        self.assertEqual(calls, ["look", "say"])
        self.hear("How much does the courier on the Dunmere road earn?")
        self.assertIn("30 silver a trip", self.tick()["reply"])
        self.assertIn("30 silver a trip", "\n".join(map(str, heard)))
