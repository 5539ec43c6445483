"""Long polls longer than SQS allows, on one queue or several, with the worker's
announcement folded in.

Wire: the JSON 1.0 protocol with `X-Amz-Target: ConveyorWorkers.PollMessages`, signed like
any SQS call, beside AnnounceWorker (workers.py):

- PollMessages {<a ReceiveMessage request>, WaitTimeSeconds: 0..MAX_WAIT_S, Announce?,
  WorkerId?, QueueUrls?} answers exactly as ReceiveMessage does, but may wait up to
  MAX_WAIT_S for a message where SQS stops at 20 s. When a queue's receive rate or group
  limits held its last look back, the answer also carries `RetryAfterSeconds` (HINT):
  how long until they let more go (service/tenants.py). `Announce`, when present, is an
  AnnounceWorker request (WorkerId, Queue, TtlSeconds, Status, Kind), recorded before the
  poll parks; the answer then also carries what AnnounceWorker's would (`"Drain": true`,
  workers.py). `WorkerId` (or the announcement's) names the polling worker: a DrainWorker
  for it answers the parked poll at once, `{"Drain": true}` (server/app.py wakes it).
- `QueueUrls` instead of `QueueUrl`: one poll parked on 1..MAX_QUEUES queues at once (a
  partitioned queue's partitions, worker/partitions.py). It answers as soon as any of
  them has messages, at most MaxNumberOfMessages in all, each message with the
  `QueueUrl` it came from; which queue is looked at first turns with every fetch, so a
  backlog in one never starves the others.

Why: an idle worker on Amazon SQS makes 180 long polls an hour (20 s each) plus nothing
else; here it can make 30 (120 s each) and announce itself with each of them, instead of
a poll every 20 s and an AnnounceWorker call every 10 s; an idle partitioned worker makes
those 30 for all its partitions, and a message sent to any of them reaches it at once.
The worker tells a server without this API from the refusal of its first call and falls
back to ReceiveMessage.

The server's long-poll loop (server/app.py) runs the plan this returns; a message that
becomes receivable on any of its queues wakes the poll at once, as ever.
An access key limited to actions (server/access.py) needs `PollMessages` among them (and
`AnnounceWorker` for an `Announce`), and one limited to queues must cover every queue
named, the announced one too (server/authz.py); a worker whose key lacks the action is
refused (AccessDenied) and falls back to ReceiveMessage.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Protocol

from conveyor.service.context import RequestContext
from conveyor.service.messages import ReceivePlan
from conveyor.service.workers import ID_PATTERN, TARGET_PREFIX
from conveyor.sqs.errors import InvalidParameterValue, MissingParameter, SqsError
from conveyor.sqs.shapes import json_checker

__all__ = ["ACTION", "ACTIONS", "HINT", "MAX_QUEUES", "MAX_WAIT_S", "TARGET_PREFIX", "PollPlan",
           "plan_poll"]

ACTION = "PollMessages"
ACTIONS: tuple[str, ...] = (ACTION,)
# Five minutes: long enough that an idle worker costs a few calls an hour, short enough
# that a worker that vanished without closing its connection (a cut network) is noticed,
# and below the idle timeouts of most proxies a team may put in front of the server
# (nginx's proxy_read_timeout is 60 s by default: the worker's own default stays under).
MAX_WAIT_S = 300
# The most queues one poll parks on: a partitioned queue's most partitions (64,
# client/partitions.py), so one poll covers any of them.
MAX_QUEUES = 64

# In an answer: seconds until a limit that held the poll's last look back lets more go.
HINT = "RetryAfterSeconds"
_OWN_FIELDS = ("WaitTimeSeconds", "Announce", "WorkerId", "QueueUrls")
_turns = itertools.count()  # which queue of a several-queue poll is looked at first


class _Service(Protocol):
    """What plan_poll needs of the service (MessageActions and WorkerActions)."""

    async def plan_receive(self, ctx: RequestContext, req: dict[str, Any]) -> ReceivePlan: ...

    async def announce_worker(self, ctx: RequestContext,
                              req: dict[str, Any]) -> dict[str, Any]: ...

    async def fetch(self, ctx: RequestContext, plan: ReceivePlan) -> dict[str, Any]: ...


# init=False and __init__ written out: compiled, it is a quarter of the cost (setup.py)
@dataclass(slots=True, init=False)
class PollPlan:
    """A checked receive on one queue or several: the server's long-poll loop runs it."""

    plans: list[ReceivePlan]  # one per queue, in the order named
    urls: list[str] | None  # the QueueUrls as named, or None for a one-queue receive
    max_messages: int
    wait_s: int
    worker_id: str | None = None  # a DrainWorker for it ends the wait (server/app.py)
    # Members added to the answer (`Drain`, from the announcement or a drain request).
    answer_extra: dict[str, Any] = field(default_factory=dict)

    def __init__(self, plans: list[ReceivePlan], urls: list[str] | None, max_messages: int,
                 wait_s: int, worker_id: str | None = None) -> None:
        self.plans, self.urls, self.max_messages, self.wait_s = plans, urls, max_messages, wait_s
        self.worker_id, self.answer_extra = worker_id, {}

    @classmethod
    def of(cls, plan: ReceivePlan) -> PollPlan:
        """A plain ReceiveMessage's plan."""
        return cls([plan], None, plan.max_messages, plan.wait_s)

    @property
    def queue_ids(self) -> list[int]:
        return [plan.queue.id for plan in self.plans]

    def hinted(self, result: dict[str, Any], now_ms: int) -> dict[str, Any]:
        """The answer, with `RetryAfterSeconds` when a queue's limit held its last fetch
        back (service/tenants.py): how long until it lets more go, so that the worker
        comes back then rather than at once."""
        retry_ms = min((p.retry_ms for p in self.plans if p.retry_ms is not None),
                       default=None)
        if retry_ms is None or retry_ms <= now_ms:
            return result
        return {**result, HINT: round((retry_ms - now_ms) / 1000, 3)}

    async def fetch(self, service: _Service, ctx: RequestContext) -> dict[str, Any]:
        """One receive attempt on every queue in turn (no waiting), at most max_messages
        in all; on several queues each message says which it came from."""
        if self.urls is None:
            return await service.fetch(ctx, self.plans[0])
        first = next(_turns) % len(self.plans)
        messages: list[dict[str, Any]] = []
        for index in itertools.chain(range(first, len(self.plans)), range(first)):
            plan = self.plans[index]
            plan.max_messages = self.max_messages - len(messages)
            if plan.max_messages <= 0:
                break
            got = (await service.fetch(ctx, plan)).get("Messages", [])
            messages += [{**message, "QueueUrl": self.urls[index]} for message in got]
        return {"Messages": messages} if messages else {}


