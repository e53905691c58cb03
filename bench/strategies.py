"""Compaction strategies side by side: the same conversation under each ``compact_strategy``.

Three players talk to the assistant in a tavern, plant facts, have it read things in the
room (the ``look`` tool, whose outputs are the bulk masking works on) and ask about both
later; now and then the tavern goes quiet and the assistant sleeps. The window is small,
so the history is compacted several times. The same scenario runs once per strategy, on
the offline engine, each with a fresh cast; then again with a builder's goal and, after
every third line, three quiet ticks in which the assistant takes autonomous turns toward it
(``with_autonomous_turns``: its ``autonomous_turns`` are counted). Prints JSON, one entry
per scenario and strategy:

- ``runs_compacted``: the runs of assistant messages that ``assistant_runs`` compactions
  replaced (``runs`` of each such compaction, added up);
- ``compactions``: each compaction's kind, strategy and history tokens before and after;
- ``model_calls``: the calls the engine answered, by purpose (conversation, summary,
  extraction, other); what a strategy spends is its summary and extraction calls;
- ``facts``: where each planted fact is at the end: the live history (``in_history``),
  the active journal, only the archive (recoverable with ``search_history`` or
  ``aihistory/archived``), or nowhere (``lost``);
- ``answers_right``: the questions answered right, of those asked, and the wrong replies;
- ``final_history_tokens`` and ``peak_usage``.

Run from the repository root: ``.venv/bin/python bench/strategies.py [STRATEGY ...]``
(part of ``make bench``). It is a report, not a test: it exits 0 whatever the figures.
"""

import json
import os
import sys
from collections import Counter

from bench_env import setup_evennia
from twisted.internet import defer
from twisted.python.failure import Failure

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_DIR, "demo"))

STRATEGIES = ("summary", "masking", "assistant_runs", "hybrid")
MAX_CONTEXT_TOKENS = 4000
PRESERVE_WINDOW = 5
SLEEP = "sleep"
DREAM_TICKS = 2
# Things in the tavern: what the assistant reads when asked (look outputs).
THINGS = {
    "notice board": (
        "Notices pinned in rows. WANTED: a courier for the Dunmere road, 30 silver a trip, "
        "ask Hilda at the stables. LOST: a grey cat named Pepper, reward 5 copper, bring her "
        "to the baker. The mill on Ferris Brook needs two labourers from Monday; bring your "
        "own boots. By order of the reeve, no fires on the common after dark. The harvest "
        "fair opens on the first day of autumn with a ploughing match and a pie contest."
    ),
    "price list": (
        "Chalked on a slate behind the bar: ale 2 copper, cider 3 copper, stew 4 copper, a "
        "loaf 1 copper, a room for the night 1 silver, stabling 6 copper. Roast boar on "
        "Saturdays only, 9 copper a plate. No credit for travelling minstrels. Ask the "
        "cook about the pickled eels, which are not for the faint of heart."
    ),
    "old map": (
        "A faded map of the valley, inked on calfskin. The river Lune winds from the hills "
        "to the sea. The ruined tower of Ostmark lies two days east, past the salt marsh. "
        "A dotted path marked 'smugglers' runs from the cove to the chapel. Someone has "
        "circled the ford at Hobb's Crossing in red and written 'flooded in spring'."
    ),
}
SCENARIO = [
    ("Alice", "Hello Helper, good evening!"),
    ("Bob", "My name is Bob and I run the forge by the north gate."),
    ("Carol", "Helper, could you read the notice board?"),
    ("Carol", "I buried 40 gold coins under the old oak in Mirkwood."),
    ("Alice", "I promised Bob to deliver 12 iron ingots on Friday."),
    ("Bob", "Helper, could you read the price list?"),
    ("Bob", "The password for the cellar door is swordfish."),
    ("Carol", "My horse is called Thunder and she is seven years old."),
    ("Alice", "Helper, look at the old map please."),
    ("Alice", "My brother Edwin keeps bees in the village of Riverrun."),
    SLEEP,
    ("Bob", "The ferry to Port Ashby leaves at six bells every morning."),
    ("Carol", "Who should a courier for the Dunmere road ask?"),
    ("Alice", "I owe the innkeeper 25 silver pieces since last winter."),
    ("Carol", "The healer Mira lives at the end of Willow Lane."),
    ("Bob", "Helper, read the notice board again."),
    ("Alice", "What is the grey cat on the notice board called?"),
    SLEEP,
    ("Bob", "On which day is there roast boar?"),
    ("Carol", "My sister Elena captains the city watch at Greyhaven."),
    ("Alice", "Which ruined tower lies two days east on the map?"),
    ("Bob", "Where did Carol bury the gold coins?"),
    SLEEP,
    ("Carol", "What is the horse of Carol called?"),
    ("Alice", "Who keeps bees in Riverrun?"),
    ("Bob", "When does the ferry to Port Ashby leave?"),
    ("Carol", "How much silver does Alice owe the innkeeper?"),
    ("Alice", "What is the password for the cellar door?"),
]
# The same conversation with a builder's goal, and quiet spells in which the assistant's
# idle ticks are autonomous turns toward it: consecutive assistant messages, the runs that
# assistant_runs compacts (conversation alone forms none: a reply is one model call).
QUIET = "quiet"
QUIET_TICKS = 3
GOAL = "Keep the tavern welcoming"
AUTONOMOUS_SCENARIO = [
    item
    for index, step in enumerate(SCENARIO)
    for item in ([step, QUIET] if step != SLEEP and index % 3 == 2 else [step])
]
ANSWERS = {
    "Who should a courier for the Dunmere road ask?": "Hilda",
    "What is the grey cat on the notice board called?": "Pepper",
    "On which day is there roast boar?": "Saturday",
    "Which ruined tower lies two days east on the map?": "Ostmark",
    "Where did Carol bury the gold coins?": "Mirkwood",
    "What is the horse of Carol called?": "Thunder",
    "Who keeps bees in Riverrun?": "Edwin",
    "When does the ferry to Port Ashby leave?": "six bells",
    "How much silver does Alice owe the innkeeper?": "25 silver",
    "What is the password for the cellar door?": "swordfish",
}
# A distinctive string of each planted fact, spoken or read in the tavern.
PLANTED_FACTS = (
    "north gate",
    "Hilda",
    "Pepper",
    "Ferris Brook",
    "40 gold coins",
    "12 iron ingots",
    "Roast boar",
    "swordfish",
    "Thunder",
    "Ostmark",
    "Hobb's Crossing",
    "Edwin",
    "Port Ashby",
    "25 silver",
    "Willow Lane",
    "Greyhaven",
)


