"""Reflection: the assistant rereads what it journaled since it last reflected and writes
insights that cite it (seed 004's ``reflection`` and ``reflection_cont`` contexts).

When the summed importance of the entries no reflection has covered yet reaches
``reflection_threshold`` (Generative Agents' trigger; see docs/context.md), the next idle
awake tick, or the first tick of a sleep, reflects (``reflect_if_due``): one run of the
``reflection`` context per audience, shown only the entries kept for that audience
(what was whispered is reflected on apart, and its insights stay private), and, when the
run ends at its limit with a tool result unread, one run of ``reflection_cont`` on it.
Neither records into the conversation history nor speaks; what a run writes as text
instead of a call is read as insights (``write_stated_insights``), and a run whose text
recorded nothing is asked once more, shown that text. The entries a run was
shown are then covered, whatever it wrote; a run that failed (a model error) covers nothing,
and reflection waits a number of ticks that doubles with each failure in a row.
"""

from django.utils import timezone
from evennia.utils import logger
from twisted.internet import defer

from .helpers.insights import (
    insights_after,
    latest_entry_id,
    mark_reflected,
    pending_entries,
    pending_importance,
    write_stated_insights,
)
from .llm_interaction import context_window, resolve_model
from .prompt_contexts import CONTEXT_REFLECTION, CONTEXT_REFLECTION_CONT
from .tool_execution import run_react_loop
from .utils.markers import REFLECTION_HEADER
from .utils.message_format import one_line, quoted
from .utils.token_counter import count_tokens
from .utils.wording import plural

# Entries read to choose from, and runs (audiences) one reflection makes at most; the rest
# wait for the next.
PENDING_READ = 200
RUNS_AT_MOST = 3
# Entries one run is shown at most, the characters of each, and the share of the context
# window their listing may take.
SHOWN_AT_MOST = 20
ENTRY_CHARS = 300
LISTING_SHARE = 1 / 3
# Ticks reflection waits after a failure, doubled for each failure in a row, up to the cap.
BACKOFF_TICKS = 2
MAX_BACKOFF_TICKS = 64
FAILED = ("llm_error", "over_window")

LISTING_TASK = (
    "What do they tell you together? For each insight, call add_journal_entry with the "
    "insight in your own words and, in cites, the ids of the entries it comes from. Call "
    "noop when you have nothing more to add."
)
# Added to the listing when a run answered in text that recorded nothing, with the text
# (cut to ``QUOTED_ANSWER_CHARS``): Qwen2.5-Coder-1.5B answered whole reflections in prose
# whose lines were no insight ("There are several patterns that keep coming back").
RECORD_AGAIN = (
    "Your answer below recorded nothing: only a tool call writes in your journal. For each "
    "insight in it, call add_journal_entry with the insight and, in cites, the ids of the "
    "entries it comes from; call noop if it holds none.\nYour answer: {answer}"
)
QUOTED_ANSWER_CHARS = 1200


@defer.inlineCallbacks
def reflect_if_due(script, character, config):
    """Reflect when the entries no reflection covered add up to ``reflection_threshold``.

    Costs no model call when nothing is due, and no query once the importance waiting is
    known (see ``helpers.idle_checks``).

    Returns:
        Deferred: Fires with None when no reflection ran (off, not due, or waiting after a
        failure), else with :func:`reflect`'s result.
    """
    threshold = config["reflection_threshold"]
    if not threshold or pending_importance(character) < threshold:
        return None
    if backing_off(script):
        return None
    result = yield reflect(script, character)
    return result


def backing_off(script):
    """Tell whether reflection still waits after a failure (and count this tick)."""
    backoff = dict(script.db.reflection_backoff or {})
    if not backoff.get("wait"):
        return False
    backoff["wait"] -= 1
    script.db.reflection_backoff = backoff
    return True


@defer.inlineCallbacks
def reflect(script, character):
    """Reflect on the entries no reflection covered yet, one run per audience.

    Returns:
        Deferred: Fires with ``status`` (``reflected``, or ``reflection_failed`` when a
        model call failed), ``covered`` (entry ids), ``insights`` (entry ids),
        ``calls`` and ``contexts`` (the context of each run), and ``error``.
    """
    start = latest_entry_id(character)
    groups = {}
    for row in pending_entries(character, PENDING_READ):
        groups.setdefault(tuple(row.audience or ()), []).append(row)
    ranked = sorted(groups.items(), key=lambda item: -sum(importance(row) for row in item[1]))
    covered, contexts, calls, error = [], [], 0, None
    for audience, rows in ranked[:RUNS_AT_MOST]:
        shown = fitted(script, rows)
        run = yield reflect_on(script, character, shown, list(audience) or None)
        calls += run["calls"]
        contexts += run["contexts"]
        if run["covered"]:
            mark_reflected(shown)
            covered += [row.entry_id for row in shown]
        error = error or run["error"]
        if run["error"]:
            break
    insights = insights_after(character, start)
    record = {
        "status": "reflection_failed" if error else "reflected",
        "at": timezone.now().isoformat(),
        "covered": covered,
        "insights": insights,
        "calls": calls,
        "contexts": contexts,
        "error": error,
    }
    script.db.last_reflection = record
    note_outcome(script, error)
    return dict(record)


