"""Sub-agents: a ``delegate`` call runs a sub-task in a fresh, bounded context.

Real ticks of a real AssistantScript on the test database; only the model is scripted. The
sub-agent's calls are the scripted model's calls made between the turn's ``delegate`` call
and the turn's next call.
"""

from django.test import override_settings

from ai.commands import CmdAiHistory
from ai.helpers.journal import add_entry, journal_entries
from ai.prompt_contexts import CONTEXT_REFLECTION
from ai.tool_execution import run_react_loop, run_sub_agent
from ai.tools import ToolContext

from .support import (
    AssistantCommandTestCase,
    AssistantTestCase,
    During,
    ScriptedLLM,
    wait_for,
)

ENABLED = {"sub_agents_enabled": True}
TASK = "Find in your journal what is known about the traveller's cart."
# What the sub-agent alone says: it must reach no prompt of the turn.
SUB_AGENT_QUERY = "cart axle"
SUB_AGENT_RESULT = "The cart's left wheel is cracked, noted two days ago."
PUBLIC_FACT = "The traveller's cart has a cracked left wheel."
PRIVATE_FACT = "Char2 hid the spare axle under the bridge."


def offered(request):
    """Return the names of the tools a scripted call was offered."""
    return {tool["function"]["name"] for tool in request.get("tools") or ()}


def sent(call):
    """Return everything one scripted call was sent, as one string."""
    return "\n".join(str(message.get("content")) for message in call)


class SubAgentTestCase(AssistantTestCase):
    def arrive(self, *steps, who=None):
        """Queue an arrival (not plain conversation: several iterations) and tick once on
        ``steps``; return the tick's result (the model is ``self.llm``)."""
        who = who or self.char1
        with ScriptedLLM(*steps) as llm:
            self.script.set_config("llm_model", llm.model)
            self.script.queue_event(
                {"type": "arrival", "speaker": who.dbref, "speaker_name": who.key}
            )
            self.llm = llm
            return self.tick()

    def delegated(self, *sub_agent_steps, reply="Welcome back."):
        """Tick on an arrival whose turn delegates ``TASK``, the sub-agent playing
        ``sub_agent_steps``, then the turn saying ``reply``."""
        return self.arrive(
            [("delegate", {"task": TASK})], *sub_agent_steps, [("say", {"message": reply})]
        )


class TestOffered(SubAgentTestCase):
    def test_delegate_is_offered_only_when_enabled(self):
        self.tick_on("Hello.", text="hi")
        self.assertNotIn("delegate", offered(self.llm.requests[0]))
        self.script.set_config("execution_config", ENABLED)
        self.tick_on("Hello.", text="hi")
        self.assertIn("delegate", offered(self.llm.requests[0]))

    def test_only_where_the_context_allows_sub_agents(self):
        self.script.set_config("execution_config", ENABLED)
        self.script.set_config("context_overrides", {"tick_event": {"allows_sub_agents": False}})
        self.tick_on("Hello.", text="hi")
        self.assertNotIn("delegate", offered(self.llm.requests[0]))
        # A context that never allows them (seed 004's table) does not offer it either.
        self.script.set_config("context_overrides", {})
        with ScriptedLLM([("noop", {})]) as llm:
            self.script.set_config("llm_model", llm.model)
            wait_for(run_react_loop(self.script, self.assistant, CONTEXT_REFLECTION, event={}))
        self.assertNotIn("delegate", offered(llm.requests[0]))
        self.assertIn("review_journal", offered(llm.requests[0]))

    def test_a_sub_agent_may_not_delegate_speak_or_act(self):
        self.script.set_config("execution_config", ENABLED)
        self.delegated(SUB_AGENT_RESULT)
        sub_agent = offered(self.llm.requests[1])
        self.assertEqual(
            sub_agent,
            {"noop", "look", "add_journal_entry", "review_journal", "recall_memories"}
            | {"search_history"},
        )


