"""Flow control: how many messages may be held, how many pollers run, and how many POSTs
may be open to the app."""

from __future__ import annotations

import asyncio

from conveyor.worker.adaptive import ConcurrencyLimit
from conveyor.worker.backoff import IdleBackoff
from conveyor.worker.metrics import WorkerMetrics


class Slots:
    """A counting limit on messages held (being posted, or received and about to be)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.free = capacity
        self._changed = asyncio.Event()

    async def take(self, count: int) -> None:
        """Wait until `count` slots are free, then hold them."""
        while self.free < count:
            self._changed.clear()
            await self._changed.wait()
        self.free -= count

    def overdraw(self, count: int) -> None:
        """Hold `count` slots now, past the capacity if need be, for a message that cannot
        wait (a FIFO group's next message): the next take waits a little longer instead."""
        self.free -= count

    async def wait_free(self) -> None:
        """Wait until at least one slot is free, without taking it."""
        while self.free < 1:
            self._changed.clear()
            await self._changed.wait()

    def give(self, count: int) -> None:
        """Return `count` slots."""
        if count:
            self.free += count
            self._changed.set()

    def resize(self, capacity: int) -> None:
        """Change the capacity; slots held past a smaller one are simply not given out
        again until enough come back."""
        grown = capacity - self.capacity
        self.capacity = capacity
        self.free += grown
        if grown > 0:
            self._changed.set()


class OpenPosts:
    """The gate in front of the app: at most `limit.current` POSTs open (adaptive.py), and
    at most as many messages as they carry plus one receive's batch held (`held`), so that
    a worker whose app is slow keeps no more messages invisible than it can soon send.
    A worker that caps its message groups itself holds, besides, up to as many again held
    back by the cap (`holds_back`): each keeps its slot, so receives stop while they are
    that many, and there is room left to receive other groups' messages meanwhile.
    The open-request and concurrency-limit gauges follow it."""

    def __init__(self, limit: ConcurrencyLimit, held: Slots, metrics: WorkerMetrics, *,
                 per_post: int, receive_batch: int) -> None:
        self.limit = limit
        self._gate = Slots(limit.current)
        self._held = held
        self._metrics = metrics
        self._per_post = per_post  # messages one POST carries (BatchSize, or 1)
        self._receive_batch = receive_batch
        self._held_back = False
        self._resize_held()
        metrics.concurrency_limit(limit.current)

    async def enter(self) -> None:
        """Wait for room under the limit (a dispatcher, before it takes a message)."""
        await self._gate.take(1)

    def leave(self) -> None:
        """Give the room back (the dispatcher is done with its message)."""
        self._gate.give(1)

    def posting(self) -> float:
        """A POST (of one message or a batch) starts now; returns its start for `posted`."""
        self._metrics.in_flight(1)
        return self.limit.start()

    def posted(self, started_s: float, status: str) -> None:
        """The POST started at `started_s` ended with `status`: let the limit learn. A fixed
        limit never moves from the one shown at start, so only an adaptive one is shown
        again."""
        self._metrics.in_flight(-1)
        self.limit.finish(started_s, status)
        if self.limit.current != self._gate.capacity:
            self._gate.resize(self.limit.current)
            self._resize_held()
        if self.limit.adaptive:
            self._metrics.concurrency_limit(self.limit.current, self.limit.cuts)

    def holds_back(self) -> None:
        """From now on messages are held back by a group cap (settlement.py)."""
        self._held_back = True
        self._resize_held()

    def _resize_held(self) -> None:
        at_app = self.limit.current * self._per_post
        self._held.resize(at_app * (2 if self._held_back else 1) + self._receive_batch)


class IdleControl:
    """How many pollers poll (seed 004). A full batch means a backlog: every parked poller
    resumes at once. A partial batch means two pollers keep up (one is always waiting on the
    server while the other comes back): the others park. An empty poll parks the poller
    too, but the last one polls again at once: a long poll parked on the server costs one
    call per wait and answers the moment a message arrives, where a pause between polls
    would leave the queue without a receiver. Only an empty poll that came back before
    its wait (short polling, or a server that does not long-poll) is followed by a pause,
    with randomized exponential back-off."""

    def __init__(self, pollers: int, backoff: IdleBackoff) -> None:
        self.active = pollers
        self._backoff = backoff
        self._wake = asyncio.Event()

    async def after_poll(self, received: int, batch: int, early: bool = True) -> None:
        """Called by each poller after each receive with the number of messages it got;
        `early` when the poll came back before the server could have waited its time."""
        if received >= batch:
            self._wake_all()
        elif self.active > (2 if received else 1):
            await self._park()
        elif received == 0 and early:
            await asyncio.sleep(self._backoff.next_pause())
        if received:
            self._backoff.reset()

    async def start_parked(self) -> None:
        """For every poller but the first: park before the first poll, as an idle worker's
        pollers would be after theirs. The first poll's full batch (a backlog) wakes them
        all; an idle worker starts with one long poll, not one per poller."""
        await self._park()

    async def _park(self) -> None:
        self.active -= 1
        try:
            await self._wake.wait()
        finally:
            self.active += 1

    def _wake_all(self) -> None:
        self._wake.set()
        self._wake = asyncio.Event()
