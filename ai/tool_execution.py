"""The ReAct loop: call the model, run the tools it asks for, record it all, repeat.

Each iteration assembles the context type's prompt, calls the model once, appends the
assistant message and one tool message per call (so history can be sent back unchanged),
and stops on: a terminal tool, ``noop``, no tool call, a tool outside the context's filter
(not run), a dangerous tool awaiting confirmation, a model error, the pattern's
iteration limit, or (for a turn of the assistant's own) a player's event waiting. An
answer's writes run before its other calls, and what it says is said once they ran: when
a write failed, its reply is held back and the model asked again with the failure in
view, so that the assistant never claims what did not happen. An answer
whose dangerous call waits for a builder says nothing yet: its words wait with the call
(``ai.confirmation``), since they would tell of a deed not done.
"""

import json
from dataclasses import dataclass, field, replace
from functools import partial

from django.db import transaction
from evennia.utils import logger
from twisted.internet import defer

from .audience import event_audience, message_audience, with_audience
from .confirmation import hold_call
from .context_usage import keep_call_frame
from .helpers.call_log import note_run
from .helpers.memory_links import describe_memory
from .history import RecentHistory
from .llm_interaction import call_llm, context_window, prefer_text_listing, resolve_model
from .prompt_assembly import assemble_prompt, includes
from .prompt_components import (
    COMPONENT_CONVERSATION_HISTORY,
    COMPONENT_SEMANTIC_MEMORIES,
)
from .prompt_contexts import (
    CONTEXT_SUB_AGENT,
    CONTEXT_TICK_EVENT,
    get_context_config,
    select_execution_pattern,
)
from .prompt_layout import cache_points
from .prompt_rendering import recall_query, whereabouts
from .semantic_memory import recall
from .sub_agents import (
    archive_transcript,
    claim_slot,
    release_slot,
    sub_agent_config,
    sub_agent_outcome,
    task_event,
)
from .thinking import ThinkingEmote
from .tools import ToolContext, ToolResult, check_call, execute_tool, get_tool, tools_for
from .tools.communication import emote, speak, spoken
from .utils.echo import is_echo, off_topic_repeat, repeats_itself
from .utils.intentions import only_announces, without_announcements
from .utils.markers import SUB_AGENT_KEY
from .utils.message_format import SendableMessages
from .utils.text_tool_calls import looks_like_markup


@dataclass
class LoopResult:
    """What one run of the loop did.

    Attributes:
        context_type (str): The context type it ran in.
        iterations (int): Model calls made.
        tools_called (list): Names of the tools run, in order.
        tools_refused (list): Names of the tools called that the context does not offer.
        stop_reason (str): ``terminal_tool``, ``noop``, ``no_tool_call``, ``tool_not_allowed``,
            ``awaiting_confirmation``, ``llm_error``, ``max_iterations`` or ``yielded`` (an
            event came, see ``yields_to_events``).
        said (list): What the assistant said in the room.
        pattern (ExecutionPattern): The execution pattern that governed the loop.
        last_answer (LLMResult): The last model answer.
        cuts (list): What the last prompt assembly cut to fit the budget.
        unspoken (list): Answers in text alone (no tool call) of a context that does not
            speak, for the caller to use (extraction journals the facts they state); never
            said in the room.
        withheld (list): Answers of a speaking context that were not said because they
            still looked like tool-call markup or code, echoed the player's line again, or
            gave a stock reply again (see ``_stuck``).
        echo_retries (int): Answers asked for again because they only repeated the
            player's line (once a turn; a second echo is withheld).
        repeat_retries (int): Answers asked for again because they said what an earlier
            reply said, or gave a recent reply word for word with nothing of the line
            (once a turn; a second repeat is said, a second stock reply withheld).
        intention_retries (int): Answers asked for again because they only announced a
            tool use without making it ("I will add <thing> to my journal."), or, in a
            context where only tool calls act (``needs_tool_call``), made no call.
        intentions_withheld (list): Such announcements that were not said (asked again
            already, or no retry left this turn).
        text_tool_calls (int): Tool calls the model wrote as text and the gateway recovered.
        malformed_tool_calls (list): Text that looked like a tool call but was none.
        held (list): Replies not said because a write the same answer asked for (a journal
            entry, a memory, a pin) failed: they may claim it happened. The model is asked
            again, once its results show the failure.
        kept (list): The messages of a context that does not record into history, in order
            (a sub-agent's, archived once its result is recorded).
        calls_not_run (list): Names of the tool calls not run because the pattern allows
            one call an answer (``multi_tool_enabled`` off): only an answer's first call runs.
        tool_result (str): The result of the last tool run, which a run that reached its
            limit leaves unread (a continuation context may take it up), or None.
    """

    context_type: str
    iterations: int = 0
    tools_called: list = field(default_factory=list)
    tools_refused: list = field(default_factory=list)
    stop_reason: str = ""
    said: list = field(default_factory=list)
    pattern: object = None
    last_answer: object = None
    cuts: list = field(default_factory=list)
    unspoken: list = field(default_factory=list)
    withheld: list = field(default_factory=list)
    echo_retries: int = 0
    repeat_retries: int = 0
    intention_retries: int = 0
    intentions_withheld: list = field(default_factory=list)
    text_tool_calls: int = 0
    malformed_tool_calls: list = field(default_factory=list)
    held: list = field(default_factory=list)
    kept: list = field(default_factory=list)
    calls_not_run: list = field(default_factory=list)
    tool_result: str | None = None