def count_calls(counter):
    """Count each call the offline engine answers, by what it was for."""
    from ai.offline import responder, summarizer

    answer = responder.respond

    def counted(messages, tools=None):
        names = responder.tool_names(tools)
        if summarizer.is_summary_request(messages):
            counter["summary"] += 1
        elif "add_journal_entry" in names and not set(names) & set(responder.SPEAK_TOOL_NAMES):
            counter["extraction"] += 1
        elif set(names) & set(responder.SPEAK_TOOL_NAMES):
            counter["conversation"] += 1
        else:
            counter["other"] += 1
        return answer(messages, tools)

    responder.respond = counted


def build_cast(strategy, goal=None):
    """Create the tavern, its things, three players and an assistant using ``strategy``
    (with ``goal``, a builder's goal it pursues on every quiet tick, whole)."""
    from evennia.utils import create

    room = create.create_object(
        "evennia.objects.objects.DefaultRoom", key=f"Tavern ({strategy})", nohome=True
    )
    for key, desc in THINGS.items():
        thing = create.create_object(
            "evennia.objects.objects.DefaultObject", key=key, location=room, home=room
        )
        thing.db.desc = desc
    players = {
        name: create.create_object(
            "evennia.objects.objects.DefaultCharacter", key=name, location=room, home=room
        )
        for name in ("Alice", "Bob", "Carol")
    }
    assistant = create.create_object(
        "ai.assistant_character.AssistantCharacter", key="Helper", location=room, home=room
    )
    script = assistant.assistant_script
    script.stop()  # the benchmark plays the ticker
    for name, value in (
        ("max_context_tokens", MAX_CONTEXT_TOKENS),
        ("compact_preserve_window", PRESERVE_WINDOW),
        ("compact_strategy", strategy),
        # What compaction keeps, not what long-term memory would bring back.
        ("memory_enabled", False),
    ):
        script.set_config(name, value)
    if goal:
        from ai.helpers.goals import GoalLimits, add_goal

        script.set_config("autonomous_interval", 1)
        script.set_config("goal_max_depth", 1)  # pursued whole: no decomposition call
        add_goal(assistant, goal, "builder", GoalLimits.of(script))
    return players, assistant


