"""Charts of what a queue did (service/activity.py) over 1 h, 24 h or 7 d, drawn as inline
SVG: no library, no script, colours from the page's theme (console.css, svg.chart).

A chart is a bar a bucket (a minute, 10 minutes or an hour), with a count axis and a time
axis; hovering a bucket shows its time and count (an SVG <title>, which browsers show as a
tooltip). The current bucket is never drawn: partly counted, it would end every chart in a
false drop; the caption gives it as "now"."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from html import escape
from urllib.parse import urlencode

from conveyor.server.console import parts
from conveyor.service import QueueRecord, Service
from conveyor.service.activity import HOUR, RANGES, History, Range

# The drawing's own units (CSS scales it, keeping its proportions): the plot's box, and
# room for the count labels at its left and the time labels below.
WIDTH, HEIGHT = 480, 128
LEFT, TOP, RIGHT, BOTTOM = 44, 8, 472, 106
SPARK_HEIGHT = 20

# What each chart shows: (kind in History.counts, or "" for the oldest message's age;
# caption; what its hover text counts).
CHARTS = (("sent", "Sent", "sent"), ("received", "Received", "received"),
          ("deleted", "Deleted", "deleted"),
          ("dead_lettered", "Dead letters arrived", "dead letters arrived"),
          ("failed", "Failed attempts", "failed attempts"),
          ("", "Oldest message waiting", ""))
# Query keys that tell of one action's outcome: a link to another range drops them.
_NOTICE_KEYS = ("done", "id", "n", "m")


def chosen_range(query: dict[str, str]) -> Range:
    """The range `?range=` names (1h, 24h, 7d); the last hour otherwise."""
    return RANGES.get(query.get("range", ""), HOUR)


def range_links(path: str, query: dict[str, str], current: Range) -> str:
    """Links to each range, keeping the rest of the page's query (filter, page, search)."""
    kept = {k: v for k, v in query.items() if k not in _NOTICE_KEYS and k != "range"}
    links = []
    for r in RANGES.values():
        href = escape(f"{path}?{urlencode({**kept, 'range': r.name})}")
        here = ' aria-current="page"' if r is current else ""
        links.append(f'<a href="{href}"{here}>{_span_name(r)}</a>')
    return f'<nav class="ranges" aria-label="Chart range">{"".join(links)}</nav>'


async def queue_activity(service: Service, queue: QueueRecord, query: dict[str, str]
                         ) -> str:
    """A queue page's charts over the chosen range, with its failure rate over the last
    hour and the range's links."""
    range_ = chosen_range(query)
    path = parts.queue_path(queue.region, queue.name)
    history = (await service.histories([queue.id], range_))[queue.id]
    hour = history if range_ is HOUR else (await service.histories([queue.id]))[queue.id]
    head = (f'<div class="bar"><h2>Activity</h2>{range_links(path, query, range_)}</div>'
            f"<p>{failure_rate(hour, long=True)}</p>")
    return head + queue_charts(history, range_)


def queue_charts(history: History | None, range_: Range) -> str:
    """The charts of each kind and of the oldest message's age over `range_`."""
    if history is None:
        return parts.muted(f"Nothing sent, received, deleted, dead-lettered or failed here "
                           f"in {range_.title}.")
    figures = [_chart(history, kind, caption, noun) for kind, caption, noun in CHARTS]
    return f'<div class="charts">{"".join(figures)}</div>'


def overview_chart(history: History | None, range_: Range) -> str:
    """One cell of the overview: messages received, a line over `range_`'s full buckets."""
    if history is None:
        return '<span class="muted">—</span>'
    values = history.counts["received"][:-1]
    top = max(values, default=0)
    scale = SPARK_HEIGHT / top if top else 0.0
    points = " ".join(f"{i},{SPARK_HEIGHT - v * scale:.1f}" for i, v in enumerate(values))
    title = (f"Received in {range_.title}: {history.total('received'):,}; at most {top:,} "
             f"in {_one_bucket(range_)}")
    return (f'<svg class="spark" viewBox="0 -1 {max(len(values) - 1, 1)} {SPARK_HEIGHT + 2}" '
            f'preserveAspectRatio="none" role="img" aria-label="{escape(title)}">'
            f"<title>{escape(title)}</title><polyline points=\"{points}\" "
            'vector-effect="non-scaling-stroke"/></svg>')


