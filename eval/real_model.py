"""Play a scripted conversation with the assistant on a real model, and score what it did.

``make eval-local`` runs this against Qwen2.5-Coder-1.5B-Instruct served on this machine
by llama.cpp (see ``local_server.py``); ``make eval-local MODEL=... API_BASE=...`` against
any litellm model (Ollama, a hosted provider with its key in the environment).

Three players plant facts in a tavern and ask about them later, through the real contrib
(typeclasses, script, ticks, compaction), as ``make demo`` does. The context window is
small, so the history is compacted at least once in an emergency and once in sleep. At the
end it sleeps until its journal is in long-term memory and prints, for each planted fact,
whether it is in the live context, in a summary, in the journal, recalled from long-term
memory by its question's words, and whether its question was answered right; every answer; the tool calls made
and the malformed ones; what the room heard that it should not have (tool-call markup,
extraction notes); and timings. The exit code is 1 when a target is missed.

Usage::

    python eval/real_model.py [--model M --api-base URL --api-key-env VAR] [--game-dir D]
"""

import argparse
import os
import sys
import time
from dataclasses import dataclass, field

from twisted.internet import defer

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demo")
)
import play  # noqa: E402  (the demo's boot and reactor helpers)

ROOM = "Crossroads Inn"
ASSISTANT = "Wren"
PLAYERS = ("Alice", "Bob", "Carol")
# A window this small makes a short conversation need compacting, as a long one would.
MAX_CONTEXT_TOKENS = 2400
PRESERVE_WINDOW = 4
LOCAL_MODEL = "openai/qwen2.5-coder-1.5b-instruct"
LOCAL_KEY_VARIABLE = "EVAL_LOCAL_API_KEY"
CALL_TIMEOUT = 900
RIGHT_ANSWERS_TARGET = 0.8
RULE = "-" * 78

# (key, speaker, the line that plants it, asker, question, words one of which a right
# answer contains). The key is a distinctive string of the fact, looked for everywhere.
FACTS = [
    (
        "north gate",
        "Bob",
        "I run the forge by the north gate.",
        "Carol",
        "Where is Bob's forge?",
        ("north gate",),
    ),
    (
        "old oak",
        "Carol",
        "I buried 40 gold coins under the old oak in Mirkwood.",
        "Alice",
        "Where did Carol bury her gold coins?",
        ("oak",),
    ),
    (
        "12 iron ingots",
        "Alice",
        "I promised Bob to deliver 12 iron ingots on Friday.",
        "Bob",
        "How many iron ingots will Alice deliver to me?",
        ("12", "twelve"),
    ),
    (
        "swordfish",
        "Bob",
        "The password for the cellar door is swordfish.",
        "Carol",
        "What is the password for the cellar door?",
        ("swordfish",),
    ),
    (
        "Thunder",
        "Carol",
        "My horse is called Thunder.",
        "Alice",
        "What is the name of Carol's horse?",
        ("thunder",),
    ),
    (
        "Edwin",
        "Alice",
        "My brother Edwin keeps bees in the village of Riverrun.",
        "Carol",
        "Who keeps bees in Riverrun?",
        ("edwin",),
    ),
    (
        "six bells",
        "Bob",
        "The ferry to Port Ashby leaves at six bells every morning.",
        "Alice",
        "When does the ferry to Port Ashby leave?",
        ("six", "6"),
    ),
    (
        "Willow Lane",
        "Carol",
        "The healer Mira lives at the end of Willow Lane.",
        "Bob",
        "Where does the healer Mira live?",
        ("willow",),
    ),
    (
        "25 silver",
        "Alice",
        "I owe the innkeeper 25 silver pieces.",
        "Carol",
        "How much silver does Alice owe the innkeeper?",
        ("25", "twenty-five", "twenty five"),
    ),
    (
        "bell tower",
        "Bob",
        "The map to the dragon lair is hidden in the chapel bell tower.",
        "Alice",
        "Where is the map to the dragon lair hidden?",
        ("bell tower", "chapel"),
    ),
]
GREETING = ("Alice", "Hello Wren, good evening!")
# Small talk between the facts and the questions, until the history has been compacted in
# an emergency and then in sleep (at most MAX_SMALL_TALK lines).
SMALL_TALK = [
    ("Carol", "What do you think of the ale they serve here?"),
    ("Bob", "It has been a long, cold week at work, friend."),
    ("Alice", "Do you like the songs the bard plays in the evening?"),
    ("Bob", "Tell me something cheerful, Wren."),
    ("Carol", "The fire is warm tonight, is it not?"),
    ("Alice", "Have you ever travelled far from this inn?"),
]
MAX_SMALL_TALK = 30
# Sleeps at the end, to move what the journal still holds into long-term memory.
MAX_MEMORY_SLEEPS = 3
# Questions come after every fact is planted, in an order unlike the planting.
QUESTION_ORDER = (1, 4, 0, 7, 2, 9, 5, 3, 8, 6)


