"""Small HTML pieces the console's pages share. Every argument is plain text unless its
name says `html`: these functions escape what they are given."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from conveyor.server.console.auth import CSRF_FIELD
from conveyor.server.console.frame import PREFIX
from conveyor.service import Counts, QueueRecord, StoredMessage, tenants
from conveyor.service.context import parse_arn
from conveyor.service.controls import is_paused


def table(headings: list[str], rows: Iterable[list[str]], numeric: tuple[int, ...] = (),
          row_classes: Iterable[str] | None = None, cards: bool = False) -> str:
    """A table of HTML cells (escaped by the caller); `row_classes` marks rows out.
    `cards`: on a narrow screen each row becomes a card, each cell labelled with its
    heading (console.css, table.cards)."""
    head = "".join(f"<th>{h}</th>" for h in headings)
    labels = [f' data-label="{escape(re.sub(r"<[^>]*>", "", h))}"' if cards else ""
              for h in headings]
    classes = iter(row_classes or ())
    body = []
    for row in rows:
        cls = next(classes, "")
        cells = "".join(f'<td{" class=n" if i in numeric else ""}'
                        f'{labels[i] if i < len(labels) else ""}>{cell}</td>'
                        for i, cell in enumerate(row))
        body.append(f'<tr class="{cls}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    kind = ' class="cards"' if cards else ""
    return (f'<div class="scroll"><table{kind}><tr>{head}</tr>{"".join(body)}</table>'
            "</div>")


def count_cells(counts: Counts) -> list[str]:
    return [f"{counts.visible:,}", f"{counts.in_flight:,}", f"{counts.delayed:,}"]


def queue_path(region: str, name: str, **query: str | int) -> str:
    path = f"{PREFIX}/queues/{quote(region, safe='')}/{quote(name, safe='')}"
    shown = {k: v for k, v in query.items() if v not in ("", 0)}
    return f"{path}?{urlencode(shown)}" if shown else path


def message_path(region: str, name: str, message_id: str) -> str:
    return f"{queue_path(region, name)}/messages/{quote(message_id, safe='')}"


def queue_link(region: str, name: str) -> str:
    return f'<a href="{escape(queue_path(region, name))}">{escape(name)}</a>'


def redrive_cell(queue: QueueRecord) -> str:
    text = queue.attributes.get("RedrivePolicy")
    if not text:
        return '<span class="muted">nowhere</span>'
    policy: dict[str, Any] = orjson.loads(text)
    arn = str(policy.get("deadLetterTargetArn", ""))
    parsed = parse_arn(arn)  # checked when the policy was set
    target = queue_link(parsed.region, parsed.name) if parsed else escape(arn)
    count = policy.get("maxReceiveCount")
    return f"{target} after {escape(str(count))} receive{'' if count == 1 else 's'}"


def sources_cell(region: str, names: list[str]) -> str:
    if not names:
        return '<span class="muted">none</span>'
    return ", ".join(queue_link(region, n) for n in sorted(names))


def state(message: StoredMessage, visible_at_ms: int, now_ms: int) -> str:
    if visible_at_ms <= now_ms:
        return "visible"
    waiting = "in flight" if message.receive_count else "delayed"
    return f"{waiting} for {(visible_at_ms - now_ms + 999) // 1000:,} s"


def exact_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso_time(ms: int) -> str:
    """A time as HTML's `datetime` attribute takes it (ISO 8601, UTC: ...Z)."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def when(ms: int, now_ms: int) -> str:
    """A time as people say it ("3 min ago"), the exact time on hover."""
    return (f'<time datetime="{iso_time(ms)}" title="{exact_time(ms)}">'
            f"{ago(now_ms - ms)}</time>")


