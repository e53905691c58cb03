"""The one gateway to language models, and the assembly of what the assistant sends.

``call_llm`` runs litellm in a worker thread (``MODEL_CALLS``) so the reactor never
blocks, bounds the wait with a timeout, retries rate limits and transient failures with
exponential backoff, and always fires with an :class:`LLMResult`: a failure comes back
as a result naming its kind, is logged, and is never swallowed or raised into a tick. A
missing or refused key, or a refused option, is told once and not tried again until the
configuration changes (``ai.model_refusals``).
"""

import copy
import json
import os
from dataclasses import dataclass, field

from evennia.utils import logger
from twisted.internet import defer, reactor
from twisted.internet.task import deferLater

from .cache_hints import cache_hints
from .config import ConfigError, ai_setting
from .litellm_loader import load_litellm, model_input_window
from .log_channel import post_to_log_channel
from .model_refusals import PERMANENT, first_report, keep_refusal, refusal, setup_of
from .offline import PROVIDER as OFFLINE_PROVIDER
from .token_calibration import needs_calibration, observe
from .tool_offering import offers_as_text, switch_to_text
from .utils.markers import SUMMARY_MARKER, TRANSCRIPT_END, TRANSCRIPT_HEADER
from .utils.message_format import (
    is_summary,
    payload_of,
    provider_copy,
    summary_text,
    tool_call_text,
)
from .utils.model_location import is_served_locally
from .utils.text_tool_calls import extract_tool_calls
from .utils.thread_pools import LazyPool
from .utils.token_counter import (
    REPLY_PRIMING_TOKENS,
    count_message_tokens,
    count_tools_tokens,
)
from .utils.tool_prompt import with_tools_described
from .utils.wording import plural

RETRYABLE = frozenset({"timeout", "rate_limit", "api_error"})
# Seconds the wait for an answer outlasts the request's own timeout (see wait_limit).
TIMEOUT_GRACE_MIN = 0.5
TIMEOUT_GRACE_MAX = 5.0
# How much of a refusal the log channel tells (the log has all of it).
CHANNEL_TEXT = 400
# The least output a task or a summary may use, whatever max_tokens limits replies to.
WORK_MAX_TOKENS = 1000
# The threads model calls run on: a pool of AI_LLM_THREADS, not Twisted's shared ten.
MODEL_CALLS = LazyPool("ai-model", lambda: ai_setting("AI_LLM_THREADS"))
# An engine inside this process (the offline engine) holds the GIL while it works: a
# second thread adds no speed and makes the reactor wait longer for its turn.
IN_PROCESS_CALLS = LazyPool("ai-model-local", lambda: 1)


@dataclass
class LLMResult:
    """The outcome of one model call, successful or not.

    Attributes:
        ok (bool): True when the model answered with a usable response.
        content (str): The text answer (may be empty when only tools were called).
        tool_calls (list): OpenAI-style tool calls, as plain dicts.
        error_kind (str): On failure: ``timeout``, ``rate_limit``, ``context_window_exceeded``,
            ``bad_request``, ``auth``, ``bad_response``, ``bad_config`` or ``api_error``.
        error (str): On failure, what went wrong.
        attempts (int): How many calls were made, retries included.
        model (str): The model called.
        usage (dict): Token usage reported for the successful call.
        text_tool_calls (int): How many of ``tool_calls`` the model wrote as text in its
            answer (recovered by the gateway, see ``ai.utils.text_tool_calls``).
        malformed_tool_calls (list): What looked like a tool call in the text but could not
            be read as one of the offered tools (removed from ``content``).
        counted_prompt_tokens (int): Our count of the prompt, for a model whose counts are
            calibrated against the provider's (0 otherwise).
        tools_offered (str): How the call offered tools: ``native`` (the API's ``tools``),
            ``text`` (listed in the prompt) or "" (none).
        offer_forced (bool): The model's ``tools_as_text`` option chose how, not the contrib
            (see ``ai.tool_offering``).
    """

    ok: bool
    content: str = ""
    tool_calls: list = field(default_factory=list)
    error_kind: str | None = None
    error: str | None = None
    attempts: int = 0
    model: str = ""
    usage: dict = field(default_factory=dict)
    text_tool_calls: int = 0
    malformed_tool_calls: list = field(default_factory=list)
    counted_prompt_tokens: int = 0
    tools_offered: str = ""
    offer_forced: bool = False

    def as_message(self):
        """Return the answer as an assistant message for the history."""
        message = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        elif message["content"] is None:
            message["content"] = ""
        return message


