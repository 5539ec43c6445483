"""The worker's side of a partitioned queue (client/partitions.py): one worker reads every
partition of WorkerQueueURL's logical queue, with plain SQS calls only.

Receiving (`PartitionedReceiver`) takes the partitions in turn, one receive each, shared
by all the worker's pollers, so a partition with a big backlog gets one receive in N and
never starves the others. While messages come, the receives do not wait (WaitTimeSeconds
0): a poller must not sit in a long poll on an empty partition while another has work;
and a partition found empty is passed over for RECHECK_EMPTY_S while others have work,
so a backlog in one of N partitions costs about one receive per batch, not N.
Once a whole round found every partition empty the worker is idle: it then makes one long
poll at a time (the daemon parks its other pollers, flow.py). On a Conveyor server that
poll is one PollMessages parked on every partition at once (QueueUrls, service/polls.py),
ExtendedPollWaitTime long: a message sent to any partition reaches the worker at once,
for 3600 / ExtendedPollWaitTime calls an hour (30 at 120 s) whatever N is. Elsewhere
(Amazon SQS, moto: PollMessages refused) it is a ReceiveMessage, PollWaitTime long, on the
next partition in turn: still 3600 / PollWaitTime calls an hour (180 at SQS's 20 s)
whatever N is, not N times that; the price is latency: a message sent to an idle worker
waits until the long poll reaches its partition, at most N × PollWaitTime (lower
PollWaitTime to trade calls for latency).

Deleting and changing visibility: the daemon batches them per partition (`RoutedBatcher`),
each entry with the partition its message came from, known by its receipt handle
(`PartitionRouter`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from typing import Any

from conveyor.client import Message, SQSClient, queue_name_from_url
from conveyor.client.partitions import PartitionedQueue, partition_name
from conveyor.clock import Clock
from conveyor.worker.batcher import Batcher
from conveyor.worker.config import WorkerConfig
from conveyor.worker.queues import (
    WorkerQueues,
    create_worker_queues,
    dead_letter_name,
    prepare_worker_queue,
)
from conveyor.worker.receiver import Received, Receiver

# While other partitions have messages, one found empty is looked at again this much later:
# a message sent to it then waits at most this long, and a backlog elsewhere costs at most
# one empty receive per empty partition per second.
RECHECK_EMPTY_S = 1.0


@dataclass(frozen=True, slots=True)
class Partitions:
    """The partitions of the worker's logical queue, each with its dead-letter queue."""

    queue: PartitionedQueue
    queues: list[WorkerQueues]  # in partition order

    def of(self, url: str) -> WorkerQueues:
        """The WorkerQueues of the partition at `url` (the first for an unknown URL)."""
        return next((q for q in self.queues if q.queue_url == url), self.queues[0])


async def prepare_partitions(sqs: SQSClient, config: WorkerConfig) -> Partitions:
    """Check (or create, with CreateQueue) every partition and its dead-letter queue: one
    per partition, or with SharedDeadLetter one for all, named after the logical queue."""
    queue = PartitionedQueue(config.worker_queue_url, config.partitions)
    shared = dead_letter_name(queue.name) if config.shared_dead_letter else None
    queues = [await prepare_worker_queue(
        sqs, url, create=config.create_queue, max_retries=config.max_retries,
        visibility_timeout_s=config.visibility_timeout,
        retention_period_s=config.retention_period, dead_letter=shared) for url in queue.urls]
    return Partitions(queue, queues)


async def create_partitions(sqs: SQSClient, name: str, count: int, *, shared_dead_letter: bool,
                            max_retries: int, visibility_timeout_s: int,
                            retention_period_s: int) -> list[WorkerQueues]:
    """Create (or reuse) the partitions of logical queue `name` and their dead-letter
    queue(s), as a worker with CreateQueue would (`conveyor queue create-partitioned`)."""
    names = [partition_name(name, i) for i in range(count)]
    shared = dead_letter_name(name) if shared_dead_letter else None
    return [await create_worker_queues(sqs, partition, max_retries=max_retries,
                                       visibility_timeout_s=visibility_timeout_s,
                                       retention_period_s=retention_period_s,
                                       dead_letter=shared) for partition in names]


class PartitionRouter:
    """Remembers the partition of each received message, by receipt handle.

    A receipt handle is forgotten once the daemon no longer holds its message (`live`)
    at two clean-ups in a row, `keep_s` apart: by then the batchers have sent or given up
    on its last entry (they give up after `keep_s`)."""

    def __init__(self, default_url: str, live: Callable[[], Container[str]], keep_s: float,
                 *, clock: Clock) -> None:
        self._default_url = default_url
        self._live = live
        self._keep_s = keep_s
        self._clock = clock
        self._urls: dict[str, str] = {}
        self._gone: set[str] = set()  # not live at the last clean-up
        self._cleaned_s = clock.monotonic_s()

    def note(self, url: str, messages: Sequence[Message]) -> None:
        """Messages received from the partition at `url`."""
        for message in messages:
            self._urls[message.receipt_handle] = url
        if self._clock.monotonic_s() - self._cleaned_s >= self._keep_s:
            self._clean()

    def url_of(self, receipt_handle: str) -> str:
        """The partition a receipt handle belongs to (the first partition when unknown:
        the daemon's own one-off receives from it, which bypass the rotation)."""
        return self._urls.get(receipt_handle, self._default_url)

    def _clean(self) -> None:
        live = self._live()
        gone = {receipt for receipt in self._urls if receipt not in live}
        for receipt in gone & self._gone:
            del self._urls[receipt]
        self._gone = gone - self._gone
        self._cleaned_s = self._clock.monotonic_s()


