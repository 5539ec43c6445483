"""Operator controls beyond SQS: pause and resume a queue's delivery.

Wire: the JSON 1.0 protocol with `X-Amz-Target: ConveyorQueues.<Action>`, signed like any
SQS call (an access key limited to actions needs the action by name, one limited to
queues must cover the queue: server/authz.py):

- PauseQueue {QueueUrl}: receives on the queue (ReceiveMessage, PollMessages) answer
  nothing until it is resumed; sends, deletes, visibility changes, purges and moves go on
  as ever. Long polls parked on it stay parked until their wait ends or it is resumed.
- ResumeQueue {QueueUrl}: delivery again; the long polls parked on the queue, on every
  node sharing the store, wake and look at once.

The state is the queue attribute `ConveyorPaused` (PAUSED), in Conveyor's own namespace:
GetQueueAttributes answers it when asked by name in any mode, and lists it under `All` and
lets SetQueueAttributes / CreateQueue set it only where the limits allow Conveyor's
attributes (`--mode relaxed`); in strict mode SQS's own calls keep refusing it as SQS
refuses a name it does not know ("Unknown Attribute ConveyorPaused."), so these two calls
are the way. With several nodes on one store, another node's pause holds there within
the queue cache's second (base.QUEUE_CACHE_SHARED_S); a resume is seen at once.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mypy_extensions import trait

from conveyor.service.base import ServiceBase
from conveyor.service.context import RequestContext
from conveyor.store.base import QueueRecord

TARGET_PREFIX = "ConveyorQueues."
# SetConveyorAttributes is QueueActions' (queues.py): it sets Conveyor's own attributes.
ACTIONS = ("PauseQueue", "ResumeQueue", "SetConveyorAttributes")
PAUSED = "ConveyorPaused"
# A resume wakes every long poll parked on the queue: more than any node has parked.
WAKE_ALL = 1_000_000

Request = dict[str, Any]


def is_paused(queue: QueueRecord) -> bool:
    """Whether the queue's delivery is paused."""
    return queue.attributes.get(PAUSED) == "true"


def with_paused(values: dict[str, str], paused: bool) -> dict[str, str]:
    """Queue attributes `values` paused or not; not paused is the attribute's absence."""
    kept = {k: v for k, v in values.items() if k != PAUSED}
    return {**kept, PAUSED: "true"} if paused else kept


@trait  # one of Service's parts (setup.py: mypyc compiles them as traits)
class ControlActions(ServiceBase):
    async def pause_queue(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        await self._set_paused(ctx, req, True)
        return {}

    async def resume_queue(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        await self._set_paused(ctx, req, False)
        return {}

    async def _set_paused(self, ctx: RequestContext, req: Request, paused: bool) -> None:
        url = req.get("QueueUrl")
        queue = await self.queue(ctx, url if isinstance(url, str) else "")
        # Read the record afresh: a cached one may miss another node's latest change.
        queue = await self.store.get_queue(queue.region, queue.name) or queue
        if is_paused(queue) == paused:
            return
        await self.store.update_queue(replace(
            queue, attributes=with_paused(queue.attributes, paused),
            modified_s=self.clock.now_s()))
        self.forget(queue)
        self.log.info("%s queue %s", "paused" if paused else "resumed", queue.name,
                      extra={"queue": queue.name})
        if not paused:
            self.woken_by_resume(queue)

    def woken_by_resume(self, queue: QueueRecord) -> None:
        """The queue delivers again: wake its parked long polls, here and on other nodes."""
        self.on_ready(queue, WAKE_ALL)



async def still_paused(service: ServiceBase, queue: QueueRecord) -> bool:
    """Whether the queue is paused, as a receive sees it: a cached record that says paused
    is read again, so a resume on another node shows at once, not after the cache's
    second (a paused queue's receives are few: its long polls stay parked)."""
    if not is_paused(queue):
        return False
    current = await service.store.get_queue(queue.region, queue.name)
    if current is None or current.id != queue.id:
        return True  # gone: the receive finds nothing either way
    service.forget(queue)
    return is_paused(current)