# Sent once, after an answer that said again what an earlier reply said (Qwen2.5-Coder-1.5B
# gave "I'm glad you're doing well, <name>!" to 30 messages in a row once it had said it).
# Every nudge is framed as a note from the game: worded as the player's, the model answered
# it aloud ("Yes, I already said that.", "I did not hear an earlier message", Qwen2.5-Coder
# 1.5B on a generated conversation).
NUDGE_FRAME = "(A note from the game, not from {speaker}; never mention it.) "
REPEAT_NUDGE = (
    NUDGE_FRAME + "Your draft reply was almost the same as a reply you gave before. Write "
    "a reply that fits what {speaker} just said."
)
# Earlier replies compared with a new one.
RECENT_REPLIES = 3
# Sent once, after an answer that only repeated the player's line (Qwen2.5-Coder-1.5B did
# that to a fact stated with a greeting: "Hello Helper! I buried 40 gold coins...").
ECHO_NUDGE = (
    NUDGE_FRAME + "Your draft reply only repeated what {speaker} said. Reply to {speaker} in "
    "your own words: answer the question, or say briefly that you will remember it."
)
# Sent once, after an answer that only restated the prompt's line of where the assistant is
# and who is present (Qwen2.5-Coder-1.5B did, when that line came just before the player's).
WHEREABOUTS_NUDGE = (
    NUDGE_FRAME + "Your draft reply only restated where you are and who is present. Reply "
    "to what {speaker} just said, in your own words."
)

# Sent once, after an answer that only announced a tool use ("I will add <thing> to my
# journal.", no call made): Qwen2.5-Coder-1.5B offered tools natively answered every line so.
INTENTION_NUDGE = (
    NUDGE_FRAME + "Do not say that you will use a tool: use it now, or answer {speaker} "
    "directly in your own words."
)
# Sent once, in a context where only tool calls act (``needs_tool_call``), after an answer
# without one: Qwen2.5-Coder-1.5B answered goal steps in prose ("Complete_goal", "I'll start
# by looking for the key"), which, said aloud, told the room its notes.
CALL_NUDGE = (
    "(A note from the game.) Your answer made no tool call, so nothing was done and nothing "
    "was said: here only tool calls act. Answer with the tool call that takes the next step, "
    'as one line of JSON: {"name": "<tool>", "arguments": {...}}.'
)
# What the turn's audience sees when an answer only announced a tool use, or gave a stock
# reply again, and was not said: an honest sign that no answer came, never recorded (the
# model would copy it).
NO_ANSWER_EMOTE = "{name} hesitates, and does not answer."


# The result of a reply held back because a write of its answer failed.
HELD_REPLY = (
    "{writes} failed (see its result), so this reply may say that something happened "
    "which did not. Reply again, true to what happened"
)


# The result of a call after an answer's first when the pattern allows one call an answer.
ONE_CALL_ONLY = (
    "only one tool call an answer runs in {context} (allows_multi_tool is off); "
    "call it again in your next answer if you still need it"
)


