"""Tick cost: what one awake tick costs the reactor thread as history grows.

An assistant on the offline engine with 100, 2,000, 10,000 and 100,000 messages of history
(compaction off, the default 100,000-token window, so the longest histories send only
their newest messages) hears one player's line per tick. For each tick the reactor
thread's CPU time is measured (``time.thread_time()`` in that thread): the model call runs
in a worker thread and does not count, so this is everything else a tick does (reading
history, assembling the prompt, appending, checking the context, running the tools).
Reported per size: the median and the 90th percentile over ``TICKS`` ticks after
``WARM_UP`` untimed ones, and the messages the calls sent.

Beside it, at 2,000 messages, ticks without a player's line (``idle_ticks``):

- ``idle``: an assistant without goals with nothing due (its journal below
  ``reflection_threshold``), which must cost what an idle tick cost before reflection;
- ``reflection``: the tick that reflects, its journal filled past ``reflection_threshold``
  with entries that share their speakers, so the offline engine writes insights; the
  model calls run on a worker thread as always, so what counts is the rest (reading the
  entries, the listing, assembling each call's prompt, writing the insights);
- ``backlog`` (``reflection_backlog`` in the JSON): the same tick with ``BACKLOG``
  unreflected entries written first (not timed), a journal that went long without a
  reflection (each covers 20 at most);
- ``autonomous``: the tick that works on an active goal's step (the offline engine closes
  it: ``complete_goal``, then ``noop``), a fresh step given untimed before each tick.

And ``summarized``: the conversation tick at 2,000 messages whose history opens with the
summary a compaction leaves (players' statements kept in their own words, which each call
compares with what was said after them: ``ai.replaced_statements``), the state of every
assistant after its first compaction.

And ``parts``: two checks of a turn at 2,000 messages, each done both ways in the same
run (the token pressure of its signals: the frame rendered again, or the tick's measure
with history read again; the goals component of an assistant without goals: the goal tree
read, or the kept answer), so that their ratio holds on a loaded machine. And
``bookkeeping``: a player's line queued and taken and noted in working memory, a model
run noted for ``aihistory``, a message appended, an answer stored with its tool call's
result, and a working-memory row read in plain SQL. And ``journal``: the conversation tick
at 2,000 messages under SQLite's rollback journal (Evennia's default) and under WAL, in
turns (the benchmarks' database runs Evennia's ``SQLITE3_PRAGMAS``, as a server's does).

Everything runs inside Twisted's real reactor, as in the server. Prints JSON; always exits
0 (a report, not a test). Run from the repository root: ``make bench``; ``python
bench/tick_cost.py idle`` measures one part (``conversation``, ``summarized``, ``idle``,
``reflection``, ``backlog``, ``autonomous``, ``parts``, ``bookkeeping``, ``journal``).
"""

import json
import statistics
import sys
import time

from bench_env import median_cpu_ms, new_assistant, set_journal_mode, setup_evennia
from compaction import MODEL, fill_history, history_rows
from play import run_in_reactor
from twisted.internet import defer
from twisted.python.failure import Failure

SIZES = (100, 2000, 10000, 100000)
TICKS = 20
WARM_UP = 3
TARGET_MS_AT_2000 = 10
TARGET_SCALING = 1.5
IDLE_HISTORY = 2000
# Timed runs of each check that ``parts`` compares.
PART_REPEATS = 200
# The journal modes ``journal`` compares, and how many times each is measured in turn.
JOURNAL_MODES = ("delete", "wal")
JOURNAL_ROUNDS = 3
# What the quality gate kept of players' words in the summary of ``summarized``.
KEPT_STATEMENTS = (
    'Alice: "The lantern oil costs 4 copper a flask."',
    'Alice: "My brother Tom works at the north gate."',
    'Bram: "I live in the mill by the river."',
    'Bram: "The guards change at midnight."',
    'Alice: "I promised Bram to bring 12 iron ingots on Saturday."',
    'Cora: "The gate password is swordfish."',
    'Cora: "My falcon is called Wren."',
    'Bram: "I owe Cora 30 silver."',
)
# Speakers of the entries a reflection tick rereads: each names several, so insights join them.
SPEAKERS = ("Player1", "Player2", "Player3")
# Unreflected entries written before the ``backlog`` part's reflections.
BACKLOG = 3000


def prepared_assistant(size, summarized=False):
    """Return an assistant with ``size`` messages of history and a player beside it; when
    ``summarized``, its first message is a compaction's summary (``summary_row``)."""
    from evennia.utils import create

    character = new_assistant(key=f"Sage{size}")
    script = character.assistant_script
    script._stop_task()
    rows = history_rows(size)
    fill_history(script, [summary_row(), *rows[1:]] if summarized else rows)
    script.set_config("compact_enabled", False)
    player = create.create_object(
        "evennia.objects.objects.DefaultCharacter", key="Alice", location=character.location
    )
    return script, player


