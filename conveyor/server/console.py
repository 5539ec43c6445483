"""The web console: what an operator opens in a browser to see the queues.

Read-only HTML on the server's own port, served from the service layer like any SQS
call: `/console` lists every queue of every region with its message counts and its
dead-letter wiring, and the workers that announce themselves (to any node);
`/console/queues/<region>/<name>` shows one queue's next messages (looked at, not
received), attributes, tags, dead-letter sources and move tasks. Pages refresh
themselves every few seconds.

A server that checks signatures (access keys configured) asks a browser for HTTP Basic
credentials instead, an access key id and its secret: the console shows message bodies,
tags and policies, which an open /metrics does not.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import quote, unquote

import orjson

from conveyor.server.http import Request, Response
from conveyor.service import RequestContext, Service
from conveyor.service.context import parse_arn
from conveyor.service.redrive import dead_letter_arn
from conveyor.service.validate import plain_name
from conveyor.service.workers import WorkerRecord
from conveyor.sqs.errors import SqsError
from conveyor.store.base import Counts, QueueRecord, StoredMessage, StoreError

log = logging.getLogger("conveyor.server.console")

PREFIX = "/console"
REFRESH_S = 5
PEEK_LIMIT = 20  # messages shown on a queue's page
BODY_CHARS = 200  # of each body
HTML = b"text/html; charset=utf-8"

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { padding: 0.3em 0.8em; border-bottom: 1px solid #ddd; text-align: left;
         white-space: nowrap; }
td code { white-space: pre-wrap; word-break: break-all; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; }
.muted { color: #888; }
code { background: #f4f4f4; padding: 0 0.2em; }
"""


