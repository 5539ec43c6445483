"""The worker daemon: pollers → dispatchers → ack / retry, with heartbeats and graceful drain.

    pollers (ReceiveMessage ×10) ──► buffer ──► HttpConnections dispatchers ──► the app
                                                        │
                        DeleteMessageBatch ◄── 2xx ─────┤
     ChangeMessageVisibilityBatch ◄── failure / heartbeat / release

At most HttpConnections + one batch of messages are held at once (`Slots`), so a free
connection always finds the next message waiting instead of holding a batch hostage.
With BatchSize, each dispatcher POSTs up to BatchSize of them at once as AWS Lambda's SQS
event and settles each by the app's partial batch response (batch_delivery.py); then
HttpConnections × BatchSize + one batch are held. With AdaptiveConcurrency the limit on
open POSTs, and so on messages held, follows the app instead (`OpenPosts`, adaptive.py).

On a FIFO queue, one message per MessageGroupId is at the app at a time, in receive order
(`GroupQueues`); the group's later messages wait here, kept invisible, until it is done.
When it fails, it is tried again here rather than handed back to SQS: SQS would not hand
it out again while its group's later messages are in flight, and handing those back too
would cost each of them a receive per failure (ApproximateReceiveCount counts every
receive), so they would reach maxReceiveCount and the dead-letter queue with their first
message, unprocessed. Its attempts are counted here the way SQS would count them, and
after maxReceiveCount of them the worker moves it to the dead-letter queue itself.

When the app is unavailable (breaker.py says how a POST's outcome shows it), each failure
would also cost a receive, and an outage of a few minutes would dead-letter every message
the worker touched. So the circuit breaker opens: no more receives; what the worker holds
stays invisible and is tried again here, after a short back-off; after GRACE_S it is
released (visibility 0) for other workers, except MAX_PROBES messages (and the FIFO groups
behind them) kept to try the app with, by POST or after a passing HealthCheckPath. Once
the app answers, the kept messages go to it first, and receiving resumes. A message
released costs one receive per outage; one kept costs none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from conveyor import __version__
from conveyor.client import (
    Message,
    SQSClient,
    SQSError,
    SQSTransportError,
    endpoint_from_queue_url,
    queue_name_from_url,
)
from conveyor.clock import Clock
from conveyor.payloads.resolver import PayloadResolver, PayloadUnavailable
from conveyor.runtime.hooks import TryLater, WorkerHook
from conveyor.runtime.presence import Presence
from conveyor.runtime.status import StatusServer
from conveyor.worker.adaptive import ConcurrencyLimit
from conveyor.worker.backoff import (
    MAX_VISIBILITY_S,
    ErrorBackoff,
    IdleBackoff,
    failure_visibility,
)
from conveyor.worker.batch_delivery import BatchPoster, QueueIdentity
from conveyor.worker.batcher import Batcher
from conveyor.worker.breaker import (
    GRACE_S,
    MAX_PROBES,
    Breaker,
    Verdict,
    verdict,
)
from conveyor.worker.config import WorkerConfig
from conveyor.worker.delivery import Deliverer, Outcome
from conveyor.worker.flow import IdleControl, OpenPosts, Slots
from conveyor.worker.groups import GroupQueues
from conveyor.worker.metrics import WorkerMetrics
from conveyor.worker.partitions import (
    PartitionedReceiver,
    PartitionRouter,
    Partitions,
    RoutedBatcher,
    prepare_partitions,
)
from conveyor.worker.queues import WorkerQueues, prepare_worker_queue, send_to_dead_letter
from conveyor.worker.receiver import Receiver

log = logging.getLogger(__name__)

SQS_MAX_RECEIVE = 10
# Repeat "queue server unreachable" at most this often while it stays down.
_ERROR_LOG_EVERY_S = 30.0
# FIFO messages held here without a request (behind their group's first, or waiting for a
# retry) take no slot: SQS holds their group back from every consumer anyway, so holding
# them keeps nothing from anyone. What bounds them (their memory, the visibility extensions
# they need) is this many per slot.
_HELD_PER_SLOT = 10
# A dead-letter queue that refused a message's copy is tried again this much later.
_DEAD_LETTER_RETRY_S = 10
# With BatchSize, HttpConnections × BatchSize messages may be held: more receives at once
# than this add connections to the queue server, not throughput.
_MAX_POLLERS = 64

# Makes one hook for one worker: its config, its queue's name, its metrics registry.
HookFactory = Callable[[WorkerConfig, str, CollectorRegistry], WorkerHook]


@dataclass(slots=True)
class Job:
    """A received message and what the daemon knows about its visibility."""

    message: Message
    received_s: float  # monotonic time the ReceiveMessage call was sent
    visible_until_s: float  # monotonic; conservative (counted from before the receive)
    accepted_s: float = 0.0  # monotonic time the answer was read
    started_s: float | None = None
    extending: bool = False
    released: bool = False
    group: str | None = None  # MessageGroupId on a FIFO queue
    waiting: bool = False  # held back here without a slot (behind its group, or a retry)
    retry: asyncio.TimerHandle | None = None  # when a retry here is due
    exhausted: bool = False  # failed maxReceiveCount times: for the dead-letter queue
    failure: Outcome | None = None  # the POST that found the app unavailable (held since)
    failed_s: float = 0.0  # monotonic time of that POST's answer


class Worker:
    """One worker daemon for one queue. `await run()` until `stop()` (or a signal) drains it."""

    def __init__(self, config: WorkerConfig, *, clock: Callable[[], float] = time.time,
                 rng: random.Random | None = None, hooks: Sequence[HookFactory] = ()) -> None:
        self.config = config
        self.queue_url = config.worker_queue_url
        self.queue_name = queue_name_from_url(config.worker_queue_url)
        self.metrics = WorkerMetrics(self.queue_name)
        self.queues: WorkerQueues | None = None
        self.state = "starting"
        self._clock = clock  # wall clock, only for RetentionPeriod; injectable for tests
        self._rng = rng or random.Random()
        at_app = config.http_connections * max(1, config.batch_size)  # messages at the app
        self._batch = min(SQS_MAX_RECEIVE, at_app)
        self._slots = Slots(at_app + self._batch)
        self._pollers = min(math.ceil(self._slots.capacity / self._batch), _MAX_POLLERS)
        self._idle = IdleControl(self._pollers, IdleBackoff(
            config.idle_backoff_min, config.idle_backoff_max, self._rng))
        self._poll_errors = ErrorBackoff(self._rng)
        self._poll_error_logged_s = -math.inf
        self._jobs: dict[str, Job] = {}
        self._fifo = self.queue_name.endswith(".fifo")  # SQS requires the suffix
        self._groups: GroupQueues[Job] = GroupQueues()
        self._waiting = Slots(self._slots.capacity * _HELD_PER_SLOT)
        self._open = OpenPosts(ConcurrencyLimit(Clock(), config.http_connections,
                                                adaptive=config.adaptive_concurrency),
                               self._slots, per_post=max(1, config.batch_size),
                               receive_batch=self._batch)
        self.metrics.concurrency_limit(self._open.limit.current)
        self._buffer: asyncio.Queue[Job | None] = asyncio.Queue()
        self._stopping = asyncio.Event()
        self._force = asyncio.Event()
        self.ready = asyncio.Event()
        self._sqs: SQSClient | None = None
        self._delete: Batcher | RoutedBatcher | None = None
        self._change: Batcher | RoutedBatcher | None = None
        self.presence: Presence | None = None
        self.receiver: Receiver | PartitionedReceiver | None = None
        self.partitions: Partitions | None = None  # with the Partitions option
        self._router: PartitionRouter | None = None
        self._deliverer = Deliverer(config, self.queue_name)
        self._payloads = PayloadResolver.from_options(
            config.payload_endpoint_url, config.payload_region or config.region,
            config.payload_access_key, config.payload_bucket,
            delete_after=config.delete_payloads)
        self._batches: BatchPoster | None = None  # BatchSize: several messages per POST
        self._breaker: Breaker[Job] = Breaker(self._rng)
        self._prober: asyncio.Task[None] | None = None
        self._grace: asyncio.TimerHandle | None = None
        self.hooks = [make(config, self.queue_name, self.metrics.registry) for make in hooks]

    # -- life cycle -----------------------------------------------------------

    def stop(self) -> None:
        """Begin a graceful drain; a second call stops waiting for open requests."""
        if self._stopping.is_set():
            self._force.set()
        self._stopping.set()

    async def run(self) -> None:
        """Run until stopped, then drain: nothing received is left invisible behind."""
        config = self.config
        endpoint = config.endpoint_url or endpoint_from_queue_url(self.queue_url)
        self._sqs = SQSClient(endpoint, region=config.region or None,
                              max_connections=self._pollers + 32, observer=self.metrics.api_call)
        status = None
        if config.status_port:
            status = StatusServer(config.status_host, config.status_port, self.metrics,
                                  self.health)
            await status.start()
        try:
            if await self._prepare():
                await self._serve()
        finally:
            self.state = "stopped"
            if status is not None:
                await status.stop()
            await self._sqs.close()

    async def _prepare(self) -> bool:
        """Check or create the queue, retrying while the server is unreachable."""
        assert self._sqs is not None
        config = self.config
        while not self._stopping.is_set():
            try:
                if config.partitions:
                    self.partitions = await prepare_partitions(self._sqs, config)
                    self.queues = self.partitions.queues[0]
                else:
                    self.queues = await prepare_worker_queue(
                        self._sqs, self.queue_url, create=config.create_queue,
                        max_retries=config.max_retries,
                        visibility_timeout_s=config.visibility_timeout,
                        retention_period_s=config.retention_period)
            except (SQSTransportError, SQSError) as exc:
                if isinstance(exc, SQSError) and not exc.retryable:
                    raise
                self._log_poll_error(exc)
                await self._pause(self._poll_errors.next_pause())
                continue
            self.queue_url = self.queues.queue_url
            self._poll_errors.reset()
            if config.expired_to_dead_letter and self.queues.dead_letter_url is None:
                log.warning("ExpiredToDeadLetter is set but queue %s has no dead-letter queue: "
                            "messages older than RetentionPeriod are deleted", self.queue_name)
            return True
        return False

    async def _serve(self) -> None:
        assert self._sqs is not None
        sqs, url = self._sqs, self.queue_url
        give_up_s = max(60, self.config.visibility_timeout)

        def deleter(queue_url: str) -> Batcher:
            return Batcher("DeleteMessageBatch", self.queue_name,
                           lambda entries: sqs.delete_message_batch(queue_url, entries),
                           give_up_s=give_up_s)

        def changer(queue_url: str) -> Batcher:
            return Batcher("ChangeMessageVisibilityBatch", self.queue_name,
                           lambda entries: sqs.change_message_visibility_batch(
                               queue_url, [(i, receipt, secs) for i, (receipt, secs) in entries]),
                           give_up_s=give_up_s)

        if self.partitions is not None:  # each entry joins its message's partition's batch
            self._router = router = PartitionRouter(url, lambda: self._jobs, keep_s=give_up_s)
            urls = self.partitions.queue.urls
            self._delete = RoutedBatcher(router, urls, deleter, lambda receipt: receipt)
            self._change = RoutedBatcher(router, urls, changer, lambda entry: entry[0])
        else:
            self._delete, self._change = deleter(url), changer(url)
        self._delete.start()
        self._change.start()
        await self._deliverer.open()
        if self.config.batch_size:
            self._batches = BatchPoster(self._deliverer, self.queue_name,
                                        self._queue_identities(sqs.region), fifo=self._fifo)
        for hook in self.hooks:
            await hook.start(sqs, url)
        self.presence = Presence(sqs, self.queue_name, self._announced_status,
                                 on_drain=self.stop)
        if self._router is not None and self.partitions is not None:
            urls = self.partitions.queue.urls
            self.receiver = PartitionedReceiver(
                sqs, urls, self._router, wait_s=self.config.poll_wait_time,
                visibility_timeout_s=self.config.visibility_timeout,
                idle_poll=Receiver(sqs, urls, wait_s=self.config.poll_wait_time,
                                   extended_wait_s=self.config.extended_poll_wait_time,
                                   visibility_timeout_s=self.config.visibility_timeout,
                                   presence=self.presence))
            self.receiver.on_received = self.metrics.received_from_partition
        else:
            self.receiver = Receiver(sqs, url, wait_s=self.config.poll_wait_time,
                                     extended_wait_s=self.config.extended_poll_wait_time,
                                     visibility_timeout_s=self.config.visibility_timeout,
                                     presence=self.presence)
        dispatchers = [asyncio.create_task(self._dispatch_loop(), name=f"dispatch-{i}")
                       for i in range(self.config.http_connections)]
        pollers = [asyncio.create_task(self._poll_loop(first=i == 0), name=f"poll-{i}")
                   for i in range(self._pollers)]
        heartbeat = asyncio.create_task(self._heartbeat_loop(), name="heartbeat")
        self.presence.start()
        self.state = "running"
        self.ready.set()
        log.info("worker started: queue=%s app=%s connections=%d pollers=%d", self.queue_name,
                 self.config.post_url, self.config.http_connections, self._pollers)
        try:
            await self._stopping.wait()
        finally:
            await self._drain(pollers, dispatchers, heartbeat)

    async def _drain(self, pollers: list[asyncio.Task[None]],
                     dispatchers: list[asyncio.Task[None]], heartbeat: asyncio.Task[None]) -> None:
        """Stop receiving, release what has not started, let open requests finish up to
        DrainTimeout, release the rest with visibility 0, and flush every batch."""
        self.state = "draining"
        for hook in self.hooks:  # e.g. the cron lease is handed over before the drain
            await hook.stop()
        if self._grace is not None:
            self._grace.cancel()
        if self._prober is not None:
            self._prober.cancel()
            await asyncio.gather(self._prober, return_exceptions=True)
        for task in pollers:
            task.cancel()
        await asyncio.gather(*pollers, return_exceptions=True)
        while not self._buffer.empty():
            job = self._buffer.get_nowait()
            if job is not None:
                self._release(job)
        for job in list(self._jobs.values()):
            if job.started_s is None:  # waiting behind its FIFO group, or for a retry
                self._release(job)
        open_requests = sum(job.started_s is not None for job in self._jobs.values())
        log.info("draining: queue=%s open_requests=%d deadline=%ds", self.queue_name,
                 open_requests, self.config.drain_timeout)
        for _ in dispatchers:
            self._buffer.put_nowait(None)
        deadline = time.monotonic() + self.config.drain_timeout
        pending = set(dispatchers)
        while pending and not self._force.is_set() and time.monotonic() < deadline:
            _done, pending = await asyncio.wait(pending, timeout=0.05)
        for task in pending:
            task.cancel()
        await asyncio.gather(*dispatchers, return_exceptions=True)
        heartbeat.cancel()
        await asyncio.gather(heartbeat, return_exceptions=True)
        await self._deliverer.close()
        for hook in self.hooks:
            await hook.close()
        assert self._delete is not None and self._change is not None
        await asyncio.gather(self._delete.close(10.0), self._change.close(10.0))
        await self._payloads.close()
        if self.presence is not None:
            await self.presence.stop()
        log.info("worker stopped: queue=%s", self.queue_name)

    async def _pause(self, seconds: float) -> None:
        """Sleep, but wake at once when stopping."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)

    # -- polling --------------------------------------------------------------

    async def _poll_loop(self, *, first: bool) -> None:
        assert self.receiver is not None
        if not first:
            await self._idle.start_parked()
        while not self._stopping.is_set():
            await self._breaker.closed.wait()  # no receiving while the app is unavailable
            await self._waiting.wait_free()
            await self._slots.take(self._batch)
            if self._stopping.is_set():  # a receive begun now could be cut off by the
                self._slots.give(self._batch)  # drain, its messages hidden for their
                return  # visibility timeout
            started = time.monotonic()
            try:
                # "All" system attributes: the daemon needs SentTimestamp (RetentionPeriod),
                # MessageGroupId (FIFO order) and ApproximateReceiveCount (MaxRetries).
                received = await self.receiver.receive(self._batch)
            except (SQSTransportError, SQSError) as exc:
                self._slots.give(self._batch)
                self._log_poll_error(exc)
                await asyncio.sleep(self._poll_errors.next_pause())
                continue
            except BaseException:
                self._slots.give(self._batch)
                raise
            messages = received.messages
            self._slots.give(self._batch - len(messages))
            self._poll_succeeded()
            if messages:
                self._accept(messages, started)
                await asyncio.sleep(0)  # let the dispatchers start these POSTs before we
                # spend CPU signing the next receive
            early = time.monotonic() - started < received.wait_s / 2
            await self._idle.after_poll(len(messages), self._batch, early)

    def _accept(self, messages: list[Message], received_s: float) -> None:
        visible_until = received_s + self.config.visibility_timeout
        now = time.monotonic()
        for message in messages:
            job = Job(message, received_s, visible_until, accepted_s=now)
            self._jobs[message.receipt_handle] = job
            if self._fifo and message.group_id is not None:
                job.group = message.group_id
                if not self._groups.add(job.group, job):
                    self._slots.give(1)
                    self._wait(job)
                    continue
            self._buffer.put_nowait(job)
        self.metrics.received(len(messages))

    def _log_poll_error(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._poll_error_logged_s >= _ERROR_LOG_EVERY_S:
            self._poll_error_logged_s = now
            log.warning("queue %s unreachable, retrying with back-off: %s", self.queue_name, exc)

    def _poll_succeeded(self) -> None:
        if self._poll_errors.failures:
            log.info("queue %s reachable again after %d failed calls", self.queue_name,
                     self._poll_errors.failures)
            self._poll_error_logged_s = -math.inf
        self._poll_errors.reset()

    # -- dispatching ----------------------------------------------------------

    async def _dispatch_loop(self) -> None:
        if self._batches is not None:
            await self._batch_loop()
            return
        while True:
            await self._open.enter()  # room under the concurrency limit first (kept on return:
            job = await self._buffer.get()  # the worker is stopping)
            if job is None:
                return
            try:
                if not job.released:
                    await self._handle(job)
            finally:
                self._slots.give(1)
                self._open.leave()

    async def _handle(self, job: Job) -> None:
        if await self._admit(job):
            self.metrics.waited(time.monotonic() - job.accepted_s)
            await self._settle(job, await self._post(job))

    async def _admit(self, job: Job) -> bool:
        """True when the message is to be POSTed now; else it has been dealt with (dead-
        lettered, expired, a duplicate scheduled run, held while the app is unavailable)."""
        message = job.message
        if job.exhausted:  # its copy to the dead-letter queue failed before: try again
            await self._to_dead_letter(job, "MaxRetries")
            return False
        age_s = self._age_s(message)
        if age_s is not None and age_s > self.config.retention_period:
            await self._expire(job, age_s)
            return False
        if not await self._admitted_by_hooks(job):
            return False
        if self._breaker.is_open:  # the app is unavailable: hold it, do not try it
            self._park(job)
            return False
        return True

    # -- batch delivery (BatchSize, batch_delivery.py) ------------------------------------

    async def _batch_loop(self) -> None:
        """A dispatcher that POSTs what the buffer holds, up to BatchSize messages at a time
        (and on a FIFO queue the messages waiting behind each group's first, in order)."""
        size = self.config.batch_size
        while True:
            await self._open.enter()  # room under the concurrency limit first
            job: Job | None = await self._buffer.get()
            batch: list[Job] = []
            taken = 0
            try:
                while job is not None:
                    taken += 1
                    if not job.released and await self._admit(job):
                        if self._deliverer.goes_alone(job.message):
                            await self._settle(job, await self._post(job))  # to its own url
                        else:
                            batch.append(job)
                            batch += self._followers(job, size - len(batch))
                    if len(batch) >= size or self._buffer.empty():
                        break
                    job = self._buffer.get_nowait()
                if batch:
                    await self._post_batch(batch)
            finally:
                self._slots.give(taken)
                self._open.leave()
            if job is None:
                return

    def _followers(self, job: Job, room: int) -> list[Job]:
        """FIFO: the messages of the job's group waiting behind it, to go in its batch."""
        if job.group is None or room <= 0:
            return []
        followers: list[Job] = []
        for other in self._groups.following(job.group, room):
            age_s = self._age_s(other.message)
            if (other.released or self._deliverer.goes_alone(other.message)
                    or (age_s is not None and age_s > self.config.retention_period)):
                break  # dealt with one by one when it is the group's first
            followers.append(other)
        return followers

    async def _post_batch(self, batch: list[Job]) -> None:
        """POST a batch and settle each message: deleted, retried, or (FIFO) left waiting
        behind a failure in its group."""
        assert self._batches is not None
        started = time.monotonic()
        for job in batch:
            job.started_s = started
            self.metrics.waited(started - job.accepted_s)
        try:  # offloaded bodies first, before the app's time is measured
            outcomes, ready = await self._with_bodies(batch)
        except asyncio.CancelledError:
            for job in batch:
                self._release(job)
            raise
        if ready:
            self.metrics.in_flight(1)
            posted = self._open.posting()
            status = "cancelled"
            try:
                sent = await self._batches.post(list(ready.values()))
                status = next((outcome.status for outcome in sent if outcome is not None), status)
            except asyncio.CancelledError:
                for job in batch:
                    self._release(job)
                raise
            finally:
                self._posted(posted, status)
            for i, outcome in zip(ready, sent, strict=True):
                outcomes[i] = outcome
        self.metrics.batch_posted(outcomes)
        for job, outcome in zip(batch, outcomes, strict=True):
            if outcome is None:  # unprocessed: waits behind its group's failure, uncounted
                job.started_s = None
                log.info("not processed, waits behind a failure in its group: queue=%s "
                         "message=%s group=%s", self.queue_name, job.message.message_id,
                         job.group, extra=self._fields(job.message, outcome="unprocessed"))
        for job, outcome in zip(batch, outcomes, strict=True):
            if outcome is not None:
                await self._settle(job, outcome)

    async def _with_bodies(self, batch: list[Job]
                           ) -> tuple[list[Outcome | None], dict[int, Message]]:
        """Fetch the batch's offloaded bodies: the messages to POST (by position, with their
        bodies), and the outcomes so far: a message whose body is unavailable fails alone
        (FIFO: its group's later ones wait, None)."""
        resolved = await self._payloads.resolve_each([job.message for job in batch])
        outcomes: list[Outcome | None] = [None] * len(batch)
        stopped: set[str] = set()
        ready: dict[int, Message] = {}
        for i, (job, found) in enumerate(zip(batch, resolved, strict=True)):
            if job.group is not None and job.group in stopped:
                continue
            if isinstance(found, PayloadUnavailable):
                outcomes[i] = Outcome(False, "payload-unavailable", 0.0, detail=str(found))
                if job.group is not None:
                    stopped.add(job.group)
            else:
                ready[i] = found
        return outcomes, ready

    async def _post(self, job: Job) -> Outcome:
        """POST the message to the app (job.started_s says since when), within the
        concurrency limit (adaptive.py); an offloaded body is fetched first, so the app
        gets it and never the pointer."""
        job.started_s = fetched_s = time.monotonic()
        try:
            message = await self._payloads.resolve(job.message)
        except PayloadUnavailable as exc:
            return Outcome(False, "payload-unavailable", time.monotonic() - fetched_s,
                           detail=str(exc))
        except asyncio.CancelledError:
            self._release(job)
            raise
        started = self._open.posting()
        self.metrics.in_flight(1)
        status = "cancelled"
        try:
            if self._batches is None or self._deliverer.goes_alone(message):
                outcome = await self._deliverer.deliver(message)
            else:
                outcome = await self._batches.post_one(message)  # a probe: a batch of one
            status = outcome.status
            return outcome
        except asyncio.CancelledError:
            self._release(job)
            raise
        finally:
            self._posted(started, status)

    def _posted(self, started: float, status: str) -> None:
        """A POST (of one message or a batch) ended: the open-request gauge drops and the
        concurrency limit learns from it; a fixed limit never moves from the one shown at
        start, so only an adaptive one is shown again."""
        self.metrics.in_flight(-1)
        limit = self._open.limit
        self._open.posted(started, status)
        if limit.adaptive:
            self.metrics.concurrency_limit(limit.current, limit.cuts)

    async def _settle(self, job: Job, outcome: Outcome) -> None:
        """Act on a POST's outcome: delete, retry, or hold it while the app is unavailable."""
        seen = verdict(outcome)
        if seen is Verdict.ANSWERED:
            self._breaker.answered()
        if outcome.ok:
            self._done(job, outcome)
        elif seen is Verdict.DOWN or (seen is Verdict.SUSPECT and not self._own_failure(job)):
            self._app_unavailable(job, outcome, seen)
        else:
            await self._retry(job, outcome)

    def _done(self, job: Job, outcome: Outcome) -> None:
        message = job.message
        self._delete_for_good(message)
        self._finish(job)
        self.metrics.succeeded(outcome.elapsed_s)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("job done: queue=%s message=%s status=%s time=%.3fs", self.queue_name,
                      message.message_id, outcome.status, outcome.elapsed_s,
                      extra=self._fields(message, outcome="done", status=outcome.status))

    async def _admitted_by_hooks(self, job: Job) -> bool:
        """A message a hook refuses (periodic tasks: a scheduled job whose run another
        message already carries) is deleted unposted; one it cannot judge yet (the run
        ledger is unreachable) is retried later."""
        try:
            for hook in self.hooks:
                if not await hook.before_delivery(job.message):
                    self._submit_delete(job.message)
                    self._finish(job)
                    return False
        except TryLater as exc:
            await self._retry(job, Outcome(False, exc.reason, 0.0, detail=str(exc)))
            return False
        return True

    def _age_s(self, message: Message) -> float | None:
        """Seconds since the message was sent (SentTimestamp), as RetentionPeriod counts.

        The server stamps SentTimestamp and ApproximateFirstReceiveTimestamp with one clock,
        so their difference is a lower bound of the age that no skew between its clock and
        this machine's can shrink; this machine's clock says how long it has been since."""
        sent_ms = message.sent_ms
        if sent_ms is None:
            return None
        age_s = self._clock() - sent_ms / 1000
        first_ms = message.first_receive_ms
        if first_ms is not None:
            age_s = max(age_s, (first_ms - sent_ms) / 1000)
        return age_s

    async def _expire(self, job: Job, age_s: float) -> None:
        """RetentionPeriod is over: delete the message unposted (as Elastic Beanstalk does),
        or with ExpiredToDeadLetter move it to the dead-letter queue."""
        message = job.message
        if (self.config.expired_to_dead_letter
                and self._queues_of(message).dead_letter_url is not None):
            if await self._to_dead_letter(job, f"RetentionPeriod, age {age_s:.0f}s"):
                self.metrics.expired()
            return
        self._delete_for_good(message)
        self._finish(job)
        self.metrics.expired()
        log.info("message expired, deleted unposted: queue=%s message=%s age=%.0fs "
                 "RetentionPeriod=%ds", self.queue_name, message.message_id, age_s,
                 self.config.retention_period,
                 extra=self._fields(message, outcome="expired", age_s=round(age_s, 3)))

    def _finish(self, job: Job) -> None:
        """The daemon is done with this message; on a FIFO queue its group's next may go."""
        self._jobs.pop(job.message.receipt_handle, None)
        self._breaker.forget(job)
        self._stop_waiting(job)
        if job.retry is not None:
            job.retry.cancel()
            job.retry = None
        if job.group is None:
            return
        following = self._groups.remove(job.group, job)
        if following is None:
            return
        if self._stopping.is_set():
            if following.started_s is None:  # else at the app, in the same batch
                self._release(following)  # and so, one by one, the rest of its group
        else:
            self._dispatch(following)

    def _wait(self, job: Job) -> None:
        """Hold a message here without a slot (see _HELD_PER_SLOT)."""
        if not job.waiting:
            job.waiting = True
            self._waiting.overdraw(1)

    def _stop_waiting(self, job: Job) -> None:
        if job.waiting:
            job.waiting = False
            self._waiting.give(1)

    def _dispatch(self, job: Job) -> None:
        """Hand a held message to the dispatchers now, ahead of the next receive."""
        job.retry = None
        if (job.released or job.message.receipt_handle not in self._jobs
                or job.started_s is not None):  # at the app (in its group's batch)
            return
        self._stop_waiting(job)
        self._slots.overdraw(1)
        self._buffer.put_nowait(job)

    def _holds_group(self, job: Job) -> bool:
        """True when later messages of this one's FIFO group wait here behind it."""
        return (job.group is not None and self._groups.behind(job.group) > 0
                and not self._stopping.is_set())

    def _delete_for_good(self, message: Message) -> None:
        """Delete a message no copy of which lives on (done, or expired): its stored body
        goes too, once the delete succeeded. A dead-letter copy keeps its body."""
        deleted = self._submit_delete(message)
        if self._payloads.cleans_up(message):  # most messages have no blob: no callback
            deleted.add_done_callback(lambda f: self._payloads.after_delete(message, f.result()))

    def _submit_delete(self, message: Message) -> asyncio.Future[str | None]:
        assert self._delete is not None
        future = self._delete.submit(message.message_id, message.receipt_handle)
        future.add_done_callback(lambda f: self._deleted(message, f.result()))
        return future

    def _deleted(self, message: Message, refusal: str | None) -> None:
        if refusal is not None:
            log.warning("delete failed, the message will be delivered again: queue=%s "
                        "message=%s code=%s", self.queue_name, message.message_id, refusal,
                        extra=self._fields(message, outcome="delete-failed", code=refusal))

    async def _retry(self, job: Job, outcome: Outcome, *, counted: bool = False) -> None:
        """Try a failed message again after a back-off: SQS gives it back (or, once its
        next receive would exceed maxReceiveCount, moves it to the dead-letter queue) -
        unless later messages of its FIFO group wait here behind it (see the module's
        docstring): then it is tried again, or dead-lettered, here."""
        message, config = job.message, self.config
        count = message.receive_count
        limit = self._queues_of(message).max_receive_count
        final = limit is not None and count >= limit
        if final:
            seconds = 0
            self.metrics.dead_lettered()
        elif outcome.retry_after_s is not None:
            seconds = min(outcome.retry_after_s, MAX_VISIBILITY_S)
        else:
            seconds = failure_visibility(count, config.error_visibility_timeout,
                                         config.max_error_visibility_timeout, self._rng)
        if not counted:
            self.metrics.failed(outcome.status, outcome.elapsed_s)
        held = self._holds_group(job)
        after = "moves to the dead-letter queue" if final else f"retry in {seconds}s"
        if held:
            after += f" (group {job.group}: {self._groups.behind(job.group or '')} behind it)"
        detail = f" ({outcome.detail})" if outcome.detail else ""
        log.warning("job failed: queue=%s message=%s status=%s time=%.3fs receive_count=%d "
                    "%s%s", self.queue_name, message.message_id, outcome.status,
                    outcome.elapsed_s, count, after, detail,
                    extra=self._fields(message, outcome="dead-letter" if final else "retry",
                                       status=outcome.status, receive_count=count,
                                       retry_in_s=seconds))
        if not held:
            self._hand_back(job, seconds)
        elif final:
            job.exhausted = True
            await self._to_dead_letter(job, "MaxRetries")
        else:
            # Tried again here, not received again: count the attempt as SQS would, for
            # maxReceiveCount and for the app's X-Aws-Sqsd-Receive-Count.
            message.attributes["ApproximateReceiveCount"] = str(count + 1)
            self._hold(job, seconds)

    def _hand_back(self, job: Job, seconds: int) -> None:
        """Return a message to SQS, visible again after `seconds`."""
        assert self._change is not None
        self._finish(job)
        self._change.submit(job.message.message_id, (job.message.receipt_handle, seconds))

    def _hold(self, job: Job, seconds: float) -> None:
        """Keep a message here (invisible, its group held back) and dispatch it again after
        `seconds`."""
        job.started_s = None
        self._wait(job)
        job.retry = asyncio.get_running_loop().call_later(seconds, self._dispatch, job)

    def _later(self, job: Job, seconds: int) -> None:
        """Try again after `seconds`: here if its FIFO group waits behind it, else via SQS."""
        if self._holds_group(job):
            self._hold(job, seconds)
        else:
            self._hand_back(job, seconds)

    async def _to_dead_letter(self, job: Job, reason: str) -> bool:
        """Copy a message into the dead-letter queue, then delete it; True when done.
        If the copy fails, the message is tried again later: nothing disappears."""
        assert self._sqs is not None
        message = job.message
        dead_letter_url = self._queues_of(message).dead_letter_url
        assert dead_letter_url is not None
        try:
            copy_id = await send_to_dead_letter(self._sqs, dead_letter_url, message)
        except (SQSTransportError, SQSError) as exc:
            log.warning("could not move to the dead-letter queue, trying again in %ds: "
                        "queue=%s message=%s: %s", _DEAD_LETTER_RETRY_S, self.queue_name,
                        message.message_id, exc)
            self._later(job, _DEAD_LETTER_RETRY_S)
            return False
        self._submit_delete(message)
        self._finish(job)
        log.warning("moved to the dead-letter queue (%s): queue=%s message=%s "
                    "dead_letter_message=%s", reason, self.queue_name, message.message_id,
                    copy_id, extra=self._fields(message, outcome="dead-lettered",
                                                dead_letter_message_id=copy_id))
        return True

    def _queue_identities(self, region: str) -> Callable[[Message], QueueIdentity]:
        """What a batch's records say of each message's queue: its partition's own, on a
        partitioned queue (Lambda's record names the queue it read the message from)."""
        identities: dict[str, QueueIdentity] = {}

        def identity(message: Message) -> QueueIdentity:
            url = self._queues_of(message).queue_url
            if url not in identities:
                identities[url] = QueueIdentity.from_url(url, region)
            return identities[url]

        return identity

    def _queues_of(self, message: Message) -> WorkerQueues:
        """The queue a message came from, with its dead-letter queue: its partition's."""
        assert self.queues is not None
        if self.partitions is None or self._router is None:
            return self.queues
        return self.partitions.of(self._router.url_of(message.receipt_handle))

    def _release(self, job: Job) -> None:
        """Hand a message back at once (visibility 0) so another worker can take it."""
        assert self._change is not None
        if job.released:
            return
        job.released = True
        self._change.submit(job.message.message_id, (job.message.receipt_handle, 0))
        self.metrics.released()
        log.info("released: queue=%s message=%s", self.queue_name, job.message.message_id,
                 extra=self._fields(job.message, outcome="released"))
        self._finish(job)

    def _fields(self, message: Message, **more: Any) -> dict[str, Any]:
        """What a JSON log line (conveyor.logs) carries besides its text."""
        return {"queue": self.queue_name, "message_id": message.message_id, **more}

    # -- the app's circuit breaker (breaker.py) -------------------------------------------

    def _own_failure(self, job: Job) -> bool:
        """Judge a SUSPECT answer (a reset, 502/503/504): the message's own failure, or a
        sign that the app is unavailable."""
        assert job.started_s is not None
        return self._breaker.own_failure(job.started_s)

    def _app_unavailable(self, job: Job, outcome: Outcome, seen: Verdict) -> None:
        """Hold a message the app could not take (it is tried again here, not given back
        with ErrorVisibilityTimeout), and open the breaker if it is closed."""
        self.metrics.failed(outcome.status, outcome.elapsed_s)
        self._hold_for_app(job, outcome, front=False)
        breaker = self._breaker
        if breaker.open():
            self._opened(job, outcome)
        elif breaker.released and breaker.held > MAX_PROBES:
            self._release(job)

    def _hold_for_app(self, job: Job, outcome: Outcome, *, front: bool) -> None:
        job.started_s = None
        job.failure, job.failed_s = outcome, time.monotonic()
        self._wait(job)
        if front:
            self._breaker.failed.insert(0, job)
        else:
            self._breaker.failed.append(job)

    def _opened(self, job: Job, outcome: Outcome) -> None:
        self.metrics.app_available(False)
        detail = f": {outcome.detail}" if outcome.detail else ""
        log.warning("app unavailable (%s%s): queue=%s message=%s; receiving paused, messages "
                    "held and tried again here", outcome.status, detail, self.queue_name,
                    job.message.message_id,
                    extra=self._fields(job.message, outcome="app-unavailable",
                                       status=outcome.status))
        loop = asyncio.get_running_loop()
        self._grace = loop.call_later(GRACE_S, self._release_held)
        self._prober = asyncio.create_task(self._probe_loop(), name="app-probe")

    def _park(self, job: Job) -> None:
        """Hold a message not yet tried while the app is unavailable, or release it when
        enough are held already (after GRACE_S)."""
        breaker = self._breaker
        if breaker.released and breaker.held >= MAX_PROBES:
            self._release(job)
            return
        self._wait(job)
        breaker.parked.append(job)

    def _release_held(self) -> None:
        """GRACE_S after the breaker opened: release (visibility 0) what this worker holds,
        so that other workers can take it, but MAX_PROBES messages to try the app with
        and the FIFO groups waiting behind them (their order stays)."""
        breaker = self._breaker
        breaker.released = True
        keep = (breaker.failed + breaker.parked)[:MAX_PROBES]
        kept_groups = {job.group for job in keep if job.group is not None}
        released = 0
        for job in list(self._jobs.values()):
            if (job.started_s is not None or job.exhausted or job.released
                    or any(job is kept for kept in keep) or job.group in kept_groups):
                continue
            self._release(job)
            released += 1
        log.warning("app still unavailable after %.0fs: queue=%s released=%d held=%d (to try "
                    "the app with, FIFO groups behind them, open requests)", GRACE_S,
                    self.queue_name, released, len(self._jobs))

    async def _probe_loop(self) -> None:
        """Look at the app after a growing pause until it answers; then close the breaker."""
        breaker = self._breaker
        reminded_s = time.monotonic()
        while not self._stopping.is_set():
            first = breaker.failed[0].failure if breaker.failed else None
            suspect = first is not None and verdict(first) is Verdict.SUSPECT
            await self._pause(breaker.next_pause_s(
                suspect=suspect, retry_after_s=first.retry_after_s if first else None))
            if self._stopping.is_set() or await self._app_back():
                return
            now = time.monotonic()
            if now - reminded_s >= _ERROR_LOG_EVERY_S:
                reminded_s = now
                log.warning("app still unavailable after %.0fs: queue=%s held=%d",
                            now - breaker.opened_s, self.queue_name, breaker.held)

    async def _app_back(self) -> bool:
        """One look: the health check if there is one, else a held message; True when the
        app answered (the breaker is then closed)."""
        if await self._answered_since_suspects():
            return True
        if self.config.health_check_path:
            if not await self._deliverer.healthy(self.config.health_check_path):
                return False
            self._breaker.answered()
            await self._close_breaker()
            return True
        job = await self._probe_job()
        if job is None:  # nothing held (all handed back meanwhile): nothing to protect
            await self._close_breaker()
            return True
        return await self._try_app(job)

    async def _answered_since_suspects(self) -> bool:
        """True (and the breaker closed) when the app answered a request that was open when
        a held message got a SUSPECT answer, after that answer: that message's failure was
        its own, and it is retried as any failure is (breaker.py)."""
        breaker = self._breaker
        own = [job for job in breaker.failed if job.failure is not None
               and verdict(job.failure) is Verdict.SUSPECT and breaker.last_answer_s > job.failed_s]
        if not own:
            return False
        for job in own:
            breaker.forget(job)
            self._stop_waiting(job)
        await self._close_breaker()
        for job in own:
            assert job.failure is not None
            await self._retry(job, job.failure, counted=True)
        return True

    async def _probe_job(self) -> Job | None:
        """The message to try the app with: an untried one first when the held ones got
        SUSPECT answers (if it gets an answer, theirs were their own failures), else the
        oldest held. With only SUSPECT ones held, now and then one more is received."""
        breaker = self._breaker
        suspects = any(job.failure is not None and verdict(job.failure) is Verdict.SUSPECT
                       for job in breaker.failed)
        if breaker.parked and (suspects or not breaker.failed):
            return breaker.parked[0]
        if suspects and breaker.wants_second_opinion():
            await self._fetch_one()
        return breaker.failed[0] if breaker.failed else None

    async def _fetch_one(self) -> None:
        """Receive one message; a dispatcher parks it for the next look."""
        assert self._sqs is not None
        started = time.monotonic()
        try:
            messages = await self._sqs.receive_messages(
                self.queue_url, max_messages=1, wait_time_s=0,
                visibility_timeout_s=self.config.visibility_timeout, system_attributes=("All",))
        except (SQSTransportError, SQSError) as exc:
            self._log_poll_error(exc)
            return
        if messages:
            self._slots.overdraw(1)
            self._accept(messages, started)

    async def _try_app(self, job: Job) -> bool:
        """POST a held message as a probe; True when the app answered."""
        breaker = self._breaker
        was_failed = any(job is failed for failed in breaker.failed)
        breaker.forget(job)
        self._stop_waiting(job)
        outcome = await self._post(job)
        seen = verdict(outcome)
        if seen is Verdict.ANSWERED:
            breaker.answered()
            await self._close_breaker()
            await self._settle(job, outcome)
            return True
        if seen is Verdict.NEUTRAL:  # no answer in time: the app is there, or hangs
            await self._retry(job, outcome)
            return False
        self.metrics.failed(outcome.status, outcome.elapsed_s)
        self._hold_for_app(job, outcome, front=was_failed)
        return False

    async def _close_breaker(self) -> None:
        """The app answers: send it what was held, in order, and receive again."""
        breaker = self._breaker
        failed, parked = breaker.close()
        if self._grace is not None:
            self._grace.cancel()
        self.metrics.app_available(True)
        log.warning("app answers again after %.1fs: queue=%s; receiving resumed, %d held "
                    "messages go to it now", time.monotonic() - breaker.opened_s,
                    self.queue_name, len(failed) + len(parked))
        for job in failed + parked:
            self._dispatch(job)

    # -- heartbeats -----------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        """Extend the visibility of messages whose request is still open (seed 003), up to
        ConnectTimeout + InactivityTimeout; release buffered ones about to reappear.

        FIFO messages waiting here are extended instead: released, one would let SQS hand
        its group out again behind the back of this worker, or cost a receive to each
        message of the group behind it."""
        vt = self.config.visibility_timeout
        if vt == 0:
            return  # the operator asked for messages never to be hidden
        tick_s = min(1.0, max(0.05, vt / 4))
        margin_s = vt / 2
        limit_s = self.config.connect_timeout + self.config.inactivity_timeout
        while True:
            await asyncio.sleep(tick_s)
            now = time.monotonic()
            for job in list(self._jobs.values()):
                if job.extending or job.visible_until_s - now > margin_s:
                    continue
                if job.started_s is None and job.group is None and not job.waiting:
                    self._release(job)  # buffered, about to reappear: let another take it
                elif job.started_s is None or now - job.started_s < limit_s:
                    self._extend(job, now)

    def _extend(self, job: Job, now: float) -> None:
        assert self._change is not None
        job.extending = True
        seconds = self.config.visibility_timeout
        future = self._change.submit(job.message.message_id, (job.message.receipt_handle, seconds))

        def done(f: asyncio.Future[str | None]) -> None:
            refusal = f.result()
            if refusal is None:
                job.extending = False
                job.visible_until_s = now + seconds
                self.metrics.extended(1)
            elif job.message.receipt_handle in self._jobs:
                # left `extending` so it is not retried every tick
                log.warning("could not extend visibility, the message may be delivered again "
                            "while this worker holds it: queue=%s message=%s code=%s",
                            self.queue_name, job.message.message_id, refusal)

        future.add_done_callback(done)

    # -- health ---------------------------------------------------------------

    def _announced_status(self) -> dict[str, Any]:
        """What the server's console lists for this worker (presence.py)."""
        return {**self.health()[1], "app": self.config.post_url, "version": __version__,
                "failed": self.metrics.failures}

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(healthy, report) for /health."""
        reachable = self._poll_errors.failures == 0
        status = self.state if self.state != "running" or reachable else "queue-unreachable"
        report = {"status": "ok" if status == "running" else status, "queue": self.queue_name,
                  "pid": os.getpid(),  # lets a local scaler tell its own worker from another
                  "in_flight": sum(job.started_s is not None for job in self._jobs.values()),
                  "held": self._slots.capacity - self._slots.free,
                  "holding": len(self._jobs),  # received, not finished: busy for conveyor scale
                  "app_available": not self._breaker.is_open,
                  "concurrency_limit": self._open.limit.current,
                  "processing_avg_s": self.metrics.processing_avg_s,
                  "processed": self.metrics.processed}
        if isinstance(self.receiver, PartitionedReceiver):  # what each partition gave
            report["partitions"] = {name: {"received": count}
                                    for name, count in self.receiver.received.items()}
        return status == "running", report