def _not_run(call, why):
    return {"role": "tool", "tool_call_id": call["id"], "content": f"Not run: {why}"}


class _Turn:
    """The messages of one loop: appended to history, or kept to the loop, per the context.

    A context that reads history but does not record into it (extraction) sees the live
    history followed by its own messages. The loop sees only the messages its audience
    may hear (with ``audience_only``, only those kept for exactly that audience), and what
    it records is kept for that audience.
    """

    def __init__(self, script, config, audience, budget, audience_only=False):
        self.script = script
        self.context_type = config.context_type
        self.audience = audience
        self.audience_only = audience_only
        self.budget = budget
        self.records_history = config.records_history
        # Whether the loop's prompt shows the live history (a context recording into it
        # does, whatever its components).
        self.sees_history = self.records_history or includes(config, COMPONENT_CONVERSATION_HISTORY)
        self.local = []

    def warm(self):
        """Read a history not held yet a page a reactor turn (``ConversationHistory.warm``).

        Returns:
            Deferred: Fires with None.
        """
        if not self.sees_history:
            return defer.succeed(None)
        return self.script.history.warm(self.budget)

    def history(self):
        """Return what the prompt may show: the newest heard messages its budget could
        hold (see ``ConversationHistory.recent``), then the loop's own."""
        if not self.sees_history:
            return RecentHistory(self.local)
        recent = self.script.history.recent(self.budget, self.audience)
        if self.audience_only:
            own = sorted(self.audience or ())
            recent = RecentHistory(
                [m for m in recent if sorted(message_audience(m) or ()) == own],
                recent.older_count,
                recent.older_tokens,
            )
        if self.local:
            recent = RecentHistory(recent + self.local, recent.older_count, recent.older_tokens)
        return recent

    def record(self, message):
        """Keep ``message`` for the turn's audience, marked with the context it ran in."""
        if message is None:
            return None
        metadata = with_audience(message.get("metadata"), self.audience)
        message = {**message, "metadata": {"context": self.context_type, **metadata}}
        if self.records_history:
            return self.script.append_message(message)
        self.local.append(message)
        return message


