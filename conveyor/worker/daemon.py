"""The worker daemon: pollers → dispatchers → ack / retry, with heartbeats and graceful drain.

    pollers (ReceiveMessage ×10) ──► buffer ──► HttpConnections dispatchers ──► the app
                                                        │
                        DeleteMessageBatch ◄── 2xx ─────┤
     ChangeMessageVisibilityBatch ◄── failure / heartbeat / release

At most HttpConnections + one batch of messages are held at once (`Slots`), so a free
connection always finds the next message waiting instead of holding a batch hostage.
With BatchSize, each dispatcher POSTs up to BatchSize of them at once as AWS Lambda's SQS
event and settles each by the app's partial batch response (batch_dispatch.py,
batch_delivery.py); then HttpConnections × BatchSize + one batch are held. With
AdaptiveConcurrency the limit on open POSTs, and so on messages held, follows the app
instead (`OpenPosts`, adaptive.py).

On a FIFO queue, one message per MessageGroupId is at the app at a time, in receive order
(`GroupQueues`); the group's later messages wait here, kept invisible, until it is done.
With GroupConcurrency, where the server caps no group (local_limits.py), the same line
holds a standard queue's groups to that many at the app at once, without order.
When it fails, it is tried again here rather than handed back to SQS: SQS would not hand
it out again while its group's later messages are in flight, and handing those back too
would cost each of them a receive per failure (ApproximateReceiveCount counts every
receive), so they would reach maxReceiveCount and the dead-letter queue with their first
message, unprocessed. Its attempts are counted here the way SQS would count them, and
after maxReceiveCount of them the worker moves it to the dead-letter queue itself.

When the app is unavailable (breaker.py says how a POST's outcome shows it), each failure
would also cost a receive: so the circuit breaker opens, receiving stops, and what the
worker holds is held until the app answers again (outage.py).

What becomes of each message (done, retried, held, released, dead-lettered, expired) is
decided by its one owner, settlement.py, which also states and checks the worker's
promises; this module keeps the life cycle, polling and dispatching. Each delivery runs
the hooks' steps (runtime/hooks.py): RetentionPeriod (retention.py), claim-checked bodies
(conveyor/payloads/step.py) and whatever hooks the worker is given (periodic tasks).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import random
from collections.abc import Callable, Sequence
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
from conveyor.payloads.step import PayloadStep
from conveyor.ratelimit import Rate
from conveyor.runtime.hooks import Unavailable, WorkerHook
from conveyor.runtime.presence import Presence
from conveyor.runtime.status import StatusServer
from conveyor.worker.adaptive import ConcurrencyLimit
from conveyor.worker.attempts import AttemptLog
from conveyor.worker.backoff import ErrorBackoff, IdleBackoff
from conveyor.worker.batch_delivery import BatchPoster, queue_identities
from conveyor.worker.batch_dispatch import BatchDispatcher
from conveyor.worker.batcher import Batcher
from conveyor.worker.config import WorkerConfig
from conveyor.worker.delivery import Deliverer, Outcome, iso8601_utc
from conveyor.worker.flow import IdleControl, OpenPosts, Slots
from conveyor.worker.heartbeat import Heartbeat
from conveyor.worker.job import Job, Waiting
from conveyor.worker.local_limits import LocalRate, local_group_cap
from conveyor.worker.metrics import WorkerMetrics
from conveyor.worker.outage import AppOutage
from conveyor.worker.partitions import (
    PartitionedReceiver,
    PartitionRouter,
    Partitions,
    RoutedBatcher,
    prepare_partitions,
)
from conveyor.worker.queues import WorkerQueues, prepare_worker_queue
from conveyor.worker.receiver import Receiver
from conveyor.worker.retention import Retention
from conveyor.worker.settlement import Settlement
from conveyor.worker.steps import DeliverySteps

log = logging.getLogger(__name__)

SQS_MAX_RECEIVE = 10
# Repeat "queue server unreachable" at most this often while it stays down.
_ERROR_LOG_EVERY_S = 30.0
# FIFO messages held here without a request (behind their group's first, or waiting for a
# retry) take no slot: SQS holds their group back from every consumer anyway, so holding
# them keeps nothing from anyone. What bounds them (their memory, the visibility extensions
# they need) is this many per slot.
_HELD_PER_SLOT = 10
# With BatchSize, HttpConnections × BatchSize messages may be held: more receives at once
# than this add connections to the queue server, not throughput.
_MAX_POLLERS = 64

# Makes one hook for one worker: its config, its queue's name, its metrics registry.
HookFactory = Callable[[WorkerConfig, str, CollectorRegistry], WorkerHook]


class Worker:
    """One worker daemon for one queue. `await run()` until `stop()` (or a signal) drains it."""

    def __init__(self, config: WorkerConfig, *, clock: Clock | None = None,
                 rng: random.Random | None = None, hooks: Sequence[HookFactory] = ()) -> None:
        self.config = config
        self.queue_url = config.worker_queue_url
        self.queue_name = queue_name_from_url(config.worker_queue_url)
        self.metrics = WorkerMetrics(self.queue_name, clock)
        self.queues: WorkerQueues | None = None
        self.state = "starting"
        self.clock = clock = clock or Clock()  # every piece below reads this one
        self._rng = rng or random.Random()
        at_app = config.http_connections * max(1, config.batch_size)  # messages at the app
        self._batch = min(SQS_MAX_RECEIVE, at_app)
        self._slots = Slots(at_app + self._batch)
        self._pollers = min(math.ceil(self._slots.capacity / self._batch), _MAX_POLLERS)
        self._idle = IdleControl(self._pollers, IdleBackoff(
            config.idle_backoff_min, config.idle_backoff_max, self._rng))
        self._poll_errors = ErrorBackoff(self._rng)
        self._poll_error_logged_s = -math.inf
        self._fifo = self.queue_name.endswith(".fifo")  # SQS requires the suffix
        self._open = OpenPosts(ConcurrencyLimit(clock, config.http_connections,
                                                adaptive=config.adaptive_concurrency),
                               self._slots, self.metrics, per_post=max(1, config.batch_size),
                               receive_batch=self._batch)
        self._local_rate = LocalRate(
            Rate(config.receive_rate, config.receive_burst or max(1, math.ceil(
                config.receive_rate))), self.queue_name, clock) if config.receive_rate else None
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
        self._deliverer = Deliverer(config, self.queue_name, clock=clock)
        self._batches: BatchPoster | None = None  # BatchSize: several messages per POST
        self.attempts = AttemptLog(self.queue_name, clock=clock)  # each failure, logged and kept
        self._batch_dispatch: BatchDispatcher | None = None
        # Each delivery's steps: RetentionPeriod, claim-checked bodies, then the hooks given.
        self._retention = Retention(config.retention_period, clock)
        self.hooks: list[WorkerHook] = [
            self._retention, PayloadStep.from_config(config),
            *(make(config, self.queue_name, self.metrics.registry) for make in hooks)]
        self._deliverer.use(self.hooks)
        self._steps = DeliverySteps(self.hooks)
        self.settlement = settlement = Settlement(
            config, self.queue_name, metrics=self.metrics, clock=clock, rng=self._rng,
            slots=self._slots, waiting=Waiting(self._slots.capacity * _HELD_PER_SLOT),
            stopping=self._stopping, hooks=self.hooks, queues_of=self._queues_of,
            attempts=self.attempts)
        self._jobs = settlement.jobs  # every message the worker holds (read here, never changed)
        self._buffer = settlement.buffer
        health_path = config.health_check_path
        settlement.outage = self._outage = AppOutage(
            settlement, post=self._post, metrics=self.metrics, queue_name=self.queue_name,
            stopping=self._stopping, pause=self._pause, receive_one=self._fetch_one,
            rng=self._rng, clock=clock,
            healthy=(lambda: self._deliverer.healthy(health_path)) if health_path else None)

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
                group_cap = (await local_group_cap(
                    self._sqs, self.queues.queue_url, self.queue_name,
                    wanted=config.group_concurrency, fifo=self._fifo)
                    if config.group_concurrency else 0)
            except (SQSTransportError, SQSError) as exc:
                if isinstance(exc, SQSError) and not exc.retryable:
                    raise
                self._log_poll_error(exc)
                await self._pause(self._poll_errors.next_pause())
                continue
            self.queue_url = self.queues.queue_url
            self._poll_errors.reset()
            if group_cap:  # held back by the cap, messages keep their slots (flow.py)
                self.settlement.cap_groups(group_cap)
                self._open.holds_back()
            if config.expired_to_dead_letter and self.queues.dead_letter_url is None:
                log.warning("ExpiredToDeadLetter is set but queue %s has no dead-letter queue: "
                            "messages older than RetentionPeriod are deleted", self.queue_name)
            return True
        return False

    async def _serve(self) -> None:
        assert self._sqs is not None
        sqs, url = self._sqs, self.queue_url
        give_up_s = max(60, self.config.visibility_timeout)
        clock = self.clock

        def deleter(queue_url: str) -> Batcher:
            return Batcher("DeleteMessageBatch", self.queue_name,
                           lambda entries: sqs.delete_message_batch(queue_url, entries),
                           clock=clock, give_up_s=give_up_s)

        def changer(queue_url: str) -> Batcher:
            return Batcher("ChangeMessageVisibilityBatch", self.queue_name,
                           lambda entries: sqs.change_message_visibility_batch(
                               queue_url, [(i, receipt, secs) for i, (receipt, secs) in entries]),
                           clock=clock, give_up_s=give_up_s)

        if self.partitions is not None:  # each entry joins its message's partition's batch
            self._router = router = PartitionRouter(url, lambda: self._jobs,
                                                    keep_s=give_up_s, clock=clock)
            urls = self.partitions.queue.urls
            self._delete = RoutedBatcher(router, urls, deleter, lambda receipt: receipt)
            self._change = RoutedBatcher(router, urls, changer, lambda entry: entry[0])
        else:
            self._delete, self._change = deleter(url), changer(url)
        self._delete.start()
        self._change.start()
        self.settlement.bind(sqs, self._delete, self._change)
        await self._deliverer.open()
        if self.config.batch_size:
            identities = queue_identities(lambda m: self._queues_of(m).queue_url, sqs.region)
            self._batches = BatchPoster(self._deliverer, self.queue_name, identities,
                                        fifo=self._fifo)
            self._batch_dispatch = BatchDispatcher(
                self._batches, self.config.batch_size, self.settlement, post=self._post,
                deliverer=self._deliverer, slots=self._slots, open_posts=self._open,
                steps=self._steps,
                past_retention=lambda m: self._retention.expired_age_s(m) is not None,
                window_s=self.config.batching_window)
        for hook in self.hooks:
            await hook.start(sqs, url)
        self.presence = Presence(sqs, self.queue_name, self._announced_status, clock=clock,
                                 on_drain=self.stop)
        self.attempts.start(sqs, self.presence.worker_id)
        if self._router is not None and self.partitions is not None:
            urls = self.partitions.queue.urls
            self.receiver = PartitionedReceiver(
                sqs, urls, self._router, clock=clock, wait_s=self.config.poll_wait_time,
                visibility_timeout_s=self.config.visibility_timeout,
                idle_poll=Receiver(sqs, urls, clock=clock, wait_s=self.config.poll_wait_time,
                                   extended_wait_s=self.config.extended_poll_wait_time,
                                   visibility_timeout_s=self.config.visibility_timeout,
                                   presence=self.presence))
            self.receiver.on_received = self.metrics.received_from_partition
        else:
            self.receiver = Receiver(sqs, url, clock=clock, wait_s=self.config.poll_wait_time,
                                     extended_wait_s=self.config.extended_poll_wait_time,
                                     visibility_timeout_s=self.config.visibility_timeout,
                                     presence=self.presence)
        dispatchers = [asyncio.create_task(self._dispatch_loop(), name=f"dispatch-{i}")
                       for i in range(self.config.http_connections)]
        pollers = [asyncio.create_task(self._poll_loop(first=i == 0), name=f"poll-{i}")
                   for i in range(self._pollers)]
        heartbeats = Heartbeat(
            self._jobs, self.settlement.change,
            visibility_timeout_s=self.config.visibility_timeout,
            request_limit_s=self.config.connect_timeout + self.config.inactivity_timeout,
            metrics=self.metrics, queue_name=self.queue_name, clock=clock)
        heartbeat = asyncio.create_task(heartbeats.run(), name="heartbeat")
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
        if self.presence is not None:  # the console shows the drain as it starts
            await self.presence.announce_now()
        for hook in self.hooks:  # e.g. the cron lease is handed over before the drain
            await hook.stop()
        await self._outage.stop()
        for task in pollers:
            task.cancel()
        await asyncio.gather(*pollers, return_exceptions=True)
        self.settlement.release_unstarted()
        open_requests = sum(job.started_s is not None for job in self._jobs.values())
        log.info("draining: queue=%s open_requests=%d deadline=%ds", self.queue_name,
                 open_requests, self.config.drain_timeout)
        for _ in dispatchers:
            self._buffer.put_nowait(None)
        deadline = self.clock.monotonic_s() + self.config.drain_timeout
        pending = set(dispatchers)
        while pending and not self._force.is_set() and self.clock.monotonic_s() < deadline:
            _done, pending = await asyncio.wait(pending, timeout=0.05)
        for task in pending:
            task.cancel()
        await asyncio.gather(*dispatchers, return_exceptions=True)
        self.settlement.release_unstarted()  # what failed meanwhile (the app went down)
        heartbeat.cancel()
        await asyncio.gather(heartbeat, return_exceptions=True)
        await self._deliverer.close()
        assert self._delete is not None and self._change is not None
        await asyncio.gather(self._delete.close(10.0), self._change.close(10.0),
                             self.attempts.close(10.0))
        for hook in self.hooks:  # after the last deletes: a stored body goes with each
            await hook.close()
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
            await self._outage.wait_closed()  # no receiving while the app is unavailable
            await self.settlement.waiting.room()
            await self._slots.take(self._batch)
            if self._stopping.is_set():  # a receive begun now could be cut off by the
                self._slots.give(self._batch)  # drain, its messages hidden for their
                return  # visibility timeout
            started = self.clock.monotonic_s()
            try:
                # "All" system attributes: the daemon needs SentTimestamp (RetentionPeriod),
                # MessageGroupId (FIFO order) and ApproximateReceiveCount (MaxRetries).
                asked = await self._rate_limited(self._batch)
                received = await self.receiver.receive(asked)
            except (SQSTransportError, SQSError) as exc:
                self._slots.give(self._batch)
                self._log_poll_error(exc)
                await asyncio.sleep(self._poll_errors.next_pause())
                continue
            except BaseException:
                self._slots.give(self._batch)
                raise
            messages = received.messages
            if self._local_rate is not None:
                self._local_rate.give_back(asked - len(messages))
            self._slots.give(self._batch - len(messages))
            self._poll_succeeded()
            if messages:
                self.settlement.accept(messages, started)
                await asyncio.sleep(0)  # let the dispatchers start these POSTs before we
                # spend CPU signing the next receive
            if received.retry_after_s:  # the queue's limits said when (receiver.py)
                await self._pause(received.retry_after_s)
            early = (self.clock.monotonic_s() - started < received.wait_s / 2
                     and not received.retry_after_s)  # its pause is done
            await self._idle.after_poll(len(messages), self._batch, early)

    async def _rate_limited(self, wanted: int) -> int:
        """How many messages the next receive asks for: `wanted`, or what the worker's own
        ReceiveRate lets go where the server enforces none (local_limits.py)."""
        rate = self._local_rate
        if rate is None or not rate.applies(self._server_enforces()):
            return wanted
        return await rate.take(wanted)

    def _server_enforces(self) -> bool | None:
        """Whether the server is Conveyor (it answered PollMessages) or not (refused it);
        None until the first receive tells (the worker applies its own rate meanwhile).
        Partitions are read with plain ReceiveMessage: the worker applies it there."""
        receiver = self.receiver
        if not isinstance(receiver, Receiver):
            return False
        if receiver.extension.confirmed:
            return True
        return None if receiver.extended else False

    def _log_poll_error(self, exc: Exception) -> None:
        now = self.clock.monotonic_s()
        if now - self._poll_error_logged_s >= _ERROR_LOG_EVERY_S:
            self._poll_error_logged_s = now
            log.warning("queue %s unreachable, retrying with back-off: %s", self.queue_name, exc)

    def _poll_succeeded(self) -> None:
        if self._poll_errors.failures:
            log.info("queue %s reachable again after %d failed calls", self.queue_name,
                     self._poll_errors.failures)
            self._poll_error_logged_s = -math.inf
        self._poll_errors.reset()

    async def _fetch_one(self) -> None:
        """Receive one message (the outage's second opinion); a dispatcher parks it."""
        assert self._sqs is not None
        started = self.clock.monotonic_s()
        try:
            messages = await self._sqs.receive_messages(
                self.queue_url, max_messages=1, wait_time_s=0,
                visibility_timeout_s=self.config.visibility_timeout, system_attributes=("All",))
        except (SQSTransportError, SQSError) as exc:
            self._log_poll_error(exc)
            return
        if messages:
            self._slots.overdraw(1)
            self.settlement.accept(messages, started)

    # -- dispatching ----------------------------------------------------------

    async def _dispatch_loop(self) -> None:
        if self._batch_dispatch is not None:
            await self._batch_dispatch.run()
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
        if await self.settlement.admit(job):
            self.metrics.waited(self.clock.monotonic_s() - job.accepted_s)
            await self.settlement.settle(job, await self._post(job))

    async def _post(self, job: Job) -> Outcome:
        """POST the message to the app (job.started_s says since when), within the
        concurrency limit (adaptive.py); the hooks' steps prepare it first (an offloaded
        body is fetched, so the app gets it and never the pointer)."""
        job.started_s = fetched_s = self.clock.monotonic_s()
        try:
            message = await self._steps.prepare(job.message)
        except Unavailable as exc:
            return Outcome(False, exc.status, self.clock.monotonic_s() - fetched_s,
                           detail=str(exc))
        except asyncio.CancelledError:
            self.settlement.release(job)
            raise
        invariants = self.settlement.invariants
        invariants.posting([job], self.settlement.groups)
        started = self._open.posting()
        status = "cancelled"
        try:
            if self._batches is None or self._deliverer.goes_alone(message):
                outcome = await self._deliverer.deliver(message)
            else:
                outcome = await self._batches.post_one(message)  # a probe: a batch of one
            status = outcome.status
            return outcome
        except asyncio.CancelledError:
            self.settlement.release(job)
            raise
        finally:
            self._open.posted(started, status)
            invariants.posted([job])

    def _queues_of(self, message: Message) -> WorkerQueues:
        """The queue a message came from, with its dead-letter queue: its partition's."""
        assert self.queues is not None
        if self.partitions is None or self._router is None:
            return self.queues
        return self.partitions.of(self._router.url_of(message.receipt_handle))

    # -- health ---------------------------------------------------------------

    def _announced_status(self) -> dict[str, Any]:
        """What the server's console lists for this worker (presence.py)."""
        return {**self.health()[1], "app": self.config.post_url, "version": __version__}

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(healthy, report) for /health."""
        reachable = self._poll_errors.failures == 0
        status = self.state if self.state != "running" or reachable else "queue-unreachable"
        down_since_s = self.metrics.app_down_since_s
        shown = "ok" if status == "running" else status
        if shown == "ok" and down_since_s is not None:  # alive, but its app does not answer
            shown = "app-down"
        report = {"status": shown, "queue": self.queue_name,
                  "pid": os.getpid(),  # lets a local scaler tell its own worker from another
                  "in_flight": sum(job.started_s is not None for job in self._jobs.values()),
                  "held": self._slots.capacity - self._slots.free,
                  "holding": len(self._jobs),  # received, not finished: busy for conveyor scale
                  "app_available": not self._outage.is_open,
                  "app_down_since": None if down_since_s is None else iso8601_utc(down_since_s),
                  "jobs_per_s": round(self.metrics.jobs_per_s(), 3),
                  "concurrency_limit": self._open.limit.current,
                  "processing_avg_s": self.metrics.processing_avg_s,
                  "processed": self.metrics.processed,  # jobs done, not attempts
                  "failed": self.metrics.failures}  # jobs dead-lettered or expired
        for hook in self.hooks:
            report.update(hook.health())
        if isinstance(self.receiver, PartitionedReceiver):  # what each partition gave
            report["partitions"] = {name: {"received": count}
                                    for name, count in self.receiver.received.items()}
        return status == "running", report