class Console:
    def __init__(self, service: Service, account_id: str, access_keys: dict[str, str]) -> None:
        self.service = service
        self.account_id = account_id
        self.access_keys = access_keys

    async def page(self, req: Request) -> Response:
        if req.method != "GET":
            return _page(405, "Method not allowed", "<p>The console only reads.</p>")
        if self.access_keys and not self._signed_in(req.headers.get("authorization", "")):
            return Response(401, b"Sign in with an access key id and its secret key.",
                            b"text/plain; charset=utf-8",
                            [(b"www-authenticate", b'Basic realm="Conveyor console"')])
        path = req.path.rstrip("/")
        parts = [unquote(p) for p in path[len(PREFIX):].split("/")[1:]]
        try:
            if not parts:
                return await self._overview(req)
            # A region that no queue URL could name is never looked up.
            if len(parts) == 3 and parts[0] == "queues" and parts[1] and plain_name(parts[1]):
                return await self._queue(req, region=parts[1], name=parts[2])
        except StoreError as exc:
            log.error("console: the store failed: %s", exc)
            return _page(503, "Store unavailable", f"<p>{escape(str(exc))}</p>")
        return _page(404, "Not found", f'<p>No such page. <a href="{PREFIX}">All queues</a></p>')

    def _signed_in(self, authorization: str) -> bool:
        scheme, _, encoded = authorization.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            key, _, secret = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        expected = self.access_keys.get(key)
        return expected is not None and hmac.compare_digest(expected, secret)

    def _context(self, req: Request, region: str) -> RequestContext:
        host = req.headers.get("host") or "localhost"
        return RequestContext(region, self.account_id, f"{req.scheme}://{host}")

    # --- pages ---------------------------------------------------------------------------

    async def _overview(self, req: Request) -> Response:
        queues = await self.service.queue_counts()
        if not queues:
            host = escape(req.headers.get("host") or "127.0.0.1:9324")
            return _page(200, "Queues", "<p>No queues yet. Create one, for example:</p>"
                         f"<p><code>aws --endpoint-url {req.scheme}://{host} sqs create-queue "
                         "--queue-name jobs</code></p>", refresh=True)
        sources: dict[str, list[str]] = {}
        for queue, _ in queues:
            target = dead_letter_arn(queue)
            if target:
                sources.setdefault(target, []).append(queue.name)
        rows = []
        for queue, counts in sorted(queues, key=lambda qc: (qc[0].region, qc[0].name)):
            arn = f"arn:aws:sqs:{queue.region}:{self.account_id}:{queue.name}"
            rows.append([
                _queue_link(queue.region, queue.name), escape(queue.region),
                "FIFO" if queue.fifo else "standard", *_count_cells(counts),
                _redrive_cell(queue), _sources_cell(queue.region, sources.get(arn, [])),
            ])
        table = _table(["Queue", "Region", "Type", "Visible", "In flight", "Delayed",
                        "Dead letters go to", "Dead-letter queue of"], rows, numeric=(3, 4, 5))
        return _page(200, "Queues", table + _workers(await self.service.live_workers(),
                                                     self.service.clock.now_ms()), refresh=True)

    async def _queue(self, req: Request, region: str, name: str) -> Response:
        ctx = self._context(req, region)
        try:
            queue = await self.service.queue(ctx, name)
            attributes = (await self.service.get_queue_attributes(
                ctx, {"QueueUrl": name, "AttributeNames": ["All"]})).get("Attributes", {})
            sources = (await self.service.list_dead_letter_source_queues(
                ctx, {"QueueUrl": name})).get("queueUrls", [])
            tasks = (await self.service.list_message_move_tasks(
                ctx, {"SourceArn": ctx.queue_arn(name), "MaxResults": 10}))["Results"]
        except SqsError as error:
            return _page(404, "Queue not found", f"<p>{escape(error.message)} "
                         f'<a href="{PREFIX}">All queues</a></p>')
        counts = Counts(int(attributes.get("ApproximateNumberOfMessages", 0)),
                        int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
                        int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)))
        body = [f'<p><a href="{PREFIX}">All queues</a></p>',
                f"<p>URL <code>{escape(ctx.queue_url(name))}</code><br>"
                f"ARN <code>{escape(ctx.queue_arn(name))}</code></p>",
                _table(["Visible", "In flight", "Delayed"], [_count_cells(counts)],
                       numeric=(0, 1, 2)),
                "<h2>Dead letters</h2>",
                f"<p>Go to: {_redrive_cell(queue)}<br>"
                f"Come from: {_sources_cell(region, [u.rsplit('/', 1)[-1] for u in sources])}"
                "</p>"]
        body += ["<h2>Messages</h2>", _messages(
            await self.service.peek(queue, PEEK_LIMIT), self.service.clock.now_ms(), counts)]
        if tasks:
            body += ["<h2>Message move tasks</h2>", _table(
                ["Status", "Moved", "To move", "Started", "Destination", "Failure"],
                [[escape(t["Status"]), str(t["ApproximateNumberOfMessagesMoved"]),
                  str(t["ApproximateNumberOfMessagesToMove"]), _time_ms(t["StartedTimestamp"]),
                  escape(t.get("DestinationArn", "its source queues")),
                  escape(t.get("FailureReason", ""))] for t in tasks], numeric=(1, 2))]
        body += ["<h2>Attributes</h2>", _table(["Name", "Value"], [
            [escape(k), f"<code>{escape(v)}</code>"] for k, v in sorted(attributes.items())])]
        tags = queue.tags
        body += ["<h2>Tags</h2>", _table(["Key", "Value"], [
            [escape(k), escape(v)] for k, v in sorted(tags.items())]) if tags
            else '<p class="muted">none</p>']
        return _page(200, name, "\n".join(body), refresh=True)


# --- HTML pieces --------------------------------------------------------------------------

def _page(status: int, title: str, body: str, refresh: bool = False) -> Response:
    meta = f'<meta http-equiv="refresh" content="{REFRESH_S}">' if refresh else ""
    text = (f'<!doctype html><html><head><meta charset="utf-8">{meta}'
            f"<title>{escape(title)} · Conveyor</title><style>{_STYLE}</style></head>"
            f"<body><h1>{escape(title)}</h1>\n{body}\n</body></html>")
    return Response(status, text.encode(), HTML)