def summary_row():
    """Return the summary a compaction leaves, as a ``(message, token_count)`` pair."""
    from ai.utils.markers import SAID_HEADER, SUMMARY_MARKER
    from ai.utils.token_counter import count_message_tokens

    kept = [f"- {statement}" for statement in KEPT_STATEMENTS]
    text = f"{SUMMARY_MARKER} Alice keeps asking about the lantern by the north gate."
    message = {"role": "system", "content": "\n".join([text, SAID_HEADER, *kept])}
    return message, count_message_tokens(message, MODEL)


def event(player, index):
    """Return the ``index``-th line the player says to the assistant."""
    text = f"Sage, tick {index}: did the lantern by the north gate flicker again?"
    return {"type": "speech", "speaker": player.dbref, "speaker_name": player.key, "text": text}


@defer.inlineCallbacks
def measure(size, summarized=False):
    """Return the reactor CPU milliseconds of ``TICKS`` awake ticks at ``size`` messages
    (``summarized``: see ``prepared_assistant``)."""
    from ai import llm_interaction

    script, player = prepared_assistant(size, summarized)
    sent = []
    original = llm_interaction._complete

    def counting(model, messages, *args, **kwargs):
        sent.append(len(messages))
        return original(model, messages, *args, **kwargs)

    llm_interaction._complete = counting
    try:
        times = yield heard_ticks(script, player)
    finally:
        llm_interaction._complete = original
    return {"history": size, **summary(times), "messages_sent_median": statistics.median(sent)}


def summary(times):
    """Return the median and 90th percentile of the timed ``times`` (after the warm-up)."""
    measured = sorted(times[WARM_UP:])
    return {
        "tick_ms_median": round(statistics.median(measured), 1),
        "tick_ms_p90": round(measured[int(len(measured) * 0.9) - 1], 1),
    }


@defer.inlineCallbacks
def timed_tick(script):
    """Run one tick; return its result and the reactor CPU milliseconds it took."""
    started = time.thread_time()
    result = yield script.at_repeat()
    return result, (time.thread_time() - started) * 1000


@defer.inlineCallbacks
def heard_ticks(script, player, first=0):
    """Run ``WARM_UP + TICKS`` awake ticks, each on the player's next line (numbered from
    ``first``); return each tick's reactor CPU milliseconds."""
    times = []
    for index in range(first, first + WARM_UP + TICKS):
        script.queue_event(event(player, index))
        _, took = yield timed_tick(script)
        times.append(took)
    return times


@defer.inlineCallbacks
def measure_idle():
    """Return the reactor CPU of an idle awake tick: no event, no goal, nothing due."""
    from ai.helpers.journal import add_entry

    script, _ = prepared_assistant(IDLE_HISTORY)
    script.set_config("sleep_after_idle_ticks", 0)  # stays awake: every tick is idle
    for index, speaker in enumerate(SPEAKERS):  # a journal below the threshold
        add_entry(script.obj, f"{speaker} said: I keep crate {index} by the wall.", "conversation")
    times, statuses = [], set()
    for _ in range(WARM_UP + TICKS):
        result, took = yield timed_tick(script)
        times.append(took)
        statuses.add(result.get("status"))
    return dict(summary(times), history=IDLE_HISTORY, statuses=sorted(statuses))


def fill_journal(script, round_):
    """Journal entries of importance 8 until a reflection is due (no tick, not timed)."""
    from ai.helpers.insights import pending_importance
    from ai.helpers.journal import add_entry

    threshold, index = script.get_config("reflection_threshold"), 0
    while pending_importance(script.obj) < threshold:
        speaker = SPEAKERS[index % len(SPEAKERS)]
        text = f"{speaker} said: I promised to bring {round_ * 100 + index} crates by day {index}."
        add_entry(script.obj, text, "conversation", importance=8)
        index += 1


def write_backlog(script, count):
    """Journal ``count`` entries of importance 8 that no reflection covers (not timed)."""
    from ai.helpers.journal import add_entry

    for index in range(count):
        speaker = SPEAKERS[index % len(SPEAKERS)]
        text = f"{speaker} said: cart {index} left the mill at dawn with {index % 40} sacks."
        add_entry(script.obj, text, "conversation", importance=8)