async def plan_poll(service: _Service, ctx: RequestContext, req: dict[str, Any]) -> PollPlan:
    """Check a PollMessages request, record its announcement, and return the plan for the
    server's long-poll loop, with its longer wait."""
    wait_s = req.get("WaitTimeSeconds", 0)
    if isinstance(wait_s, bool) or not isinstance(wait_s, int) or not 0 <= wait_s <= MAX_WAIT_S:
        msg = f"WaitTimeSeconds must be a whole number between 0 and {MAX_WAIT_S}."
        raise InvalidParameterValue(msg)
    announce = req.get("Announce")
    if announce is not None and not isinstance(announce, dict):
        raise InvalidParameterValue("Announce must be an AnnounceWorker request (an object).")
    worker_id = _worker_id(req.get("WorkerId", (announce or {}).get("WorkerId")))
    urls = _queue_urls(req)
    receive = {name: value for name, value in req.items() if name not in _OWN_FIELDS}
    if urls is not None:
        receive["QueueUrl"] = urls[0]  # each queue is planned alike, below
    try:
        # Extension bodies reach the service unchecked (jsonproto): this one's SQS part
        # gets ReceiveMessage's own model check, so it is read exactly as ReceiveMessage is.
        receive = json_checker("ReceiveMessage")(receive)
    except SqsError as error:
        error.action = ACTION
        raise
    plans = [await service.plan_receive(ctx, {**receive, "QueueUrl": url})
             for url in urls or [receive["QueueUrl"]]]
    _once_each(plans)
    poll = PollPlan(plans, urls, plans[0].max_messages, wait_s, worker_id)
    if announce is not None:
        poll.answer_extra = await service.announce_worker(ctx, announce)
    return poll


def _worker_id(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise InvalidParameterValue("WorkerId must be 1-256 characters of letters, digits "
                                    "and _ . : / # @ -.")
    return value


def _queue_urls(req: dict[str, Any]) -> list[str] | None:
    """The QueueUrls of a several-queue poll (None when it names one QueueUrl)."""
    urls = req.get("QueueUrls")
    if urls is None:
        return None
    if "QueueUrl" in req:
        raise InvalidParameterValue("Give QueueUrl or QueueUrls, not both.")
    if not isinstance(urls, list) or not all(isinstance(url, str) for url in urls):
        raise InvalidParameterValue("QueueUrls must be a list of queue URLs.")
    if not urls:
        raise MissingParameter("QueueUrls must name at least one queue.")
    if len(urls) > MAX_QUEUES:
        raise InvalidParameterValue(f"QueueUrls may name at most {MAX_QUEUES} queues, "
                                    f"not {len(urls)}.")
    return urls


def _once_each(plans: list[ReceivePlan]) -> None:
    """Refuse a queue named twice (perhaps by two spellings of its URL)."""
    seen: set[int] = set()
    for plan in plans:
        if plan.queue.id in seen:
            raise InvalidParameterValue(f"QueueUrls names queue {plan.queue.name} more than "
                                        "once.")
        seen.add(plan.queue.id)