@dataclass
class Turn:
    """One player line and what came of it."""

    speaker: str
    line: str
    reply: str = ""
    status: str = ""
    seconds: float = 0.0
    fact: tuple = None


@dataclass
class Run:
    """Everything the evaluation observed."""

    turns: list = field(default_factory=list)
    compactions: list = field(default_factory=list)
    failed_compactions: list = field(default_factory=list)
    extractions: list = field(default_factory=list)
    heard: list = field(default_factory=list)
    tool_calls: int = 0
    text_tool_calls: int = 0
    malformed: list = field(default_factory=list)
    withheld: list = field(default_factory=list)
    echo_retries: int = 0
    sleeps: int = 0
    remembered: dict = field(default_factory=dict)


def listen(player, run, assistant):
    """Record every message ``player`` receives from the assistant: what the room heard."""
    original = player.msg

    def msg(text=None, from_obj=None, **kwargs):
        if from_obj is assistant and text is not None:
            run.heard.append(text[0] if isinstance(text, tuple) else str(text))
        return original(text=text, from_obj=from_obj, **kwargs)

    player.msg = msg


def build_cast(model, options):
    """Create the inn, its players (listened to) and the assistant on the real model."""
    from evennia.utils import create
    from evennia.utils.search import search_object

    for key in (ASSISTANT, *PLAYERS, ROOM):
        for obj in search_object(key, exact=True):
            obj.delete()
    room = create.create_object(play.ROOM_TYPECLASS, key=ROOM, nohome=True)
    players = {
        name: create.create_object(play.PLAYER_TYPECLASS, key=name, location=room, home=room)
        for name in PLAYERS
    }
    assistant = create.create_object(
        play.ASSISTANT_TYPECLASS, key=ASSISTANT, location=room, home=room
    )
    script = assistant.assistant_script
    script.stop()
    script.set_config("llm_model", model)
    script.set_config("llm_options", options)
    script.set_config("max_context_tokens", MAX_CONTEXT_TOKENS)
    script.set_config("compact_preserve_window", PRESERVE_WINDOW)
    return players, assistant


def note_tick(result, run):
    """Collect a tick's compaction, extraction and tool-call figures."""
    loop = result.get("loop")
    if loop is not None:
        run.tool_calls += len(loop.tools_called) + len(loop.tools_refused)
        run.text_tool_calls += loop.text_tool_calls
        run.malformed += loop.malformed_tool_calls
        run.withheld += loop.withheld
        run.echo_retries += loop.echo_retries
    memory = result.get("emergency") or result.get("memory") or {}
    extraction = memory.get("pre_compaction_extraction")
    if extraction and extraction.get("iterations"):
        run.extractions.append(extraction)
        run.tool_calls += len(extraction.get("tools_called", []))
        run.text_tool_calls += extraction.get("text_tool_calls", 0)
        run.malformed += extraction.get("malformed_tool_calls", [])
    if extraction and extraction.get("iterations"):
        print(f"     >> extraction journaled {extraction.get('facts_recorded')} facts")
    compaction = memory.get("context_compaction")
    if compaction and compaction.get("skipped"):
        print(f"     >> no compaction: {compaction.get('reason')}")
    elif compaction:
        (run.compactions if compaction.get("success") else run.failed_compactions).append(
            compaction
        )
        if compaction.get("success"):
            print(
                f"     >> {compaction['kind']} compaction: {compaction['compacted_messages']} "
                f"messages -> summary; context {compaction['usage_before']:.0%} -> "
                f"{compaction['usage_after']:.0%}"
            )
        else:
            print(f"     >> {compaction['kind']} compaction FAILED: {compaction.get('error')}")


@defer.inlineCallbacks
def say(script, player, line, run, fact=None):
    """Say ``line`` as ``player`` and run the tick that answers it."""
    player.execute_cmd(f"say {line}")
    started = time.monotonic()
    result = yield script.at_repeat()
    turn = Turn(player.key, line, fact=fact, status=result.get("status", ""))
    turn.seconds = time.monotonic() - started
    turn.reply = result.get("reply") or ""
    run.turns.append(turn)
    note_tick(result, run)
    print(f"     {ASSISTANT} ({turn.seconds:.0f}s, {turn.status}): {turn.reply or '-'}")
    usage = script.context_usage()
    print(f"     context {usage.total_tokens:,}/{usage.max_tokens:,} = {usage.usage:.0%}")