@defer.inlineCallbacks
def measure_reflection(backlog=0):
    """Return the reactor CPU of a tick that reflects (model calls on their worker thread),
    with ``backlog`` unreflected entries written first."""
    script, _ = prepared_assistant(IDLE_HISTORY)
    script.set_config("sleep_after_idle_ticks", 0)
    write_backlog(script, backlog)
    times, entries, insights = [], [], []
    for round_ in range(WARM_UP + TICKS):
        fill_journal(script, round_)
        result, took = yield timed_tick(script)
        if result.get("status") != "reflected":
            raise RuntimeError(f"the tick did not reflect: {result}")
        times.append(took)
        entries.append(len(result["covered"]))
        insights.append(len(result["insights"]))
    return dict(
        summary(times),
        history=IDLE_HISTORY,
        threshold=script.get_config("reflection_threshold"),
        **({"backlog": backlog} if backlog else {}),
        entries_reread_median=statistics.median(entries),
        insights_median=statistics.median(insights),
        calls_per_reflection=result["calls"],
    )


@defer.inlineCallbacks
def measure_autonomous():
    """Return the reactor CPU of an autonomous tick: an active step, no event, the offline
    engine closing the step (``complete_goal``, then ``noop``; model calls on their worker
    thread). Each timed tick gets a fresh step, given untimed."""
    from ai.helpers.goals import GoalLimits, add_goal

    script, _ = prepared_assistant(IDLE_HISTORY)
    script.set_config("sleep_after_idle_ticks", 0)
    script.set_config("autonomous_interval", 1)
    limits = GoalLimits.of(script)
    parent = add_goal(script.obj, "Keep the hall in order", "builder", limits)
    # A step never worked on, so that closing the others never closes the goal.
    add_goal(script.obj, "Mend the door", "builder", limits, parent=parent, priority=1)
    times = []
    for index in range(WARM_UP + TICKS):
        add_goal(script.obj, f"Sweep corner {index}", "builder", limits, parent=parent, priority=9)
        result, took = yield timed_tick(script)
        if result.get("status") != "autonomous":
            raise RuntimeError(f"the tick did not work on a goal: {result}")
        times.append(took)
    return dict(summary(times), history=IDLE_HISTORY, calls_per_turn=result["loop"].iterations)


def measure_parts():
    """Return what a turn at 2,000 messages pays for two checks, done each way in one run:
    its signals' token pressure (the frame rendered again, or the tick's measure with
    history read again) and the goals component without a goal (the tree, or the kept
    answer); and, once per call of a summarized history, its kept statements checked
    against what was said after them (``summarized``), and what a call sends of the held
    history made of it, with a summary first and without one."""
    from ai.context_usage import measure_context, with_history_now
    from ai.helpers.goals import goal_tree, has_active_goals
    from ai.replaced_statements import without_replaced
    from ai.utils.message_format import sendable_messages

    script, _ = prepared_assistant(IDLE_HISTORY)
    character = script.obj
    measured = measure_context(script, character)
    history = list(script.conversation_history)
    summarized = list(prepared_assistant(IDLE_HISTORY, summarized=True)[0].conversation_history)
    checks = {
        "kept_statements_checked_ms": lambda _: without_replaced(summarized),
        "history_sent_ms": lambda _: sendable_messages(without_replaced(history)),
        "summarized_history_sent_ms": lambda _: sendable_messages(without_replaced(summarized)),
        "pressure_frame_rendered_again_ms": lambda _: measure_context(script, character),
        "pressure_history_read_again_ms": lambda _: with_history_now(script, measured),
        "goals_tree_read_ms": lambda _: goal_tree(character, None),
        "goals_kept_answer_ms": lambda _: has_active_goals(character),
    }
    timed = {name: median_cpu_ms(check, PART_REPEATS, warm_up=5) for name, check in checks.items()}
    return {"history": IDLE_HISTORY, **timed}


@defer.inlineCallbacks
def measure_journal_modes():
    """Return the conversation tick at ``IDLE_HISTORY`` messages under SQLite's rollback
    journal (``delete``, Evennia's default) and under ``wal``, one assistant, the modes in
    turns ``JOURNAL_ROUNDS`` times, so that their ratio holds on a loaded machine."""
    script, player = prepared_assistant(IDLE_HISTORY)
    times, first = {}, 0
    for _ in range(JOURNAL_ROUNDS):
        for mode in JOURNAL_MODES:
            if set_journal_mode(mode) != mode:
                return {"error": f"SQLite would not switch to journal_mode={mode}"}
            taken = yield heard_ticks(script, player, first)
            first += len(taken)
            times.setdefault(mode, []).append(summary(taken)["tick_ms_median"])
    set_journal_mode(JOURNAL_MODES[0])
    medians = {mode: statistics.median(runs) for mode, runs in times.items()}
    return {
        "history": IDLE_HISTORY,
        "tick_ms_median_per_round": times,
        "wal_over_delete": round(medians["wal"] / medians["delete"], 2),
    }


