"""Play a scripted conversation with an AI assistant in a throwaway Evennia game.

Three players talk in a tavern: they plant facts (names, numbers, promises, places) and
ask about them later. The assistant hears them through its real typeclass and answers on
each tick, using the offline engine (no network, no API key). Its context limit is that
of a small local model, 4,096 tokens, and the conversation fills it several times: its
history is compacted in an emergency when a tick starts at 80% of the limit, and while
it sleeps (the scenario sends it to sleep now and then) at 70%. Asleep, it
also consolidates its journal into long-term memory (Mem0, local), marks a fact that
changed as superseded, and moves consolidated entries out of the active journal. Once the
importance journaled since its last reflection reaches ``reflection_threshold``, falling
asleep reflects: it writes insights that cite the entries they join; after the
conversation, an idle tick reflects on what is left (the threshold lowered to what the
last stretch journaled). Last, a builder gives it a goal, which quiet ticks break into
steps and pursue to its end in autonomous turns. The driver prints every tick,
compaction, memory step, reflection and goal step, then the compactions, the journal,
where each planted fact can still be found (live context, active journal, long-term
memory) and which answers came from long-term memory alone. Every line fits 78 columns.

Usage (``make demo`` builds the game directory and runs this)::

    python demo/play.py [GAME_DIR]

``GAME_DIR`` defaults to ``build/demo_game`` beside this repository's ``demo/`` folder;
it must be an initialised Evennia game with ``"ai"`` in ``INSTALLED_APPS`` (this script
migrates it). The exit code is 1 when a tick did not reply, when a compaction or a sleep
step failed, when the context went over its limit, when fewer than two compactions of
each kind ran, when a planted fact was lost, when no question was answered from
long-term memory alone, when no reflection wrote an insight citing journal entries, or
when the goal was not reached.
"""

import os
import sys
import textwrap
import time
from dataclasses import dataclass, field

from twisted.internet import defer, reactor
from twisted.python.failure import Failure

from ai.utils.wording import plural

ROOM = "Tavern"
ASSISTANT = "Helper"
PLAYERS = ("Alice", "Bob", "Carol")
ASSISTANT_TYPECLASS = "ai.assistant_character.AssistantCharacter"
ROOM_TYPECLASS = "typeclasses.rooms.Room"
PLAYER_TYPECLASS = "typeclasses.characters.Character"
DEFAULT_GAME_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "build", "demo_game")
# Every line printed fits a terminal of this many columns.
WIDTH = 78
RULE = "-" * WIDTH
# Where a step's lines continue: under the text after "[12] ".
STEP_INDENT = " " * 5

# The window of a small local model. The prompt's frame (what a tick sends besides history:
# about 900 tokens, docs/context.md) takes a fifth of it, as in a deployment; in a smaller
# one (2,800 until issue 20) it took a third and more, leaving compactions little to work on.
MAX_CONTEXT_TOKENS = 4096
# The goal a builder gives after the conversation, and the quiet ticks it may take.
GOAL = "Keep the common room tidy"
GOAL_TICKS = 8
PRESERVE_WINDOW = 5
REQUIRED_COMPACTIONS = {"emergency": 2, "sleep": 2}
# Short summaries, and consolidated entries out of the active journal right after they
# were learned whatever their importance: late questions find their facts only in
# long-term memory. (A game keeps the defaults: 400 words, a week, importance below 4.)
SUMMARY_WORDS = 60
JOURNAL_PRUNE_AGE_DAYS = 1e-6  # about 0.1 s
JOURNAL_PRUNE_IMPORTANCE = 10.0

# A scenario step: the tavern goes quiet and the assistant sleeps for two ticks, dozing
# (nothing runs) then dreaming (the sleep pipeline, which compacts at the sleep threshold).
SLEEP = "sleep"
SLEEP_TICKS = 2

