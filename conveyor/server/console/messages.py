"""A queue's messages as the console shows them: looked at, never received.

Messages come from the service's `peek` (the next ones to be received, in order, read
off the store's visibility index and stopping at the limit). A page of them, a search
and finding one by id all read at most SCAN_LIMIT messages, so a queue with a million
messages costs the same as one with ten thousand; what lies deeper is counted but not
listed (the store offers no cursor to start a read further in).
"""

from __future__ import annotations

import base64
import json
from html import escape

from conveyor.server.console import parts
from conveyor.server.console.forms import selection_field
from conveyor.server.console.frame import PREFIX, render
from conveyor.server.console.visit import Visit
from conveyor.server.http import Response
from conveyor.service import Counts, QueueRecord, Service, StoredMessage
from conveyor.service.inspect import (
    attempts,
    backing_off,
    death,
    message_attributes,
    system_attributes,
)

PAGE_SIZE = 50  # messages per page
SCAN_LIMIT = 10_000  # messages read at most to page, search or find one
BODY_CHARS = 200  # of each body in the list
FAILING = "failing"  # ?view=failing: the messages whose last attempt failed

Peeked = tuple[StoredMessage, int]  # a message and when it is (or becomes) visible


async def find(service: Service, queue: QueueRecord, ids: set[str]) -> dict[str, Peeked]:
    """The messages with these ids among the next SCAN_LIMIT, by id."""
    found = {}
    for m, visible_at in await service.peek(queue, SCAN_LIMIT):
        if m.message_id in ids:
            found[m.message_id] = (m, visible_at)
            if len(found) == len(ids):
                break
    return found


