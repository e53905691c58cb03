"""The usage chart: an assistant's context usage over its recent ticks, as an SVG string.

Drawn on the server, for a web page to put inline: the tokens of each recorded tick (see
``ai.usage_history``) as a line, the sleep and emergency compaction thresholds as dashed
lines, and each compaction as a vertical marker styled by its kind, whose tooltip gives
its kind, strategy and time. ``render_usage_chart`` is pure; ``assistant_usage_chart``
reads one assistant's rows and renders them.
"""

from typing import NamedTuple
from xml.sax.saxutils import escape, quoteattr

from django.utils import timezone

from .llm_interaction import context_window
from .models import CompactionRecord
from .usage_history import usage_rows

WIDTH, HEIGHT = 600, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 44
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
FONT = 'font-family="sans-serif" font-size="11"'
# Each kind of compaction its own colour and dashes; an unknown kind is drawn as "other".
MARKER_STYLES = {
    "sleep": ("#2f6fb5", "none"),
    "emergency": ("#c0392b", "none"),
    "manual": ("#6b6b6b", "2 3"),
    "other": ("#8e44ad", "1 2"),
}
THRESHOLD_COLOURS = {"sleep": "#2f6fb5", "emergency": "#c0392b"}


class UsagePoint(NamedTuple):
    """The tokens of the context after one tick."""

    time: object  # datetime
    tokens: int


class CompactionMark(NamedTuple):
    """One compaction, as the chart marks it."""

    time: object  # datetime
    kind: str
    strategy: str
    undone: bool = False


def render_usage_chart(points, max_tokens, sleep_threshold, emergency_threshold, compactions=()):
    """Return the SVG of a usage chart; it scales to its container's width.

    Args:
        points (list): ``UsagePoint`` rows, oldest first.
        max_tokens (int): The context limit, which the thresholds are fractions of.
        sleep_threshold (float): ``compact_sleep_threshold``.
        emergency_threshold (float): ``compact_emergency_threshold``.
        compactions (list): ``CompactionMark`` rows; those outside the points' time span
            are left out.

    Returns:
        str: An ``<svg>`` element. Without points it is a chart frame that says no usage
        was recorded yet (never None).
    """
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" '
        f'role="img" aria-label={quoteattr(summary(points, max_tokens))} class="ai-usage-chart">',
        f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" '
        f'height="{HEIGHT - TOP - BOTTOM}" fill="none" stroke="#999"/>',
    ]
    if not points:
        parts.append(
            f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" {FONT}>'
            "No usage recorded yet</text></svg>"
        )
        return "".join(parts)
    top = max(max_tokens, *(point.tokens for point in points)) or 1
    start, end = points[0].time, points[-1].time
    span = (end - start).total_seconds()

    def x(time):
        if not span:
            return (LEFT + WIDTH - RIGHT) / 2
        return LEFT + (time - start).total_seconds() / span * (WIDTH - LEFT - RIGHT)

    def y(tokens):
        return HEIGHT - BOTTOM - tokens / top * (HEIGHT - TOP - BOTTOM)

    parts += axes(top, start, end)
    for name, fraction in (("sleep", sleep_threshold), ("emergency", emergency_threshold)):
        parts.append(threshold_line(name, fraction, y(fraction * max_tokens)))
    for mark in compactions:
        if start <= mark.time <= end:
            parts.append(compaction_marker(mark, x(mark.time)))
    coordinates = " ".join(f"{x(point.time):.1f},{y(point.tokens):.1f}" for point in points)
    parts.append(
        f'<polyline class="tokens" points="{coordinates}" fill="none" stroke="#222" '
        'stroke-width="1.5"/>'
    )
    parts.append("</svg>")
    return "".join(parts)


def summary(points, max_tokens):
    """Return the chart's description for screen readers."""
    if not points:
        return "Context usage: no usage recorded yet"
    last = points[-1].tokens
    return f"Context usage over {len(points)} ticks; the last {last:,} of {max_tokens:,} tokens"