# (speaker, line) or SLEEP: facts are planted first, questions about them come later.
SCENARIO = [
    ("Alice", "Hello Helper, good evening!"),
    ("Bob", "My name is Bob and I run the forge by the north gate."),
    ("Carol", "I buried 40 gold coins under the old oak in Mirkwood."),
    ("Alice", "I promised Bob to deliver 12 iron ingots on Friday."),
    ("Bob", "The password for the cellar door is swordfish."),
    ("Carol", "My horse is called Thunder and she is seven years old."),
    ("Alice", "Where did Carol bury the gold coins?"),
    ("Alice", "My brother Edwin keeps bees in the village of Riverrun."),
    ("Carol", "What is the password for the cellar door?"),
    ("Bob", "The ferry to Port Ashby leaves at six bells every morning."),
    ("Carol", "I promised to guard the bridge at Dunmere until midnight."),
    ("Bob", "My apprentice Tomas lost three hammers in the river last week."),
    ("Bob", "How many iron ingots will Alice deliver to me?"),
    ("Alice", "I owe the innkeeper 25 silver pieces since last winter."),
    ("Carol", "The healer Mira lives at the end of Willow Lane."),
    ("Bob", "The password for the cellar door is now marmalade."),
    ("Alice", "What is the horse of Carol called?"),
    ("Bob", "The dwarves of Khazad Gorm trade mithril for amber."),
    ("Carol", "The map to the dragon lair is hidden in the chapel bell tower."),
    ("Alice", "The harbour master Quentin charges 7 copper per crate."),
    ("Bob", "Where is my forge?"),
    SLEEP,
    ("Carol", "My sister Elena captains the city watch at Greyhaven."),
    ("Alice", "I will meet the wizard Orrin at the crossroads on Sunday."),
    ("Bob", "The old mine entrance collapsed after the storm on Tuesday."),
    ("Carol", "The blacksmith Ulric shoes horses for 3 copper each."),
    ("Carol", "Who keeps bees in Riverrun?"),
    ("Alice", "I am terribly afraid of spiders."),
    ("Alice", "When does the ferry to Port Ashby leave?"),
    ("Alice", "The baker Hilda sells rye bread only on Thursdays."),
    ("Bob", "My cousin Fenwick sails a cog called the Grey Gull."),
    ("Bob", "Where does the healer Mira live?"),
    ("Carol", "The lighthouse keeper Brannoc lost his lantern key in March."),
    ("Alice", "The tanner Osric moved his workshop to Lower Ditch."),
    SLEEP,
    ("Bob", "Who captains the city watch at Greyhaven?"),
    ("Carol", "How much silver does Alice owe the innkeeper?"),
    ("Bob", "Our guild meets in the cellar of the Blue Boar on Wednesdays."),
    ("Carol", "The ferryman Jory charges double after dark."),
    ("Alice", "Where is the map to the dragon lair hidden?"),
    ("Alice", "The spice merchant Zahra arrives with the caravan in nine days."),
    ("Bob", "My daughter Ysolde turns ten at midsummer."),
    SLEEP,
    ("Carol", "Who will win the archery tournament?"),
    ("Alice", "What is the password for the cellar door now?"),
    ("Carol", "How many iron ingots will Alice deliver to Bob?"),
    ("Alice", "Who sells rye bread on Thursdays?"),
    ("Bob", "Where did Carol bury the gold coins?"),
    ("Carol", "What is the cog of Fenwick called?"),
    ("Bob", "What is Alice afraid of?"),
]
# What a right answer to each question holds; where it can be found is where its fact is.
ANSWERS = {
    "Where did Carol bury the gold coins?": "Mirkwood",
    "What is the password for the cellar door now?": "marmalade",  # was swordfish
    "What is the horse of Carol called?": "Thunder",
    "Where is my forge?": "north gate",
    "Who keeps bees in Riverrun?": "Edwin",
    "When does the ferry to Port Ashby leave?": "six bells",
    "Where does the healer Mira live?": "Willow Lane",
    "Who captains the city watch at Greyhaven?": "Elena",
    "How much silver does Alice owe the innkeeper?": "25 silver",
    "Where is the map to the dragon lair hidden?": "bell tower",
    "How many iron ingots will Alice deliver to Bob?": "12 iron ingots",
    "Who sells rye bread on Thursdays?": "Hilda",
    "What is the cog of Fenwick called?": "Grey Gull",
    "What is Alice afraid of?": "spiders",
}

