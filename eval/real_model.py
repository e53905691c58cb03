"""Play generated conversations with the assistant on a real model, and score what it did.

``make eval-local`` runs this against Qwen2.5-Coder-1.5B-Instruct served on this machine by
llama.cpp (see ``local_server.py``); ``make eval-local MODEL=... API_BASE=...`` against any
litellm model (Ollama, a hosted provider with its key in the environment).

Each run plays one conversation (``conversations.py``: generated from a seed, new each run
unless ``--seed`` is given, or ``--conversation fixed``) through the real contrib
(typeclasses, script, ticks, extraction, compaction) at the contrib's defaults: only the
model, its ``api_base`` and key variable, and the context window (``--window``) are set,
plus ``--strategy`` / ``--layout`` when compared. Small talk follows the planted facts until
the history has been compacted; then the questions; then sleeps until the journal is in
long-term memory. It prints where each fact can be found and whether each question was
answered right, then the figures (``results.py``) and the targets, and writes the run as
JSON under ``build/eval/runs``. Several runs (``--runs``) are aggregated: mean and min-max.

It stops at once, printing no figures, when the model server dies, a call is refused as
badly configured, or three ticks in a row fail: a run that measured nothing says so.
Exit code: 0 targets met, 1 a target missed, 2 stopped.

Usage::

    python eval/real_model.py [--model M --api-base URL --api-key-env VAR] [--seed S]
        [--runs N | --seeds 'S1 S2 ...'] [--conversation generated|fixed] [--window N]
        [--strategy S] [--layout L] [--facts N] [--questions N] [--filler N] [--game-dir D]
"""

import argparse
import json
import os
import random
import sys
import time
from dataclasses import dataclass, field

from twisted.internet import defer
from twisted.python.failure import Failure

EVAL_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(EVAL_DIR), "demo"))
import conversations  # noqa: E402
import detectors  # noqa: E402
import play  # noqa: E402  (the demo's boot and reactor helpers)
import results  # noqa: E402

# The smallest window docs/context.md recommends for a small local model.
SMALLEST_RECOMMENDED_WINDOW = 2500
LOCAL_MODEL = "openai/qwen2.5-coder-1.5b-instruct"
LOCAL_KEY_VARIABLE = "EVAL_LOCAL_API_KEY"
RUNS_DIR = os.path.join(os.path.dirname(EVAL_DIR), "build", "eval", "runs")
CAST_TAG = "ai-eval-cast"
FAILED_TICKS_LIMIT = 3
SLOW_CALL_SECONDS = 60
MAX_MEMORY_SLEEPS = 3
RULE = "-" * 78


class EvaluationStopped(Exception):
    """The run cannot measure anything: the server died or the model calls keep failing."""


@dataclass
class Turn:
    """One player line and what came of it."""

    line: conversations.Line
    reply: str = ""
    status: str = ""
    seconds: float = 0.0
    question: conversations.Question = None


@dataclass
class Run:
    """Everything one run observed."""

    conversation: conversations.Conversation
    turns: list = field(default_factory=list)
    heard: list = field(default_factory=list)  # (listener, text)
    compactions: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    failed_ticks: int = 0
    sleeps: int = 0


class Watchdog:
    """Stops the evaluation when it can no longer measure anything.

    Attributes:
        server: The local model server to check before and after each tick (or None).
        failed_in_a_row: Ticks that failed with a model error since the last good one.
    """

    def __init__(self, server=None):
        self.server = server
        self.failed_in_a_row = 0

    def before_tick(self):
        """Raise EvaluationStopped if the model server has exited."""
        if self.server is not None:
            try:
                self.server.check_alive()
            except RuntimeError as err:
                raise EvaluationStopped(str(err)) from err

    def after_tick(self, result):
        """Raise EvaluationStopped on a dead server, a bad configuration, or failing ticks."""
        self.before_tick()
        answer = result.get("llm")
        if getattr(answer, "error_kind", None) == "bad_config":
            raise EvaluationStopped(f"the model call was refused as misconfigured: {answer.error}")
        if result.get("status") != "llm_error":
            self.failed_in_a_row = 0
            return
        self.failed_in_a_row += 1
        if self.failed_in_a_row >= FAILED_TICKS_LIMIT:
            error = getattr(answer, "error", "") or "no error given"
            raise EvaluationStopped(
                f"{self.failed_in_a_row} ticks in a row failed to reach the model; the last "
                f"error: {error}"
            )


