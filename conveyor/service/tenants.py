"""A queue's tenant limits as receives apply them (the rules: service/rules.py, tenant
limits; the attributes: service/attributes.py).

The group limits (ConveyorGroupConcurrency, ConveyorGroupReceiveRate) go to the store with
each claim, in its `picking`, and are applied in the claim's transaction. The queue's own
rate (ConveyorReceiveRate) is taken from its bucket before the claim, at most what the
receive asks, and what the claim did not hand out is given back after it, so the bucket
only ever holds back: never more than the rate and burst go, on any node.

A receive that a limit held back notes in its plan when to look again (`retry_ms`): a long
poll parked on the queue sleeps until then (server/app.py), and PollMessages tells the
worker (`RetryAfterSeconds`, service/polls.py), so neither polls in a busy loop.
"""

from __future__ import annotations

from conveyor.service import attributes as attrs
from conveyor.service import rules
from conveyor.store.base import QueueRecord, Store


def picking(queue: QueueRecord) -> rules.Picking:
    """The claim rules for a receive on `queue`, with its group limits."""
    if queue.fifo:
        return rules.picking()
    group_rate = attrs.receive_rate(queue.attributes, group=True)
    return rules.picking(attrs.group_cap(queue.attributes),
                         rules.Rate(*group_rate) if group_rate else None)


def queue_rate(queue: QueueRecord) -> rules.Rate | None:
    """The queue's own receive rate, if it has one."""
    rate = attrs.receive_rate(queue.attributes, group=False)
    return rules.Rate(*rate) if rate else None


def wakes_on_delete(queue: QueueRecord) -> bool:
    """Whether a delete may let a held-back message go: a FIFO group's next, or a capped
    group's (parked long polls then look again)."""
    return queue.fifo or bool(attrs.group_cap(queue.attributes))


async def take(store: Store, queue: QueueRecord, wanted: int, now_ms: int
               ) -> tuple[int, int | None]:
    """(messages the receive may hand out, when to look again if fewer than `wanted`)."""
    rate = queue_rate(queue)
    if rate is None:
        return wanted, None
    granted, ready_ms = await store.take_tokens(queue, wanted, now_ms, rate)
    return granted, ready_ms if granted < wanted else None


async def give_back(store: Store, queue: QueueRecord, unused: int, now_ms: int) -> None:
    """Return the tokens a receive took and did not hand out."""
    rate = queue_rate(queue)
    if rate is not None and unused > 0:
        await store.take_tokens(queue, -unused, now_ms, rate)


def sooner(a: int | None, b: int | None) -> int | None:
    """The earlier of two times to look again (None: no time)."""
    if a is None or b is None:
        return a if b is None else b
    return min(a, b)
