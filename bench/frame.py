"""The prompt's frame: what each context type sends besides history, at the defaults, and
the smallest window a conversation runs in.

For a fresh assistant at the contrib's defaults (the offline engine, counted as cl100k),
every context type is assembled without history (``ai.context_usage.measure_frame``) and
its tokens are reported with their parts (the system prompt, the other components, the
tool schemas). ``tick_event``'s frame is what ``max_context_tokens`` must leave room
beside: the smallest window ``set_config`` accepts is reported too.

Then, at each of ``WINDOWS`` (those ``set_config`` refuses stored directly, as an older
version may have), a player says ``TICKS`` lines to an assistant at the
defaults (a fact, or a question about an earlier one): reported are the ticks that
replied, the emergency compactions that ran and those that left usage over the threshold,
how many archived messages whole, and the calls that would have been over the window (not
sent). A window works when every tick replied and every emergency brought usage under the
threshold. The offline engine stands in for the model: its summaries are short, so a real
small model's may need more room.

A model that litellm cannot count with a bundled encoding is counted by the heuristic (four
characters a token) until calibrated: ``--model`` measures the frame as counted for it.

Prints JSON; always exits 0 (a report, not a test). Run from the repository root:
``python bench/frame.py [--model openai/qwen2.5-coder-1.5b]``.
"""

import argparse
import json
import os
import sys

from bench_env import new_assistant, setup_evennia
from twisted.internet import defer
from twisted.python.failure import Failure

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demo")
)
from play import run_in_reactor  # noqa: E402  (demo/play.py)

# Around the smallest window set_config accepts at the defaults (1,600), and above it.
WINDOWS = (1200, 1300, 1400, 1500, 1600, 2000, 2500)
TICKS = 40


def line(index):
    """Return the player's ``index``-th line: a fact every third line, else a question."""
    if index % 3 == 0:
        return f"Remember this: item {index} is kept in box {index * 7}, on shelf {index % 5}."
    return f"Where is item {(index // 3) * 3} kept, and is it still there?"


@defer.inlineCallbacks
def converse(window, model, accepted):
    """Return what ``TICKS`` ticks of conversation did at ``max_context_tokens`` ``window``
    (stored directly unless ``accepted``: set_config refuses it)."""
    from evennia.utils import create

    character = new_assistant(key=f"Sage{window}")
    script = character.assistant_script
    script._stop_task()
    if model:
        script.set_config("llm_model", model)
    if accepted:
        script.set_config("max_context_tokens", window)
    else:
        script.attributes.add("max_context_tokens", window)
    player = create.create_object(
        "evennia.objects.objects.DefaultCharacter", key="<player>", location=character.location
    )
    row = dict(window=window, accepted=accepted, replied=0, emergencies=0, still_over=0)
    row.update(archived=0, not_sent_over_window=0)
    for index in range(TICKS):
        script.queue_event(
            {
                "type": "speech",
                "speaker": player.dbref,
                "speaker_name": player.key,
                "text": line(index),
            }
        )
        result = yield script.at_repeat()
        row["replied"] += result.get("status") == "replied"
        row["not_sent_over_window"] += result.get("status") == "over_window"
        emergency = result.get("emergency") or {}
        if "context_compaction" in emergency:
            row["emergencies"] += 1
            row["still_over"] += bool(emergency["still_over_threshold"])
            compaction = emergency["context_compaction"]
            row["archived"] += compaction.get("archived_messages", 0)
            if "escalation" in compaction:
                row.setdefault("escalated_after", []).append(compaction["escalation"]["first"])
    row["works"] = row["replied"] == TICKS and not row["still_over"]
    return row


@defer.inlineCallbacks
def converse_at_each_window(model, smallest):
    """Return one row per window of ``WINDOWS``; ``smallest`` is the least set_config takes."""
    rows = []
    for window in WINDOWS:
        rows.append((yield converse(window, model, window >= smallest)))
    return rows


def smallest_accepted_window(script, frame_tokens):
    """Return the smallest ``max_context_tokens`` (a multiple of 100) that set_config takes."""
    from ai.config import ConfigError

    window = frame_tokens // 100 * 100
    while True:
        try:
            script.set_config("max_context_tokens", window)
            return window
        except ConfigError:
            window += 100


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="count as this model (llm_model); default: offline")
    args = parser.parse_args()
    setup_evennia()
    from ai.context_usage import measure_frame
    from ai.prompt_contexts import CONTEXT_TICK_EVENT, DEFAULT_CONTEXT_CONFIGS

    character = new_assistant()
    script = character.assistant_script
    script._stop_task()
    if args.model:
        script.set_config("llm_model", args.model)
    frames = {}
    for context_type in DEFAULT_CONTEXT_CONFIGS:
        tokens, parts = measure_frame(script, character, context_type)
        frames[context_type] = {"tokens": tokens, "parts": parts}
    tick = frames[CONTEXT_TICK_EVENT]["tokens"]
    report = {
        "model": script.get_config("llm_model"),
        "frames": frames,
        "smallest_accepted_window": smallest_accepted_window(script, tick),
    }
    if not args.model:  # a conversation needs a model that answers offline
        smallest = report["smallest_accepted_window"]
        rows = run_in_reactor(converse_at_each_window, args.model, smallest)
        if isinstance(rows, Failure):
            rows.raiseException()
        report["conversations"] = rows
        report["smallest_working_window"] = min(
            (row["window"] for row in rows if row["works"]), default=None
        )
        report["refused_windows_that_work"] = [
            row["window"] for row in rows if row["works"] and not row["accepted"]
        ]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
