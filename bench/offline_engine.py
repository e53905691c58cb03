"""The offline engine's cost per call: its answer, and counting the prompt's tokens.

The offline engine (the default model) reports the tokens of each prompt it answers, as a
provider does. A prompt sends the history's messages again call after call; counting
them anew with tiktoken took a third of the engine's thread at 50 assistants (issue 23).
The engine now keeps the counts of plain messages by their text
(``ai.utils.token_counter.kept_message_tokens``). For prompts of ``SIZES`` messages, this
reports the CPU time of one count both ways, in the same run: every message counted anew
(``count_message_tokens``, as before) and through the kept counts (after a first call).

Its answer to a question read every earlier line again (its words, whether it asks), 22
ms of CPU at 2,000 messages; the engine now keeps each line's reading
(``ai.offline.responder``). The answer to a question at the end of the same prompts is
timed both ways in one run: on lines never read before (each repetition says them with
its own number) and on the same lines again, as every later call of a conversation does.
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


# What the answer's prompt offers and asks (``respond`` reads the tools' names).
TOOLS = [{"type": "function", "function": {"name": name}} for name in ("say", "noop")]
QUESTION = {"role": "user", "content": 'Char1 says, "Which pier does the ferry leave from?"'}


def answer_prompt(size, salt):
    """Return instructions, ``size`` player lines said with ``salt`` and a question."""
    lines = [dict(line, content=f"{line['content'][:-1]} ({salt})\"") for line in prompt(size)]
    return [{"role": "system", "content": "You are Sage."}, *lines, QUESTION]


def answer_ms(size):
    """Return the median CPU milliseconds of answering the question: on lines never read,
    then on the same lines again."""
    from ai.offline.responder import respond

    fresh, again = [], []
    for rep in range(REPS):
        messages = answer_prompt(size, rep)
        for times in (fresh, again):
            started = time.thread_time()
            respond(messages, TOOLS)
            times.append((time.thread_time() - started) * 1000)
    return [round(sorted(times)[len(times) // 2], 2) for times in (fresh, again)]


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
    from ai.utils.token_counter import count_message_tokens, kept_message_tokens

    results = []
    for size in SIZES:
        messages = prompt(size)
        anew = cpu_ms(count_message_tokens, messages)
        kept = cpu_ms(kept_message_tokens, messages)
        results.append({"messages": size, "recounted_ms": anew, "kept_ms": kept})
    answers = []
    for size in SIZES:
        fresh, again = answer_ms(size)
        answers.append({"messages": size, "lines_read_anew_ms": fresh, "lines_kept_ms": again})
    print(
        json.dumps({"model": MODEL, "prompt_count_cpu": results, "answer_cpu": answers}, indent=2)
    )


if __name__ == "__main__":
    main()