class TestBoundedContext(SubAgentTestCase):
    def setUp(self):
        super().setUp()
        self.script.set_config("execution_config", ENABLED)

    def test_the_sub_agent_sees_its_task_not_the_conversation(self):
        self.tick_on("Good to know.", text="The bridge toll is seven coins.")
        self.delegated([("review_journal", {"query": SUB_AGENT_QUERY})], SUB_AGENT_RESULT)
        first, second = self.llm.calls[1], self.llm.calls[2]
        self.assertIn("working alone on one task", sent(first))
        self.assertNotIn("a friendly character", sent(first))  # the turn's system prompt
        self.assertIn(TASK, sent(first))
        for call in (first, second):
            self.assertNotIn("bridge toll", sent(call))
            self.assertNotIn("Char arrives", sent(call))
        # Its own tool result, and nothing else, comes back to it.
        self.assertIn("Result of your last action", sent(second))
        # The turn reads back only the result.
        self.assertIn(f"Result of the sub-task: {SUB_AGENT_RESULT}", sent(self.llm.calls[3]))
        self.assertNotIn(SUB_AGENT_QUERY, sent(self.llm.calls[3]))

    def test_it_reads_only_what_the_turns_audience_may_hear(self):
        add_entry(self.assistant, PUBLIC_FACT, "conversation")
        add_entry(self.assistant, PRIVATE_FACT, "conversation", audience=[self.char2.dbref])
        self.delegated([("review_journal", {"query": "cart axle wheel bridge"})], "Cracked.")
        read_back = sent(self.llm.calls[2])
        self.assertIn(PUBLIC_FACT, read_back)
        self.assertNotIn("spare axle", read_back)

    def test_a_whispered_turn_s_sub_agent_keeps_the_whisper_s_audience(self):
        add_entry(self.assistant, PRIVATE_FACT, "conversation", audience=[self.char2.dbref])
        add_entry(
            self.assistant, "Char's horse is lame.", "conversation", audience=[self.char1.dbref]
        )
        with ScriptedLLM(
            [("delegate", {"task": TASK})],
            [("review_journal", {"query": "axle horse bridge lame"})],
            [("add_journal_entry", {"content": "The axle must be fetched before dusk."})],
            "Fetch the axle before dusk.",
        ) as llm:
            self.script.set_config("llm_model", llm.model)
            self.char2.execute_cmd("whisper Helper = What about my cart?")
            self.tick()
        read_back = sent(llm.calls[2])
        self.assertIn("spare axle", read_back)
        self.assertNotIn("horse", read_back)
        noted = [e for e in journal_entries(self.assistant) if "before dusk" in e["content"]]
        self.assertEqual(noted[0]["audience"], [self.char2.dbref])
        archived = self.script.history.archived_by(self.delegate_result()["id"])
        self.assertTrue(archived)
        for message in archived:
            self.assertEqual(message["metadata"]["audience"], [self.char2.dbref])

    def delegate_result(self):
        calls = [m for m in self.script.conversation_history if m.get("tool_calls")]
        call_id = next(
            call["id"]
            for message in calls
            for call in message["tool_calls"]
            if call["function"]["name"] == "delegate"
        )
        return next(m for m in self.script.conversation_history if m.get("tool_call_id") == call_id)


class TestTheLiveHistory(SubAgentTestCase):
    def setUp(self):
        super().setUp()
        self.script.set_config("execution_config", ENABLED)

    def test_grows_by_one_call_and_one_result_however_long_the_sub_task(self):
        long_sub_task = [
            [("review_journal", {"query": f"{SUB_AGENT_QUERY} {n}"})] for n in range(3)
        ]
        self.script.set_config("sub_agent_max_iterations", 4)
        self.tick_on([("delegate", {"task": TASK})], *long_sub_task, SUB_AGENT_RESULT, text="hi")
        live = self.script.conversation_history
        # The player's line, the delegate call and its result: a single action's turn.
        self.assertEqual([m["role"] for m in live], ["user", "assistant", "tool"])
        self.assertEqual(live[1]["tool_calls"][0]["function"]["name"], "delegate")
        self.assertIn(SUB_AGENT_RESULT, live[2]["content"])
        self.assertEqual(len(self.llm.calls), 5)  # the turn's one, the sub-agent's four
        archived = self.script.history.archived_by(live[2]["id"])
        self.assertEqual(len(archived), 7)  # three calls, three results, the answer
        self.assertEqual({m["metadata"]["context"] for m in archived}, {"sub_agent"})

    def test_what_the_sub_agent_said_reaches_no_later_prompt(self):
        self.delegated([("review_journal", {"query": SUB_AGENT_QUERY})], SUB_AGENT_RESULT)
        self.arrive([("search_history", {"query": SUB_AGENT_QUERY})], [("say", {"message": "Hm."})])
        everything = "\n".join(sent(call) for call in self.llm.calls)
        # Only in the search's own answer: no archived message of the sub-agent is found.
        self.assertIn(f"No archived message matches {SUB_AGENT_QUERY!r}", everything)
        self.assertEqual(everything.count(SUB_AGENT_QUERY), 1)
        self.assertIn(SUB_AGENT_RESULT, everything)  # the result, read back by the turn