class BadResponse(Exception):
    """The model's response could not be read as a chat completion."""


def classify_error(err):
    """Map an exception from litellm (or the wait for it) to an error kind."""
    litellm = load_litellm()
    if isinstance(err, (defer.TimeoutError, litellm.Timeout)):
        return "timeout"
    if isinstance(err, litellm.ContextWindowExceededError):
        return "context_window_exceeded"
    if isinstance(err, litellm.RateLimitError):
        return "rate_limit"
    if isinstance(err, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
        return "auth"
    if _refused_by_the_client(err):
        return "auth"
    if isinstance(err, BadResponse):
        return "bad_response"
    if isinstance(err, (litellm.BadRequestError, litellm.NotFoundError)):
        return "bad_request"
    return "api_error"


def _refused_by_the_client(err):
    """Tell whether ``err`` comes from an OpenAI client that refused to send the request:
    no key ("Missing credentials"). litellm reports it as a server error (500), which a
    retry cannot mend; the client's own error, unlike a server's, is no ``APIError``."""
    import openai

    cause, seen = err, set()
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, openai.OpenAIError) and not isinstance(cause, openai.APIError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def resolve_model(script, model=None):
    """Return ``model``, else the script's ``llm_model``, else the ``AI_LLM_MODEL`` setting."""
    return model or script.get_config("llm_model") or ai_setting("AI_LLM_MODEL")


def call_options(script, purpose="reply"):
    """Return the litellm options of a call: server-wide settings under the assistant's own.

    Args:
        script (AssistantScript): The calling assistant.
        purpose (str): ``reply`` (an answer to players), ``task`` (the assistant's own work,
            e.g. journaling before a compaction) or ``summary``. ``max_tokens`` of
            ``llm_options`` is meant for replies: a task or a summary may use at least
            ``WORK_MAX_TOKENS`` (``compact_options`` may set a summary's own limit). A
            summary's options lie over the main model's when it is the main model.
    """
    main = {
        **ai_setting("AI_LLM_OPTIONS"),
        **script.get_config("llm_options"),
    }
    if purpose == "reply":
        return main
    # A cap still, or a small model may loop until its context is full.
    main["max_tokens"] = max(main.get("max_tokens", 0), WORK_MAX_TOKENS)
    if purpose == "task":
        return main
    summary = {
        **ai_setting("AI_COMPACT_OPTIONS"),
        **script.get_config("compact_options"),
    }
    return {**main, **summary} if script.get_config("compact_model") is None else summary


def model_kwargs(script, purpose="reply"):
    """Return a call's litellm keyword arguments (see ``call_options``), its options'
    ``timeout`` and their ``tools_as_text``.

    Raises:
        ConfigError: for a refused setting or a key variable that is not set.
    """
    options = call_options(script, purpose)
    own_timeout = options.pop("timeout", None)
    as_text = options.pop("tools_as_text", None)
    return litellm_kwargs(options), own_timeout, as_text


def litellm_kwargs(options):
    """Turn model options into litellm keyword arguments: the key read from its variable.

    Raises:
        ConfigError: when ``api_key_env`` names a variable that is not set.
    """
    kwargs = dict(options)
    variable = kwargs.pop("api_key_env", None)
    if variable:
        if not os.environ.get(variable):
            raise ConfigError(f"api_key_env names {variable}, which is not set in the environment")
        kwargs["api_key"] = os.environ[variable]
    return kwargs


def context_window(script):
    """Return the context limit: ``max_context_tokens``, else the model's input window.

    The configuration never leaves both unknown: ``max_context_tokens`` None is refused
    for a model whose window litellm does not know.
    """
    return script.get_config("max_context_tokens") or model_input_window(resolve_model(script))


def _read_tool_calls(message):
    calls = []
    for call in getattr(message, "tool_calls", None) or ():
        function = call.function
        arguments = function.arguments
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(
            {
                "id": call.id,
                "type": "function",
                "function": {"name": function.name, "arguments": arguments or "{}"},
            }
        )
    return calls


def _complete(model, messages, tools, timeout, extra, tools_as_text=False, cache=None):
    """Run one litellm completion (in a worker thread) and read it into a result.

    With ``tools_as_text`` the tools are listed in the system prompt instead of sent as
    the API's ``tools``; either way, calls written in the answer's text are recovered.
    ``cache`` holds the points and key of ``cache_hints``; the options win over the hints.
    """
    litellm = load_litellm()
    messages = provider_copy(messages)
    kwargs = dict(extra)
    if cache:
        kwargs = {**cache_hints(model, kwargs.get("api_base"), **cache), **kwargs}
    if tools and tools_as_text:
        messages = with_tools_described(messages, tools)
    elif tools:
        kwargs["tools"] = copy.deepcopy(tools)  # the tools' own schemas (Tool.schema): a copy
    response = litellm.completion(
        model=model, messages=messages, timeout=timeout, num_retries=0, **kwargs
    )
    try:
        message = response.choices[0].message
        tool_calls = _read_tool_calls(message)
        content = message.content or ""
    except (AttributeError, IndexError, TypeError) as err:
        raise BadResponse(f"unreadable response: {err}") from err
    if not isinstance(content, str):
        raise BadResponse(f"content is {type(content).__name__}, not text")
    usage = getattr(response, "usage", None)
    usage = usage.model_dump() if hasattr(usage, "model_dump") else dict(usage or {})
    result = LLMResult(ok=True, content=content, tool_calls=tool_calls, model=model, usage=usage)
    if tools and not tool_calls and content:
        recover_text_tool_calls(result, tools)
    if tools:
        result.tools_offered = "text" if tools_as_text else "native"
    if needs_calibration(model):
        result.counted_prompt_tokens = REPLY_PRIMING_TOKENS
        # The schemas themselves, whose text is kept (the copy sent is the same JSON).
        result.counted_prompt_tokens += count_tools_tokens(None if tools_as_text else tools, model)
        result.counted_prompt_tokens += sum(count_message_tokens(m, model) for m in messages)
    return result


def recover_text_tool_calls(result, tools):
    """Turn tool calls that the model wrote into its text into real ones, in place.

    Small and local models often answer with a fenced JSON block, ``<tool_call>`` tags or
    ``say(message="...")`` instead of the API's tool calls; what cannot be read as an
    offered tool is removed from the text and reported in ``malformed_tool_calls``.
    """
    found = extract_tool_calls(result.content, tools)
    result.tool_calls = found.calls
    result.text_tool_calls = len(found.calls)
    result.malformed_tool_calls = list(found.malformed)
    if found.calls or found.malformed:
        result.content = found.text


def wait_limit(timeout):
    """Return how long to wait for a call whose request times out after ``timeout`` seconds.

    The request's own timeout closes its connection; the wait lasts a little longer so that
    this happens first, and ends it anyway for a provider that ignores the timeout.
    """
    return timeout + min(TIMEOUT_GRACE_MAX, max(TIMEOUT_GRACE_MIN, timeout * 0.1))


@defer.inlineCallbacks
def call_llm(
    script,
    messages,
    model=None,
    tools=None,
    timeout=None,
    max_retries=None,
    purpose="reply",
    cache_points=None,
    **extra,
):
    """Call a model through litellm without blocking the reactor.

    Args:
        script (AssistantScript): The calling assistant (for its model, options and logging).
        messages (list): Chat messages; metadata and other stored fields are stripped.
        model (str, optional): Overrides the script's model.
        tools (list, optional): OpenAI-style tool schemas to offer.
        timeout (float, optional): Seconds per attempt; else the options' ``timeout``, else
            ``AI_LLM_LOCAL_TIMEOUT`` for a model served locally, ``AI_LLM_TIMEOUT`` for
            others (see ``default_timeout``). The request itself is cancelled when it runs
            out.
        max_retries (int, optional): Retries after a retryable failure;
            ``AI_LLM_MAX_RETRIES`` by default.
        purpose (str): ``reply``, ``task`` or ``summary``: which options apply (see
            ``call_options``).
        cache_points (list, optional): Indices of the messages that end a prefix a later
            call will repeat (see ``ai.prompt_layout.cache_points``): the provider is told,
            as far as it takes hints (``ai.cache_hints``) and ``prompt_cache_hints``
            allows. None for a prompt that is not expected to repeat.
        **extra: Further keyword arguments for ``litellm.completion`` (e.g. ``mock_response``),
            over the options.

    Returns:
        Deferred: Fires with an :class:`LLMResult`; never errbacks for a model failure.
    """
    model = resolve_model(script, model)
    try:
        kwargs, own_timeout, as_text = model_kwargs(script, purpose)
        tools_as_text, forced = offers_as_text(model, as_text)
        kwargs = {**kwargs, **extra}
        timeout = timeout or own_timeout or default_timeout(model, kwargs.get("api_base"))
    except ConfigError as err:
        return cannot_succeed(script, model, "bad_config", str(err), problem=str(err))
    setup = setup_of(model, kwargs)
    if refusal(setup):
        return cannot_succeed(script, model, *refusal(setup), problem=setup)
    retries = ai_setting("AI_LLM_MAX_RETRIES") if max_retries is None else max_retries
    payload = payload_of(messages)
    cache = None
    if cache_points is not None and script.get_config("prompt_cache_hints"):
        cache = {"points": list(cache_points), "cache_key": f"evennia-ai-{script.id}"}
    attempt = 0
    while True:
        attempt += 1
        pool = IN_PROCESS_CALLS if model.split("/", 1)[0] == OFFLINE_PROVIDER else MODEL_CALLS
        waiting = pool.run(_complete, model, payload, tools, timeout, kwargs, tools_as_text, cache)
        waiting.addTimeout(wait_limit(timeout), reactor)
        try:
            result = yield waiting
        except Exception as err:
            kind = classify_error(err)
            detail = f"{type(err).__name__}: {err}".strip()
            if kind == "timeout":
                detail = f"no answer within {timeout:g}s"
        else:
            result.attempts, result.offer_forced = attempt, forced
            _calibrate(script, result)
            if result.text_tool_calls:
                prefer_text_listing(script, result, "wrote its tool calls as text")
            for piece in result.malformed_tool_calls:
                logger.log_warn(f"AI {script.label}: ignored a tool call in the text: {piece}")
            return result
        if kind in PERMANENT:
            keep_refusal(setup, kind, detail)
            return cannot_succeed(script, model, kind, detail, problem=setup, attempts=attempt)
        if kind not in RETRYABLE or attempt > retries:
            logger.log_err(
                f"AI {script.label}: model call to {model} failed ({kind}) after "
                f"{plural(attempt, 'attempt')}: {detail}"
            )
            return LLMResult(ok=False, error_kind=kind, error=detail, attempts=attempt, model=model)
        delay = ai_setting("AI_LLM_RETRY_DELAY") * 2 ** (attempt - 1)
        logger.log_warn(
            f"AI {script.label}: model call to {model} failed ({kind}), retry {attempt} of "
            f"{retries} in {delay:g}s: {detail}"
        )
        yield deferLater(reactor, delay, lambda: None)


def cannot_succeed(script, model, kind, error, problem, attempts=0):
    """Return the failed result of a call that cannot succeed until the configuration
    changes (see ``ai.model_refusals``), telling the log and the builders once.

    Args:
        problem: What the failure is kept by: a model setup, or a refused option's text.
    """
    if first_report(script.id, problem):
        if kind == "bad_config":
            what = f"calls to {model} cannot be made: {error}."
        else:
            what = (
                f"{model} refused its key, or it has none: {error}. No call is made with "
                "this key again until it or the model's options change, or the server "
                "reloads (a key variable is only read by a new server process)."
            )
        logger.log_err(f"AI {script.label}: {what} (said once)")
        short = what if len(what) <= CHANNEL_TEXT else what[: CHANNEL_TEXT - 1] + "…"
        post_to_log_channel(script, f"{script.label}: {short}")
    return LLMResult(ok=False, error_kind=kind, error=error, attempts=attempts, model=model)


def model_problem(script):
    """Return why calls of the assistant's models cannot succeed until its configuration
    changes (a key missing or refused, an option refused), or None."""
    for purpose, model in (("reply", resolve_model(script)), ("summary", summary_model(script))):
        try:
            kwargs = model_kwargs(script, purpose)[0]
        except ConfigError as err:
            return f"calls to {model} cannot be made: {err}"
        refused = refusal(setup_of(model, kwargs))
        if refused:
            return f"{model} refused its key, or it has none: {refused[1]}"
    return None


def default_timeout(model, api_base=None):
    """Return the timeout of a call whose options set none: ``AI_LLM_LOCAL_TIMEOUT`` for a
    model served locally (see ``ai.utils.model_location``), else ``AI_LLM_TIMEOUT``."""
    local = is_served_locally(model, api_base)
    return ai_setting("AI_LLM_LOCAL_TIMEOUT" if local else "AI_LLM_TIMEOUT")


def prefer_text_listing(script, result, reason):
    """List the tools of ``result``'s model as text from now on, when they went natively
    and its options leave the choice to the contrib (never fails a call).

    Returns:
        bool: True when this switched the model.
    """
    if result.tools_offered != "native" or result.offer_forced:
        return False
    try:
        return switch_to_text(result.model, reason)
    except Exception:
        logger.log_trace(
            f"AI {script.label}: could not remember how to offer tools to {result.model}"
        )
        return False


def _calibrate(script, result):
    """Let the provider's reported prompt tokens calibrate our counts (never fails a call)."""
    try:
        observe(result.model, result.counted_prompt_tokens, result.usage.get("prompt_tokens"))
    except Exception:
        logger.log_trace(f"AI {script.label}: token calibration of {result.model} failed")


DEFAULT_COMPACTION_PROMPT = """You are condensing the older part of a conversation between \
players of a game and you, their assistant, so that you can go on without it. Several \
players share you: say who said or did what, by the name the transcript gives them.

Keep every fact about people, creatures, objects, places and events, with its exact names \
and numbers; decisions, promises, deals and debts, with their terms and deadlines; any \
constraint, rule, secret or password someone relied on; the current state of things and \
tasks in progress or still open, with who owns them; what is planned next; anything else \
you would need to carry on as if you still had the whole conversation; and anything from \
an earlier [CONTEXT SUMMARY] that still matters.

Tell only what the transcript shows. Credit words only to the one who said them; name only \
people who appear in it; say you did something (noted it, gave it, looked at it) only when \
one of your tool calls in it did. Write it as a record of the past: a request is told as who \
asked for what and whether it was done, never as an order. Leave out greetings, small talk, \
your own replies, how tools were called, and anything said twice. Write at most \
{max_words} words."""
# Said after the transcript, where a small model heeds it: given the instructions before
# the transcript alone, Qwen2.5-Coder-1.5B copied the transcript out instead of condensing
# it (754 tokens for 780); asked again after it, it listed the facts (about 120 words). Its
# shape is a placeholder: an example with names and facts was copied into summaries as facts.
SUMMARY_REQUEST = """List every fact worth keeping from the conversation above, one short \
line each, as "- <speaker> said <what they said>." with the speaker's name as the \
conversation gives it. Keep exact names, numbers and constraints; add nothing the \
conversation does not say; skip greetings and small talk; do not copy the conversation. At \
most {max_words} words."""
SUMMARY_MAX_WORDS = 400


def format_message_for_compaction(message):
    """Return one history message as a transcript entry that keeps who said what.

    An entry's first line starts at the margin with what the message is (a player's
    quoted words, ``[you said]``, ``[tool result]``, or ``[CONTEXT SUMMARY]`` for a summary
    the contrib wrote); every further line of it is indented, so nothing inside a message
    can start an entry of its own.
    """
    role, content = message["role"], (message.get("content") or "").strip()
    if role == "assistant" and message.get("tool_calls"):
        calls = "; ".join(tool_call_text(call) for call in message["tool_calls"])
        entry = f"[you used tools] {calls}" + (f" and said: {content}" if content else "")
    elif role == "assistant":
        entry = f"[you said] {content}"
    elif role == "tool":
        entry = f"[tool result] {content}"
    elif is_summary(message):
        entry = f"{SUMMARY_MARKER}\n{summary_text(content)}"
    elif role == "system":
        entry = f"[note] {content}"
    else:
        entry = content
    head, *rest = entry.splitlines() or [""]
    return "\n".join([head, *(f"  {line.strip()}" for line in rest if line.strip())])


def format_messages_for_compaction(messages):
    """Return the transcript that the summary call receives, ending with its end marker."""
    entries = [format_message_for_compaction(message) for message in messages]
    return "\n".join([TRANSCRIPT_HEADER, *(entry for entry in entries if entry), TRANSCRIPT_END])


def generate_context_summary(script, messages_to_compact, model=None, instructions=None):
    """Summarize ``messages_to_compact`` in a separate call that sends only them.

    Uses ``compact_model`` (else the main model) and ``compact_prompt`` (else
    ``DEFAULT_COMPACTION_PROMPT``, with ``SUMMARY_REQUEST`` after the transcript).

    Args:
        instructions (tuple, optional): ``(prompt, request after the transcript)`` in place
            of :func:`summary_instructions`.

    Returns:
        Deferred: Fires with the :class:`LLMResult`; its ``content`` is the summary.
    """
    prompt, request = instructions or summary_instructions(script)
    transcript = format_messages_for_compaction(messages_to_compact)
    payload = [
        {"role": "system", "content": prompt},
        {"role": "user", "content": f"{transcript}\n\n{request}" if request else transcript},
    ]
    return call_llm(script, payload, model=model or summary_model(script), purpose="summary")


def summary_instructions(script):
    """Return the summary call's ``(prompt, request after the transcript)``."""
    return compaction_prompt(script), summary_request(script)


def compaction_prompt(script):
    """Return the summary call's instructions: ``compact_prompt``, else the default."""
    return script.get_config("compact_prompt") or DEFAULT_COMPACTION_PROMPT.format(
        max_words=SUMMARY_MAX_WORDS
    )


def summary_request(script):
    """Return what follows the transcript: ``SUMMARY_REQUEST``, or "" with a ``compact_prompt``."""
    if script.get_config("compact_prompt"):
        return ""
    return SUMMARY_REQUEST.format(max_words=SUMMARY_MAX_WORDS)


def summary_model(script):
    """Return the model that writes summaries: ``compact_model``, else the main model."""
    return script.get_config("compact_model") or resolve_model(script)