@defer.inlineCallbacks
def sleep(script, run):
    """Let the assistant doze, then dream: its sleep pipeline compacts at 70%."""
    script.fall_asleep("evaluation")
    run.sleeps += 1
    for _ in range(2):
        started = time.monotonic()
        result = yield script.at_repeat()
        note_tick(result, run)
        print(f"     {ASSISTANT} is {result.get('phase')} ({time.monotonic() - started:.0f}s)")


def compacted(run, kind):
    """Tell whether a compaction of ``kind`` has succeeded in the run."""
    return any(c["kind"] == kind for c in run.compactions)


@defer.inlineCallbacks
def converse(players, assistant, run):
    """Plant every fact, talk until both kinds of compaction ran, then ask the questions."""
    script = assistant.assistant_script
    threshold = script.get_config("compact_sleep_threshold")
    number = 0

    def step(speaker, line, fact=None):
        nonlocal number
        number += 1
        print(f"[{number:2d}] {speaker}: {line}")
        return say(script, players[speaker], line, run, fact)

    yield step(*GREETING)
    for _, speaker, line, *_ in FACTS:
        yield step(speaker, line)
    for turn in range(MAX_SMALL_TALK):
        if compacted(run, "emergency") and compacted(run, "sleep"):
            break
        if compacted(run, "emergency") and script.context_usage().usage >= threshold:
            print(f"[--] (the inn goes quiet; {ASSISTANT} falls asleep)")
            yield sleep(script, run)
            continue
        yield step(*SMALL_TALK[turn % len(SMALL_TALK)])
    for index in QUESTION_ORDER:
        _, _, _, asker, question, _ = FACTS[index]
        yield step(asker, question, FACTS[index])
    yield recall_from_memory(assistant, run)
    return run


@defer.inlineCallbacks
def recall_from_memory(assistant, run):
    """Sleep until the journal is in long-term memory; then recall each fact's question.

    ``run.remembered`` gets, per fact, the first recalled memory that still holds: what
    long-term memory alone gives back for the question's words.
    """
    from ai.helpers.memory_links import count_unconsolidated
    from ai.semantic_memory import recall

    script = assistant.assistant_script
    for _ in range(MAX_MEMORY_SLEEPS):
        if not count_unconsolidated(assistant):
            break
        print(f"[--] ({ASSISTANT} sleeps to consolidate its journal into long-term memory)")
        yield sleep(script, run)
    for key, _, _, _, question, _ in FACTS:
        found = yield recall(assistant, question, None, 5)
        holding = [memory["text"] for memory in found if memory["invalid_at"] is None]
        run.remembered[key] = holding[0] if holding else ""


def is_right(reply, words):
    """Tell whether ``reply`` holds one of the words of a right answer."""
    return any(word in reply.lower() for word in words)


def fact_table(script, character, run):
    """Print each fact's places and whether its question was answered right."""
    places = play.fact_places(script, character, [f[0] for f in FACTS])
    answers = {turn.fact[0]: turn for turn in run.turns if turn.fact}
    right = 0
    print(f"{'fact':<16}{'live':>6}{'summary':>9}{'journal':>9}{'memory':>8}{'answered':>10}")
    for key, *_, words in FACTS:
        found = places[key]
        turn = answers.get(key)
        ok = bool(turn) and is_right(turn.reply, words)
        right += ok
        recalled = is_right(run.remembered.get(key, ""), words)
        print(
            f"{key:<16}{'yes' if 'recent' in found else '-':>6}"
            f"{'yes' if 'summary' in found else '-':>9}{'yes' if 'journal' in found else '-':>9}"
            f"{'yes' if recalled else '-':>8}{'right' if ok else 'WRONG':>10}"
        )
    lost = [key for key, found in places.items() if not found]
    return right, lost


def spoken_problems(run):
    """Return what the room heard that it never should: markup, extraction notes."""
    from ai.utils.text_tool_calls import looks_like_markup

    return [line for line in run.heard if looks_like_markup(line)]


