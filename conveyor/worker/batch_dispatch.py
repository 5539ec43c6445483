"""Dispatching with BatchSize: which messages go to the app together, and what becomes of
each. (How a batch is written and its answer read is batch_delivery.py.)

A dispatcher takes what the buffer holds, up to BatchSize messages, and POSTs them as one
batch; on a FIFO queue a group's first message brings the messages waiting behind it
(`followers`), in order. A scheduled job goes alone to its own url, as without BatchSize.
Each message of the answer is settled by its owner (settlement.py: deleted, retried, held
while the app is unavailable) but one the app did not process (FIFO: behind a failure in
its group, or behind a body that could not be fetched): it stays waiting behind its
group's first, neither deleted nor counted as failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from conveyor.client import Message
from conveyor.clock import Clock
from conveyor.runtime.hooks import Unavailable
from conveyor.worker.batch_delivery import BatchPoster
from conveyor.worker.delivery import Deliverer, Outcome
from conveyor.worker.flow import OpenPosts, Slots
from conveyor.worker.groups import GroupQueues
from conveyor.worker.job import Job, log_fields
from conveyor.worker.metrics import WorkerMetrics
from conveyor.worker.settlement import Settlement
from conveyor.worker.steps import DeliverySteps

# What _next answers when the buffer gave nothing within the batching window.
_WINDOW_OVER = object()

# The daemon's logger: its lines read (and are filtered) as they did when this was daemon.py.
log = logging.getLogger("conveyor.worker.daemon")


class BatchDispatcher:
    """The dispatchers' loop with BatchSize: one `run()` per HttpConnections."""

    def __init__(self, poster: BatchPoster, size: int, owner: Settlement, *,
                 post: Callable[[Job], Awaitable[Outcome]], deliverer: Deliverer,
                 slots: Slots, open_posts: OpenPosts, steps: DeliverySteps,
                 past_retention: Callable[[Message], bool], window_s: float = 0.0) -> None:
        self._poster = poster
        self._size = size
        self._window_s = window_s  # BatchingWindow: how long a batch may wait to fill
        self._filling = asyncio.Lock()  # with a window, one batch fills at a time
        self._owner = owner  # every message's fate
        self._post_one = post  # POST one message alone (the daemon's)
        self._deliverer = deliverer
        self._buffer = owner.buffer  # received messages; None: the worker is stopping
        self._slots = slots  # each message taken from the buffer holds one
        self._open = open_posts
        self._groups = owner.groups
        self._past_retention = past_retention
        self._steps = steps
        self._metrics: WorkerMetrics = owner.metrics
        self._queue_name = owner.queue_name
        self._clock: Clock = owner.clock

    async def run(self) -> None:
        """A dispatcher that POSTs what the buffer holds, up to BatchSize messages at a time
        (and on a FIFO queue the messages waiting behind each group's first, in order);
        with a BatchingWindow, a batch short of BatchSize waits up to the window from its
        first message for more, as Lambda's MaximumBatchingWindowInSeconds, one batch
        filling at a time (so that idle dispatchers do not split the messages coming)."""
        while True:
            await self._open.enter()  # room under the concurrency limit first
            batch: list[Job] = []
            taken = 0
            stopping = False
            try:
                async with self._filling if self._window_s else contextlib.nullcontext():
                    job: Job | None = await self._buffer.get()
                    deadline_s = self._clock.monotonic_s() + self._window_s
                    while job is not None:
                        taken += 1
                        await self._gather(job, batch)
                        if len(batch) >= self._size:
                            break
                        following = await self._next(deadline_s if batch else None)
                        if following is _WINDOW_OVER:
                            break
                        job = following
                    stopping = job is None
                if batch:
                    await self._post(batch)
            finally:
                self._slots.give(taken)
                self._open.leave()
            if stopping:
                return

    async def _gather(self, job: Job, batch: list[Job]) -> None:
        """Add the job to the batch, with its FIFO followers; a scheduled job is POSTed
        alone to its own url."""
        if job.released or not await self._owner.admit(job):
            return
        if self._deliverer.goes_alone(job.message):  # to its own url
            await self._owner.settle(job, await self._post_one(job))
        else:
            batch.append(job)
            batch += followers(job, self._groups, self._size - len(batch), self._one_by_one)

    async def _next(self, deadline_s: float | None) -> Job | None | object:
        """The buffer's next job now, or within the window until `deadline_s`;
        _WINDOW_OVER when there is none (None: the worker is stopping)."""
        if not self._buffer.empty():
            return self._buffer.get_nowait()
        left_s = deadline_s - self._clock.monotonic_s() if deadline_s is not None else 0.0
        if left_s <= 0:
            return _WINDOW_OVER
        getter = asyncio.ensure_future(self._buffer.get())
        done, _ = await asyncio.wait((getter,), timeout=left_s)
        if not done:
            getter.cancel()
            try:
                return await getter  # it came as the window closed: it is ours
            except asyncio.CancelledError:
                if not getter.cancelled():
                    raise
                return _WINDOW_OVER
        return getter.result()

    def _one_by_one(self, job: Job) -> bool:
        """True for a message dealt with alone when it is its group's first: released, a
        scheduled job, or past RetentionPeriod."""
        return (job.released or self._deliverer.goes_alone(job.message)
                or self._past_retention(job.message))

    async def _post(self, batch: list[Job]) -> None:
        """POST a batch and settle each message: deleted, retried, or (FIFO) left waiting
        behind a failure in its group."""
        started = self._clock.monotonic_s()
        for job in batch:
            job.started_s = started
            self._metrics.waited(started - job.accepted_s)
        try:  # offloaded bodies first, before the app's time is measured
            resolved = await self._steps.prepare_each([job.message for job in batch])
        except asyncio.CancelledError:
            self._release(batch)
            raise
        outcomes, ready = with_bodies(batch, resolved, ordered=self._groups.ordered)
        if ready:
            posted = self._open.posting()
            status = "cancelled"
            at_app = [batch[i] for i in ready]
            self._owner.invariants.posting(at_app, self._groups)
            try:
                sent = await self._poster.post(list(ready.values()))
                status = next((outcome.status for outcome in sent if outcome is not None), status)
            except asyncio.CancelledError:
                self._release(batch)
                raise
            finally:
                self._open.posted(posted, status)
                self._owner.invariants.posted(at_app)
            for i, outcome in zip(ready, sent, strict=True):
                outcomes[i] = outcome
        self._metrics.batch_posted(outcomes)
        for job, outcome in zip(batch, outcomes, strict=True):
            if outcome is None:  # unprocessed: waits behind its group's failure, uncounted
                job.started_s = None
                log.info("not processed, waits behind a failure in its group: queue=%s "
                         "message=%s group=%s", self._queue_name, job.message.message_id,
                         job.group, extra=log_fields(self._queue_name, job.message,
                                                     outcome="unprocessed"))
        for job, outcome in zip(batch, outcomes, strict=True):
            if outcome is not None:
                await self._owner.settle(job, outcome)

    def _release(self, batch: list[Job]) -> None:
        for job in batch:
            self._owner.release(job)