async def section(service: Service, v: Visit, queue: QueueRecord, counts: Counts,
                  can_delete: bool, can_move: bool) -> str:
    """The Messages part of a queue's page: search, paging, the table, delete."""
    wanted = v.query.get("search", "")
    page = v.number("page")
    total = counts.visible + counts.in_flight + counts.delayed
    failing = v.query.get("view") == FAILING
    if failing:  # the messages whose last recorded attempt failed, with why
        scanned = await service.peek(queue, SCAN_LIMIT)
        shown = [p for p in scanned if selects(p[0], wanted, failing)][:PAGE_SIZE]
        note = (f"{len(shown)}{'+' if len(shown) == PAGE_SIZE else ''} failing (their last "
                f"recorded attempt failed){' and matching' if wanted else ''} among the "
                f"next {len(scanned):,} of {total:,} messages.")
    elif wanted:
        scanned = await service.peek(queue, SCAN_LIMIT)
        shown = [p for p in scanned if selects(p[0], wanted, False)][:PAGE_SIZE]
        if not shown and len(scanned) == SCAN_LIMIT:  # an exact id, deeper
            deep = await service.find_message(queue, wanted)
            if deep is not None:
                return (f'<section id="messages" data-live>'
                        f"{_search_bar(v, queue, wanted, page, total, [])}<p>Message "
                        f'<a href="{escape(parts.message_path(queue.region, queue.name, deep.message_id))}">'  # noqa: E501
                        f"{escape(deep.message_id)}</a>, found by its id deeper than the "
                        f"next {SCAN_LIMIT:,}.</p></section>")
        note = (f"{len(shown)}{'+' if len(shown) == PAGE_SIZE else ''} found by id, body or "
                f"attribute value among the next {len(scanned):,} of {total:,} messages.")
    else:
        cursor = _cursor(v.query.get("after", ""))
        asked = page
        if cursor is not None:  # a keyset cursor: any depth, one page's cost
            shown = await service.peek(queue, PAGE_SIZE, cursor)
        else:
            page = min(page, SCAN_LIMIT // PAGE_SIZE)
            window = await service.peek(queue, page * PAGE_SIZE)
            shown = window[(page - 1) * PAGE_SIZE:]
        first = (page - 1) * PAGE_SIZE + 1
        note = (f"Messages {first:,}–{first + len(shown) - 1:,} of {total:,}, in the order "
                "they become visible." if shown else "No messages here.")
        if asked != page:
            note += (f" Page {asked:,} cannot be opened by number: numbers reach page "
                     f"{page:,}; follow next → from there to go deeper.")
    html = [_search_bar(v, queue, wanted, page, total, shown, failing), parts.muted(note)]
    if (wanted or failing) and (can_delete or can_move):
        every = parts.bulk_path(queue.region, queue.name, search=wanted,
                                view=FAILING if failing else "")
        html.append(f'<p><a href="{escape(every)}">Act on everything matching →</a> '
                    '<span class="muted">(delete, move or redrive, counted through the '
                    "whole queue)</span></p>")
    if shown:
        html.append(_table(v, queue, shown, service.clock.now_ms(), can_delete, can_move,
                           failing))
    return f'<section id="messages" data-live>{"".join(html)}</section>'


def selects(m: StoredMessage, wanted: str, failing: bool) -> bool:
    """Whether the filter (a search, the failing view, or both) takes message `m`: the
    one test of the page's list and of the bulk actions on everything matching."""
    if failing:
        return bool(attempts(m)) and (not wanted or _matches(m, wanted)
                                      or wanted in _last_failure(m))
    return _matches(m, wanted)


def _matches(m: StoredMessage, wanted: str) -> bool:
    if m.message_id == wanted or wanted in m.body:
        return True
    return bool(m.attributes) and any(
        wanted in str(a.get("StringValue", "")) for a in message_attributes(m).values())


def _cursor(text: str) -> tuple[int, int] | None:
    """`after=<visible_at>.<seq>`: the last message of the page before."""
    visible_at, _, seq = text.partition(".")
    if visible_at.isdigit() and seq.isdigit() and len(visible_at) < 16 and len(seq) < 19:
        return int(visible_at), int(seq)
    return None


def _last_failure(m: StoredMessage) -> str:
    """The reason of a message's last recorded attempt (they are kept failed ones only: a
    delivered message is deleted), with the app's HTTP status when known."""
    recorded = attempts(m)
    if not recorded:
        return ""
    last = recorded[-1]
    status = f" (HTTP {last['Status']})" if "Status" in last else ""
    return f"{last.get('Reason', '')}{status}"


def _search_bar(v: Visit, queue: QueueRecord, wanted: str, page: int, total: int,
                shown: list[Peeked], failing: bool = False) -> str:
    path = parts.queue_path(queue.region, queue.name)
    links = []
    views = (f'<a href="{escape(path)}">all messages</a>' if failing else
             f'<a href="{escape(parts.queue_path(queue.region, queue.name, view=FAILING))}">'
             "failing</a>")
    links.append(views)
    if not wanted and not failing:
        region, name = queue.region, queue.name
        if page > 1 and "after" in v.query:
            links.append(f'<a href="{escape(path)}">← first page</a>')
        elif page > 1:
            links.append(f'<a href="{escape(parts.queue_path(region, name, page=page - 1))}">'
                         "← previous</a>")
        if len(shown) == PAGE_SIZE and page * PAGE_SIZE < total:
            # Past the numbered pages, a cursor: the last message shown (visible_at, seq).
            m, visible_at = shown[-1]
            target = (parts.queue_path(region, name, page=page + 1)
                      if page < SCAN_LIMIT // PAGE_SIZE and "after" not in v.query else
                      parts.queue_path(region, name, page=page + 1,
                                       after=f"{visible_at}.{m.seq}"))
            links.append(f'<a href="{escape(target)}">next →</a>')
    clear = f' <a href="{escape(path)}">clear</a>' if wanted else ""
    return (f'<form class="bar" method="get" action="{escape(path)}">'
            f'<input type="search" name="search" value="{escape(wanted)}" '
            'placeholder="Message id or text (press /)" aria-label="Search messages">'
            f'{parts.hidden({"view": FAILING}) if failing else ""}'
            f'<button>Search</button>{clear} {" ".join(links)}</form>')


def _table(v: Visit, queue: QueueRecord, shown: list[Peeked], now_ms: int,
           can_delete: bool, can_move: bool, failing: bool = False) -> str:
    rows = []
    selectable = can_delete or can_move
    for m, visible_at in shown:
        box = (f'<input type="checkbox" name="{escape(selection_field(m.message_id))}" '
               f'value="1" aria-label="select {escape(m.message_id)}">'
               if selectable else "")
        link = parts.message_path(queue.region, queue.name, m.message_id)
        rows.append([box, f'<a href="{escape(link)}">{escape(m.message_id)}</a>',
                     parts.when(m.sent_ms, now_ms), parts.state(m, visible_at, now_ms),
                     str(m.receive_count),
                     escape((m.dlq_source_arn or "").rsplit(":", 1)[-1]),
                     f"<code>{escape(parts.shorten(m.body, BODY_CHARS))}</code>",
                     *([escape(_last_failure(m))] if failing else [])])
    all_box = ('<input type="checkbox" data-select-all aria-label="select all">'
               if selectable else "")
    table = parts.table([all_box, "Message id", "Sent", "State", "Receives",
                         "Dead-lettered from", "Body", *(["Last failure"] if failing else [])],
                        rows, numeric=(4,), cards=True)
    if not selectable:
        return table
    buttons = []
    if can_delete:
        buttons.append('<button class="danger" data-delete-selected data-needs-selection>'
                       "Delete selected</button>")
    if can_move:
        dead_letters = any(m.dlq_source_arn for m, _ in shown)
        buttons.append(
            f'<label class="inline">Move selected to <input name="destination" '
            f'autocomplete="off" aria-label="queue to move to" placeholder="'
            f'{"empty: back to the queue each came from" if dead_letters else "queue name"}">'
            f'</label><button formaction="{PREFIX}/move-messages" data-needs-selection>'
            f'{"Redrive" if dead_letters else "Move"} selected</button>')
    # One form, two actions: delete-messages, or move-messages by the second button. The
    # buttons sit above the rows with the count ticked (console.js), and stay in view.
    count = '<output class="muted" data-selected-count></output>'
    return parts.form("delete-messages", v.csrf, {"region": queue.region, "queue": queue.name},
                      f'<div class="bar selection-bar">{count}{"".join(buttons)}</div>{table}',
                      css="selection")


async def page(service: Service, v: Visit, queue: QueueRecord, message_id: str,
               can_delete: bool, can_retry: bool) -> Response:
    """One message, whole: body (pretty when JSON), attributes, receive count, state."""
    found = (await find(service, queue, {message_id})).get(message_id)
    back = parts.queue_link(queue.region, queue.name)
    deep = None if found else await service.find_message(queue, message_id)
    if found is None and deep is None:
        return render(404, "Message not found", f"<p>No message {escape(message_id)} in "
                      f"{back} (it may have been deleted).</p>", who=v.who, header=v.header)
    now_ms = service.clock.now_ms()
    retry = ""
    if found is not None:
        m, visible_at = found
        state = escape(parts.state(m, visible_at, now_ms))
        if backing_off(m, visible_at, now_ms):
            state += (' <span class="muted">(waiting out its back-off: its last delivery '
                      "failed)</span>")
            if can_retry:
                retry = parts.form("retry-now", v.csrf, {
                    "region": queue.region, "queue": queue.name, "message": m.message_id},
                    "<button>Retry now</button>", css="inline")
    else:
        assert deep is not None
        m, state = deep, (f'<span class="muted">deeper than the next {SCAN_LIMIT:,}: '
                          "visible or waiting, not read</span>")
    system = system_attributes(queue, m)
    facts = [["State", state],
             ["Receives", str(m.receive_count) + (
                 ' <span class="muted">(those in the queue it came from included: the '
                 "count goes along with a dead letter, as on SQS)</span>"
                 if m.dlq_source_arn else "")],
             ["Sent", parts.when(m.sent_ms, now_ms)],
             ["First received", parts.when(m.first_receive_ms, now_ms)
              if m.first_receive_ms else '<span class="muted">never</span>'],
             *[[escape(k), f"<code>{escape(v)}</code>"] for k, v in sorted(system.items())
               if k not in ("SentTimestamp", "ApproximateReceiveCount",
                            "ApproximateFirstReceiveTimestamp")]]
    if m.dlq_source_arn:
        facts += _why_here(m, now_ms)
    attrs = [[escape(k), escape(a.get("DataType", "")), _attribute_value(a)]
             for k, a in sorted(message_attributes(m).items())]
    body = [f"<p>{back} · <code>{escape(m.message_id)}</code></p>",
            parts.table(["", ""], facts), retry, "<h2>Body</h2>",
            f"<pre>{escape(_pretty(m.body))}</pre>", "<h2>Message attributes</h2>",
            parts.table(["Name", "Type", "Value"], attrs) if attrs else parts.muted("none"),
            "<h2>Failed attempts</h2>", _attempts(m, now_ms)]
    if can_delete:
        body.append(parts.form("delete-messages", v.csrf, {
            "region": queue.region, "queue": queue.name, selection_field(m.message_id): "1"},
            '<button class="danger">Delete this message</button>'))
    return render(200, "Message", "\n".join(body), who=v.who, header=v.header)


def _why_here(m: StoredMessage, now_ms: int) -> list[list[str]]:
    """A dead letter's story: where it came from, and the receives that spent it there
    (its receive count goes along, less the receive that moved it: the store's
    dead_letter)."""
    source = (m.dlq_source_arn or "").rsplit(":", 1)[-1]
    died = death(m)
    if died is None:  # dead-lettered before Conveyor kept why
        return [["Why here", escape(f"dead-lettered from {source}: received there more "
                                    "times than its maxReceiveCount without being deleted")]]
    first, last = died.get("first_receive_ms"), died.get("last_receive_ms")
    return [
        ["Why here", escape(_died_there(source, died.get("receive_count")))],
        ["First received there", parts.when(first, now_ms) if isinstance(first, int) else ""],
        ["Last received there", (parts.when(last, now_ms) + ' <span class="muted">(the '
                                 "receive that moved it here)</span>")
         if isinstance(last, int) else ""]]


def _died_there(source: str, receive_count: object) -> str:
    """The receives a dead letter spent in its source. The kept count includes the receive
    that moved it (rules.spent: past maxReceiveCount), which delivered nothing."""
    if not isinstance(receive_count, int) or receive_count < 1:
        return (f"dead-lettered from {source}: received there more times than its "
                "maxReceiveCount without being deleted")
    delivered = receive_count - 1
    return (f"dead-lettered from {source}: delivered there {delivered} "
            f"time{'' if delivered == 1 else 's'} without being deleted; the next receive, "
            "past its maxReceiveCount, moved it here")


def _attribute_value(attribute: dict) -> str:
    """A message attribute's value: text as sent, a Binary one in base64 (as SQS's JSON
    protocol and the AWS CLI show it), said so."""
    if "BinaryValue" in attribute:
        data = attribute["BinaryValue"]
        encoded = base64.b64encode(data if isinstance(data, bytes) else str(data).encode())
        return (f"<code>{escape(encoded.decode())}</code> "
                '<span class="muted">(base64)</span>')
    return f"<code>{escape(str(attribute.get('StringValue', '')))}</code>"


def _attempts(m: StoredMessage, now_ms: int) -> str:
    """What workers recorded of its failed deliveries, oldest first (a dead letter's, in
    the queue it died in)."""
    rows = [[parts.when(a["At"], now_ms) if isinstance(a.get("At"), int) else "",
             escape(str(a.get("Reason", ""))) + (f" (HTTP {a['Status']})" if "Status" in a
                                                  else ""),
             escape(str(a.get("WorkerId", ""))),
             f"<pre>{escape(str(a.get('AnswerHead', '')))}</pre>" if a.get("AnswerHead")
             else ""] for a in attempts(m)]
    if not rows:
        return parts.muted("none recorded")
    return parts.table(["When", "Why", "Worker", "The app's answer (its start)"], rows)


def _pretty(body: str) -> str:
    try:
        return json.dumps(json.loads(body), indent=2, ensure_ascii=False)
    except ValueError:
        return body