def ago(elapsed_ms: int) -> str:
    seconds = max(0, elapsed_ms) // 1000
    for unit, size in (("d", 86_400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"


def duration(seconds: float) -> str:
    s = int(seconds)
    if s >= 86_400:
        return f"{s // 86_400} d {s % 86_400 // 3600} h"
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 60} min {s % 60} s" if s >= 60 else f"{s} s"


def spoken_seconds(seconds: int) -> str:
    """A length of time in the largest whole units: 345600 -> "4 days", 90 -> "1 min 30 s"."""
    if seconds == 0:
        return "0 s"
    out = []
    for unit, size in (("day", 86_400), ("h", 3600), ("min", 60), ("s", 1)):
        n, seconds = divmod(seconds, size)
        if n:
            out.append(f"{n} {unit}{'s' if unit == 'day' and n != 1 else ''}")
    return " ".join(out)


# Queue attributes in seconds (GetQueueAttributes, AWS API reference), and epoch seconds.
SECONDS_ATTRIBUTES = ("VisibilityTimeout", "DelaySeconds", "MessageRetentionPeriod",
                      "ReceiveMessageWaitTimeSeconds", "KmsDataKeyReusePeriodSeconds")
TIME_ATTRIBUTES = ("CreatedTimestamp", "LastModifiedTimestamp")


def attribute_value(name: str, value: str) -> str:
    """A queue attribute's value as people read it (HTML): times as dates, seconds in
    days/hours/minutes, sizes in KiB, with the raw value beside it."""
    raw = f"<code>{escape(value)}</code>"
    if not value.isdigit():
        return raw
    n = int(value)
    if name in TIME_ATTRIBUTES:
        return f'<time datetime="{iso_time(n * 1000)}">{exact_time(n * 1000)}</time> {raw}'
    if name in SECONDS_ATTRIBUTES:
        return f"{spoken_seconds(n)} {raw}"
    if name == "MaximumMessageSize":
        if n % 1_048_576 == 0:
            return f"{n // 1_048_576:,} MiB {raw}"
        return f"{n // 1024:,} KiB {raw}" if n % 1024 == 0 else raw
    return raw


def shorten(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars] + "…"


def muted(text: str) -> str:
    return f'<p class="muted">{escape(text)}</p>'


def hidden(fields: dict[str, str]) -> str:
    return "".join(f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">'
                   for k, v in fields.items())


def form(action: str, csrf: str, fields: dict[str, str], inner_html: str,
         css: str = "") -> str:
    """A POST form to the console action `action`, carrying the CSRF token and `fields`."""
    cls = f' class="{css}"' if css else ""
    return (f'<form method="post" action="{PREFIX}/{action}"{cls}>'
            f"{hidden({CSRF_FIELD: csrf, **fields})}{inner_html}</form>")


def confirm_by_name(name: str, also: str = "") -> str:
    """An input the operator must fill in with `name` (or `also`, a count: as GitHub asks),
    checked again by the server; the button stays disabled until then (console.js)."""
    either = f" or <code>{escape(also)}</code>" if also else ""
    other = f' data-confirm-also="{escape(also)}"' if also else ""
    return (f"<label>Type <code>{escape(name)}</code>{either} to confirm<br>"
            f'<input name="confirm" required autocomplete="off" data-confirm="{escape(name)}"'
            f"{other}></label>")


def bulk_path(region: str, name: str, **query: str | int) -> str:
    """The page that acts on every message matching the queue page's filter."""
    path = f"{queue_path(region, name)}/bulk"
    shown = {k: v for k, v in query.items() if v not in ("", 0)}
    return f"{path}?{urlencode(shown)}" if shown else path


def notice(text: str, error: bool = False) -> str:
    return f'<p class="notice{" error" if error else ""}" role="status">{escape(text)}</p>'


def paused_badge(queue: QueueRecord) -> str:
    """A mark on a queue whose delivery is paused (ConveyorQueues.PauseQueue)."""
    return (' <span class="badge paused" title="delivery paused: receives answer nothing '
            'until it is resumed">paused</span>' if is_paused(queue) else "")


def limits(queue: QueueRecord) -> list[tuple[str, str]]:
    """The queue's limits that apply (service/tenants.py settings), each as (what, how
    much) in words with units."""
    found = tenants.settings(queue)
    out = []
    if "group_concurrency" in found:
        out.append(("Group concurrency", f"{found['group_concurrency']:g} in flight per group"))
    for key, label, each in (("receive_rate", "Receive rate", ""),
                             ("group_receive_rate", "Group receive rate", " per group")):
        if key in found:
            burst = found[key.replace("rate", "burst")]
            out.append((label, f"{found[key]:g}/s{each}, burst {burst:g}"))
    if "max_delay_seconds" in found:
        out.append(("Longest delay", spoken_seconds(int(found["max_delay_seconds"]))))
    return out


def limits_badge(queue: QueueRecord) -> str:
    """A mark on a queue whose receives a group cap or a rate bounds, naming them."""
    bounds = [f"{what}: {much}" for what, much in limits(queue) if what != "Longest delay"]
    if not bounds:
        return ""
    return f' <span class="badge limits" title="{escape("; ".join(bounds))}">limits</span>'