class CallTimer:
    """Times and keeps every litellm call: what was sent, and the reply (a litellm callback:
    the model boundary, not the product). A run's calls are saved beside its record."""

    def __init__(self):
        self.calls = []

    @property
    def seconds(self):
        """Return each call's duration in seconds, in the order of the calls."""
        return [call["seconds"] for call in self.calls]

    def install(self):
        """Register with litellm; return self."""
        from litellm.integrations.custom_logger import CustomLogger

        from ai.litellm_loader import load_litellm

        timer = self

        class _Logger(CustomLogger):
            def log_success_event(self, kwargs, response_obj, start_time, end_time):
                timer.calls.append(
                    {
                        "seconds": (end_time - start_time).total_seconds(),
                        "messages": kwargs.get("messages"),
                        "tools": [
                            tool.get("function", {}).get("name")
                            for tool in kwargs.get("optional_params", {}).get("tools") or ()
                        ],
                        "reply": _reply_of(response_obj),
                    }
                )

            log_failure_event = log_success_event

        litellm = load_litellm()
        litellm.callbacks = [*litellm.callbacks, _Logger()]
        return self


def _reply_of(response):
    """Return the message of a litellm response as a dict (None for a failed call)."""
    try:
        return response.choices[0].message.model_dump()
    except (AttributeError, IndexError, TypeError):
        return None


def listen(player, run, assistant):
    """Record every message ``player`` receives from the assistant: what they heard."""
    original = player.msg

    def msg(text=None, from_obj=None, **kwargs):
        if from_obj is assistant and text is not None:
            heard = text[0] if isinstance(text, tuple) else str(text)
            run.heard.append((player.key, heard))
        return original(text=text, from_obj=from_obj, **kwargs)

    player.msg = msg


def build_cast(conversation, model, options, settings):
    """Create the inn, its players (listened to) and the assistant; remove any earlier cast."""
    from evennia.utils import create
    from evennia.utils.search import search_object_by_tag

    for obj in sorted(search_object_by_tag(CAST_TAG), key=_depth, reverse=True):
        obj.delete()  # what is carried first: its holder's deletion would send it home

    def made(typeclass, key, **kwargs):
        obj = create.create_object(typeclass, key=key, **kwargs)
        obj.tags.add(CAST_TAG)
        return obj

    room = made(play.ROOM_TYPECLASS, conversation.room, nohome=True)
    players = {
        name: made(play.PLAYER_TYPECLASS, name, location=room, home=room)
        for name in conversation.players
    }
    assistant = made(play.ASSISTANT_TYPECLASS, conversation.assistant, location=room, home=room)
    script = assistant.assistant_script
    script.stop()  # the evaluation plays the ticker
    script.set_config("llm_model", model)
    script.set_config("llm_options", options)
    script.set_config("max_context_tokens", settings["window"])
    for name, key in (("compact_strategy", "strategy"), ("prompt_layout", "layout")):
        if settings.get(key):
            script.set_config(name, settings[key])
    return players, assistant


def _depth(obj):
    """Return how many locations hold ``obj`` (0 for a room)."""
    depth, location = 0, obj.location
    while location is not None:
        depth, location = depth + 1, location.location
    return depth


def note_compaction(result, run):
    """Record the compaction a tick ran (done or refused) and print it."""
    memory = result.get("emergency") or result.get("memory") or {}
    compaction = memory.get("context_compaction")
    if not compaction or compaction.get("skipped"):
        return
    if compaction.get("success"):
        run.compactions.append(compaction)
        print(
            f"     >> {compaction['kind']} compaction: {compaction['compacted_messages']} "
            f"messages -> summary; context {compaction['usage_before']:.0%} -> "
            f"{compaction['usage_after']:.0%}"
        )
    else:
        run.refused.append(compaction)
        print(f"     >> {compaction.get('kind')} compaction refused: {compaction.get('error')}")