def measure_bookkeeping():
    """Return what a tick's bookkeeping writes cost, in the reactor thread: a player's line
    queued and taken (``queue_event``, ``pop_event``), noted in working memory
    (``note_conversation``), and a model run noted for ``aihistory`` (``note_run``), with
    20 runs kept already; a message appended on its own, and an answer with a tool call
    stored with its result in one transaction, as a turn stores them; the conversation's
    working-memory row read (``raw_rows.select_rows``)."""
    from django.db import transaction

    from ai.helpers.call_log import note_run
    from ai.helpers.working_memory import note_conversation
    from ai.models import WorkingMemory
    from ai.utils.raw_rows import select_rows

    script, player = prepared_assistant(100)
    line = event(player, 0)
    note_conversation(script.obj, line)
    for _ in range(20):
        note_run(script, "tick_event", 2, "terminal_tool")
    call = {"id": "call_1", "type": "function", "function": {"name": "say", "arguments": "{}"}}
    answer = {"role": "assistant", "content": "", "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": 'You say, "Yes."'}

    def store_turn(_):
        with transaction.atomic():
            script.append_message(answer)
            script.append_message(result)

    names = ["id", "speaker_name", "turns", "started_at", "last_active", "recent"]
    where = "db_object_id = %s AND speaker = %s"
    return {
        "message_appended_ms": median_cpu_ms(
            lambda index: script.append_message({"role": "user", "content": f"line {index}"}),
            PART_REPEATS,
            warm_up=5,
        ),
        "answer_and_result_stored_ms": median_cpu_ms(store_turn, PART_REPEATS, warm_up=5),
        "working_memory_read_ms": median_cpu_ms(
            lambda _: select_rows(WorkingMemory, names, where, [script.obj.id, player.dbref]),
            PART_REPEATS,
            warm_up=5,
        ),
        "event_queued_and_taken_ms": median_cpu_ms(
            lambda _: (script.queue_event(line), script.pop_event()), PART_REPEATS, warm_up=5
        ),
        "conversation_noted_ms": median_cpu_ms(
            lambda _: note_conversation(script.obj, line), PART_REPEATS, warm_up=5
        ),
        "model_run_noted_ms": median_cpu_ms(
            lambda _: note_run(script, "tick_event", 2, "terminal_tool"), PART_REPEATS, warm_up=5
        ),
    }


@defer.inlineCallbacks
def measure_all(parts):
    """Return ``{part: its figures}`` for the ``parts`` asked for."""
    report = {}
    if "conversation" in parts:
        report["conversation"] = []
        for size in SIZES:
            report["conversation"].append((yield measure(size)))
    if "summarized" in parts:
        report["summarized"] = yield measure(IDLE_HISTORY, summarized=True)
    if "idle" in parts:
        report["idle"] = yield measure_idle()
    if "reflection" in parts:
        report["reflection"] = yield measure_reflection()
    if "backlog" in parts:
        report["reflection_backlog"] = yield measure_reflection(BACKLOG)
    if "autonomous" in parts:
        report["autonomous"] = yield measure_autonomous()
    if "parts" in parts:
        report["parts"] = measure_parts()
    if "bookkeeping" in parts:
        report["bookkeeping"] = measure_bookkeeping()
    if "journal" in parts:
        report["journal"] = yield measure_journal_modes()
    return report


def main(parts):
    setup_evennia()
    measured = run_in_reactor(measure_all, parts)
    if isinstance(measured, Failure):
        measured.raiseException()
    report = {"unit": "milliseconds of reactor-thread CPU per tick, model calls excluded"}
    report["model"] = MODEL
    if "conversation" in measured:
        rows = measured["conversation"]
        at = {row["history"]: row["tick_ms_median"] for row in rows}
        report["ticks"] = rows
        report["targets"] = {
            "at_2000_ms": at[2000],
            "at_2000_ok": at[2000] <= TARGET_MS_AT_2000,
            "scaling_100000_over_2000": round(at[100000] / at[2000], 2),
            "scaling_ok": at[100000] <= TARGET_SCALING * at[2000],
        }
    if "summarized" in measured:
        report["after_a_compaction"] = measured["summarized"]
    idle_parts = ("idle", "reflection", "reflection_backlog", "autonomous")
    idle = {key: measured[key] for key in idle_parts if key in measured}
    if idle:
        report["idle_ticks"] = idle
    if "parts" in measured:
        report["turn_checks"] = measured["parts"]
    if "bookkeeping" in measured:
        report["bookkeeping"] = measured["bookkeeping"]
    if "journal" in measured:
        report["journal_modes"] = measured["journal"]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main(
        sys.argv[1:]
        or (
            "conversation",
            "summarized",
            "idle",
            "reflection",
            "backlog",
            "autonomous",
            "parts",
            "bookkeeping",
            "journal",
        )
    )