def followers(job: Job, groups: GroupQueues[Job], room: int,
              one_by_one: Callable[[Job], bool]) -> list[Job]:
    """FIFO: up to `room` messages of the job's group waiting behind it, to go in its batch;
    they stop before the first that is to be `one_by_one` (when it is its group's first)."""
    if job.group is None or not groups.ordered or room <= 0:
        return []
    found: list[Job] = []
    for other in groups.following(job.group, room):
        if one_by_one(other):
            break
        found.append(other)
    return found


def with_bodies(batch: Sequence[Job], resolved: Sequence[Message | Unavailable], *,
                ordered: bool) -> tuple[list[Outcome | None], dict[int, Message]]:
    """Sort a batch by its offloaded bodies (`resolved`, in order): the messages to POST (by
    position, with their bodies), and the outcomes so far: a message whose body is
    unavailable fails alone (FIFO: its group's later ones wait, None)."""
    outcomes: list[Outcome | None] = [None] * len(batch)
    stopped: set[str] = set()
    ready: dict[int, Message] = {}
    for i, (job, found) in enumerate(zip(batch, resolved, strict=True)):
        if job.group is not None and job.group in stopped:
            continue
        if isinstance(found, Unavailable):
            outcomes[i] = Outcome(False, found.status, 0.0, detail=str(found))
            if job.group is not None and ordered:
                stopped.add(job.group)
        else:
            ready[i] = found
    return outcomes, ready