@defer.inlineCallbacks
def run_react_loop(
    script,
    character,
    context_type,
    event=None,
    signals=None,
    iteration_limit=None,
    source_message_ids=(),
    source_messages=(),
    context_config=None,
    audience=None,
    audience_only=False,
    memories=None,
    assessment=None,
    tool_result=None,
    yields_to_events=False,
):
    """Run the ReAct loop of ``context_type`` for ``character``.

    Args:
        script (AssistantScript): The assistant's script.
        character (AssistantCharacter): The assistant.
        context_type (str): One of the context types (``tick_event``, ``pre_compaction``...).
        event (dict, optional): The pending event.
        signals (dict, optional): Context signals for the execution pattern's third layer.
        iteration_limit (int, optional): The caller's own limit, used instead of
            ``execution_config``'s ``max_iterations_per_tick``; the context type and the
            signals may still lower it.
        source_message_ids (iterable): History ids the tools should cite as sources.
        source_messages (iterable): History messages journal entries may cite, by content.
        context_config (ContextConfig, optional): The configuration to run with, when the
            caller changed the one ``get_context_config`` gives for ``context_type``.
        audience (list, optional): Who hears the turn (``ai.audience``); the event's
            audience by default (a whisperer, or the room).
        audience_only (bool): Show only the history kept for exactly ``audience``, not
            the room's messages a whisperer may also hear.
        memories (list, optional): Lines for the semantic memories component; by default
            what long-term memory recalls for the event (see ``recall_for``).
        assessment (dict, optional): The model's own assessment of the task
            (``ai.task_assessment``): ``recommended_iterations``, ``recommended_mode`` and
            ``recommend_confirm_dangerous``, the third layer beside ``signals``; it may
            only restrict.
        tool_result (str, optional): The result of a tool an earlier run ran, for the tool
            result component of the first call (``reflection_cont`` takes up
            ``reflection``'s).
        yields_to_events (bool): End the loop before its next model call when an event
            waits (a turn of the assistant's own never keeps a player waiting).

    Returns:
        Deferred: Fires with a :class:`LoopResult`.
    """
    config = context_config or get_context_config(context_type, script)
    static = script.get_config("execution_config")
    if iteration_limit:
        static = {**static, "max_iterations_per_tick": iteration_limit}
    layer3 = {**(assessment or {}), "context_signals": dict(signals or {})}
    pattern = select_execution_pattern(static, config, layer3)
    tools = tools_for(config.tool_filter, pattern.allowed_categories, pattern.sub_agents_enabled)
    allowed = {tool.name for tool in tools}
    schemas = [tool.schema(context_type) for tool in tools] or None
    model = resolve_model(script)
    budget = config.token_budget or context_window(script)
    audience = audience or event_audience(event)
    context = ToolContext(
        script,
        character,
        context_type,
        event,
        list(source_message_ids),
        list(source_messages),
        audience,
    )
    if pattern.sub_agents_enabled:
        context.sub_agent = partial(run_sub_agent, context)
    turn = _Turn(script, config, audience, budget, audience_only)
    yield turn.warm()
    if memories is None:
        # A generator: gone through only when memory answers (a pass over long history).
        shown = (message["id"] for message in turn.history() if "id" in message)
        memories = yield recall_for(script, character, config, event, audience, shown)
    result = LoopResult(context_type=context_type, pattern=pattern)
    thinking = ThinkingEmote(script, character, audience) if config.speaks and event else None
    iteration, limit = 0, pattern.max_iterations
    kept = {}  # components rendered once for the run (prompt_assembly.RENDERED_ONCE_A_RUN)
    while iteration < limit:
        if iteration and yields_to_events and script.has_pending_events():
            result.stop_reason = "yielded"  # a player waits: answered next tick
            break
        iteration += 1
        history = turn.history()
        prompt = assemble_prompt(
            script,
            character,
            config,
            model,
            budget,
            history,
            event,
            tool_result,
            schemas,
            memories=memories,
            audience=audience,
            kept=kept,
        )
        if iteration == 1 and context_type == CONTEXT_TICK_EVENT:
            keep_call_frame(script, prompt, model)
        if prompt.total_tokens > budget:
            # The frame alone is over the window: the call would be refused, or cut by the
            # server where the model cannot see it. Builders are told; nothing is sent.
            logger.log_err(
                f"AI {script.label}: {context_type} call not sent: its prompt is "
                f"{prompt.total_tokens} tokens, over the {budget}-token window"
            )
            result.stop_reason = "over_window"
            break
        purpose = "reply" if config.speaks else "task"
        points = cache_points(prompt, iteration < limit)
        calling = call_llm(
            script, prompt.messages, tools=schemas, purpose=purpose, cache_points=points
        )
        if thinking:
            thinking.watch(calling)
        answer = yield calling
        speaking = config.speaks and event
        earlier = _recent_replies(history) if speaking else ()
        if speaking:
            nudge = _nudge(script, answer, event, earlier, result)
        else:
            nudge = _call_nudge(script, config, answer, result)
        if nudge:
            answer = yield call_llm(
                script,
                SendableMessages([*prompt.messages, {"role": "user", "content": nudge}]),
                tools=schemas,
                purpose=purpose,
                cache_points=points,
            )
        if speaking and answer.ok and _announces_only(answer, result):
            why = "an announced tool use never made"
            answer = _withhold(script, character, answer, audience, why, result.intentions_withheld)
        elif (
            speaking
            and nudge
            and answer.ok
            and _stuck(script, _said_in(answer.as_message()), event, earlier)
        ):
            answer = _withhold(
                script, character, answer, audience, "a stock reply given again", result.withheld
            )
        elif speaking and answer.ok:
            answer = _unannounced(answer, result)
        result.iterations, result.last_answer, result.cuts = iteration, answer, prompt.cuts
        if not answer.ok:
            result.stop_reason = "llm_error"
            break
        result.text_tool_calls += answer.text_tool_calls
        result.malformed_tool_calls += answer.malformed_tool_calls
        speech = spoken(character, _speech(script, answer, config, event, result))
        calls, surplus = _runnable(answer.tool_calls, pattern)
        waiting = _held(character, calls, allowed, pattern, speech)
        if waiting:
            speech = ""  # said now, it would tell of a deed not done: it waits with the call
        ran = yield _run_calls(calls, allowed, pattern, context, result, waiting)
        ran.messages[len(calls) : len(calls)] = _refuse_surplus(surplus, context_type, result)
        held = bool(speech and ran.failed_writes)
        if held:
            result.held.append(speech)
            speech = ""
        # The answer joins history once its calls ran: its text only if it was said. It and
        # its calls' results are stored together or not at all (a provider refuses a call
        # without its result), in one commit.
        with transaction.atomic():
            turn.record(_recorded(answer, config, speech, held or waiting is not None))
            for message in ran.messages:
                stored = turn.record(message)
                delegated = ran.delegated.get(message.get("tool_call_id"))
                if delegated and "id" in stored:
                    archive_transcript(script, stored, delegated)
        if speech:
            said, _ = speak(character, speech, audience)
            result.said.append(said)
        if not answer.tool_calls:
            result.stop_reason = "no_tool_call"
            break
        result.stop_reason, tool_result = ran.stop, ran.last
        if (held or ran.held) and result.stop_reason in ("noop", "terminal_tool"):
            result.stop_reason = ""  # the reply is still owed
        if result.stop_reason:
            break
        if (held or ran.held) and iteration == limit == pattern.max_iterations:
            limit += 1  # a held reply is asked for again, even at the limit (once a turn)
    else:
        result.stop_reason = "max_iterations"
    result.kept = list(turn.local)
    calls = result.iterations + result.echo_retries + result.repeat_retries
    note_run(script, context_type, calls + result.intention_retries, result.stop_reason, audience)
    result.tool_result = tool_result
    return result