def failure_rate(history: History | None, long: bool = False) -> str:
    """Failed attempts over the last hour, of the messages received (each receive is an
    attempt at the message), as HTML; `long`: a sentence, for the queue page."""
    failed = history.total("failed") if history else 0
    received = history.total("received") if history else 0
    if not failed:
        if long:
            return '<span class="muted">No failed attempts recorded in the last hour.</span>'
        return "0%" if received else '<span class="muted">—</span>'
    # An attempt is recorded after its receive, so one may count in the hour after it.
    share = f"{min(failed / received, 1):.0%}" if received else "none received"
    of = f"{failed:,} of {received:,} received" if received else f"{failed:,}"
    if long:
        return f'<span class="failing">Failed attempts in the last hour: {of} ({share}).</span>'
    return (f'<span class="failing" title="Failed attempts in the last hour: {of}">{share}'
            "</span>")


def _chart(history: History, kind: str, caption: str, noun: str) -> str:
    range_ = history.range
    full = range_.points
    label: Callable[[float], str]
    if kind:
        values: list[float | None] = [float(n) for n in history.counts[kind]]
        current = f"{history.counts[kind][-1]:,}"
        shown = f"{history.total(kind):,} in {range_.title}"
        top = _nice(max(values[:-1], default=0.0) or 0.0)
        label = _compact

        def say(v: float | None) -> str:
            return f"{v:,.0f} {noun}" if v else "none"
    else:
        values = [None if a is None else float(a) for a in history.oldest_s]
        current = "" if values[-1] is None else parts.spoken_seconds(int(values[-1]))
        latest = next((a for a in reversed(values[:-1]) if a is not None), None)
        shown = ("not sampled" if latest is None
                 else f"{parts.spoken_seconds(int(latest))} at the latest sample")
        top = _nice_age(max((v for v in values[:-1] if v is not None), default=0.0))
        label = _age

        def say(v: float | None) -> str:
            return ("not sampled" if v is None else
                    f"the oldest waited {parts.spoken_seconds(int(v))}" if v
                    else "nothing waiting")
    so_far = f" · now {current}" if current else ""
    title = f"{caption} per {_bucket_name(range_)}, {range_.title}: {shown}"
    step = (RIGHT - LEFT) / full

    def y_of(v: float) -> float:
        return BOTTOM - (BOTTOM - TOP) * v / top
    drawn = _bars(values[:full], step, y_of) if kind else _line(values[:full], step, y_of)
    svg = (f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
           f'aria-label="{escape(title)}">{_axes(range_, top, label)}{drawn}'
           f"{_hover(history, values[:full], step, say)}</svg>")
    return (f'<figure class="chart" data-kind="{kind or "oldest"}"><figcaption>'
            f'<b>{escape(caption)}</b> {escape(shown)}<span class="muted" title="the '
            f'current {_bucket_name(range_)}, still being counted (not drawn)">'
            f"{escape(so_far)}</span></figcaption>{svg}</figure>")


def _axes(range_: Range, top: float, label: Callable[[float], str]) -> str:
    """Grid lines at 0, half and the top, their values at the left; time below."""
    out = ['<g class="axis values">']
    half = [top / 2] if (top / 2).is_integer() and top > 1 else []  # no "2.5 messages"
    for value in (0.0, *half, top):
        y = BOTTOM - (BOTTOM - TOP) * value / top
        out.append(f'<line x1="{LEFT}" x2="{RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">'
                   f"{escape(label(value))}</text>")
    out.append('</g><g class="axis time">')
    ticks, unit, size = _ticks(range_)
    for n in range(ticks + 1):
        x = RIGHT - (RIGHT - LEFT) * n / ticks
        anchor = "end" if n == 0 else "start" if n == ticks else "middle"
        text = "now" if n == 0 else f"−{n * size} {unit}"
        out.append(f'<text x="{x:.1f}" y="{HEIGHT - 6}" text-anchor="{anchor}">{text}</text>')
    out.append("</g>")
    return "".join(out)


