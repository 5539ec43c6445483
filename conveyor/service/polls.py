"""Long polls longer than SQS allows, with the worker's announcement folded in.

Wire: the JSON 1.0 protocol with `X-Amz-Target: ConveyorWorkers.PollMessages`, signed like
any SQS call, beside AnnounceWorker (workers.py):

- PollMessages {<a ReceiveMessage request>, WaitTimeSeconds: 0..MAX_WAIT_S, Announce?}
  answers exactly as ReceiveMessage does, but may wait up to MAX_WAIT_S for a message
  where SQS stops at 20 s. `Announce`, when present, is an AnnounceWorker request
  (WorkerId, Queue, TtlSeconds, Status, Kind), recorded before the poll parks; the
  answer then also carries what AnnounceWorker's would (`"Drain": true`, workers.py).

Why: an idle worker on Amazon SQS makes 180 long polls an hour (20 s each) plus nothing
else; here it can make 30 (120 s each) and announce itself with each of them, instead of
a poll every 20 s and an AnnounceWorker call every 10 s. The worker tells a server without
this API from the refusal of its first call and falls back to ReceiveMessage.

The server's long-poll loop (server/app.py) runs the plan this returns, as it does
ReceiveMessage's; a message that becomes receivable wakes the poll at once, as ever.
An access key limited to actions (server/access.py) needs `PollMessages` among them; a
worker whose key lacks it is refused (AccessDenied) and falls back to ReceiveMessage.
"""

from __future__ import annotations

from typing import Any, Protocol

from conveyor.service.context import RequestContext
from conveyor.service.messages import ReceivePlan
from conveyor.service.workers import TARGET_PREFIX
from conveyor.sqs.errors import InvalidParameterValue, SqsError
from conveyor.sqs.shapes import json_checker

__all__ = ["ACTION", "ACTIONS", "MAX_WAIT_S", "TARGET_PREFIX", "plan_poll"]

ACTION = "PollMessages"
ACTIONS = (ACTION,)
# Five minutes: long enough that an idle worker costs a few calls an hour, short enough
# that a worker that vanished without closing its connection (a cut network) is noticed,
# and below the idle timeouts of most proxies a team may put in front of the server
# (nginx's proxy_read_timeout is 60 s by default: the worker's own default stays under).
MAX_WAIT_S = 300

_OWN_FIELDS = ("WaitTimeSeconds", "Announce")


class _Service(Protocol):
    """What plan_poll needs of the service (MessageActions and WorkerActions)."""

    async def plan_receive(self, ctx: RequestContext, req: dict[str, Any]) -> ReceivePlan: ...

    async def announce_worker(self, ctx: RequestContext,
                              req: dict[str, Any]) -> dict[str, Any]: ...


async def plan_poll(service: _Service, ctx: RequestContext, req: dict[str, Any]) -> ReceivePlan:
    """Check a PollMessages request, record its announcement, and return the receive plan
    for the server's long-poll loop, with its longer wait."""
    wait_s = req.get("WaitTimeSeconds", 0)
    if isinstance(wait_s, bool) or not isinstance(wait_s, int) or not 0 <= wait_s <= MAX_WAIT_S:
        msg = f"WaitTimeSeconds must be a whole number between 0 and {MAX_WAIT_S}."
        raise InvalidParameterValue(msg)
    announce = req.get("Announce")
    if announce is not None and not isinstance(announce, dict):
        raise InvalidParameterValue("Announce must be an AnnounceWorker request (an object).")
    receive = {name: value for name, value in req.items() if name not in _OWN_FIELDS}
    try:
        # Extension bodies reach the service unchecked (jsonproto): this one's SQS part
        # gets ReceiveMessage's own model check, so it is read exactly as ReceiveMessage is.
        receive = json_checker("ReceiveMessage")(receive)
    except SqsError as error:
        error.action = ACTION
        raise
    plan: ReceivePlan = await service.plan_receive(ctx, receive)
    if announce is not None:
        plan.answer_extra = await service.announce_worker(ctx, announce)
    plan.wait_s = wait_s
    return plan
