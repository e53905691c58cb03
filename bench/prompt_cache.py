"""Prompt caching: how much of each model call's prompt repeats the previous call's prefix.

Providers and local servers reuse the unchanged prefix of a prompt (Anthropic and OpenAI
bill it at a fraction; llama.cpp skips evaluating it). An assistant on the offline engine
plays a conversation in a tavern, inside Twisted's real reactor: four players talk (facts,
questions, greetings), one arrives late, the room's ambience changes, the assistant
journals facts and notes observations of the speakers (tool calls), and lines recall
journal entries of an earlier evening that history no longer holds. Every call to
``litellm.completion`` is captured as sent (the tool schemas, then the messages) and
compared with the call before it, as a prefix cache would: whole parts while they are
identical, then byte by byte within the first part that differs. Tokens are counted with
the model's counter (cl100k for the offline engine) over the JSON of each part.

Reported per layout (``prompt_layout``): the median and mean share of a call's prompt
tokens (and bytes) that is an identical prefix of the previous call's prompt, the mean
tokens after that prefix (what a server must evaluate afresh), which component first
breaks the prefix, how often, and how many replies were the same as under ``seed``.
Prints JSON; always exits 0 (a report, not a test). Run from the repository root:
``make bench``, or ``.venv/bin/python bench/prompt_cache.py``.
"""

import json
import os
import statistics
import sys
from collections import Counter

from bench_env import setup_evennia
from twisted.internet import defer
from twisted.python.failure import Failure

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demo")
)
from play import run_in_reactor  # noqa: E402  (the demo's reactor runner)

MODEL = "offline/assistant"
LAYOUTS = ("seed", "cache_friendly")
PLAYERS = ("Alice", "Bob", "Carol")
LATECOMER = "Dana"
# Journaled on an earlier evening: out of history, recalled by lines that share their words.
OLD_FACTS = (
    "Alice said: the lighthouse keeper Morwen trades lamp oil for herring.",
    "Bob said: the forge bellows were mended by the tinker Jory.",
    "Carol said: the bridge toll at Dunmere is three copper.",
    "Dana said: the healer Mira grows feverfew behind the chapel.",
    "Alice said: the cellar door sticks when it rains.",
    "Bob said: the north gate closes at the tenth bell.",
    "Carol said: the ferry to Port Ashby carries no horses.",
    "Dana said: the old mine road floods every spring.",
)
# (kind, who, text): a "say" line is a tick; a "pose" is the room's ambience (it does not
# name the assistant); "arrive" brings the latecomer in.
SCENARIO = (
    ("say", "Alice", "Good evening, Helper!"),
    ("say", "Bob", "My name is Bob and I run the forge by the north gate."),
    ("pose", "Carol", "shakes the rain from her cloak."),
    ("say", "Carol", "I buried 40 gold coins under the old oak in Mirkwood."),
    ("say", "Alice", "I promised Bob 12 iron ingots by Friday."),
    ("say", "Bob", "The password for the cellar door is swordfish."),
    ("say", "Alice", "Does the cellar door stick when it rains?"),
    ("say", "Carol", "My horse is called Thunder and she is seven years old."),
    ("pose", "Bob", "stokes the fire."),
    ("say", "Alice", "Where did Carol bury the gold coins?"),
    ("say", "Bob", "When does the north gate close?"),
    ("say", "Carol", "The ferry to Port Ashby leaves at six bells."),
    ("arrive", LATECOMER, ""),
    ("say", LATECOMER, "Hello everyone, what a storm!"),
    ("say", LATECOMER, "I saw the healer Mira at the chapel today."),
    ("say", "Alice", "My brother Edwin keeps bees in Riverrun."),
    ("say", "Bob", "Who trades lamp oil for herring?"),
    ("pose", LATECOMER, "hangs her lantern by the door."),
    ("say", "Carol", "What is the password for the cellar door?"),
    ("say", LATECOMER, "My cousin Tomas lost three hammers in the river."),
    ("say", "Alice", "I owe the innkeeper 25 silver pieces."),
    ("say", "Bob", "Who mended the forge bellows?"),
    ("say", "Carol", "The dwarves of Khazad Gorm trade mithril for amber."),
    ("say", LATECOMER, "Does the old mine road flood?"),
    ("say", "Alice", "How many iron ingots will I bring Bob?"),
    ("pose", "Alice", "laughs at something Bob said."),
    ("say", "Bob", "My apprentice Wren starts on Monday."),
    ("say", "Carol", "How much is the bridge toll at Dunmere?"),
    ("say", LATECOMER, "The map to the dragon lair is in the bell tower."),
    ("say", "Alice", "Where is the map to the dragon lair?"),
    ("say", "Bob", "I will meet the wizard Orrin at the crossroads on Sunday."),
    ("say", "Carol", "Does the ferry carry horses?"),
    ("say", LATECOMER, "Where does Mira grow feverfew?"),
    ("say", "Alice", "Thank you, Helper."),
    ("pose", "Carol", "yawns and stretches."),
    ("say", "Bob", "The harbour master Quentin charges 7 copper per crate."),
    ("say", "Carol", "What is my horse called?"),
    ("say", LATECOMER, "My sister Elena captains the watch at Greyhaven."),
    ("say", "Alice", "Who keeps bees in Riverrun?"),
    ("say", "Bob", "Who captains the watch at Greyhaven?"),
    ("say", "Carol", "How much silver does Alice owe the innkeeper?"),
    ("say", LATECOMER, "Who did Bob say he will meet on Sunday?"),
    ("say", "Alice", "When does the ferry leave?"),
    ("say", "Bob", "Where is my forge?"),
    ("say", LATECOMER, "Who lost three hammers in the river?"),
    ("pose", "Bob", "pours another round."),
    ("say", "Alice", "Wren will be a fine apprentice, Bob."),
    ("say", "Bob", "Who trades mithril for amber?"),
    ("say", "Alice", "Where does the healer Mira grow feverfew?"),
    ("say", "Carol", "Good night, Helper."),
    ("say", LATECOMER, "Good night, all."),
)