def _bars(values: list[float | None], step: float, y_of: Callable[[float], float]) -> str:
    """One path of every bar: a bar is as wide as its bucket, less a gap."""
    width = max(step * 0.8, 1.0)
    path = "".join(f"M{LEFT + i * step + (step - width) / 2:.1f},{BOTTOM}"
                   f"V{y_of(v):.1f}h{width:.1f}V{BOTTOM}z"
                   for i, v in enumerate(values) if v)
    return f'<path class="bars" d="{path}"/>' if path else ""


def _line(values: list[float | None], step: float, y_of: Callable[[float], float]) -> str:
    """A line through the sampled buckets' middles (unsampled ones skipped)."""
    points = " ".join(f"{LEFT + (i + 0.5) * step:.1f},{y_of(v):.1f}"
                      for i, v in enumerate(values) if v is not None)
    return f'<polyline class="line" points="{points}"/>' if points else ""


def _hover(history: History, values: list[float | None], step: float,
           say: Callable[[float | None], str]) -> str:
    """A transparent column over each bucket, titled with its time and value; a run of
    buckets with nothing in them shares one column."""
    out = ['<g class="hover">']
    i = 0
    while i < len(values):
        end = i + 1
        if not values[i]:
            while end < len(values) and values[end] == values[i]:
                end += 1
        title = f"{_period(history, i, end)}: {say(values[i])}"
        out.append(f'<rect x="{LEFT + i * step:.1f}" y="{TOP}" width="{(end - i) * step:.1f}" '
                   f'height="{BOTTOM - TOP}"><title>{escape(title)}</title></rect>')
        i = end
    out.append("</g>")
    return "".join(out)


def _period(history: History, first: int, end: int) -> str:
    """Buckets [first, end) as UTC times: `14:05–14:06 UTC`, dated beyond the hour."""
    start = datetime.fromtimestamp(history.start_ms(first) / 1000, UTC)
    stop = datetime.fromtimestamp(history.start_ms(end) / 1000, UTC)
    if history.range is HOUR:
        return f"{start:%H:%M}–{stop:%H:%M} UTC"
    same_day = start.date() == stop.date()
    return f"{start:%a %d %b %H:%M}–{stop:%H:%M}" + (
        " UTC" if same_day else f" {stop:%a %d %b} UTC")


def _ticks(range_: Range) -> tuple[int, str, int]:
    """(labels, unit, size): the time axis's labels from the right edge leftwards."""
    minutes = range_.points * range_.span_min
    if minutes <= 60:
        return 4, "min", minutes // 4
    if minutes <= 24 * 60:
        return 4, "h", minutes // 60 // 4
    return minutes // 1440, "d", 1


def _span_name(range_: Range) -> str:
    minutes = range_.points * range_.span_min
    if minutes % 1440 == 0 and minutes > 1440:
        return f"{minutes // 1440} days"
    return f"{minutes // 60} hour{'s' if minutes > 60 else ''}"


def _bucket_name(range_: Range) -> str:
    span = range_.span_min
    return "minute" if span == 1 else "hour" if span == 60 else f"{span} minutes"


def _one_bucket(range_: Range) -> str:
    return {1: "a minute", 60: "an hour"}.get(range_.span_min, f"{range_.span_min} minutes")


def _nice(value: float) -> float:
    """The least of 1, 2, 5 x 10^n at or above `value` (1 at least): the axis's top."""
    nice = 1.0
    while nice < value:
        for factor in (2, 2.5, 2):
            nice *= factor
            if nice >= value:
                break
    return nice


def _nice_age(seconds: float) -> float:
    """The axis's top for ages: a nice number of the largest unit the age reaches."""
    unit = next((u for u in (86_400, 3600, 60) if seconds >= u), 1)
    return _nice(seconds / unit) * unit


def _compact(value: float) -> str:
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def _age(seconds: float) -> str:
    """An age on the axis, short: 90 -> "1.5 min"."""
    for size, unit in ((86_400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"
