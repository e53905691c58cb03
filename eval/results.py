"""The evaluation's figures: one run's, their mean and spread over runs, and the targets.

A run's JSON (``build/eval/runs/<stamp>-<seed>.json``, written by ``real_model.py``) holds
its ``metrics``; a run that measured nothing (stopped on a dead server or failing calls)
holds ``aborted`` and is left out of every figure.

Usage::

    python eval/results.py build/eval/runs/*.json [--out aggregate.json]
"""

import argparse
import json
import statistics
import sys

# (key, label, kind): a share is printed as a percentage, a count as a number.
METRICS = (
    ("answers_right", "answers right", "share"),
    ("facts_findable", "facts findable", "share"),
    ("found_live", "  in the live context", "share"),
    ("found_summary", "  in a summary", "share"),
    ("found_journal", "  in the journal", "share"),
    ("found_memory", "  in long-term memory", "share"),
    ("invented", "invented facts", "count"),
    ("swapped", "swapped speakers", "count"),
    ("intentions", "intentions said instead of answers", "count"),
    ("echoes", "echoes", "count"),
    ("markup", "markup heard", "count"),
    ("leaks", "whispers leaked", "count"),
    ("compactions_done", "compactions done", "count"),
    ("compactions_refused", "compactions refused", "count"),
    ("slow_calls", "calls over 60 s", "count"),
    ("calls", "model calls", "count"),
    ("minutes", "minutes", "count"),
)
# (label, figure, comparison, limit): the figure is read from an aggregate (see targets()).
TARGETS = (
    ("answers right >= 80% (mean)", "answers_right", ">=", 0.8),
    ("facts findable >= 95% (mean)", "facts_findable", ">=", 0.95),
    ("invented facts 0", "invented", "<=", 0),
    ("swapped speakers 0", "swapped", "<=", 0),
    ("intentions said 0", "intentions", "<=", 0),
    ("refused compactions <= 10% of attempts", "refused_share", "<=", 0.1),
    ("whispers leaked 0", "leaks", "<=", 0),
)
MEAN_TARGETS = {"answers_right", "facts_findable"}


def measured(runs):
    """Return the runs that measured something (not stopped)."""
    return [run for run in runs if not run.get("aborted")]


def aggregate(runs):
    """Return the mean, min and max of each metric over ``runs`` (those that measured).

    Returns:
        dict: ``{"runs": n, "seeds": [...], "metrics": {key: {"mean", "min", "max"}},
        "refused_share": pooled refused / attempted compactions}``.
    """
    runs = measured(runs)
    figures = {}
    for key, _, _ in METRICS:
        values = [run["metrics"][key] for run in runs if key in run["metrics"]]
        if values:
            figures[key] = {
                "mean": statistics.fmean(values),
                "min": min(values),
                "max": max(values),
            }
    done = sum(run["metrics"].get("compactions_done", 0) for run in runs)
    refused = sum(run["metrics"].get("compactions_refused", 0) for run in runs)
    return {
        "runs": len(runs),
        "seeds": [run.get("seed") for run in runs],
        "set_ups": sorted({json.dumps([run.get("model"), run.get("settings")]) for run in runs}),
        "metrics": figures,
        "refused_share": refused / (done + refused) if done + refused else 0.0,
    }


def targets(summary):
    """Return ``[(label, value, met)]`` for each target, read from ``aggregate()``'s result.

    The answer and fact targets hold on the mean; the counts hold on every run (their max);
    the refused share is pooled over the runs' attempts.
    """
    results = []
    for label, key, comparison, limit in TARGETS:
        if key == "refused_share":
            value = summary["refused_share"]
        else:
            figure = summary["metrics"].get(key)
            if figure is None:
                results.append((label, None, False))
                continue
            value = figure["mean"] if key in MEAN_TARGETS else figure["max"]
        met = value >= limit if comparison == ">=" else value <= limit
        results.append((label, value, met))
    return results


def _shown(value, kind):
    if value is None:
        return "-"
    return (
        f"{value:.0%}"
        if kind == "share"
        else f"{value:g}" if value == int(value) else f"{value:.1f}"
    )


def print_summary(summary, out=None):
    """Print each metric's mean and min-max, then each target as met or missed."""
    out = out or sys.stdout
    print(f"runs: {summary['runs']} (seeds {', '.join(map(str, summary['seeds']))})", file=out)
    for set_up in summary["set_ups"]:
        print(f"model and settings: {set_up}", file=out)
    if len(summary["set_ups"]) > 1:
        print("!! these runs differ in model or settings: compare them apart", file=out)
    print(f"{'':<38}{'mean':>8}{'min':>8}{'max':>8}", file=out)
    for key, label, kind in METRICS:
        figure = summary["metrics"].get(key)
        if figure:
            row = [_shown(figure[name], kind) for name in ("mean", "min", "max")]
            print(f"{label:<38}{row[0]:>8}{row[1]:>8}{row[2]:>8}", file=out)
    print(f"{'refused share of attempts (pooled)':<38}{summary['refused_share']:>8.0%}", file=out)
    return print_targets(targets(summary), out)


def print_targets(results, out=None):
    """Print the targets as met or MISSED; return the labels of the missed ones."""
    out = out or sys.stdout
    missed = []
    for label, value, met in results:
        shown = "-" if value is None else f"{value:.2f}".rstrip("0").rstrip(".")
        print(f"  {'met   ' if met else 'MISSED'} {label} (is {shown})", file=out)
        if not met:
            missed.append(label)
    return missed


def main(argv=None):
    """Aggregate run files; print; write JSON with ``--out``; exit 1 if a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run JSON files (real_model.py writes them)")
    parser.add_argument("--out", help="write the aggregate here as JSON")
    args = parser.parse_args(argv)
    runs = []
    for path in args.runs:
        with open(path) as handle:
            runs.append(json.load(handle))
    stopped = len(runs) - len(measured(runs))
    if stopped:
        print(f"left out: {stopped} run(s) that measured nothing (stopped)")
    if not measured(runs):
        print("no run measured anything: no figures", file=sys.stderr)
        return 2
    summary = aggregate(runs)
    missed = print_summary(summary)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(dict(summary, targets=targets(summary)), handle, indent=1)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