def utter(player, assistant, line):
    """Let ``player`` say ``line`` in the room, or whisper it to ``assistant``."""
    if line.whisper:
        player.execute_cmd(f"whisper {assistant.key} = {line.text}")
    else:
        player.execute_cmd(f"say {line.text}")


@defer.inlineCallbacks
def say(script, player, line, run, watchdog, question=None):
    """Say (or whisper) ``line`` as ``player`` and run the tick that answers it."""
    assistant = script.obj
    utter(player, assistant, line)
    watchdog.before_tick()
    started = time.monotonic()
    result = yield script.at_repeat()
    turn = Turn(line, result.get("reply") or "", result.get("status", ""), question=question)
    turn.seconds = time.monotonic() - started
    run.turns.append(turn)
    note_compaction(result, run)
    print(f"     {assistant.key} ({turn.seconds:.0f}s, {turn.status}): {turn.reply or '-'}")
    watchdog.after_tick(result)


@defer.inlineCallbacks
def sleep(script, run, watchdog):
    """Let the assistant doze, then dream: its sleep pipeline compacts at its threshold."""
    script.fall_asleep("evaluation")
    run.sleeps += 1
    for _ in range(2):
        watchdog.before_tick()
        started = time.monotonic()
        result = yield script.at_repeat()
        note_compaction(result, run)
        print(f"     {script.obj.key} is {result.get('phase')} ({time.monotonic() - started:.0f}s)")
        watchdog.before_tick()


@defer.inlineCallbacks
def converse(players, assistant, run, watchdog):
    """Plant the facts, talk until the history was compacted, ask, then consolidate."""
    from ai.helpers.memory_links import count_unconsolidated

    conversation = run.conversation
    script = assistant.assistant_script
    threshold = script.get_config("compact_sleep_threshold")
    number = 0

    def step(line, question=None):
        nonlocal number
        number += 1
        how = "whispers" if line.whisper else "says"
        print(f"[{number:2d}] {line.speaker} {how}: {line.text}")
        return say(script, players[line.speaker], line, run, watchdog, question)

    for line in conversation.opening:
        yield step(line)
    for line in conversation.filler:
        if run.compactions or run.refused:
            break
        if script.context_usage().usage >= threshold:
            print(f"[--] (the inn goes quiet; {assistant.key} falls asleep)")
            yield sleep(script, run, watchdog)
            continue
        yield step(line)
    for question in conversation.questions:
        line = conversations.Line(question.asker, question.text, question.whisper, "question")
        yield step(line, question)
    for _ in range(MAX_MEMORY_SLEEPS):
        if not count_unconsolidated(assistant):
            break
        print(f"[--] ({assistant.key} sleeps to consolidate its journal into long-term memory)")
        yield sleep(script, run, watchdog)
    return run


def kept_texts(assistant):
    """Return what the assistant kept, by place: live messages, summaries, journal, memory.

    Summaries include those replaced since (a summary of a summary); the journal includes
    archived entries: whatever was ever written there can have invented something.
    """
    from ai.models import ConversationMessage, JournalEntry, MemoryLink

    script = assistant.assistant_script
    rows = ConversationMessage.objects.filter(db_script=script)
    summaries = [r.content or "" for r in rows if (r.metadata or {}).get("type") == "compaction"]
    live = [
        r.content or ""
        for r in rows.filter(is_live=True)
        if (r.metadata or {}).get("type") != "compaction"
    ]
    journal = list(
        JournalEntry.objects.filter(db_object=assistant).values_list("content", flat=True)
    )
    memory = list(MemoryLink.objects.filter(db_object=assistant).values_list("text", flat=True))
    live_summaries = [
        r.content or ""
        for r in rows.filter(is_live=True)
        if (r.metadata or {}).get("type") == "compaction"
    ]
    return {
        "live": live,
        "summary": live_summaries,
        "all_summaries": summaries,
        "journal": journal,
        "memory": memory,
    }