def _table(headings: list[str], rows: Iterable[list[str]], numeric: tuple[int, ...] = ()) -> str:
    head = "".join(f"<th>{h}</th>" for h in headings)
    body = "".join(
        "<tr>" + "".join(f'<td{" class=n" if i in numeric else ""}>{cell}</td>'
                         for i, cell in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _count_cells(counts: Counts) -> list[str]:
    return [f"{counts.visible:,}", f"{counts.in_flight:,}", f"{counts.delayed:,}"]


def _queue_link(region: str, name: str) -> str:
    return (f'<a href="{PREFIX}/queues/{quote(region, safe="")}/{quote(name, safe="")}">'
            f"{escape(name)}</a>")


def _redrive_cell(queue: QueueRecord) -> str:
    text = queue.attributes.get("RedrivePolicy")
    if not text:
        return '<span class="muted">nowhere</span>'
    policy: dict[str, Any] = orjson.loads(text)
    arn = str(policy.get("deadLetterTargetArn", ""))
    parsed = parse_arn(arn)  # checked when the policy was set
    target = _queue_link(parsed.region, parsed.name) if parsed else escape(arn)
    count = policy.get("maxReceiveCount")
    return f"{target} after {escape(str(count))} receive{'' if count == 1 else 's'}"


def _sources_cell(region: str, names: list[str]) -> str:
    if not names:
        return '<span class="muted">none</span>'
    return ", ".join(_queue_link(region, n) for n in sorted(names))


def _messages(peeked: list[tuple[StoredMessage, int]], now_ms: int, counts: Counts) -> str:
    if not peeked:
        return '<p class="muted">none</p>'
    rows = [[escape(m.message_id), _time_ms(m.sent_ms), _state(m, visible_at, now_ms),
             str(m.receive_count), escape((m.dlq_source_arn or "").rsplit(":", 1)[-1]),
             f"<code>{escape(_shorten(m.body))}</code>"] for m, visible_at in peeked]
    total = counts.visible + counts.in_flight + counts.delayed
    note = (f'<p class="muted">The next {len(peeked)} of {total:,}, in the order they '
            "become visible.</p>" if total > len(peeked) else "")
    return note + _table(["Message id", "Sent", "State", "Receives", "Dead-lettered from",
                          "Body"], rows, numeric=(3,))


def _workers(announced: list[WorkerRecord], now_ms: int) -> str:
    """The workers and autoscalers that announced themselves (conveyor/worker/presence.py)."""
    scalers = [w for w in announced if w.kind == "scaler"]
    return _worker_table([w for w in announced if w.kind == "worker"], now_ms) + (
        _scaler_table(scalers, now_ms) if scalers else "")


def _scaler_table(scalers: list[WorkerRecord], now_ms: int) -> str:
    rows = []
    for s in scalers:
        status = s.status
        rows.append([
            _queue_link(s.region, s.queue), escape(str(status.get("policy", ""))),
            escape(f"{status.get('current', '?')} → {status.get('desired', '?')}"),
            escape(f"{status.get('metric', '?')} / {status.get('target', '?')}"),
            escape(str(status.get("reason", ""))), _seen(s, now_ms)])
    return "<h2>Autoscaling</h2>" + _table(
        ["Queue", "Policy", "Workers now → wanted", "Backlog per worker / target",
         "Last decision", "Last seen"], rows)


def _seen(record: WorkerRecord, now_ms: int) -> str:
    return f"{max(0, now_ms - record.last_seen_ms) // 1000} s ago"


def _worker_table(workers: list[WorkerRecord], now_ms: int) -> str:
    if not workers:
        return ('<h2>Workers</h2><p class="muted">none has announced itself '
                "(conveyor worker does, every 10 s)</p>")
    rows = []
    for w in workers:
        status = w.status
        average = status.get("processing_avg_s")
        rows.append([
            escape(w.worker_id), _queue_link(w.region, w.queue),
            escape(str(status.get("status", "?"))), escape(str(status.get("in_flight", ""))),
            escape(str(status.get("processed", ""))),
            f"{average:.3f} s" if isinstance(average, int | float) else "",
            escape(str(status.get("app", ""))), _time_ms(w.first_seen_ms), _seen(w, now_ms)])
    return "<h2>Workers</h2>" + _table(
        ["Worker", "Queue", "State", "In flight", "Processed", "Average job", "App", "Up since",
         "Last seen"], rows, numeric=(3, 4))


def _state(message: StoredMessage, visible_at_ms: int, now_ms: int) -> str:
    if visible_at_ms <= now_ms:
        return "visible"
    waiting = "in flight" if message.receive_count else "delayed"
    return f"{waiting} for {(visible_at_ms - now_ms + 999) // 1000:,} s"


def _shorten(body: str) -> str:
    return body if len(body) <= BODY_CHARS else body[:BODY_CHARS] + "…"


def _time_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