def build_cast(layout):
    """Create a tavern with the players, the latecomer next door, and an assistant.

    Returns:
        tuple: ``(people by name, assistant)``.
    """
    from evennia.utils import create

    from ai.helpers.journal import add_entry

    room = create.create_object("typeclasses.rooms.Room", key=f"Tavern ({layout})", nohome=True)
    porch = create.create_object("typeclasses.rooms.Room", key=f"Porch ({layout})", nohome=True)
    people = {
        name: create.create_object(
            "typeclasses.characters.Character",
            key=name,
            location=porch if name == LATECOMER else room,
            home=room,
        )
        for name in (*PLAYERS, LATECOMER)
    }
    assistant = create.create_object(
        "ai.assistant_character.AssistantCharacter", key="Helper", location=room, home=room
    )
    script = assistant.assistant_script
    script.stop()  # the driver plays the ticker
    script.set_config("prompt_layout", layout)
    # Recall from the journal alone: Mem0's embedder would load a model for the same effect.
    script.set_config("memory_enabled", False)
    for fact in OLD_FACTS:
        add_entry(assistant, fact, "conversation", importance=5)
    return people, assistant


class Recorder:
    """Captures what each model call sends, and which component each message came from."""

    def __init__(self):
        import litellm

        import ai.tool_execution as loop

        self.calls, self.prompt = [], None
        self._completion, self._assemble = litellm.completion, loop.assemble_prompt
        litellm.completion, loop.assemble_prompt = self.completion, self.assemble

    def close(self):
        import litellm

        import ai.tool_execution as loop

        litellm.completion, loop.assemble_prompt = self._completion, self._assemble

    def assemble(self, *args, **kwargs):
        self.prompt = self._assemble(*args, **kwargs)
        return self.prompt

    def completion(self, **kwargs):
        messages = kwargs["messages"]
        self.calls.append(
            {"tools": kwargs.get("tools"), "messages": messages, "labels": self.labels(messages)}
        )
        return self._completion(**kwargs)

    def labels(self, messages):
        """Name each message by its component (``nudge`` for one the loop added after)."""
        labels = []
        for key in self.prompt.components:
            count = self.prompt.history_included if key == "conversation_history" else 1
            labels += [key] * count
        return labels + ["nudge"] * (len(messages) - len(labels))