PLACES = ("live", "summary", "journal", "memory")


def without_frame(text):
    """Return ``text`` without the lines the contrib writes around what a model wrote.

    A summary opens with the contrib's marker and preamble, a restored part with its header,
    and a whole line stands for messages archived unsummarized: those are the contrib's
    words, not the model's, so they cannot invent anything.
    """
    from ai.utils import markers

    text = "\n".join(
        line for line in text.splitlines() if not line.startswith(markers.ARCHIVE_MARKER)
    )
    frame = (
        markers.SUMMARY_MARKER,
        markers.SUMMARY_PREAMBLE,
        markers.RESTORED_HEADER,
        markers.EARLIER_HEADER,
        markers.SAID_HEADER,
        markers.NOTES_HEADER,
        markers.SYNTHESIS_MARKER,
        markers.PINNED_FACT_MARKER,
    )
    for words in frame:
        text = text.replace(words, " ")
    return text


def measure(run, assistant, calls, minutes):
    """Return the run's record: metrics, answers, where each fact is, and every finding."""
    conversation = run.conversation
    kept = kept_texts(assistant)
    places = {
        fact.id: [p for p in PLACES if any(detectors.mentions(t, fact.value) for t in kept[p])]
        for fact in conversation.facts.values()
    }
    answers = [
        {
            "asker": turn.line.speaker,
            "question": turn.line.text,
            "purpose": turn.question.purpose,
            "reply": turn.reply or f"({turn.status})",
            "right": detectors.answer_right(turn.question, turn.reply),
        }
        for turn in run.turns
        if turn.question
    ]
    stored = [
        without_frame(text) for text in kept["all_summaries"] + kept["journal"] + kept["memory"]
    ]
    replies = [turn.reply for turn in run.turns if turn.reply]
    findings = {
        "invented": detectors.invented(stored, conversation),
        "swapped": detectors.swapped(stored, conversation),
        "intentions": detectors.intentions(replies),
        "echoes": [
            detectors.Finding(t.line.text, t.reply)
            for t in run.turns
            if t.line.role != "question" and detectors.is_echo(t.reply, t.line.text)
        ],
        "markup": detectors.markup([text for _, text in run.heard]),
        "leaks": detectors.leaks(run.heard, conversation),
    }
    facts = len(places) or 1
    metrics = {
        "answers_right": sum(a["right"] for a in answers) / (len(answers) or 1),
        "facts_findable": sum(bool(found) for found in places.values()) / facts,
        **{f"found_{p}": sum(p in found for found in places.values()) / facts for p in PLACES},
        **{key: len(found) for key, found in findings.items()},
        "compactions_done": len(run.compactions),
        "compactions_refused": len(run.refused),
        "slow_calls": sum(seconds > SLOW_CALL_SECONDS for seconds in calls),
        "calls": len(calls),
        "minutes": round(minutes, 1),
    }
    return {
        "metrics": metrics,
        "answers": answers,
        "facts": places,
        "findings": {k: [vars(f) for f in found] for k, found in findings.items()},
        "refusals": [c.get("error") for c in run.refused],
    }


def report(record):
    """Print a run's answers, fact table, findings and targets; return the missed targets."""
    print(RULE)
    for answer in record["answers"]:
        verdict = "right" if answer["right"] else "WRONG"
        print(f"  [{verdict}] {answer['asker']} ({answer['purpose']}): {answer['question']}")
        print(f"          -> {answer['reply']}")
    print(RULE)
    print(f"{'fact':<16}" + "".join(f"{p:>9}" for p in PLACES))
    for fact, found in record["facts"].items():
        print(f"{fact:<16}" + "".join(f"{'yes' if p in found else '-':>9}" for p in PLACES))
    for key, found in record["findings"].items():
        for finding in found[:5]:
            print(f"  !! {key}: {finding['what']}: {finding['text'][:90]!r}")
    for refusal in record["refusals"]:
        print(f"  !! refused compaction: {refusal}")
    metrics = record["metrics"]
    if not metrics["compactions_done"] + metrics["compactions_refused"]:
        print("  !! no compaction ran: 'facts findable' says nothing of compaction here")
    print(RULE)
    return results.print_summary(results.aggregate([record]))