@defer.inlineCallbacks
def run_sub_agent(parent, task):
    """Run ``task`` in a sub-agent of the turn whose tools run with ``parent``.

    The sub-agent runs the loop in its own context (``ai.sub_agents``), with the turn's
    audience and sources, within ``sub_agent_budget`` and ``sub_agent_max_iterations``.

    Args:
        parent (ToolContext): The context of the ``delegate`` call.
        task (str): What the sub-agent is to do.

    Returns:
        Deferred: Fires with the :class:`ToolResult` the ``delegate`` call answers.
    """
    script = parent.script
    refused = claim_slot(script)
    if refused:
        return ToolResult(ok=False, content=refused)
    limit = script.get_config("sub_agent_max_iterations")
    try:
        loop = yield run_react_loop(
            script,
            parent.character,
            CONTEXT_SUB_AGENT,
            event=task_event(task),
            iteration_limit=limit,
            source_message_ids=parent.source_message_ids,
            source_messages=parent.source_messages,
            context_config=sub_agent_config(limit),
            audience=parent.audience,
            memories=[],
        )
    finally:
        release_slot(script)
    return sub_agent_outcome(task, loop, limit, parent.audience)


@defer.inlineCallbacks
def recall_for(script, character, config, event, audience, shown=()):
    """Return the long-term memories worth showing for ``event``, one line each.

    Only for a context with the semantic memories component and an event to recall by
    (its words and its speaker), and not those drawn only from the history messages
    ``shown`` (the prompt has them already). Memory that fails to answer costs the turn its
    memories, never its reply.
    """
    limit = script.get_config("memory_recall_limit")
    wanted = includes(config, COMPONENT_SEMANTIC_MEMORIES)
    if not (event and wanted and limit and script.get_config("memory_enabled")):
        return []
    query = recall_query(event)
    try:
        found = yield recall(character, query, audience, limit, shown)
    except Exception as err:
        logger.log_err(f"AI {script.label}: long-term memory did not answer: {err!r}")
        return []
    return [describe_memory(memory) for memory in found]