def axes(top, start, end):
    """Return the axes' labels: tokens up the left side, time along the bottom."""
    bottom = HEIGHT - BOTTOM
    labels = [
        f'<text x="{LEFT - 6}" y="{bottom - share * (bottom - TOP) + 4:.1f}" text-anchor="end" '
        f"{FONT}>{round(top * share):,}</text>"
        for share in (0, 0.5, 1)
    ]
    labels += [
        f'<text x="{LEFT}" y="{bottom + 16}" {FONT}>{escape(start.strftime(TIME_FORMAT))}</text>',
        f'<text x="{WIDTH - RIGHT}" y="{bottom + 16}" text-anchor="end" {FONT}>'
        f"{escape(end.strftime(TIME_FORMAT))}</text>",
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 6}" text-anchor="middle" '
        f"{FONT}>time</text>",
        f'<text x="14" y="{(TOP + bottom) / 2}" text-anchor="middle" {FONT} '
        f'transform="rotate(-90 14 {(TOP + bottom) / 2})">tokens</text>',
    ]
    return labels


def threshold_line(name, fraction, at):
    """Return a dashed line across the chart at height ``at``, labelled with its name."""
    colour = THRESHOLD_COLOURS[name]
    label = escape(f"{name} threshold {fraction:.0%}")
    # The two labels at opposite ends, so that close thresholds keep both readable.
    anchor = f'x="{LEFT + 4}"' if name == "sleep" else f'x="{WIDTH - RIGHT - 4}" text-anchor="end"'
    return (
        f'<g class="threshold {name}"><line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{at:.1f}" '
        f'y2="{at:.1f}" stroke="{colour}" stroke-dasharray="6 4"/>'
        f'<text {anchor} y="{at - 4:.1f}" fill="{colour}" {FONT}>{label}</text></g>'
    )


def compaction_marker(mark, at):
    """Return a vertical line at ``at`` for one compaction, its tooltip saying what it was."""
    kind = mark.kind if mark.kind in MARKER_STYLES else "other"
    colour, dashes = MARKER_STYLES[kind]
    title = f"{mark.kind} compaction ({mark.strategy}) at {mark.time.strftime(TIME_FORMAT)}"
    if mark.undone:
        title += ", undone"
    return (
        f'<g class="compaction {kind}"><title>{escape(title)}</title>'
        f'<line x1="{at:.1f}" x2="{at:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" '
        f'stroke="{colour}" stroke-width="2" stroke-dasharray="{dashes}"/></g>'
    )


def usage_chart_data(script, limit=None):
    """Read what the usage chart of one assistant shows.

    Args:
        script (AssistantScript): The assistant's script (``character.assistant_script``).
        limit (int, optional): Only the newest this many ticks.

    Returns:
        dict: The keyword arguments of ``render_usage_chart``: the recorded ticks, the
        context limit of the newest one (the current limit without one), the assistant's
        two thresholds, and its compactions since the oldest tick shown, in local time.
    """
    rows = usage_rows(script, limit)
    config = script.effective_config()
    records = CompactionRecord.objects.filter(db_script_id=script.id)
    if rows:
        records = records.filter(created_at__gte=rows[0][0])
    return {
        "points": [UsagePoint(timezone.localtime(row[0]), row[1]) for row in rows],
        "max_tokens": rows[-1][2] if rows else context_window(script),
        "sleep_threshold": config["compact_sleep_threshold"],
        "emergency_threshold": config["compact_emergency_threshold"],
        "compactions": [
            CompactionMark(
                timezone.localtime(record.created_at),
                record.kind,
                record.strategy,
                record.undone_at is not None,
            )
            for record in records
        ],
    }


def assistant_usage_chart(script, limit=None):
    """Return the SVG usage chart of one assistant (see ``usage_chart_data``)."""
    return render_usage_chart(**usage_chart_data(script, limit))
