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
When it fails, it is tried again here rather than handed back to SQS: SQS would not hand
it out again while its group's later messages are in flight, and handing those back too
would cost each of them a receive per failure (ApproximateReceiveCount counts every
receive), so they would reach maxReceiveCount and the dead-letter queue with their first
message, unprocessed. Its attempts are counted here the way SQS would count them, and
after maxReceiveCount of them the worker moves it to the dead-letter queue itself.

When the app is unavailable (breaker.py says how a POST's outcome shows it), each failure
would also cost a receive: so the circuit breaker opens, receiving stops, and what the
worker holds is held or released until the app answers again (outage.py).
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
from conveyor.payloads.resolver import PayloadResolver, PayloadUnavailable
from conveyor.runtime.hooks import TryLater, WorkerHook
from conveyor.runtime.presence import Presence
from conveyor.runtime.status import StatusServer
from conveyor.worker.adaptive import ConcurrencyLimit
from conveyor.worker.attempts import AttemptLog
from conveyor.worker.backoff import (
    MAX_VISIBILITY_S,
    ErrorBackoff,
    IdleBackoff,
    failure_visibility,
)
from conveyor.worker.batch_delivery import BatchPoster, queue_identities
from conveyor.worker.batch_dispatch import BatchDispatcher
from conveyor.worker.batcher import Batcher
from conveyor.worker.config import WorkerConfig
from conveyor.worker.delivery import Deliverer, Outcome
from conveyor.worker.flow import IdleControl, OpenPosts, Slots
from conveyor.worker.groups import GroupQueues
from conveyor.worker.heartbeat import Heartbeat
from conveyor.worker.job import Job, JobActions, Waiting, log_fields
from conveyor.worker.metrics import WorkerMetrics
from conveyor.worker.outage import AppOutage
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


class Worker:
    """One worker daemon for one queue. `await run()` until `stop()` (or a signal) drains it."""

    def __init__(self, config: WorkerConfig, *, clock: Clock | None = None,
                 rng: random.Random | None = None, hooks: Sequence[HookFactory] = ()) -> None:
        self.config = config
        self.queue_url = config.worker_queue_url
        self.queue_name = queue_name_from_url(config.worker_queue_url)
        self.metrics = WorkerMetrics(self.queue_name)
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
        self._jobs: dict[str, Job] = {}
        self._fifo = self.queue_name.endswith(".fifo")  # SQS requires the suffix
        self._groups: GroupQueues[Job] = GroupQueues()
        self._waiting = Waiting(self._slots.capacity * _HELD_PER_SLOT)
        self._open = OpenPosts(ConcurrencyLimit(clock, config.http_connections,
                                                adaptive=config.adaptive_concurrency),
                               self._slots, self.metrics, per_post=max(1, config.batch_size),
                               receive_batch=self._batch)
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
        self._deliverer = Deliverer(config, self.queue_name, clock=clock)
        self._payloads = PayloadResolver.from_options(
            config.payload_endpoint_url, config.payload_region or config.region,
            config.payload_access_key, config.payload_bucket,
            delete_after=config.delete_payloads)
        self._batches: BatchPoster | None = None  # BatchSize: several messages per POST
        self.attempts = AttemptLog(self.queue_name, clock=clock)  # each failure, logged and kept
        self._batch_dispatch: BatchDispatcher | None = None
        # What the pieces that decide when (the batch dispatchers, the outage) may do.
        self._actions = JobActions(admit=self._admit, post=self._post, settle=self._settle,
                                   retry=self._retry, release=self._release,
                                   dispatch=self._dispatch)
        health_path = config.health_check_path
        self._outage = AppOutage(
            self._actions, jobs=self._jobs, waiting=self._waiting, metrics=self.metrics,
            queue_name=self.queue_name, stopping=self._stopping, pause=self._pause,
            receive_one=self._fetch_one, rng=self._rng, clock=clock,
            healthy=(lambda: self._deliverer.healthy(health_path)) if health_path else None)
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
        await self._deliverer.open()
        if self.config.batch_size:
            identities = queue_identities(lambda m: self._queues_of(m).queue_url, sqs.region)
            self._batches = BatchPoster(self._deliverer, self.queue_name, identities,
                                        fifo=self._fifo)
            self._batch_dispatch = BatchDispatcher(
                self._batches, self.config.batch_size, self._actions,
                buffer=self._buffer, slots=self._slots, open_posts=self._open,
                groups=self._groups, past_retention=lambda m: self._expired_age_s(m) is not None,
                payloads=self._payloads, metrics=self.metrics, queue_name=self.queue_name,
                clock=clock)
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
            self._jobs, self._change.submit, self._release,
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
        for hook in self.hooks:  # e.g. the cron lease is handed over before the drain
            await hook.stop()
        await self._outage.stop()
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
        deadline = self.clock.monotonic_s() + self.config.drain_timeout
        pending = set(dispatchers)
        while pending and not self._force.is_set() and self.clock.monotonic_s() < deadline:
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
        await asyncio.gather(self._delete.close(10.0), self._change.close(10.0),
                             self.attempts.close(10.0))
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
            await self._outage.wait_closed()  # no receiving while the app is unavailable
            await self._waiting.room()
            await self._slots.take(self._batch)
            if self._stopping.is_set():  # a receive begun now could be cut off by the
                self._slots.give(self._batch)  # drain, its messages hidden for their
                return  # visibility timeout
            started = self.clock.monotonic_s()
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
            early = self.clock.monotonic_s() - started < received.wait_s / 2
            await self._idle.after_poll(len(messages), self._batch, early)

    def _accept(self, messages: list[Message], received_s: float) -> None:
        visible_until = received_s + self.config.visibility_timeout
        now = self.clock.monotonic_s()
        for message in messages:
            job = Job(message, received_s, visible_until, accepted_s=now)
            self._jobs[message.receipt_handle] = job
            if self._fifo and message.group_id is not None:
                job.group = message.group_id
                if not self._groups.add(job.group, job):
                    self._slots.give(1)
                    self._waiting.add(job)  # takes no slot (see _HELD_PER_SLOT)
                    continue
            self._buffer.put_nowait(job)
        self.metrics.received(len(messages))

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
            self._accept(messages, started)

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
        if await self._admit(job):
            self.metrics.waited(self.clock.monotonic_s() - job.accepted_s)
            await self._settle(job, await self._post(job))

    async def _admit(self, job: Job) -> bool:
        """True when the message is to be POSTed now; else it has been dealt with (dead-
        lettered, expired, a duplicate scheduled run, held while the app is unavailable)."""
        message = job.message
        if job.exhausted:  # its copy to the dead-letter queue failed before: try again
            await self._to_dead_letter(job, "MaxRetries")
            return False
        age_s = self._expired_age_s(message)
        if age_s is not None:
            await self._expire(job, age_s)
            return False
        if not await self._admitted_by_hooks(job):
            return False
        if self._outage.is_open:  # the app is unavailable: hold it, do not try it
            self._outage.park(job)
            return False
        return True

    async def _post(self, job: Job) -> Outcome:
        """POST the message to the app (job.started_s says since when), within the
        concurrency limit (adaptive.py); an offloaded body is fetched first, so the app
        gets it and never the pointer."""
        job.started_s = fetched_s = self.clock.monotonic_s()
        try:
            message = await self._payloads.resolve(job.message)
        except PayloadUnavailable as exc:
            return Outcome(False, "payload-unavailable", self.clock.monotonic_s() - fetched_s,
                           detail=str(exc))
        except asyncio.CancelledError:
            self._release(job)
            raise
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
            self._release(job)
            raise
        finally:
            self._open.posted(started, status)

    async def _settle(self, job: Job, outcome: Outcome) -> None:
        """Act on a POST's outcome: delete, retry, or hold it while the app is unavailable."""
        if not outcome.ok:  # every failed attempt, single or batched, is told here
            self.attempts.failed(self._queues_of(job.message).queue_url, job.message, outcome)
        if self._outage.hold_if_unavailable(job, outcome):
            return
        if outcome.ok:
            self._done(job, outcome)
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

    def _expired_age_s(self, message: Message) -> float | None:
        """The message's age when it is past RetentionPeriod, else None."""
        age_s = self._age_s(message)
        return age_s if age_s is not None and age_s > self.config.retention_period else None

    def _age_s(self, message: Message) -> float | None:
        """Seconds since the message was sent (SentTimestamp), as RetentionPeriod counts.

        The server stamps SentTimestamp and ApproximateFirstReceiveTimestamp with one clock,
        so their difference is a lower bound of the age that no skew between its clock and
        this machine's can shrink; this machine's clock says how long it has been since."""
        sent_ms = message.sent_ms
        if sent_ms is None:
            return None
        age_s = (self.clock.now_ms() - sent_ms) / 1000
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
        self._outage.forget(job)
        self._waiting.discard(job)
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

    def _dispatch(self, job: Job) -> None:
        """Hand a held message to the dispatchers now, ahead of the next receive."""
        job.retry = None
        if (job.released or job.message.receipt_handle not in self._jobs
                or job.started_s is not None):  # at the app (in its group's batch)
            return
        self._waiting.discard(job)
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
        self._waiting.add(job)
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
        return log_fields(self.queue_name, message, **more)

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
                  "app_available": not self._outage.is_open,
                  "concurrency_limit": self._open.limit.current,
                  "processing_avg_s": self.metrics.processing_avg_s,
                  "processed": self.metrics.processed}
        if isinstance(self.receiver, PartitionedReceiver):  # what each partition gave
            report["partitions"] = {name: {"received": count}
                                    for name, count in self.receiver.received.items()}
        return status == "running", report