@defer.inlineCallbacks
def reflect_on(script, character, rows, audience):
    """Run ``reflection`` on ``rows`` (one audience's entries), once more when it answered
    in text that recorded nothing (shown that text, asked for the calls), then
    ``reflection_cont`` on a tool result the last run left unread.

    Returns:
        Deferred: Fires with ``covered`` (whether the entries count as reflected on: the
        ``reflection`` run answered), ``calls``, ``contexts`` and ``error``.
    """
    event = {
        "type": "reflection",
        "instruction": listing(rows),
        "offered": [row.entry_id for row in rows],  # review_journal adds what it shows
    }
    start = latest_entry_id(character)
    outcome = {"covered": True, "calls": 0, "contexts": []}
    loop = yield run_one(script, character, CONTEXT_REFLECTION, event, audience, outcome)
    if loop.stop_reason in FAILED:
        return dict(outcome, covered=False, error=failure(loop))
    if (
        loop.stop_reason == "no_tool_call"
        and loop.unspoken
        and not insights_after(character, start)
    ):
        told = one_line(loop.unspoken[-1])[:QUOTED_ANSWER_CHARS]
        again = RECORD_AGAIN.format(answer=quoted(told))
        asked = dict(event, instruction=f"{event['instruction']}\n{again}")
        loop = yield run_one(script, character, CONTEXT_REFLECTION, asked, audience, outcome)
        if loop.stop_reason in FAILED:
            return dict(outcome, error=failure(loop))
    if loop.stop_reason != "max_iterations" or not loop.tool_result:
        return dict(outcome, error=None)
    cont = yield run_one(
        script, character, CONTEXT_REFLECTION_CONT, event, audience, outcome, loop.tool_result
    )
    return dict(outcome, error=failure(cont) if cont.stop_reason in FAILED else None)


@defer.inlineCallbacks
def run_one(script, character, context_type, event, audience, outcome, tool_result=None):
    """Run ``context_type`` on ``event``, count it in ``outcome`` (``calls``, ``contexts``)
    and, unless it failed, write the insights its text states; fire with the loop."""
    loop = yield run_react_loop(
        script, character, context_type, event=event, audience=audience, tool_result=tool_result
    )
    outcome["calls"] += loop.iterations
    outcome["contexts"].append(context_type)
    if loop.stop_reason not in FAILED:
        write_stated_insights(character, loop.unspoken, event["offered"], audience)
    return loop


def failure(loop):
    """Return what made a run fail, for the record and the log."""
    answer = loop.last_answer
    if loop.stop_reason == "llm_error" and answer is not None:
        return f"{answer.error_kind}: {answer.error}"
    return f"{loop.context_type}: {loop.stop_reason}"


def note_outcome(script, error):
    """Clear the backoff after a reflection that worked; lengthen it after a failure."""
    if not error:
        script.attributes.remove("reflection_backoff")
        return
    failures = (script.db.reflection_backoff or {}).get("failures", 0) + 1
    wait = min(BACKOFF_TICKS * 2 ** (failures - 1), MAX_BACKOFF_TICKS)
    script.db.reflection_backoff = {"failures": failures, "wait": wait}
    logger.log_warn(
        f"AI {script.label}: reflection failed ({error}); next try in "
        f"{plural(wait, 'tick')} at the soonest"
    )


def importance(row):
    """Return an entry's importance as the trigger counts it: its score, else the writer's."""
    return row.score if row.score is not None else row.importance


def fitted(script, rows):
    """Return the oldest of ``rows`` whose listing fits ``LISTING_SHARE`` of the context
    window (``SHOWN_AT_MOST`` at most, one at least).

    Each entry's line is counted once (not the growing listing again for every entry),
    then the listing of those that fitted once, in case joining the lines counts more.
    """
    budget = context_window(script) * LISTING_SHARE
    model = resolve_model(script)
    shown = rows[:1]
    used = count_tokens(listing(shown), model)
    for row in rows[1:SHOWN_AT_MOST]:
        used += count_tokens(f"\n{entry_line(row)}", model)
        if used > budget:
            break
        shown.append(row)
    while len(shown) > 1 and count_tokens(listing(shown), model) > budget:
        shown.pop()
    return shown


def listing(rows):
    """Return the pending event of a reflection: the entries, each quoted, then the task."""
    return "\n".join([REFLECTION_HEADER, *(entry_line(row) for row in rows), LISTING_TASK])


def entry_line(row):
    """Return the line of a reflection's listing that shows the journal entry ``row``."""
    text = one_line(row.content)
    if len(text) > ENTRY_CHARS:
        text = text[:ENTRY_CHARS] + " [...]"
    return f"[{row.entry_id}] (importance {row.importance}) {quoted(text)}"