def parts(call):
    """Return a call's ``(component, JSON text)`` parts: the tool schemas, then each message."""
    found = [("tool_schemas", json.dumps(call["tools"]))] if call["tools"] else []
    return found + [(label, json.dumps(m)) for label, m in zip(call["labels"], call["messages"])]


def shared_prefix(previous, current):
    """Return the text ``current`` shares as a prefix with ``previous``, and what broke it.

    Parts are compared whole while identical, then byte by byte within the first part
    that differs. What broke the prefix is that part's component, or ``<component> in
    place of <component>`` when the previous call had another component there (history
    that grew where the previous call's later parts were); None when ``previous`` is a
    prefix of ``current``.
    """
    shared = []
    for index, (label, text) in enumerate(current):
        if index >= len(previous):
            break
        was, before = previous[index]
        if before != text:
            shared.append(os.path.commonprefix([before, text]))
            return "".join(shared), label if label == was else f"{label} in place of {was}"
        shared.append(text)
    return "".join(shared), None


def measure(calls):
    """Return the prefix shares of the calls after the first, and what broke their prefix."""
    from ai.utils.token_counter import count_tokens

    tokens, sizes, fresh, breakers = [], [], [], Counter()
    for previous, current in zip(calls, calls[1:]):
        now = parts(current)
        whole = "".join(text for _, text in now)
        prefix, broken_by = shared_prefix(parts(previous), now)
        shared, total = count_tokens(prefix, MODEL), count_tokens(whole, MODEL)
        tokens.append(shared / total)
        fresh.append(total - shared)
        sizes.append(len(prefix.encode()) / len(whole.encode()))
        breakers[broken_by or "nothing (the previous prompt is a prefix)"] += 1
    prompts = (count_tokens("".join(text for _, text in parts(call)), MODEL) for call in calls)
    return {
        "calls": len(calls),
        "mean_prompt_tokens": round(statistics.mean(prompts)),
        "prefix_share_tokens": {
            "median": round(statistics.median(tokens), 3),
            "mean": round(statistics.mean(tokens), 3),
        },
        "mean_tokens_after_the_prefix": round(statistics.mean(fresh)),
        "prefix_share_bytes": {
            "median": round(statistics.median(sizes), 3),
            "mean": round(statistics.mean(sizes), 3),
        },
        "first_break": dict(breakers.most_common()),
    }


@defer.inlineCallbacks
def play(layout):
    """Play the scenario with an assistant of ``layout``; return the captured calls."""
    people, assistant = build_cast(layout)
    script, recorder = assistant.assistant_script, Recorder()
    replies = []
    try:
        for kind, who, text in SCENARIO:
            person = people[who]
            if kind == "arrive":
                person.move_to(assistant.location, quiet=False)
            elif kind == "pose":
                person.execute_cmd(f"pose {text}")
            else:
                person.execute_cmd(f"say {text}")
                result = yield script.at_repeat()
                replies.append(result.get("reply"))
    finally:
        recorder.close()
    return {"calls": recorder.calls, "replies": replies}


@defer.inlineCallbacks
def play_all():
    """Play the scenario once per layout."""
    played = {}
    for layout in LAYOUTS:
        played[layout] = yield play(layout)
    return played


def main():
    """Play the scenario under each layout and print the prefix shares as JSON."""
    from ai.utils.network_guard import forbid_network

    forbid_network()
    setup_evennia()
    played = run_in_reactor(play_all)
    if isinstance(played, Failure):
        played.printTraceback(file=sys.stderr)
        return
    ticks = sum(kind == "say" for kind, _, _ in SCENARIO)
    figures = {
        "model": MODEL,
        "ticks": ticks,
        "unit": "share of a call's prompt (tool schemas, then messages, as JSON) that is an "
        "identical prefix of the previous call's prompt; tokens counted with the model's "
        "counter",
        "layouts": {
            layout: dict(
                measure(result["calls"]),
                same_replies_as_seed=sum(
                    mine == seed for mine, seed in zip(result["replies"], played["seed"]["replies"])
                ),
            )
            for layout, result in played.items()
        },
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