def compaction_of(result):
    """Return the compaction a tick ran (emergency or dreaming), or None."""
    memory = result.get("emergency") or result.get("memory") or {}
    compaction = memory.get("context_compaction")
    return compaction if compaction and compaction.get("success") else None


def fact_places(script, character):
    """Return where each planted fact is: history, journal, archive only, or lost."""
    from ai.helpers.journal import journal_entries
    from ai.models import ConversationMessage

    live = " ".join(
        (m.get("content") or "") + json.dumps(m.get("tool_calls") or "")
        for m in script.conversation_history
    )
    journal = " ".join(e["content"] for e in journal_entries(character) if not e.get("archived"))
    archived = " ".join(
        ConversationMessage.objects.filter(db_script_id=script.id, is_live=False)
        .exclude(content=None)
        .values_list("content", flat=True)
    )
    places = {}
    for fact in PLANTED_FACTS:
        if fact in live:
            places[fact] = "in_history"
        elif fact in journal:
            places[fact] = "in_journal"
        elif fact in archived:
            places[fact] = "in_archive_only"
        else:
            places[fact] = "lost"
    return places


@defer.inlineCallbacks
def play(strategy, calls, scenario=SCENARIO, goal=None):
    """Play ``scenario`` under ``strategy`` (the assistant pursuing ``goal``, if given); fire
    with its figures."""
    players, assistant = build_cast(strategy, goal)
    script = assistant.assistant_script
    compactions, answers, peak, autonomous = [], [], 0.0, 0
    before = Counter(calls)
    for step in scenario:
        if step == QUIET:
            results = []
            for _ in range(QUIET_TICKS):
                results.append((yield script.at_repeat()))
            autonomous += sum(result.get("status") == "autonomous" for result in results)
        elif step == SLEEP:
            script.fall_asleep("benchmark")
            results = []
            for _ in range(DREAM_TICKS):
                results.append((yield script.at_repeat()))
        else:
            speaker, line = step
            players[speaker].execute_cmd(f"say {line}")
            results = [(yield script.at_repeat())]
            peak = max(peak, script.context_usage().usage)
            if line in ANSWERS:
                reply = results[0].get("reply") or ""
                answers.append((line, ANSWERS[line].lower() in reply.lower(), reply))
        for compaction in filter(None, map(compaction_of, results)):
            compactions.append(
                {
                    "kind": compaction["kind"],
                    "strategy": compaction.get("strategy", strategy),
                    "tokens_before": compaction["original_tokens"],
                    "tokens_after": compaction["new_tokens"],
                    **({"runs": compaction["runs"]} if "runs" in compaction else {}),
                }
            )
    spent = Counter(calls)
    spent.subtract(before)
    places = fact_places(script, assistant)
    figures = {"autonomous_turns": autonomous} if goal else {}
    return {
        **figures,
        "runs_compacted": sum(compaction.get("runs", 0) for compaction in compactions),
        "compactions": compactions,
        "model_calls": dict(spent),
        "facts": dict(Counter(places.values())),
        "lost_facts": [fact for fact, place in places.items() if place == "lost"],
        "answers_right": f"{sum(right for _, right, _ in answers)}/{len(answers)}",
        "wrong_answers": {line: reply for line, right, reply in answers if not right},
        "final_history_tokens": script.history.token_total(),
        "peak_usage": round(peak, 3),
    }


@defer.inlineCallbacks
def play_all(strategies):
    """Play each scenario under each strategy in turn; fire with the figures by scenario,
    then strategy."""
    calls = Counter()
    count_calls(calls)
    figures = {"conversation": {}, "with_autonomous_turns": {}}
    for strategy in strategies:
        figures["conversation"][strategy] = yield play(strategy, calls)
        figures["with_autonomous_turns"][strategy] = yield play(
            strategy, calls, AUTONOMOUS_SCENARIO, GOAL
        )
    return figures


def main(strategies):
    setup_evennia()
    import play as demo

    figures = demo.run_in_reactor(play_all, strategies)
    if isinstance(figures, Failure):
        figures.raiseException()
    print(json.dumps({"max_context_tokens": MAX_CONTEXT_TOKENS, "scenarios": figures}, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:] or STRATEGIES)