@defer.inlineCallbacks
def play_runs(plan, model, options, settings, watchdog, timer, runs_dir=RUNS_DIR):
    """Play each conversation of ``plan`` in turn; save and return the run records."""
    records = []
    for conversation in plan:
        print(RULE)
        print(
            f"run {len(records) + 1}/{len(plan)}: {conversation.name} conversation, seed "
            f"{conversation.seed} (repeat it with --seed {conversation.seed})"
        )
        players, assistant = build_cast(conversation, model, options, settings)
        run = Run(conversation)
        for player in players.values():
            listen(player, run, assistant)
        started, first_call = time.monotonic(), len(timer.calls)
        try:
            yield converse(players, assistant, run, watchdog)
        except EvaluationStopped as stop:
            record = run_record(conversation, model, settings, aborted=str(stop))
            save(record, runs_dir, timer.calls[first_call:])
            raise
        record = run_record(conversation, model, settings)
        record.update(measure(run, assistant, timer.seconds[first_call:], _minutes(started)))
        if not any(turn.status == "replied" for turn in run.turns):
            record = run_record(conversation, model, settings, aborted="no tick replied")
            save(record, runs_dir, timer.calls[first_call:])
            raise EvaluationStopped("no tick replied: the run measured nothing")
        record["missed"] = report(record)
        save(record, runs_dir, timer.calls[first_call:])
        records.append(record)
    return records


def _minutes(started):
    return (time.monotonic() - started) / 60


def run_record(conversation, model, settings, aborted=None):
    """Return the head of a run's JSON record."""
    record = {
        "stamp": time.strftime("%Y%m%d-%H%M%S"),
        "seed": conversation.seed,
        "conversation": conversation.name,
        "model": model,
        "settings": settings,
    }
    if aborted:
        record["aborted"] = aborted
    return record


def save(record, runs_dir, calls=None):
    """Write ``record`` to ``<runs_dir>/<stamp>-<seed>.json``, and the run's model ``calls``
    (see ``CallTimer``) beside it as ``.calls.json``; return the record's path."""
    os.makedirs(runs_dir, exist_ok=True)
    name = record["seed"] if record["seed"] is not None else record["conversation"]
    path = os.path.join(runs_dir, f"{record['stamp']}-{name}.json")
    with open(path, "w") as handle:
        json.dump(record, handle, indent=1)
    print(f"run written to {path}")
    if calls:
        with open(path[: -len(".json")] + ".calls.json", "w") as handle:
            json.dump(calls, handle, indent=1, default=str)
    return path


def seeds_of(args):
    """Return the seeds to run: ``--seeds`` (a count or a list), else ``--runs`` of them."""
    if args.seeds:
        items = args.seeds.replace(",", " ").split()
        if len(items) > 1:
            return [int(item) for item in items]
        args.runs = int(items[0])
    first = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    return [first + n for n in range(args.runs)]