def _nudge(script, answer, event, earlier, result):
    """Return what to ask the model once more when ``answer`` only announces a tool use,
    echoes or repeats, else None.

    Asked once a turn: a second announcement or echo is withheld; a second repeat is said
    (the same question may deserve the same answer) unless it is a stock reply again (see
    ``_stuck``), which is withheld. A model that announces while offered
    tools natively gets them listed as text from now on, this retry included. ``earlier``
    holds the recent replies (``_recent_replies``).
    """
    if result.echo_retries or result.repeat_retries or result.intention_retries:
        return None
    if not answer.ok:
        return None
    if _announces_only(answer, result):
        result.intention_retries += 1
        prefer_text_listing(script, answer, "announced a tool use without making it")
        return INTENTION_NUDGE.format(speaker=_speaker(event))
    echoed = _echoed(_said_in(answer.as_message()), event, script.obj)
    if echoed:
        result.echo_retries += 1
        return echoed.format(speaker=_speaker(event))
    said = _said_in(answer.as_message())
    if repeats_itself(said, earlier) or _stuck(script, said, event, earlier):
        result.repeat_retries += 1
        return REPEAT_NUDGE.format(speaker=_speaker(event))
    return None


def _call_nudge(script, config, answer, result):
    """Return ``CALL_NUDGE`` when ``answer`` made no tool call in a context where only calls
    act (``needs_tool_call``), once a turn, else None. A model offered tools natively gets
    them listed as text from now on, this retry included."""
    if not config.needs_tool_call or result.intention_retries:
        return None
    if not answer.ok or answer.tool_calls:
        return None
    result.intention_retries += 1
    prefer_text_listing(script, answer, "answered without a tool call where only calls act")
    return CALL_NUDGE


def _recent_replies(history):
    """Return what the newest ``RECENT_REPLIES`` replies of ``history`` said, oldest first."""
    earlier = []
    for message in reversed(history):
        said = _said_in(message) if message["role"] == "assistant" else ""
        if said:
            earlier.insert(0, said)
            if len(earlier) == RECENT_REPLIES:
                break
    return earlier


def _stuck(script, said, event, earlier):
    """Tell whether ``said`` is one of the ``earlier`` replies again, word for word, with
    nothing of the line it answers (see ``off_topic_repeat``)."""
    names = (script.obj.key, event.get("speaker_name"))
    return off_topic_repeat(said, earlier, event.get("text"), names)


def _speaker(event):
    return event.get("speaker_name") or "the player"


def _said_in(message):
    """Return what an assistant message says: its text and its ``say`` calls' messages."""
    said = [message.get("content") or "", *_say_messages(message.get("tool_calls"))]
    return " ".join(said).strip()


def _say_messages(tool_calls):
    """Return the messages of the ``say`` calls among ``tool_calls``."""
    messages = []
    for call in tool_calls or ():
        if call["function"]["name"] == "say":
            arguments = call["function"].get("arguments") or ""
            try:
                messages.append(str(json.loads(arguments).get("message", "")))
            except (ValueError, AttributeError):
                messages.append(arguments)
    return messages


def _heard(answer):
    """Return what the room would hear of ``answer``: its ``say`` messages, else its text."""
    return " ".join(_say_messages(answer.tool_calls)) or answer.content or ""


def _announces_only(answer, result):
    """Tell whether ``answer`` only announces a tool use: no call but ``say`` made, and
    nothing said but the announcement (see ``ai.utils.intentions``), or the claim of one
    when no call but ``say`` ran this turn (``result``)."""
    if _acts(answer):
        return False
    return only_announces(_heard(answer), _claims_untrue(result))


def _acts(answer):
    """Tell whether ``answer`` calls a tool other than ``say``: what it announces, it does."""
    return any(call["function"]["name"] != "say" for call in answer.tool_calls)


def _claims_untrue(result):
    """Tell whether saying a tool's work was done would be untrue: no tool but ``say`` ran
    in the turn so far."""
    return all(name == "say" for name in result.tools_called)


def _unannounced(answer, result):
    """Return ``answer`` without the announcements of a tool use it made no call for, in its
    text and its ``say`` messages (``utils.intentions.without_announcements``; claims of one
    too when ``result`` ran none): "The ferry leaves at dawn. I'll note that down." is said
    as "The ferry leaves at dawn."."""
    if _acts(answer):
        return answer
    claims = _claims_untrue(result)
    calls = []
    for call in answer.tool_calls:
        try:
            arguments = json.loads(call["function"].get("arguments") or "{}")
            message = arguments["message"]
        except (ValueError, KeyError, TypeError):
            calls.append(call)
            continue
        arguments["message"] = without_announcements(str(message), claims)
        function = dict(call["function"], arguments=json.dumps(arguments))
        calls.append(dict(call, function=function))
    content = without_announcements(answer.content, claims) if answer.content else answer.content
    return replace(answer, content=content, tool_calls=calls)


