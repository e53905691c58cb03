"""Tick overhead: the cost of one history append and one threshold check as history grows.

Compares the history store (``ai.history.ConversationHistory``: one INSERT plus one counter
UPDATE per append, one counter read per check) with the naive design of a list in
``script.db.conversation_history`` whose tokens are recounted every tick. Prints JSON with
the median milliseconds at each history size and whether the targets are met; it always
exits 0, since it is a report rather than a test.

Run from the repository root: ``make bench``.
"""

import json
import statistics
import time

from bench_env import new_assistant, setup_evennia

SIZES = (100, 1000, 5000, 10000)
MODEL = "offline/assistant"
MAX_TOKENS = 100000  # the default max_context_tokens
THRESHOLD = 0.8  # the default compact_emergency_threshold
OURS_REPS = 50
# The naive path walks the whole list, so its repetitions shrink as the list grows.
NAIVE_MESSAGES_BUDGET = 100000
NAIVE_MIN_REPS = 9
TARGET_RATIO_AT_5000 = 100
TARGET_SCALING = 2


def message(index):
    """Return the ``index``-th user message, a sentence of about twenty words."""
    return {
        "role": "user",
        "content": f'Alice says, "({index}) the lantern by the north gate flickered again '
        'tonight and the guards still wonder who keeps stealing the oil."',
    }


def elapsed_ms(call, *args):
    """Return the milliseconds ``call(*args)`` takes."""
    start = time.perf_counter()
    call(*args)
    return (time.perf_counter() - start) * 1000


def measure(append, check, size, reps):
    """Time ``reps`` ticks of one append then one check, after one untimed warm-up tick.

    Returns:
        tuple: Median milliseconds of the append and of the check.
    """
    append(message(size))
    check()
    appends, checks = [], []
    for index in range(size + 1, size + 1 + reps):
        appends.append(elapsed_ms(append, message(index)))
        checks.append(elapsed_ms(check))
    return statistics.median(appends), statistics.median(checks)


def ours(script, size):
    """Prefill the history store with ``size`` messages and time its append and check."""
    from ai.history import ConversationHistory
    from ai.models import ConversationMessage, HistoryCounter
    from ai.utils.token_counter import count_message_tokens

    rows = []
    for position in range(size):
        msg = message(position)
        rows.append(
            ConversationMessage(
                db_script_id=script.id,
                position=position,
                role=msg["role"],
                content=msg["content"],
                token_count=count_message_tokens(msg, MODEL),
            )
        )
    ConversationMessage.objects.bulk_create(rows, batch_size=1000)
    HistoryCounter.objects.update_or_create(
        db_script_id=script.id,
        defaults={
            "live_tokens": sum(row.token_count for row in rows),
            "live_count": size,
            "next_position": size,
            "counted_for": MODEL,
        },
    )
    store = ConversationHistory(script, MODEL)

    def check():
        live_tokens, _ = store.totals()
        return live_tokens / MAX_TOKENS >= THRESHOLD

    return measure(store.append, check, size, OURS_REPS)


def naive(script, size):
    """Prefill a list attribute with ``size`` messages and time the seeds' append and check."""
    from ai.helpers.execution import count_conversation_tokens

    script.db.conversation_history = [message(index) for index in range(size)]

    def append(msg):
        # In place on the _SaverList: like copy-and-assign it re-pickles and saves the whole
        # list, but skips the copy, so it is the cheaper of the two (by 20-25% here).
        script.db.conversation_history.append(msg)

    def check():
        tokens = count_conversation_tokens(script.db.conversation_history, MODEL)
        return tokens / MAX_TOKENS >= THRESHOLD

    reps = max(NAIVE_MIN_REPS, min(OURS_REPS, NAIVE_MESSAGES_BUDGET // size))
    return measure(append, check, size, reps) + (reps,)


def main():
    """Measure every size and print the figures and targets as JSON."""
    setup_evennia()
    results = {}
    for size in SIZES:
        script = new_assistant(key=f"Helper{size}").assistant_script
        ours_append, ours_check = ours(script, size)
        naive_append, naive_check, naive_reps = naive(script, size)
        results[size] = {
            "messages": size,
            "ours_append_ms": round(ours_append, 4),
            "ours_check_ms": round(ours_check, 4),
            "naive_append_ms": round(naive_append, 4),
            "naive_check_ms": round(naive_check, 4),
            "ratio": round((naive_append + naive_check) / (ours_append + ours_check), 1),
            "reps": {"ours": OURS_REPS, "naive": naive_reps},
        }

    def ours_tick(size):
        return results[size]["ours_append_ms"] + results[size]["ours_check_ms"]

    ratio = results[5000]["ratio"]
    scaling = round(ours_tick(10000) / ours_tick(100), 2)
    report = {
        "model": MODEL,
        "max_tokens": MAX_TOKENS,
        "unit": "median milliseconds per operation",
        "sizes": list(results.values()),
        "targets": {
            "ratio_at_5000": ratio,
            "ratio_at_5000_ok": ratio >= TARGET_RATIO_AT_5000,
            "scaling_10000_vs_100": scaling,
            "scaling_ok": scaling <= TARGET_SCALING,
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
