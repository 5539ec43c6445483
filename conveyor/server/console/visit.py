"""One page view: who asks, with which CSRF token, and what the page's query says."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import parse_qsl

from conveyor.server.console.calls import Operator
from conveyor.server.http import Request
from conveyor.service import RequestContext

MAX_QUERY_CHARS = 200  # a search or filter longer than this is cut

# What an action did, told on the page it redirects to (`?done=<key>&...`, actions.py).
NOTICES = {
    "sent": "Sent message {id}.",
    "purged": "Purged: every message sent before now is being deleted.",
    "created": "Created the queue.",
    "queue-deleted": "Deleted queue {id}.",
    "edited": "Changed {id}.",
    "tagged": "Tags: {n} set, {m} removed.",
    "unchanged": "Nothing to change.",
    "deleted-messages": "Deleted {n} message(s).",
    "not-deleted": "Deleted {n} message(s); {m} were gone, or received meanwhile and left "
                   "to their receiver.",
    "redrive": "Redrive started: its progress is below.",
    "cancelled": "Redrive cancelled after {n} message(s).",
    "moved": "Moved {n} message(s).",
    "not-moved": "Moved {n} message(s); {m} were gone, or received meanwhile and left to "
                 "their receiver.",
    "paused": "Delivery paused: receives answer nothing until it is resumed.",
    "resumed": "Delivery resumed.",
    "retried": "Message {id} is visible now: the next receive takes it.",
    "bulk-started": "Started: its progress is below.",
    "bulk-cancelled": "Cancelling: the job stops before its next step; what it did stays "
                      "done.",
    "drain-requested": "Asked worker {id} to drain: it finishes its jobs, stops receiving "
                       "and exits at its next announcement.",
}


@dataclass(slots=True)
class Visit:
    req: Request
    operator: Operator
    csrf: str  # the token forms on this page carry (auth.SignIn.form_token)
    who: str  # the sign-out form, HTML
    header: str  # the server line, HTML
    account_id: str
    query: dict[str, str] = field(init=False)
    # region -> ctx(region): the overview asks once per queue (10,000 on a big server)
    _contexts: dict[str, RequestContext] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        pairs = parse_qsl(self.req.query_string.decode("latin-1"), keep_blank_values=True)
        self.query = {k: v[:MAX_QUERY_CHARS] for k, v in pairs}

    def ctx(self, region: str) -> RequestContext:
        """The request context of an SQS call made from this page, in `region`: queue
        URLs name the host the browser used, messages sent carry the key as SenderId, and
        lists show only the queues the key may see."""
        found = self._contexts.get(region)
        if found is None:
            host = self.req.headers.get("host") or "localhost"
            sender = self.operator.key.key_id if self.operator.key else ""
            found = self._contexts[region] = self.operator.scoped(
                RequestContext(region, self.account_id, f"{self.req.scheme}://{host}", sender))
        return found

    async def may(self, action: str, request: dict[str, Any], region: str) -> bool:
        """Whether the operator's key allows the call (the API's check, server/authz.py)."""
        return await self.operator.may(action, request, self.ctx(region))

    def sees(self, queue: str) -> bool:
        """Whether the page may show the queue called `queue` (a worker's, a decision's)."""
        return self.operator.sees(queue)

    def notice(self) -> str:
        """The outcome of the action that sent the browser here, as HTML."""
        template = NOTICES.get(self.query.get("done", ""))
        if template is None:
            return ""
        text = template.format(id=self.query.get("id", "")[:100], n=self.number("n", 0),
                               m=self.number("m", 0))
        return f'<p class="notice" role="status">{escape(text)}</p>'

    def number(self, name: str, default: int = 1) -> int:
        text = self.query.get(name, "")
        return int(text) if text.isdigit() and len(text) < 9 else default