def _withhold(script, character, answer, audience, why, withheld):
    """Keep ``answer`` from the room and return it emptied, noting what it said in
    ``withheld``.

    Nothing of it is said or recorded (said and recorded, a stock reply would teach the
    model to give it to every line). The audience sees ``NO_ANSWER_EMOTE``, so that a
    player knows no answer came.
    """
    text = _heard(answer).strip()
    logger.log_warn(f"AI {script.label}: withheld {why}: {text[:60]}")
    withheld.append(text)
    if character.location is not None:
        emote(character, NO_ANSWER_EMOTE.format(name=character.key), audience)
    return replace(answer, content="", tool_calls=[])


def _echoed(said, event, character):
    """Return the nudge for ``said`` when it only repeats the player's line back to them or
    the prompt's line of whereabouts, else None."""
    if is_echo(said, event.get("text")):
        return ECHO_NUDGE
    if is_echo(said, whereabouts(character)):
        return WHEREABOUTS_NUDGE
    return None


def _speech(script, answer, config, event, result):
    """Return the text of ``answer`` to say in the room, or "" (noting why in ``result``).

    Only contexts that talk to players speak, and only text: prose beside a ``say`` call is
    the model's preamble, and text that still looks like markup is never said.
    """
    text = (answer.content or "").strip()
    if not text:
        return ""
    if not (config.speaks and event):
        if not answer.tool_calls:
            result.unspoken.append(text)
        return ""
    if any(call["function"]["name"] == "say" for call in answer.tool_calls):
        return ""
    if looks_like_markup(text) or (result.echo_retries and _echoed(text, event, script.obj)):
        logger.log_warn(f"AI {script.label}: withheld an answer (markup or an echo): {text[:60]}")
        result.withheld.append(text)
        return ""
    return text


def _recorded(answer, config, speech, held=False):
    """Return the assistant message that joins the turn's messages, or None.

    Scratch text (of a context that does not speak, withheld, held back, or held with a
    call that waits for a builder) stays out of history; the tool calls always go in, so
    that their results have the call they answer.
    """
    if not answer.tool_calls:
        return {"role": "assistant", "content": speech} if speech else None
    shown = config.speaks and not held and not looks_like_markup(answer.content)
    content = (speech or answer.content) if shown else None
    return {"role": "assistant", "content": content or None, "tool_calls": answer.tool_calls}


@dataclass
class _Ran:
    """What running one answer's tool calls did.

    Attributes:
        messages (list): The tool results, in the order of the calls, then the follow-ups.
        stop (str): Why the loop stops here, or "".
        last (str): The last result's text, or None.
        failed_writes (list): Names of the writes that failed (``Tool.writes``).
        held (bool): Whether a ``say`` call was held back for them.
        delegated (dict): Call id -> the ``data`` of a ``delegate`` call's result, whose
            sub-agent's messages are archived once the result is recorded.
    """

    messages: list = field(default_factory=list)
    stop: str = ""
    last: str = None
    failed_writes: list = field(default_factory=list)
    held: bool = False
    delegated: dict = field(default_factory=dict)


@dataclass
class Held:
    """A dangerous call of an answer that waits for a builder, and the answer's words
    (its text and its ``say`` calls' messages), said only once the call has run."""

    call: dict
    words: list


def _runnable(calls, pattern):
    """Split an answer's tool calls into those that run and those the pattern refuses: with
    ``multi_tool_enabled`` off, only the first call (as the model wrote them) runs."""
    calls = list(calls or ())
    if pattern.multi_tool_enabled:
        return calls, []
    return calls[:1], calls[1:]


def _refuse_surplus(calls, context_type, result):
    """Return the results of ``calls``, not run because only one call an answer runs."""
    why = ONE_CALL_ONLY.format(context=context_type)
    result.calls_not_run += [call["function"]["name"] for call in calls]
    return [_not_run(call, why) for call in calls]