# A distinctive string of each planted fact: it is kept if the string is still somewhere.
PLANTED_FACTS = (
    "north gate",
    "40 gold coins",
    "12 iron ingots",
    "swordfish",
    "Thunder",
    "Edwin",
    "Port Ashby",
    "Dunmere",
    "Tomas",
    "25 silver",
    "Willow Lane",
    "Khazad Gorm",
    "bell tower",
    "Quentin",
    "Greyhaven",
    "Orrin",
    "mine entrance",
    "marmalade",
    "Ulric",
    "Hilda",
    "Grey Gull",
    "Brannoc",
    "Lower Ditch",
    "Blue Boar",
    "Jory",
    "Zahra",
    "Ysolde",
    "spiders",
)


@dataclass
class Outcome:
    """What a played scenario produced.

    Attributes:
        silent_ticks (int): Awake ticks that did not reply.
        compactions (list): One dict per successful compaction: the compaction's result,
            plus ``compacted_tokens`` (the replaced messages' tokens) and ``facts_lost``
            (the facts planted so far that could no longer be found right after it).
        failed_steps (int): Compactions and sleep steps that failed.
        peak_usage (float): The fullest the context was after a step, as a fraction.
        answers (list): One dict per question checked: ``question``, ``places`` (where
            its fact was when asked) and ``right``.
        spoken (list): The lines spoken so far.
        reflections (list): What each reflection did (``ai.reflection.reflect``'s result).
        goal_status (str): The status ``GOAL`` reached over the quiet ticks after the
            conversation.
    """

    silent_ticks: int = 0
    compactions: list = field(default_factory=list)
    failed_steps: int = 0
    peak_usage: float = 0.0
    answers: list = field(default_factory=list)
    spoken: list = field(default_factory=list)
    reflections: list = field(default_factory=list)
    goal_status: str = ""


