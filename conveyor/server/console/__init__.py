"""The web console: what an operator opens in a browser to see and act on the queues.

HTML on the server's own port, served from the service layer like any SQS call:
`/console` lists the queues of every region a page at a time with their message counts,
a chart, the failure rate and dead-letter wiring (dead-letter queues holding messages
marked), a form to create one, the workers that announce themselves (to any node) with
a Drain button each, the autoscalers' decisions as a timeline (workers.py) and the recent
console actions; `/console/queues/<region>/<name>` shows one queue: charts of its last
hour, day or week (charts.py, counted by the service: activity.py, kept in the store so
every node agrees), send, purge, delete, pause or resume its delivery, edit
its attributes (typed: attribute_form.py), redrive policy and tags, redrive its dead
letters with live progress, its messages a page at a time or searched (looked at, never
received), deleted (by receipt, or by the service's console-only drop when none names
them) or moved, a selection at a time, to another queue or back where dead letters came
from, or everything matching a search at once (`.../bulk`: bulk.py);
`.../messages/<id>` shows one message whole, for a dead letter why it died, and for one
waiting out its back-off a button to retry it now. Pages update their live parts every
few seconds (static/console.js).

A server that checks signatures (access keys configured) first sends a browser to
`/console/sign-in`, where an access key id and its secret key buy a session cookie
(auth.py) signed with a key derived from that key's secret (sessions.py): every node with
the same keys accepts it, and a restart signs nobody out.

Every POST goes through `Console._post`, which refuses another site's requests (Origin)
and forms without the right CSRF token before any action in `Console.actions` runs.
Each action is an SQS call made through calls.Calls: checked against the signed-in key's
limits exactly as a signed API request is (so a read-only key is refused, 403, and
changes nothing), run by the service, counted and logged with the key that made it.
Pages show only the buttons the key allows, and only the queues (and messages) it may
look at (GetQueueAttributes, and ReceiveMessage for messages), and of the workers,
autoscalers, scaling decisions and drains only those of its queues: the one table of
server/authz.py decides, for pages and actions as for the API.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from html import escape
from urllib.parse import unquote

from conveyor import __version__
from conveyor.server.access import AccessKey
from conveyor.server.console import auth, bulk
from conveyor.server.console.actions import Action, Actions
from conveyor.server.console.auth import CSRF_COOKIE, CSRF_FIELD, SIGN_IN, Session
from conveyor.server.console.calls import Calls, Observe, Operator
from conveyor.server.console.frame import PREFIX, STATIC, asset, render
from conveyor.server.console.overview import Overview
from conveyor.server.console.parts import duration
from conveyor.server.console.queue import QueuePage
from conveyor.server.console.visit import Visit
from conveyor.server.http import Request, Response
from conveyor.service import Service, StoreError
from conveyor.service.validate import plain_name
from conveyor.sqs.limits import MODES

__all__ = ["PREFIX", "Console", "auth", "favicon"]

log = logging.getLogger("conveyor.server.console")

SEND_FORM = "send-message"  # the one form that carries a message body: a larger limit


def favicon() -> Response:
    """GET /favicon.ico, which browsers ask of any site: the console's icon (no 403 from
    the SQS endpoint, so no error in the browser's console)."""
    found = asset("favicon.svg")
    assert found is not None
    return found


class Console:
    def __init__(self, service: Service, account_id: str, access_keys: dict[str, AccessKey],
                 session_s: int = auth.DEFAULT_SESSION_S,
                 observe: Observe = lambda action, outcome, seconds: None,
                 default_region: str = "us-east-1",
                 count_sign_in: Callable[[str], None] = lambda outcome: None) -> None:
        self.service = service
        self.account_id = account_id
        self.access_keys = access_keys
        self.default_region = default_region
        self.started = time.monotonic()
        self.auth = auth.SignIn({k: v.secret for k, v in access_keys.items()},
                                service.clock.now_ms, session_s, service.sign_ins,
                                count_sign_in)
        self.calls = Calls(service, observe)
        self.overview = Overview(service)
        self.jobs = bulk.Jobs()
        self.queue_page = QueuePage(service, self.jobs)
        # Every POST /console/<name>. Add buttons' actions here: _post guards them all, and
        # a page with a form embeds the token of self.auth.form_token(req, session).
        self.actions: dict[str, Action] = {
            "sign-in": self.auth.sign_in, "sign-out": self.auth.sign_out,
            **Actions(service, self.calls, account_id, self.operator, self.jobs).table()}

    def operator(self, session: Session | None) -> Operator:
        """Who acts: the session's access key (None without keys: an open console)."""
        return Operator(self.access_keys.get(session.key_id) if session else None, self.service)

    async def page(self, req: Request) -> Response:
        if req.method == "POST":
            return await self._post(req)
        if req.method != "GET":
            return render(405, "Method not allowed", "<p>Use the console's pages and buttons.</p>")
        path = req.path.rstrip("/")
        if path.startswith(STATIC):
            found = asset(path[len(STATIC):])
            return found or render(404, "Not found", "<p>No such file.</p>")
        if path == SIGN_IN:
            return self.auth.page(req)
        session = self.auth.session(req)
        if self.access_keys and session is None:
            query = req.query_string.decode("latin-1")
            return self.auth.to_sign_in(req, f"{req.path}?{query}" if query else req.path)
        csrf, headers = self.auth.form_token(req, session)
        visit = Visit(req, self.operator(session), csrf, self.auth.who(session),
                      self._header(), self.account_id)
        response = await self._route(visit, path)
        response.headers += headers
        return response

    async def _route(self, v: Visit, path: str) -> Response:
        parts = [unquote(p) for p in path[len(PREFIX):].split("/")[1:]]
        try:
            if not parts:
                return await self.overview.page(v, self.default_region, list(self.calls.recent))
            # A region that no queue URL could name is never looked up.
            if len(parts) >= 3 and parts[0] == "queues" and parts[1] and plain_name(parts[1]):
                if len(parts) == 3:
                    return await self.queue_page.page(v, parts[1], parts[2])
                if len(parts) == 4 and parts[3] == "bulk":
                    return await self.queue_page.bulk(v, parts[1], parts[2])
                if len(parts) == 5 and parts[3] == "messages":
                    return await self.queue_page.message(v, parts[1], parts[2], parts[4])
        except StoreError as exc:
            log.error("console: the store failed: %s", exc)
            return render(503, "Store unavailable", f"<p>{escape(str(exc))}</p>", who=v.who)
        return render(404, "Not found", f'<p>No such page. <a href="{PREFIX}">All queues</a></p>',
                      who=v.who, header=v.header)

    def _header(self) -> str:
        kind = "PostgreSQL" if self.service.shared else "embedded SQLite"
        mode = next((name for name, limits in MODES.items() if limits is self.service.limits),
                    "custom")
        return (f"version {escape(__version__)} · store {kind} · mode {escape(mode)} · up "
                f"{duration(time.monotonic() - self.started)}")

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
        limit = (self.service.limits.max_request_bytes if name == SEND_FORM
                 else auth.MAX_FORM_BYTES)
        form = auth.read_form(req, limit)
        if form is None:
            return render(400, "Bad request", f"<p>Expected a form ({auth.FORM_TYPE}, at most "
                          f"{auth.MAX_FORM_FIELDS} fields and {limit:,} bytes).</p>")
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
        try:
            return await action(req, form, session)
        except StoreError as exc:
            log.error("console: the store failed: %s", exc)
            return render(503, "Store unavailable", f"<p>{escape(str(exc))}</p>")
