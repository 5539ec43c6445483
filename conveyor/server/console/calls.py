"""The console's SQS calls, checked, validated and run exactly as the API runs a request.

A console action is an SQS call on the signed-in operator's behalf: its request is
checked against botocore's model like a decoded JSON body (conveyor.sqs.shapes), then
against the operator's access key (server/authz.py, the API's own check), then run by
the same service method, and counted in the same request metrics. So a key limited to
reading is refused here as it is on the API, and the service's limits and errors hold.
Every call is logged with the access key that made it, and the last ones are kept for
the console's "Recent actions".
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conveyor.server import authz
from conveyor.server.access import AccessKey
from conveyor.service import RequestContext, Service, controls, workers
from conveyor.sqs import shapes
from conveyor.sqs.errors import AccessDenied, SqsError

log = logging.getLogger("conveyor.server.console")

AUDIT_SIZE = 100  # recent actions kept in memory for the overview

# (action, outcome, seconds): the server's request metrics (ServerMetrics.requests).
Observe = Callable[[str, str, float], None]


@dataclass(frozen=True, slots=True)
class Operator:
    """Who uses the console: the access key signed in, None on a console without keys
    (which may do everything, like an API without signatures), and where the queues a
    call implies are looked up (the service)."""

    key: AccessKey | None
    lookups: authz.Lookups

    @property
    def key_id(self) -> str:
        return self.key.key_id if self.key else "anonymous"

    async def may(self, action: str, request: dict[str, Any], ctx: RequestContext) -> bool:
        """Whether this operator's key allows the call: pages show only allowed buttons."""
        try:
            await self.check(action, request, ctx)
        except AccessDenied:
            return False
        return True

    async def check(self, action: str, request: dict[str, Any], ctx: RequestContext) -> None:
        """The API's own check (server/authz.py): AccessDenied unless the key may act on
        every queue the call touches, named or implied."""
        await authz.authorize(self.key, action, request, ctx, self.lookups)

    def scoped(self, ctx: RequestContext) -> RequestContext:
        """`ctx` for this operator: lists show only the queues its key may see."""
        return authz.scoped(ctx, self.key)

    def sees(self, queue: str) -> bool:
        """Whether a page may show the queue called `queue` (a worker's, a decision's)."""
        return authz.visible(self.key, queue)


@dataclass(frozen=True, slots=True)
class Done:
    """One console call, for the overview's list of recent actions."""

    at_ms: int
    key_id: str
    region: str
    action: str
    target: str
    outcome: str


class Calls:
    def __init__(self, service: Service, observe: Observe) -> None:
        self.service = service
        self.observe = observe
        self.recent: deque[Done] = deque(maxlen=AUDIT_SIZE)

    async def call(self, operator: Operator, ctx: RequestContext, action: str,
                   request: dict[str, Any]) -> dict[str, Any]:
        """Run one SQS action for `operator`; raises the SqsError the API would answer."""
        started = time.perf_counter()
        outcome = "ok"
        try:
            # Conveyor's own calls (DrainWorker, PauseQueue...) have no botocore model: the
            # service checks them, as it does when they come over the wire.
            checked = (request if action in workers.ACTIONS + controls.ACTIONS
                       else shapes.json_checker(action)(request))
            ctx = operator.scoped(ctx)
            await operator.check(action, checked, ctx)
            return await self.service.action(action)(ctx, checked)
        except SqsError as error:
            outcome = error.code
            raise
        finally:
            self.observe(action, outcome, time.perf_counter() - started)
            self.record(operator, ctx, action, request, outcome)

    async def authorize(self, operator: Operator, ctx: RequestContext, action: str,
                        request: dict[str, Any]) -> None:
        """Refuse (AccessDenied, logged) before an action that reads first and calls after."""
        try:
            await operator.check(action, request, ctx)
        except AccessDenied as error:
            self.record(operator, ctx, action, request, error.code)
            raise

    def record(self, operator: Operator, ctx: RequestContext, action: str,
               request: dict[str, Any], outcome: str) -> None:
        """Log a call (or the console's own deed) with who made it, and keep it for the
        overview's recent actions."""
        target = _target(request)
        self.recent.appendleft(Done(self.service.clock.now_ms(), operator.key_id, ctx.region,
                                    action, target, outcome))
        log.info("console: %s %s by access key %s: %s", action, target, operator.key_id,
                 outcome, extra={"queue": target, "access_key": operator.key_id})


def _target(request: dict[str, Any]) -> str:
    """What a call is about, for the log: its queue, source ARN or task."""
    for member in ("QueueUrl", "QueueName", "SourceArn"):
        value = request.get(member)
        if isinstance(value, str):
            return value.rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    if isinstance(request.get("WorkerId"), str):
        return f"worker {request['WorkerId']}"
    return "move task" if "TaskHandle" in request else ""