class RoutedBatcher:
    """A Batcher per partition behind Batcher's own interface: each entry joins the batch
    of its message's partition, so that ten deletes stay one call, not one per partition
    their messages came from (which would spend every partition's call quota on each)."""

    def __init__(self, router: PartitionRouter, urls: Sequence[str],
                 make: Callable[[str], Batcher], receipt: Callable[[Any], str]) -> None:
        self._router = router
        self._receipt = receipt
        self._batchers = {url: make(url) for url in urls}

    def start(self) -> None:
        """Start every partition's sender."""
        for batcher in self._batchers.values():
            batcher.start()

    def submit(self, message_id: str, payload: Any) -> asyncio.Future[str | None]:
        """Queue one entry on its message's partition (see Batcher.submit)."""
        url = self._router.url_of(self._receipt(payload))
        return self._batchers[url].submit(message_id, payload)

    async def close(self, timeout_s: float) -> None:
        """Send what is pending on every partition, then stop (see Batcher.close)."""
        await asyncio.gather(*(b.close(timeout_s) for b in self._batchers.values()))


class PartitionedReceiver:
    """Receives for the pollers of one worker from every partition in turn (see the
    module's docstring); the daemon calls it as it calls `Receiver`."""

    def __init__(self, sqs: SQSClient, urls: Sequence[str], router: PartitionRouter, *,
                 clock: Clock, wait_s: int, visibility_timeout_s: int,
                 idle_poll: Receiver | None = None,
                 system_attributes: Sequence[str] = ("All",)) -> None:
        self._sqs = sqs
        self._idle_poll = idle_poll  # PollMessages on every partition, while it is taken
        self._clock = clock
        self._urls = list(urls)
        self._router = router
        self._wait_s = wait_s
        self._visibility_timeout_s = visibility_timeout_s
        self._system_attributes = list(system_attributes)
        self._next = 0
        self._empty_in_a_row = 0  # a first round without waiting finds a backlog anywhere
        self._skip_until_s = [0.0] * len(self._urls)  # found empty: passed over until then
        names = [queue_name_from_url(url) for url in self._urls]
        self._names = dict(zip(self._urls, names, strict=True))  # not parsed per receive
        self.polls = dict.fromkeys(names, 0)  # receives sent, per partition
        self.polls_of_all = 0  # PollMessages parked on every partition at once
        self.received = dict.fromkeys(names, 0)  # messages received, per partition
        # Called with (partition name, count) as messages come: the worker's /metrics.
        self.on_received: Callable[[str, int], None] | None = None

    async def receive(self, max_messages: int) -> Received:
        """One receive from the next partition: short while messages come, long when the
        last round found every partition empty."""
        idle = self._empty_in_a_row >= len(self._urls)
        if idle and self._idle_poll is not None and self._idle_poll.extended:
            self.polls_of_all += 1
            return self._note_all(await self._idle_poll.receive(max_messages))
        index = self._pick(idle)
        url = self._urls[index]
        wait_s = self._wait_s if idle else 0
        self.polls[self._names[url]] += 1
        messages = await self._sqs.receive_messages(
            url, max_messages=max_messages, wait_time_s=wait_s,
            visibility_timeout_s=self._visibility_timeout_s,
            system_attributes=self._system_attributes)
        if messages:
            self._empty_in_a_row = 0
            self._skip_until_s[index] = 0.0
            self._noted(url, messages)
        else:
            self._empty_in_a_row += 1
            self._skip_until_s[index] = self._clock.monotonic_s() + RECHECK_EMPTY_S
        return Received(messages, wait_s)

    def _note_all(self, received: Received) -> Received:
        """The answer of one poll of every partition: each message noted with its own."""
        by_url: dict[str, list[Message]] = {}
        for message, url in zip(received.messages, received.sources, strict=True):
            by_url.setdefault(url, []).append(message)
        for url, messages in by_url.items():
            self._noted(url, messages)
        if received.messages:
            self._empty_in_a_row = 0  # back to quick receives, each partition in turn
        return received

    def _noted(self, url: str, messages: Sequence[Message]) -> None:
        self._router.note(url, messages)
        name = self._names.get(url) or queue_name_from_url(url)  # a server's own spelling
        self.received[name] += len(messages)
        if self.on_received is not None:
            self.on_received(name, len(messages))

    def _pick(self, idle: bool) -> int:
        """The next partition in turn, passing over those found empty lately (none when
        idle: the long poll turns over them all); the next in turn if all were."""
        now, count = self._clock.monotonic_s(), len(self._urls)
        index = next((i % count for i in range(self._next, self._next + count)
                      if idle or self._skip_until_s[i % count] <= now), self._next)
        self._next = (index + 1) % count
        return index