def boot_evennia(game_dir):
    """Load the game's settings and Django, migrate its database, then initialise Evennia.

    Args:
        game_dir (str): The Evennia game directory (holding ``server/conf/settings.py``).
    """
    game_dir = os.path.abspath(game_dir)
    os.chdir(game_dir)
    sys.path.insert(0, game_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "server.conf.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    import evennia

    evennia._init()


def remove_previous_cast():
    """Delete the objects a previous run left behind, so every run starts afresh."""
    from evennia.utils.search import search_object

    for key in (ASSISTANT, *PLAYERS, ROOM):
        for obj in search_object(key, exact=True):
            obj.delete()


def build_cast():
    """Create the tavern, its three players and the assistant, with the demo's small window.

    Returns:
        tuple: ``(players, assistant)``: players by name, and the AssistantCharacter.
    """
    from evennia.utils import create

    room = create.create_object(ROOM_TYPECLASS, key=ROOM, nohome=True)
    players = {
        name: create.create_object(PLAYER_TYPECLASS, key=name, location=room, home=room)
        for name in PLAYERS
    }
    assistant = create.create_object(ASSISTANT_TYPECLASS, key=ASSISTANT, location=room, home=room)
    script = assistant.assistant_script
    # The driver plays the ticker: stop the script's own timer so only our ticks run.
    script.stop()
    script.set_config("max_context_tokens", MAX_CONTEXT_TOKENS)
    script.set_config("compact_preserve_window", PRESERVE_WINDOW)
    script.set_config("compact_prompt", short_summary_prompt())
    script.set_config("journal_prune_age", JOURNAL_PRUNE_AGE_DAYS)
    script.set_config("journal_prune_importance", JOURNAL_PRUNE_IMPORTANCE)
    return players, assistant


def short_summary_prompt():
    """Return the default summary prompt with the demo's shorter word limit."""
    from ai.llm_interaction import DEFAULT_COMPACTION_PROMPT

    return DEFAULT_COMPACTION_PROMPT.format(max_words=SUMMARY_WORDS)


def say(text, indent="", subsequent_indent=None):
    """Print ``text`` wrapped to ``WIDTH`` columns, line by line: its first line after
    ``indent``, the others after ``subsequent_indent`` (two more spaces by default)."""
    if subsequent_indent is None:
        subsequent_indent = indent + "  "
    for number, line in enumerate(text.splitlines() or [""]):
        first = indent if number == 0 else subsequent_indent
        print(
            textwrap.fill(
                line,
                WIDTH,
                initial_indent=first,
                subsequent_indent=subsequent_indent,
                break_on_hyphens=False,
            )
        )


def print_header(script):
    """Print what is being run, with which model, and the context limit and thresholds."""
    from ai.llm_interaction import resolve_model

    config = script.effective_config()
    usage = script.context_usage()
    print(RULE)
    say(f"evennia-ai demo: {ASSISTANT} in the {ROOM} with {', '.join(PLAYERS)}")
    say(f"model: {resolve_model(script)} (in-process offline engine: no network, no API key)")
    say(
        f"context limit: {usage.max_tokens:,} tokens, of which the prompt's frame (all but "
        f"history) takes {usage.total_tokens - usage.history_tokens:,}; compaction in an "
        f"emergency at {config['compact_emergency_threshold']:.0%}, in sleep at "
        f"{config['compact_sleep_threshold']:.0%}, keeping the last "
        f"{config['compact_preserve_window']} messages or 20% of the limit"
    )
    say(f"{len(SCENARIO)} steps, {len(PLANTED_FACTS)} planted facts")
    print(RULE)


def reply_of(result):
    """Return what the assistant said in a tick, or a description of why it said nothing."""
    if result.get("status") == "replied":
        return result["reply"]
    return f"(no reply: {result.get('status')} {result.get('error', '')})".rstrip()


def print_usage(usage, outcome):
    """Print how full the context is, and keep the fullest it was in ``outcome``."""
    outcome.peak_usage = max(outcome.peak_usage, usage.usage)
    say(
        f"context: {usage.total_tokens:,} tokens (history {usage.history_tokens:,}, "
        f"{plural(usage.message_count, 'message')}) of {usage.max_tokens:,} = {usage.usage:.2%}",
        STEP_INDENT,
    )


def print_compaction(record):
    """Print one compaction: its kind, what it replaced, and the tokens before and after."""
    say(
        f">> {record['kind']} compaction: {plural(record['compacted_messages'], 'message')} -> "
        f"summary; history {record['original_tokens']:,} -> {record['new_tokens']:,} tokens "
        f"({record['reduction_pct']:.0f}% less); the compacted part "
        f"{record['compacted_tokens']:,} -> {record['summary_tokens']:,} tokens; context "
        f"{record['usage_before']:.0%} -> {record['usage_after']:.0%}; facts kept "
        f"{record['facts_planted'] - len(record['facts_lost'])}/{record['facts_planted']}",
        STEP_INDENT,
        STEP_INDENT + "   ",
    )


def compaction_of(result):
    """Return the compaction result a tick carries (emergency or dreaming), or None."""
    memory = result.get("emergency") or result.get("memory") or {}
    return memory.get("context_compaction")


def fact_places(script, character, facts):
    """Return where each key of ``facts`` can be found, as ``{key: set of places}``.

    The places: ``summary`` (a live ``[CONTEXT SUMMARY]``: what compaction kept),
    ``recent`` (another live message), ``journal`` (an entry of the active journal) and
    ``memory`` (a long-term memory, current or superseded). A lost fact maps to an empty
    set.
    """
    from ai.helpers.journal import journal_entries
    from ai.models import MemoryLink

    live = script.conversation_history
    memories = MemoryLink.objects.filter(db_object_id=character.id).exclude(memory_id="")
    texts = {
        "summary": [m["content"] for m in live if m["metadata"].get("type") == "compaction"],
        "recent": [
            m.get("content") or "" for m in live if m["metadata"].get("type") != "compaction"
        ],
        "journal": [e["content"] for e in journal_entries(character) if not e.get("archived")],
        "memory": list(memories.values_list("text", flat=True)),
    }
    return {
        key: {place for place, found in texts.items() if any(key in text for text in found)}
        for key in facts
    }


PLACES = ("summary", "recent", "journal", "memory")
IN_CONTEXT = {"summary", "recent", "journal"}


def lost_facts(places):
    """Return the keys that ``fact_places`` found nowhere."""
    return [key for key, found in places.items() if not found]


def planted_so_far(spoken):
    """Return the keys of the planted facts that appear in the lines spoken so far."""
    return [key for key in PLANTED_FACTS if any(key in line for line in spoken)]


def record_compaction(script, result, outcome):
    """Record and print the compaction a tick ran, if it ran one; report failed attempts."""
    from ai.models import ConversationMessage

    compaction = compaction_of(result)
    if not compaction or compaction.get("skipped"):
        return
    if not compaction.get("success"):
        outcome.failed_steps += 1
        say(f">> {compaction['kind']} compaction failed: {compaction['error']}", STEP_INDENT)
        return
    summary = ConversationMessage.objects.get(pk=compaction["summary_id"])
    planted = planted_so_far(outcome.spoken)
    record = dict(
        compaction,
        compacted_tokens=summary.metadata["original_token_count"],
        facts_planted=len(planted),
        facts_lost=lost_facts(fact_places(script, script.obj, planted)),
    )
    outcome.compactions.append(record)
    print_compaction(record)


@defer.inlineCallbacks
def talk(script, player, line, outcome):
    """Say ``line`` as ``player``, then run one tick and print the reply."""
    answer = ANSWERS.get(line)
    before = fact_places(script, script.obj, [answer])[answer] if answer else set()
    player.execute_cmd(f"say {line}")
    outcome.spoken.append(line)
    result = yield script.at_repeat()
    if result.get("status") != "replied":
        outcome.silent_ticks += 1
    record_compaction(script, result, outcome)
    say(f"{ASSISTANT}: {reply_of(result)}", STEP_INDENT)
    if answer:
        right = answer.lower() in reply_of(result).lower()
        outcome.answers.append({"question": line, "places": before, "right": right})
        if right and not before & IN_CONTEXT:
            say("(answered from long-term memory: not in the live context or journal)", STEP_INDENT)
    print_usage(script.context_usage(), outcome)


@defer.inlineCallbacks
def sleep(script, outcome):
    """Send the assistant to sleep and run its dozing tick, then its dreaming tick."""
    script.fall_asleep("demo")
    for _ in range(SLEEP_TICKS):
        result = yield script.at_repeat()
        compaction = compaction_of(result) or {}
        skipped = f" (no compaction: {compaction['reason']})" if compaction.get("skipped") else ""
        say(f"{ASSISTANT} is {result.get('phase', result.get('status'))}{skipped}", STEP_INDENT)
        record_reflection(script, result.get("reflection"), outcome)
        print_memory_work(result.get("memory") or {}, outcome)
        record_compaction(script, result, outcome)
    print_usage(script.context_usage(), outcome)


def record_reflection(script, reflection, outcome):
    """Record and print what a reflection did: each insight and the entries it cites."""
    from ai.helpers.journal import journal_entries

    if not reflection:
        return
    outcome.reflections.append(reflection)
    if reflection.get("error"):
        outcome.failed_steps += 1
    entries = {entry["id"]: entry for entry in journal_entries(script.obj)}
    say(
        f">> reflection: {plural(len(reflection['covered']), 'journal entry', 'journal entries')}"
        f" reread, {plural(len(reflection['insights']), 'insight')} written"
        + (f" (FAILED: {reflection['error']})" if reflection.get("error") else ""),
        STEP_INDENT,
        STEP_INDENT + "   ",
    )
    for entry_id in reflection["insights"]:
        insight = entries[entry_id]
        say(f"insight: {insight['content']}", STEP_INDENT + "   ", STEP_INDENT + "     ")
        for cited in insight["cites"]:
            text = preview(entries[cited]["content"], WIDTH - len(STEP_INDENT) - 7)
            say(f"cites {cited}: {text}", STEP_INDENT + "     ", STEP_INDENT + "       ")


@defer.inlineCallbacks
def reflect(script, outcome):
    """Run an idle awake tick that reflects on what the journal holds since the last
    reflection, the threshold lowered to that importance when it is below it."""
    from ai.helpers.insights import pending_importance

    pending = int(pending_importance(script.obj))
    threshold = script.get_config("reflection_threshold")
    if 0 < pending < threshold:
        script.set_config("reflection_threshold", pending)
        say(
            f"(reflection_threshold lowered from {threshold} to {pending}, the importance "
            f"journaled since the last reflection)",
            STEP_INDENT,
        )
    result = yield script.at_repeat()
    if result.get("status") not in ("reflected", "reflection_failed"):
        say(f"{ASSISTANT} is {result.get('status')}: nothing to reflect on", STEP_INDENT)
    record_reflection(script, result if "insights" in result else None, outcome)


def print_memory_work(memory, outcome):
    """Print what a dreaming tick's memory operations did, one short line each."""
    done = []
    consolidation = memory.get("memory_consolidation") or {}
    if consolidation.get("consolidated_entry_ids"):
        entries = len(consolidation["consolidated_entry_ids"])
        done.append(
            f"long-term memory: {plural(entries, 'journal entry', 'journal entries')} "
            f"consolidated, {plural(consolidation['memories_added'], 'memory', 'memories')} "
            f"added, {plural(len(consolidation['superseded']), 'older fact')} superseded"
        )
    entities = memory.get("entity_consolidation") or {}
    if entities.get("consolidated"):
        done.append(
            f"entity profiles: {plural(len(entities['consolidated']), 'new observation')} "
            f"consolidated, {plural(len(entities['superseded']), 'older one')} superseded"
        )
    pruned = memory.get("episodic_prune") or {}
    if pruned.get("archived"):
        archived = plural(pruned["archived"], "consolidated entry", "consolidated entries")
        done.append(f"journal: {archived} left the active journal")
    for step, result in memory.items():
        if step != "context_compaction" and (result or {}).get("error"):
            outcome.failed_steps += 1
            done.append(f"{step} FAILED: {result['error']}")
    for line in done:
        say(f">> {line}", STEP_INDENT, STEP_INDENT + "   ")


@defer.inlineCallbacks
def play(players, assistant):
    """Play the scenario: a spoken line then one tick, or a sleep, per step.

    Returns:
        Deferred: Fires with the :class:`Outcome`.
    """
    script = assistant.assistant_script
    print_header(script)
    outcome = Outcome()
    for number, step in enumerate(SCENARIO, start=1):
        if step == SLEEP:
            say(f"[{number:2d}] (the tavern goes quiet; {ASSISTANT} falls asleep)", "", STEP_INDENT)
            yield sleep(script, outcome)
        else:
            speaker, line = step
            say(f"[{number:2d}] {speaker}: {line}", "", STEP_INDENT)
            yield talk(script, players[speaker], line, outcome)
    say(f"[{len(SCENARIO) + 1:2d}] (the tavern is quiet; {ASSISTANT} reflects)", "", STEP_INDENT)
    yield reflect(script, outcome)
    say(f"[{len(SCENARIO) + 2:2d}] (a builder gives {ASSISTANT} a goal: {GOAL})", "", STEP_INDENT)
    yield pursue(script, outcome)
    return outcome


@defer.inlineCallbacks
def pursue(script, outcome):
    """Give the assistant ``GOAL`` as a builder would, then run quiet ticks (one autonomous
    turn each, ``autonomous_interval`` 1) until it is done, ``GOAL_TICKS`` at most, printing
    what each did."""
    from ai.helpers.goals import GoalLimits, add_goal
    from ai.models import Goal

    script.set_config("autonomous_interval", 1)
    goal = add_goal(script.obj, GOAL, "builder", GoalLimits.of(script))
    for _ in range(GOAL_TICKS):
        result = yield script.at_repeat()
        status = result.get("status")
        if status == "decomposed":
            steps = Goal.objects.filter(parent=goal).order_by("id")
            say(f">> broken into {plural(steps.count(), 'step')}:", STEP_INDENT)
            for step in steps:
                say(f"#{step.id} {step.text}", STEP_INDENT + "   ")
        elif status == "autonomous":
            calls = ", ".join(result["loop"].tools_called) or "no tool"
            say(f">> autonomous turn: {calls}", STEP_INDENT)
        goal.refresh_from_db()
        if goal.status != "active":
            break
    outcome.goal_status = goal.status
    say(f">> goal #{goal.id} is {goal.status}", STEP_INDENT)


def preview(text, width):
    """Return ``text`` on one line, cut to ``width`` characters."""
    flat = " / ".join(line.strip() for line in text.splitlines() if line.strip())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def print_compactions(compactions):
    """Print every compaction: kind, history tokens before and after, and the compacted
    part's tokens before and after (a table within ``WIDTH`` columns)."""
    print(f"compactions: {len(compactions)}")
    if compactions:
        print(f"{'':5}{'kind':<11}{'history, tokens':<31}compacted part, tokens")
    for number, record in enumerate(compactions, start=1):
        print(
            f"  {number:>2} {record['kind']:<9}  "
            f"{record['original_tokens']:>6,} -> {record['new_tokens']:>6,} "
            f"({record['reduction_pct']:>3.0f}% less)   "
            f"{record['compacted_tokens']:>6,} -> {record['summary_tokens']:>5,} "
            f"({1 - record['summary_tokens'] / record['compacted_tokens']:>4.0%} less)"
        )


def print_superseded(character):
    """Print every long-term memory that a newer fact replaced, with the newer one."""
    from ai.models import MemoryLink

    replaced = MemoryLink.objects.filter(db_object_id=character.id, superseded_by__isnull=False)
    print(f"long-term memories superseded by a newer fact: {replaced.count()}")
    for link in replaced.select_related("superseded_by"):
        print(f"  {preview(link.text, WIDTH - 2)}")
        print(f"    -> {preview(link.superseded_by.text, WIDTH - 7)}")


def print_journal(character):
    """Print the journal's entries, oldest first: archived or not, importance, and the
    entry on one line (a compaction's synthesis as what it kept; see ``listed``)."""
    from ai.helpers.journal import journal_entries, listed

    entries = journal_entries(character)
    count = plural(len(entries), "entry", "entries")
    print(f"journal: {count} (a: archived, out of the active journal)")
    for number, (entry, text) in enumerate(zip(entries, listed(entries)), start=1):
        row = f"  {number:>2} {'a' if entry.get('archived') else ' '}[{entry['importance']:>2}] "
        print(row + preview(text, WIDTH - len(row)))


def problems_of(outcome, lost):
    """Return what makes the run a failure: silent ticks, too few compactions, lost facts,
    no answer from long-term memory alone, no insight, a goal not reached."""
    problems = []
    if outcome.failed_steps:
        problems.append(f"{plural(outcome.failed_steps, 'compaction or sleep step')} failed")
    if outcome.peak_usage > 1:
        problems.append(f"the context was over its limit ({outcome.peak_usage:.1%})")
    if not from_memory(outcome):
        problems.append("no question was answered from long-term memory alone")
    if outcome.silent_ticks:
        problems.append(f"{plural(outcome.silent_ticks, 'tick')} did not reply")
    for kind, required in REQUIRED_COMPACTIONS.items():
        done = sum(1 for record in outcome.compactions if record["kind"] == kind)
        if done < required:
            problems.append(f"{plural(done, f'{kind} compaction')}, fewer than {required}")
    if lost:
        problems.append(f"planted facts lost: {', '.join(lost)}")
    if not any(reflection["insights"] for reflection in outcome.reflections):
        problems.append("no reflection wrote an insight")
    if outcome.goal_status != "done":
        problems.append(f"the goal was not reached (it is {outcome.goal_status or 'absent'})")
    return problems


def from_memory(outcome):
    """Return the answers that were right while their fact was only in long-term memory."""
    return [a for a in outcome.answers if a["right"] and not a["places"] & IN_CONTEXT]


def print_answers(outcome):
    """Print each checked question: right or wrong, and where its fact was when asked."""
    right = sum(answer["right"] for answer in outcome.answers)
    say(
        f"questions checked: {right}/{len(outcome.answers)} right, of which answered from "
        f"long-term memory alone (the fact in neither the live context nor the active "
        f"journal): {len(from_memory(outcome))}; where each fact was when asked:"
    )
    for answer in outcome.answers:
        places = ", ".join(sorted(answer["places"])) or "nowhere"
        verdict = "right" if answer["right"] else "WRONG"
        say(f"{verdict:<5}  {answer['question']} ({places})", "  ", " " * 9)


def report(assistant, outcome):
    """Print the compactions, the journal and the planted facts; return the exit code."""
    places = fact_places(assistant.assistant_script, assistant, PLANTED_FACTS)
    lost = lost_facts(places)
    print(RULE)
    print_compactions(outcome.compactions)
    print_journal(assistant)
    print_superseded(assistant)
    counts = {place: sum(place in found for found in places.values()) for place in PLACES}
    say(
        f"planted facts found: {len(places) - len(lost)}/{len(places)} (in a live summary "
        f"{counts['summary']}, in the recent messages {counts['recent']}, in the active "
        f"journal {counts['journal']}, in long-term memory {counts['memory']})"
    )
    print_answers(outcome)
    if lost:
        say(f"missing: {', '.join(lost)}", "  ")
    problems = problems_of(outcome, lost)
    for problem in problems:
        print(textwrap.fill(problem, WIDTH, subsequent_indent="  "), file=sys.stderr)
    return 1 if problems else 0


def run_in_reactor(function, *args):
    """Run ``function(*args)``, which returns a Deferred, inside Twisted's real reactor.

    Returns:
        The Deferred's result, or a :class:`~twisted.python.failure.Failure` if it failed.
    """
    results = []

    def start():
        running = defer.maybeDeferred(function, *args)
        running.addBoth(results.append)
        running.addBoth(lambda _: reactor.stop())

    reactor.callWhenRunning(start)
    reactor.run()
    return results[0] if results else Failure(RuntimeError("the reactor stopped early"))


def main(argv):
    """Boot the game, (re)build the cast, play the scenario; return the exit code."""
    from ai.utils.network_guard import forbid_network

    started = time.monotonic()
    forbid_network()
    boot_evennia(argv[1] if len(argv) > 1 else DEFAULT_GAME_DIR)
    remove_previous_cast()
    players, assistant = build_cast()
    outcome = run_in_reactor(play, players, assistant)
    if isinstance(outcome, Failure):
        outcome.printTraceback(file=sys.stderr)
        return 1
    code = report(assistant, outcome)
    # Its timer again, paused as a server shutdown leaves it (Evennia's own call there): the
    # next server started on this game (make demo-server) resumes it, and the assistant ticks.
    script = assistant.assistant_script
    script.start()
    script._pause_task(auto_pause=True)
    print(RULE)
    print(f"done in {time.monotonic() - started:.1f}s")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