def report(assistant, run, elapsed):
    """Print the evaluation's tables and figures; return the list of missed targets."""
    script = assistant.assistant_script
    print(RULE)
    print("answers:")
    for turn in run.turns:
        if turn.fact:
            print(f"  {turn.speaker}: {turn.line}\n    -> {turn.reply or '(' + turn.status + ')'}")
    print(RULE)
    right, lost = fact_table(script, assistant, run)
    asked = len(QUESTION_ORDER)
    bad_speech = spoken_problems(run)
    ticks = [turn.seconds for turn in run.turns]
    kinds = [c["kind"] for c in run.compactions]
    print(RULE)
    print(f"questions answered right: {right}/{asked}")
    print(f"facts findable after the compactions: {len(FACTS) - len(lost)}/{len(FACTS)}")
    remembered = sum(is_right(run.remembered.get(fact[0], ""), fact[-1]) for fact in FACTS)
    print(f"facts recalled from long-term memory by their question: {remembered}/{len(FACTS)}")
    print(
        f"compactions: {len(run.compactions)} ({kinds.count('emergency')} emergency, "
        f"{kinds.count('sleep')} sleep), failed: {len(run.failed_compactions)}"
    )
    print(
        f"extractions: {len(run.extractions)}, facts journaled by them: "
        f"{sum(e.get('facts_recorded', 0) for e in run.extractions)}"
    )
    print(
        f"tool calls made: {run.tool_calls} (written as text and recovered: "
        f"{run.text_tool_calls}); malformed: {len(run.malformed)}; withheld answers: "
        f"{len(run.withheld)}"
    )
    from ai.utils.echo import is_echo

    echoes = [turn for turn in run.turns if not turn.fact and is_echo(turn.reply, turn.line)]
    print(
        f"replies that repeated the player's line: {len(echoes)}/{len(run.turns) - asked} "
        f"(answers asked for again after an echo: {run.echo_retries})"
    )
    print(f"lines the room heard: {len(run.heard)}; with markup: {len(bad_speech)}")
    for line in bad_speech:
        print(f"  !! {line[:70]}")
    print(
        f"ticks: {len(ticks)}, median {sorted(ticks)[len(ticks) // 2]:.0f}s, "
        f"longest {max(ticks):.0f}s; whole run {elapsed / 60:.1f} min"
    )
    missed = []
    if lost:
        missed.append(f"facts lost: {', '.join(lost)}")
    if right < RIGHT_ANSWERS_TARGET * asked:
        missed.append(f"{right}/{asked} questions answered right (target 80%)")
    if bad_speech:
        missed.append(f"{len(bad_speech)} line(s) of markup spoken to the room")
    if run.failed_compactions:
        missed.append(f"{len(run.failed_compactions)} failed compaction(s)")
    if "emergency" not in kinds or "sleep" not in kinds:
        missed.append("not both an emergency and a sleep compaction")
    return missed


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a litellm model string (default: the local model)")
    parser.add_argument("--api-base", help="the model server's URL")
    parser.add_argument("--api-key-env", help="the environment variable holding the key")
    parser.add_argument("--game-dir", default=play.DEFAULT_GAME_DIR)
    return parser.parse_args(argv)


def model_and_options(args, stack):
    """Return the model string and its options; start the local server when none is named."""
    options = {"temperature": 0.2, "max_tokens": 200, "timeout": CALL_TIMEOUT}
    if args.model:
        options.update({"api_base": args.api_base} if args.api_base else {})
        options.update({"api_key_env": args.api_key_env} if args.api_key_env else {})
        return args.model, options
    import local_server

    server = stack.enter_context(
        local_server.start_server(local_server.ensure_server_python(), local_server.ensure_model())
    )
    # llama.cpp's server checks no key, but the OpenAI client wants one.
    os.environ.setdefault(LOCAL_KEY_VARIABLE, "local")
    # Offered natively (its chat template's tool block), this model repeats players' lines.
    options.update(api_base=server.api_base, api_key_env=LOCAL_KEY_VARIABLE, tools_as_text=True)
    print(f"local model served at {server.api_base} (log: {server.log_path})")
    return LOCAL_MODEL, options


def main(argv):
    from contextlib import ExitStack

    args = parse_args(argv)
    started = time.monotonic()
    with ExitStack() as stack:
        model, options = model_and_options(args, stack)
        play.boot_evennia(args.game_dir)
        players, assistant = build_cast(model, options)
        run = Run()
        for player in players.values():
            listen(player, run, assistant)
        print(RULE)
        print(f"evennia-ai real-model evaluation: {model}")
        print(f"options: { {k: v for k, v in options.items() if k != 'api_key_env'} }")
        print(f"context window {MAX_CONTEXT_TOKENS} tokens, preserve window {PRESERVE_WINDOW}")
        print(RULE)
        outcome = play.run_in_reactor(converse, players, assistant, run)
        if outcome is not run:
            outcome.printTraceback(file=sys.stderr)
            return 1
        missed = report(assistant, run, time.monotonic() - started)
    for problem in missed:
        print(f"MISSED: {problem}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