class TestLimits(SubAgentTestCase):
    def test_over_budget_the_call_is_refused_naming_the_budget(self):
        self.script.set_config("execution_config", {**ENABLED, "sub_agent_budget": 0})
        result = self.delegated("never asked")
        self.assertEqual(len(self.llm.calls), 2)  # no sub-agent call between the turn's two
        refusal = sent(self.llm.calls[1])
        self.assertIn("sub_agent_budget allows 0 at once", refusal)
        self.assertEqual(result["status"], "replied")

    def test_the_budget_caps_how_many_run_at_once(self):
        self.script.set_config("execution_config", {**ENABLED, "sub_agent_budget": 1})
        parent = ToolContext(self.script, self.assistant, "tick_event")

        def second_sub_agent():
            return run_sub_agent(parent, "another task")

        second = During(second_sub_agent, answer=SUB_AGENT_RESULT)
        self.delegated(second)
        refused = second.result()
        self.assertFalse(refused.ok)
        self.assertIn("1 sub-agent running", refused.content)
        self.assertIn("sub_agent_budget", refused.content)
        # Once the first ended, its place is free again.
        self.assertEqual(self.script.ndb.sub_agents_running, 0)
        self.assertIn(SUB_AGENT_RESULT, sent(self.llm.calls[2]))

    def test_the_sub_agent_s_iteration_limit_holds(self):
        self.script.set_config("execution_config", ENABLED)
        self.script.set_config("sub_agent_max_iterations", 2)
        looping = [[("review_journal", {"query": f"wheel {n}"})] for n in range(2)]
        result = self.delegated(*looping)
        # The turn's call, the sub-agent's two, then the turn's reply.
        self.assertEqual(len(self.llm.calls), 4)
        read_back = sent(self.llm.calls[3])
        self.assertIn("used its 2 model calls (sub_agent_max_iterations)", read_back)
        self.assertEqual(result["reply"], "Welcome back.")

    @override_settings(AI_LLM_MAX_RETRIES=0)
    def test_a_failed_sub_agent_call_is_a_clear_result_and_the_turn_goes_on(self):
        self.script.set_config("execution_config", ENABLED)
        result = self.delegated(ValueError("model down"), reply="Welcome, Char.")
        self.assertIn("The sub-task failed: its model call failed", sent(self.llm.calls[2]))
        self.assertEqual(result["status"], "replied")
        self.assertEqual(result["reply"], "Welcome, Char.")
        self.assertEqual(self.script.ndb.sub_agents_running, 0)


class TestAiHistory(AssistantCommandTestCase):
    def setUp(self):
        super().setUp()
        self.script.set_config("execution_config", ENABLED)
        with ScriptedLLM(
            [("delegate", {"task": TASK})],
            [("review_journal", {"query": SUB_AGENT_QUERY})],
            SUB_AGENT_RESULT,
        ) as llm:
            self.script.set_config("llm_model", llm.model)
            self.script.queue_event(
                {
                    "type": "speech",
                    "speaker": self.char1.dbref,
                    "speaker_name": "Char",
                    "text": "hi",
                }
            )
            wait_for(self.script.at_repeat())

    def test_subagents_shows_what_the_sub_agent_said(self):
        shown = self.call(CmdAiHistory(), "/subagents Helper")
        self.assertIn("Sub-agent under row", shown)
        self.assertIn("review_journal", shown)
        self.assertIn("cart's left wheel", shown)
        # Wrapped where the row id leaves room (four digits on PostgreSQL).
        self.assertIn("task: Find in your journal", " ".join(shown.split()))
        self.assertTrue(all(len(line) <= 78 for line in shown.splitlines()), shown)

    def test_the_listing_shows_the_context_of_each_call(self):
        shown = self.call(CmdAiHistory(), "Helper")
        self.assertIn("context", shown)
        self.assertIn("tick_event", shown)
        self.assertIn("sub_agent: 2 calls, no_tool_call", shown)
        self.assertNotIn("review_journal", shown)  # the sub-agent's work is not live
        self.assertTrue(all(len(line) <= 78 for line in shown.splitlines()), shown)
        calls = self.call(CmdAiHistory(), "/calls Helper")
        self.assertIn("tick_event: 1 call, max_iterations", calls)