def _held(character, calls, allowed, pattern, speech):
    """Return the :class:`Held` call among an answer's ``calls`` (those that run) that must
    wait for a builder, or None.

    Only a dangerous call the turn reaches: a call the context does not offer ends the
    turn first. Its words are ``speech`` and what the ``say`` calls among ``calls`` would say.
    """
    if not pattern.dangerous_requires_confirm:
        return None
    for call in calls:
        name = call["function"]["name"]
        if name not in allowed:
            return None
        if get_tool(name).is_dangerous:
            said = (spoken(character, text) for text in _say_messages(calls))
            words = [text for text in said if text.strip() and not looks_like_markup(text)]
            return Held(call, [speech, *words])
    return None


@defer.inlineCallbacks
def _run_calls(calls, allowed, pattern, context, result, waiting=None):
    """Run one answer's tool calls, each waited for: its writes first, so that a reply it
    asks for (``say``) is held back when one of them failed; then the others in order.

    With ``waiting`` (a :class:`Held`, see ``_held``), that call waits for a builder
    instead (``ai.confirmation``) and the answer's ``say`` calls are not run: their words
    wait with it, unless a write failed (they may claim it): then they are held back. A
    waiting call that could not run now (``check_call``) is refused at once, as a failed
    write: the model reads why and may call again, and no builder is asked for it.

    Returns:
        Deferred: Fires with a :class:`_Ran`.
    """
    ran, results = _Ran(), {}
    refused = waiting and check_call(waiting.call, context)
    if refused:
        ran.failed_writes.append(waiting.call["function"]["name"])
        result.held.extend(word for word in waiting.words if word)
        ran.held = True
    writes_first = sorted(calls or (), key=lambda call: not _writes(call, allowed))
    for call in writes_first:
        name = call["function"]["name"]
        if ran.stop in ("tool_not_allowed", "awaiting_confirmation"):
            results[call["id"]] = _not_run(call, "the turn ended before this call")
            continue
        if name not in allowed:
            results[call["id"]] = _not_run(
                call, f"{name} is not available in {context.context_type}"
            )
            result.tools_refused.append(name)
            ran.stop = "tool_not_allowed"
            continue
        tool = get_tool(name)
        if refused and call is waiting.call:
            results[call["id"]] = {"role": "tool", "tool_call_id": call["id"], "content": refused}
            ran.last = refused
            continue
        if waiting and call is waiting.call:
            words = waiting.words
            if ran.failed_writes:
                result.held.extend(word for word in words if word)  # they may claim it
                words = []
            content = hold_call(context, call, words)
            results[call["id"]] = {"role": "tool", "tool_call_id": call["id"], "content": content}
            ran.stop = "awaiting_confirmation"
            continue
        if name == "say" and ran.failed_writes:
            results[call["id"]] = _not_run(
                call, HELD_REPLY.format(writes=", ".join(ran.failed_writes))
            )
            if not waiting:  # a held call's words were held back with it
                result.held.append(_say_messages([call])[0])
                ran.held = True
            continue
        if waiting and name == "say":
            held_name = waiting.call["function"]["name"]
            results[call["id"]] = _not_run(call, f"said once a builder allows {held_name}")
            continue
        outcome = yield defer.maybeDeferred(execute_tool, call, context)
        results[call["id"]] = {
            "role": "tool",
            "tool_call_id": call["id"],
            "content": outcome.content,
        }
        result.tools_called.append(name)
        ran.last = outcome.content
        if SUB_AGENT_KEY in outcome.data:
            ran.delegated[call["id"]] = outcome.data
        if tool.writes and not outcome.ok:
            ran.failed_writes.append(name)
        if name == "say" and outcome.ok:
            result.said.append(outcome.data.get("message", ""))
        if name == "noop":
            ran.stop = ran.stop or "noop"
        elif tool.is_terminal and pattern.terminal_ends_loop:
            ran.stop = ran.stop or "terminal_tool"
    ran.messages = [results[call["id"]] for call in calls or ()] + context.follow_ups
    context.follow_ups.clear()
    return ran


def _writes(call, allowed):
    """Tell whether ``call`` asks for one of the ``allowed`` tools that write (``Tool.writes``)."""
    name = call["function"]["name"]
    return name in allowed and get_tool(name).writes
