"""The worker's Prometheus metrics, in a registry of its own (one per Worker)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from conveyor.clock import Clock

if TYPE_CHECKING:
    from conveyor.worker.delivery import Outcome

_PROCESSING_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                       10, 30, 60, 180, 600, 1800, 3600)


_WAIT_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 5, 30)

RATE_WINDOW_S = 60.0  # jobs a second are over the last minute: what is happening now


class WorkerMetrics:
    """Counters, gauges and histograms named `conveyor_worker_*`, labelled by queue."""

    def __init__(self, queue: str, clock: Clock | None = None) -> None:
        self.registry = CollectorRegistry()
        self._clock = clock or Clock()
        self._finished_s: deque[float] = deque()  # when each job of the last minute ended
        self.queue = queue
        q = ("queue",)
        reg = self.registry
        self._received = Counter("conveyor_worker_messages_received", "Messages received.",
                                 q, registry=reg)
        # With Partitions: what each partition (a queue of its own) gave, beside the total.
        self._partition_received = Counter(
            "conveyor_worker_partition_messages_received",
            "Messages received, per partition of a partitioned queue (Partitions).",
            ("queue", "partition"), registry=reg)
        self._succeeded = Counter("conveyor_worker_messages_succeeded",
                                  "Messages the app accepted (then deleted).", q, registry=reg)
        self._failed = Counter("conveyor_worker_messages_failed",
                               "Messages the app did not accept, by HTTP status or reason.",
                               ("queue", "status"), registry=reg)
        self._dead_lettered = Counter(
            "conveyor_worker_messages_dead_lettered",
            "Failures on the last receive before the dead-letter queue takes the message.",
            q, registry=reg)
        self._expired = Counter(
            "conveyor_worker_messages_expired",
            "Messages older than RetentionPeriod (from SentTimestamp), not posted: deleted, or "
            "moved to the dead-letter queue with ExpiredToDeadLetter.", q, registry=reg)
        self._released = Counter("conveyor_worker_messages_released",
                                 "Messages handed back with visibility 0 (drain, or the app "
                                 "unavailable).", q, registry=reg)
        self._app_available = Gauge("conveyor_worker_app_available",
                                    "1 while the app takes messages, 0 while the circuit "
                                    "breaker holds them back from it.", q, registry=reg)
        self._app_available.labels(queue).set(1)
        self._app_outages = Counter("conveyor_worker_app_outages",
                                    "Times the app was found unavailable (the circuit breaker "
                                    "opened).", q, registry=reg)
        self._in_flight = Gauge("conveyor_worker_in_flight", "Requests open to the app.",
                                q, registry=reg)
        self._processing = Histogram("conveyor_worker_processing_seconds",
                                     "Time the app took per message.", q,
                                     buckets=_PROCESSING_BUCKETS, registry=reg)
        self._waiting = Histogram("conveyor_worker_wait_seconds",
                                  "Time from receipt until the POST starts (waiting for a free "
                                  "connection).", q, buckets=_WAIT_BUCKETS, registry=reg)
        self._concurrency_limit = Gauge(
            "conveyor_worker_concurrency_limit",
            "POSTs that may be open to the app now: HttpConnections, or with "
            "AdaptiveConcurrency the limit that follows the app.", q, registry=reg)
        self._concurrency_cuts = Counter(
            "conveyor_worker_concurrency_cuts",
            "Times AdaptiveConcurrency cut the limit for a 429/503/504 answer or an "
            "InactivityTimeout.", q, registry=reg)
        self._cuts_seen = 0
        self._batches = Counter("conveyor_worker_batches",
                                "Batches POSTed (BatchSize), by outcome: ok (all deleted), "
                                "partial (some listed in batchItemFailures) or failed.",
                                ("queue", "outcome"), registry=reg)
        self._unprocessed = Counter("conveyor_worker_messages_unprocessed",
                                    "FIFO messages of a batch left waiting behind a failure "
                                    "in their group (neither deleted nor counted as failed).",
                                    q, registry=reg)
        self._extensions = Counter("conveyor_worker_visibility_extensions",
                                   "Heartbeat visibility extensions.", q, registry=reg)
        self._api_calls = Counter("conveyor_worker_api_calls", "SQS API calls.",
                                  ("queue", "action", "outcome"), registry=reg)
        # For the autoscaler (conveyor/scale): a recent average, not the all-time one.
        self.processing_avg_s: float | None = None
        # Jobs, not attempts (a job retried three times is one): announced to the console.
        self.processed = 0  # jobs the app accepted, since start
        self.failures = 0  # jobs that ended failed (dead-lettered or expired), since start
        self._jobs = Counter("conveyor_worker_jobs",
                             "Jobs finished, by outcome: done (the app accepted it), "
                             "dead_lettered (its last receive failed) or expired; each job "
                             "once, whatever its attempts.", ("queue", "outcome"), registry=reg)
        self._jobs_per_s = Gauge("conveyor_worker_jobs_per_second",
                                 "Jobs finished a second over the last minute.", q,
                                 registry=reg)
        self._jobs_per_s.labels(queue).set_function(self.jobs_per_s)
        self._app_down_since = Gauge(
            "conveyor_worker_app_unavailable_since_seconds",
            "When the app was found unavailable (Unix time), 0 while it answers.", q,
            registry=reg)
        self.app_down_since_s: float | None = None  # wall time the breaker opened
        self._processing_avg = Gauge("conveyor_worker_processing_seconds_avg",
                                     "Recent average time the app took per message (EWMA).",
                                     q, registry=reg)

    def received(self, count: int) -> None:
        """Count received messages."""
        self._received.labels(self.queue).inc(count)

    def received_from_partition(self, partition: str, count: int) -> None:
        """Count messages received from one partition (its queue's name)."""
        self._partition_received.labels(self.queue, partition).inc(count)

    def succeeded(self, seconds: float) -> None:
        """Count a success (a job done) and observe its processing time."""
        self._succeeded.labels(self.queue).inc()
        self._processing.labels(self.queue).observe(seconds)
        self._average(seconds)
        self.processed += 1
        self._finished("done")

    def failed(self, status: str, seconds: float) -> None:
        """Count a failed attempt by HTTP status (or reason) and observe its processing
        time; the job is not finished by it (dead_lettered says when it is)."""
        self._failed.labels(self.queue, status).inc()
        self._processing.labels(self.queue).observe(seconds)
        self._average(seconds)

    def _finished(self, outcome: str) -> None:
        self._jobs.labels(self.queue, outcome).inc()
        self._finished_s.append(self._clock.monotonic_s())

    def jobs_per_s(self) -> float:
        """Jobs finished a second over the last minute (fewer seconds just after start)."""
        now_s = self._clock.monotonic_s()
        while self._finished_s and self._finished_s[0] < now_s - RATE_WINDOW_S:
            self._finished_s.popleft()
        return len(self._finished_s) / RATE_WINDOW_S

    def _average(self, seconds: float) -> None:
        """Exponentially weighted: about the last 20 jobs count."""
        previous = self.processing_avg_s
        self.processing_avg_s = seconds if previous is None else previous + (
            seconds - previous) / 20
        self._processing_avg.labels(self.queue).set(self.processing_avg_s)

    def waited(self, seconds: float) -> None:
        """Observe how long a received message waited for a connection."""
        self._waiting.labels(self.queue).observe(seconds)

    def batch_posted(self, outcomes: Sequence[Outcome | None]) -> None:
        """Count one batch by outcome, and its unprocessed messages (None)."""
        failed = sum(outcome is not None and not outcome.ok for outcome in outcomes)
        unprocessed = sum(outcome is None for outcome in outcomes)
        if failed + unprocessed == 0:
            label = "ok"
        elif failed + unprocessed < len(outcomes):
            label = "partial"
        else:
            label = "failed"
        self._batches.labels(self.queue, label).inc()
        if unprocessed:
            self._unprocessed.labels(self.queue).inc(unprocessed)

    def dead_lettered(self) -> None:
        """Count a final failure: the job ends failed."""
        self._dead_lettered.labels(self.queue).inc()
        self.failures += 1
        self._finished("dead_lettered")

    def expired(self) -> None:
        """Count a message set aside unposted for RetentionPeriod: the job ends failed."""
        self._expired.labels(self.queue).inc()
        self.failures += 1
        self._finished("expired")

    def released(self, count: int = 1) -> None:
        """Count messages released with visibility 0."""
        self._released.labels(self.queue).inc(count)

    def app_available(self, available: bool) -> None:
        """The circuit breaker closed (True) or opened (False)."""
        self._app_available.labels(self.queue).set(1 if available else 0)
        self.app_down_since_s = None if available else self._clock.now_s()
        self._app_down_since.labels(self.queue).set(self.app_down_since_s or 0)
        if not available:
            self._app_outages.labels(self.queue).inc()

    def in_flight(self, delta: int) -> None:
        """Move the open-request gauge."""
        self._in_flight.labels(self.queue).inc(delta)

    def concurrency_limit(self, limit: int, cuts: int = 0) -> None:
        """Show the current limit on open POSTs, and count the cuts made since last time."""
        self._concurrency_limit.labels(self.queue).set(limit)
        if cuts > self._cuts_seen:
            self._concurrency_cuts.labels(self.queue).inc(cuts - self._cuts_seen)
            self._cuts_seen = cuts

    def extended(self, count: int) -> None:
        """Count heartbeat extensions."""
        self._extensions.labels(self.queue).inc(count)

    def api_call(self, action: str, outcome: str, _seconds: float) -> None:
        """Client observer hook: count one SQS call."""
        self._api_calls.labels(self.queue, action, outcome).inc()

    def value(self, name: str, **labels: str) -> float:
        """Current value of one sample (0 if absent), e.g. for tests and the benchmark."""
        found = self.registry.get_sample_value(name, {"queue": self.queue, **labels})
        return found or 0.0

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)
