"""The offline engine's usage figures: counting a prompt's tokens, recounted or kept.

The offline engine (the default model) reports the tokens of each prompt it answers, as a
provider does. A prompt sends the history's messages again call after call; counting
them anew with tiktoken took a third of the engine's thread at 50 assistants (issue 23).
The engine now keeps the counts of plain messages by their text
(``ai.offline.engine.prompt_message_tokens``). For prompts of ``SIZES`` messages, this
reports the CPU time of one count both ways, in the same run: every message counted anew
(``count_message_tokens``, as before) and through the kept counts (after a first call).
Prints JSON; always exits 0.

Run from the repository root: ``python bench/offline_engine.py`` (``make bench`` runs it).
"""

import json
import time

from bench_env import setup_evennia

SIZES = (100, 2000)
REPS = 20
MODEL = "offline/assistant"


def prompt(size):
    """Return ``size`` player lines as the history sends them."""
    return [
        {
            "role": "user",
            "content": f'Char{i % 3} says, "The ferry number {i} leaves at dawn from the pier."',
        }
        for i in range(size)
    ]


def cpu_ms(count, messages):
    """Return the median CPU milliseconds of counting ``messages`` with ``count``."""
    times = []
    for _ in range(REPS):
        started = time.thread_time()
        sum(count(message, MODEL) for message in messages)
        times.append((time.thread_time() - started) * 1000)
    return round(sorted(times)[len(times) // 2], 2)


def main():
    setup_evennia()
    from ai.offline.engine import prompt_message_tokens
    from ai.utils.token_counter import count_message_tokens

    results = []
    for size in SIZES:
        messages = prompt(size)
        anew = cpu_ms(count_message_tokens, messages)
        kept = cpu_ms(prompt_message_tokens, messages)
        results.append({"messages": size, "recounted_ms": anew, "kept_ms": kept})
    print(json.dumps({"model": MODEL, "prompt_count_cpu": results}, indent=2))


if __name__ == "__main__":
    main()
