"""Small charts of a queue's last hour (service/activity.py), drawn as inline SVG: no
library, no script, colours from the page's theme (console.css, svg.spark)."""

from __future__ import annotations

from html import escape

from conveyor.server.console import parts
from conveyor.service.activity import KINDS, RECEIVED, History

HEIGHT = 20  # the drawing's own units; CSS sizes it


def sparkline(values: list[float | None], label: str, unit: str) -> str:
    """A line over `values` (one a minute, the oldest first, the last the current minute;
    None: not known, skipped), scaled to its own highest value, which the hover text tells
    with the latest. The current minute is not drawn: partly counted, it would end every
    chart in a false drop; the hover text gives it as "so far"."""
    values, current = values[:-1], (values[-1] if values else None)
    known = [(i, v) for i, v in enumerate(values) if v is not None]
    top = max((v for _, v in known), default=0.0)
    scale = HEIGHT / top if top else 0.0
    points = " ".join(f"{i},{HEIGHT - v * scale:.1f}" for i, v in known)
    latest = _number(known[-1][1]) if known else "none"
    title = (f"{label}, the last hour: highest {_number(top)} {unit}, latest full minute "
             f"{latest}, this minute so far {'none' if current is None else _number(current)}")
    return (f'<svg class="spark" viewBox="0 -1 {max(len(values) - 1, 1)} {HEIGHT + 2}" '
            f'preserveAspectRatio="none" role="img" aria-label="{escape(title)}">'
            f"<title>{escape(title)}</title><polyline points=\"{points}\" "
            'vector-effect="non-scaling-stroke"/></svg>')


def queue_charts(history: History | None) -> str:
    """A queue page's charts: messages a second of each kind and the oldest's age."""
    if history is None:
        return parts.muted("No messages sent, received or deleted here in the last hour "
                           "(as this server counts, or every node on PostgreSQL).")
    rows = [[escape(kind.capitalize()), sparkline(list(series), f"{kind} per second", "/s"),
             _number(series[-1])]
            for kind, series in history.per_second.items()]
    ages = [float(a) if a is not None else None for a in history.oldest_s]
    latest = next((a for a in reversed(history.oldest_s) if a is not None), None)
    rows.append(["Oldest message (s)", sparkline(ages, "oldest message's age", "s"),
                 "" if latest is None else parts.duration(latest)])
    return parts.table(["Last hour (full minutes)", "", "This minute so far"], rows)


def overview_chart(history: History | None) -> str:
    """One cell of the overview: messages received a second over the last hour."""
    if history is None:
        return '<span class="muted">—</span>'
    return sparkline(history.per_second[KINDS[RECEIVED]], "received per second", "/s")


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.2f}"
