"""The web console: what an operator opens in a browser to see the queues.

HTML on the server's own port, served from the service layer like any SQS call:
`/console` lists every queue of every region with its message counts and its dead-letter
wiring, and the workers that announce themselves (to any node);
`/console/queues/<region>/<name>` shows one queue's next messages (looked at, not
received), attributes, tags, dead-letter sources and move tasks. Pages refresh themselves
every few seconds.

A server that checks signatures (access keys configured) first sends a browser to
`/console/sign-in`, where an access key id and its secret key buy a session cookie
(console_auth.py): the console shows message bodies, tags and policies. Sessions live in
this server's memory, so a restart signs everyone out.

Every POST goes through `Console._post`, which refuses another site's requests (Origin)
and forms without the right CSRF token before any action in `Console.actions` runs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import quote, unquote

import orjson

from conveyor.server import console_auth as auth
from conveyor.server.console_auth import CSRF_COOKIE, CSRF_FIELD, SIGN_IN, Session
from conveyor.server.console_html import PREFIX, render
from conveyor.server.http import Request, Response
from conveyor.service import RequestContext, Service
from conveyor.service.context import parse_arn
from conveyor.service.redrive import dead_letter_arn
from conveyor.service.validate import plain_name
from conveyor.service.workers import WorkerRecord
from conveyor.sqs.errors import SqsError
from conveyor.store.base import Counts, QueueRecord, StoredMessage, StoreError

log = logging.getLogger("conveyor.server.console")

PEEK_LIMIT = 20  # messages shown on a queue's page
BODY_CHARS = 200  # of each body

# A state-changing console request: (request, its form, its session) -> response. Runs only
# behind Console._post's checks.
Action = Callable[[Request, dict[str, str], Session | None], Awaitable[Response]]


class Console:
    def __init__(self, service: Service, account_id: str, access_keys: dict[str, str],
                 session_s: int = auth.DEFAULT_SESSION_S) -> None:
        self.service = service
        self.account_id = account_id
        self.access_keys = access_keys
        self.auth = auth.SignIn(access_keys, auth.Sessions(service.clock.now_ms, session_s))
        # Every POST /console/<name>. Add buttons' actions here: _post guards them all, and
        # a page with a form embeds the token of self.auth.form_token(req, session).
        self.actions: dict[str, Action] = {"sign-in": self.auth.sign_in,
                                           "sign-out": self.auth.sign_out}

    async def page(self, req: Request) -> Response:
        if req.method == "POST":
            return await self._post(req)
        if req.method != "GET":
            return render(405, "Method not allowed", "<p>Use the console's pages and buttons.</p>")
        path = req.path.rstrip("/")
        if path == SIGN_IN:
            return self.auth.page(req)
        session = self.auth.session(req)
        if self.access_keys and session is None:
            return self.auth.to_sign_in(req, req.path)
        parts = [unquote(p) for p in path[len(PREFIX):].split("/")[1:]]
        who = self.auth.who(session)
        try:
            if not parts:
                return await self._overview(req, who)
            # A region that no queue URL could name is never looked up.
            if len(parts) == 3 and parts[0] == "queues" and parts[1] and plain_name(parts[1]):
                return await self._queue(req, who, region=parts[1], name=parts[2])
        except StoreError as exc:
            log.error("console: the store failed: %s", exc)
            return render(503, "Store unavailable", f"<p>{escape(str(exc))}</p>", who=who)
        return render(404, "Not found", f'<p>No such page. <a href="{PREFIX}">All queues</a></p>',
                      who=who)

    async def _post(self, req: Request) -> Response:
        """The one gate of every state-changing request. An action runs only for this
        console's own form: no foreign Origin, a well-formed form, and the CSRF token of a
        live session (to sign in, or on a console without keys, the CSRF cookie's: double
        submit). Anything else is refused before the action runs, so it changes nothing."""
        name = req.path[len(PREFIX):].strip("/")
        action = self.actions.get(name)
        if action is None:
            return render(405, "Method not allowed", "<p>Nothing to post here.</p>")
        if not auth.same_origin(req):
            log.warning("console: refused a cross-origin POST to %s from %r", req.path,
                        req.headers.get("origin"))
            return render(403, "Forbidden", "<p>Another site's form cannot post here.</p>")
        form = auth.read_form(req)
        if form is None:
            return render(400, "Bad request", f"<p>Expected a form ({auth.FORM_TYPE}, at most "
                          f"{auth.MAX_FORM_FIELDS} fields and {auth.MAX_FORM_BYTES:,} bytes)."
                          "</p>")
        session = self.auth.session(req)
        if name == "sign-in" or not self.access_keys:
            expected = auth.cookies(req).get(CSRF_COOKIE)
        else:  # a session ended or never was: no token can match
            expected = session.csrf if session else None
        if not auth.same_secret(form.get(CSRF_FIELD), expected):
            log.warning("console: refused a POST to %s without the right CSRF token", req.path)
            return render(403, "Forbidden", "<p>This form is out of date or was not made by "
                          f'this console. <a href="{PREFIX}">Reload the console</a> and try '
                          "again.</p>")
        return await action(req, form, session)

    def _context(self, req: Request, region: str) -> RequestContext:
        host = req.headers.get("host") or "localhost"
        return RequestContext(region, self.account_id, f"{req.scheme}://{host}")

    # --- pages ---------------------------------------------------------------------------

    async def _overview(self, req: Request, who: str) -> Response:
        queues = await self.service.queue_counts()
        if not queues:
            host = escape(req.headers.get("host") or "127.0.0.1:9324")
            return render(200, "Queues", "<p>No queues yet. Create one, for example:</p>"
                          f"<p><code>aws --endpoint-url {req.scheme}://{host} sqs create-queue "
                          "--queue-name jobs</code></p>", refresh=True, who=who)
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
        workers = _workers(await self.service.live_workers(), self.service.clock.now_ms())
        return render(200, "Queues", table + workers, refresh=True, who=who)

    async def _queue(self, req: Request, who: str, region: str, name: str) -> Response:
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
            return render(404, "Queue not found", f"<p>{escape(error.message)} "
                          f'<a href="{PREFIX}">All queues</a></p>', who=who)
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
        return render(200, name, "\n".join(body), refresh=True, who=who)


# --- HTML pieces --------------------------------------------------------------------------

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
