"""The prompt's frame: what each context type sends besides history, at the defaults.

For a fresh assistant at the contrib's defaults (the offline engine, counted as cl100k),
every context type is assembled without history (``ai.context_usage.measure_frame``) and
its tokens are reported with their parts (the system prompt, the other components, the
tool schemas). ``tick_event``'s frame is what ``max_context_tokens`` must leave room
beside: the smallest window ``set_config`` accepts is reported too.

A model that litellm cannot count with a bundled encoding is counted by the heuristic (four
characters a token) until calibrated: ``--model`` measures the frame as counted for it.

Prints JSON; always exits 0 (a report, not a test). Run from the repository root:
``python bench/frame.py [--model openai/qwen2.5-coder-1.5b]``.
"""

import argparse
import json

from bench_env import new_assistant, setup_evennia


def smallest_accepted_window(script, frame_tokens):
    """Return the smallest ``max_context_tokens`` (a multiple of 100) that set_config takes."""
    from ai.config import ConfigError

    window = max(256, frame_tokens // 100 * 100)
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
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