def plan_of(args):
    """Return the conversations to play."""
    if args.conversation == "fixed":
        return [conversations.fixed() for _ in range(args.runs)]
    shape = conversations.Shape(facts=args.facts, questions=args.questions, filler=args.filler)
    return [conversations.generate(seed, shape) for seed in seeds_of(args)]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a litellm model string (default: the local model)")
    parser.add_argument("--api-base", help="the model server's URL")
    parser.add_argument("--api-key-env", help="the environment variable holding the key")
    parser.add_argument("--game-dir", default=play.DEFAULT_GAME_DIR)
    parser.add_argument("--seed", type=int, help="the first run's seed (default: a new one)")
    parser.add_argument("--runs", type=int, default=1, help="runs, one seed each (default 1)")
    parser.add_argument("--seeds", help="a number of runs, or the seeds: '11 12 13'")
    parser.add_argument("--conversation", choices=("generated", "fixed"), default="generated")
    parser.add_argument("--window", type=int, default=SMALLEST_RECOMMENDED_WINDOW)
    parser.add_argument("--strategy", help="compact_strategy (default: the contrib's)")
    parser.add_argument("--layout", help="prompt_layout (default: the contrib's)")
    parser.add_argument("--facts", type=int, default=conversations.Shape.facts)
    parser.add_argument("--questions", type=int, default=conversations.Shape.questions)
    parser.add_argument(
        "--filler",
        type=int,
        default=conversations.Shape.filler,
        help="most small-talk lines said while waiting for a compaction",
    )
    parser.add_argument("--runs-dir", default=RUNS_DIR, help="where run JSON files go")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def model_and_options(args, stack):
    """Return the model, its options (only what reaching it needs) and the server, if local."""
    options = {}
    if args.model:
        options.update({"api_base": args.api_base} if args.api_base else {})
        options.update({"api_key_env": args.api_key_env} if args.api_key_env else {})
        return args.model, options, None
    import local_server

    server = stack.enter_context(
        local_server.start_server(local_server.ensure_server_python(), local_server.ensure_model())
    )
    # llama.cpp's server checks no key, but the OpenAI client wants one.
    os.environ.setdefault(LOCAL_KEY_VARIABLE, "local")
    options.update(api_base=server.api_base, api_key_env=LOCAL_KEY_VARIABLE)
    print(f"local model served at {server.api_base} (log: {server.log_path})")
    return LOCAL_MODEL, options, server


def main(argv):
    """Play the runs; print and save their figures; return the exit code (0, 1 or 2)."""
    args = parse_args(argv)
    try:
        plan = plan_of(args)
    except ValueError as err:
        print(f"bad conversation size: {err}", file=sys.stderr)
        return 2
    seeds = [conversation.seed for conversation in plan]
    return evaluate(args, plan, play_runs, "real-model evaluation", seeds)


def evaluate(args, plan, play_runs, what, seeds):
    """Play ``plan`` with ``play_runs`` on the model ``args`` names; print and save the
    figures; return the exit code (0 targets met, 1 a target missed, 2 stopped)."""
    from contextlib import ExitStack

    settings = {"window": args.window, "strategy": args.strategy, "layout": args.layout}
    with ExitStack() as stack:
        model, options, server = model_and_options(args, stack)
        play.boot_evennia(args.game_dir)
        timer = CallTimer().install()
        print(RULE)
        print(f"evennia-ai {what}: {model}, {len(plan)} run(s)")
        print(f"settings: {settings}; seeds: {', '.join(map(str, seeds))}")
        outcome = play.run_in_reactor(
            play_runs, plan, model, options, settings, Watchdog(server), timer, args.runs_dir
        )
    if isinstance(outcome, Failure):
        if outcome.check(EvaluationStopped):
            print(RULE, file=sys.stderr)
            print(f"EVALUATION STOPPED: {outcome.value}", file=sys.stderr)
            print("It measured nothing: no figures are given.", file=sys.stderr)
        else:
            outcome.printTraceback(file=sys.stderr)
        return 2
    missed = outcome[-1]["missed"] if len(outcome) == 1 else aggregate_runs(outcome, args.runs_dir)
    for problem in missed:
        print(f"MISSED: {problem}", file=sys.stderr)
    return 1 if missed else 0


def aggregate_runs(records, runs_dir):
    """Print and save the aggregate of several runs; return the missed targets."""
    print(RULE)
    summary = results.aggregate(records)
    missed = results.print_summary(summary)
    path = os.path.join(runs_dir, f"{records[0]['stamp']}.aggregate.json")
    with open(path, "w") as handle:
        json.dump(dict(summary, targets=results.targets(summary)), handle, indent=1)
    print(f"aggregate written to {path}")
    return missed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
