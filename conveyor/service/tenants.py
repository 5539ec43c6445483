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

What applies to a queue (`settings`) and how often each limit held a receive back
(`HeldBack`) are shown by /metrics and the console.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from conveyor.service import attributes as attrs
from conveyor.service import rules
from conveyor.store.base import QueueRecord, Store

HELD_BY_RATE = "receive_rate"  # the queue's own rate (the group limits': rules.py)


@dataclass(frozen=True, slots=True)
class Picking(rules.Picking):
    """The claim rules, noting in `held` which group limits left a group short in this
    claim (rules.group_holds), so that a receive they held back is counted."""

    held: set[str] = field(default_factory=set)

    def group_room(self, in_flight: int, tat_ms: float | None, now_ms: int,
                   limit: int) -> int:
        self.held.update(rules.group_holds(self.group_cap, self.group_rate, in_flight,
                                           tat_ms, now_ms, limit))
        return rules.Picking.group_room(self, in_flight, tat_ms, now_ms, limit)


def picking(queue: QueueRecord) -> Picking:
    """The claim rules for a receive on `queue`, with its group limits."""
    rules_now = rules.picking() if queue.fifo else rules.picking(
        attrs.group_cap(queue.attributes), group_rate(queue))
    return Picking(rules_now.fifo_scan, rules_now.fair_groups, rules_now.group_cap,
                   rules_now.group_rate)


def group_rate(queue: QueueRecord) -> rules.Rate | None:
    """Each group's receive rate, if the queue has one."""
    rate = attrs.receive_rate(queue.attributes, group=True)
    return rules.Rate(*rate) if rate else None


def queue_rate(queue: QueueRecord) -> rules.Rate | None:
    """The queue's own receive rate, if it has one."""
    rate = attrs.receive_rate(queue.attributes, group=False)
    return rules.Rate(*rate) if rate else None


def settings(queue: QueueRecord) -> dict[str, float]:
    """The limits that apply to `queue`, by name, those set only: `group_concurrency`
    (messages in flight per group), `receive_rate` / `group_receive_rate` (messages a
    second) with their `..._burst`, and `max_delay_seconds` when the queue opted in to
    delays past SQS's 15 minutes. Group limits apply to standard queues alone."""
    found: dict[str, float] = {}
    if not queue.fifo and attrs.group_cap(queue.attributes):
        found["group_concurrency"] = attrs.group_cap(queue.attributes)
    for name, rate in (("receive_rate", queue_rate(queue)),
                       ("group_receive_rate", None if queue.fifo else group_rate(queue))):
        if rate is not None:
            found[name], found[name.replace("rate", "burst")] = rate.per_s, rate.burst
    if attrs.MAX_DELAY in queue.attributes:
        found["max_delay_seconds"] = int(queue.attributes[attrs.MAX_DELAY])
    return found


def held(wanted: int, granted: int, handed: int, picked: Picking) -> list[str]:
    """The limits that held a receive back, which asked `wanted` messages, was granted
    `granted` by the queue's rate and handed out `handed`: the queue's rate when it
    granted fewer than asked and the claim found all it granted (so more would have
    gone); the group limits that left a group short when the claim handed out fewer."""
    found = [HELD_BY_RATE] if granted < wanted and handed == granted else []
    if handed < granted:
        found += sorted(picked.held)
    return found


class HeldBack:
    """Receives each limit held back, per queue, since this node started (/metrics):
    only queues with limits appear."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str, str], int] = {}

    def count(self, queue: QueueRecord, limits: list[str]) -> None:
        for limit in limits:
            key = (queue.region, queue.name, limit)
            self.counts[key] = self.counts.get(key, 0) + 1

    def totals(self) -> list[tuple[str, str, str, int]]:
        """(region, queue, limit, receives held back), in order."""
        return [(*key, n) for key, n in sorted(self.counts.items())]


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
