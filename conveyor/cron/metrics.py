"""Periodic-task metrics, added to the worker's registry (`conveyor_worker_cron_*`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

# A run enqueued this long (cron time) after its scheduled time counts as late.
LATE_AFTER_S = 60.0


class CronMetrics:
    """Leadership, enqueued / late / skipped / re-sent runs, duplicates and forgeries dropped
    on receipt."""

    def __init__(self, queue: str, registry: CollectorRegistry | None = None) -> None:
        self.queue = queue
        self.registry = registry or CollectorRegistry()
        q, qt = ("queue",), ("queue", "task")
        reg = self.registry
        self._leader = Gauge("conveyor_worker_cron_leader",
                             "1 while this daemon leads periodic tasks for the queue.", q,
                             registry=reg)
        self._elected = Counter("conveyor_worker_cron_elections",
                                "Times this daemon became the leader.", q, registry=reg)
        self._tasks = Gauge("conveyor_worker_cron_tasks", "Tasks in the schedule in force.", q,
                            registry=reg)
        self._enqueued = Counter("conveyor_worker_cron_runs_enqueued",
                                 "Scheduled runs enqueued by this daemon.", qt, registry=reg)
        self._late = Counter("conveyor_worker_cron_runs_late",
                             f"Runs enqueued over {LATE_AFTER_S:g}s after their time "
                             "(caught up after a handover or outage).", qt, registry=reg)
        self._skipped = Counter("conveyor_worker_cron_runs_skipped",
                                "Runs older than the grace period when a leader looked: not "
                                "enqueued.", qt, registry=reg)
        self._resent = Counter("conveyor_worker_cron_runs_resent",
                               "In-doubt runs sent again after a leader died between claiming "
                               "and confirming them.", qt, registry=reg)
        self._duplicates = Counter("conveyor_worker_cron_duplicates_dropped",
                                   "Scheduled jobs received for a run already taken by another "
                                   "message: deleted unposted.", qt, registry=reg)
        self._rejected = Counter("conveyor_worker_cron_jobs_rejected",
                                 "Scheduled-job messages that were not genuine (unsigned, bad "
                                 "signature, a time the task's schedule does not fire...): "
                                 "deleted unposted.", ("queue", "reason"), registry=reg)
        self._file_errors = Counter("conveyor_worker_cron_file_errors",
                                    "cron.yaml loads that failed (the last good one was kept).",
                                    q, registry=reg)

    def leading(self, leader: bool) -> None:
        """Set the leadership gauge (and count an election)."""
        if leader:
            self._elected.labels(self.queue).inc()
        self._leader.labels(self.queue).set(1 if leader else 0)

    def tasks(self, count: int) -> None:
        """Tasks in the schedule."""
        self._tasks.labels(self.queue).set(count)

    def enqueued(self, task: str, lateness_s: float, resent: bool) -> None:
        """Count one enqueued run."""
        self._enqueued.labels(self.queue, task).inc()
        if lateness_s > LATE_AFTER_S:
            self._late.labels(self.queue, task).inc()
        if resent:
            self._resent.labels(self.queue, task).inc()

    def skipped(self, task: str, count: int) -> None:
        """Count runs given up for being older than the grace period."""
        self._skipped.labels(self.queue, task).inc(count)

    def duplicate(self, task: str) -> None:
        """Count a duplicate dropped on receipt."""
        self._duplicates.labels(self.queue, task).inc()

    def rejected(self, reason: str) -> None:
        """Count a scheduled job dropped as not genuine (no task label: a forger names it)."""
        self._rejected.labels(self.queue, reason).inc()

    def file_error(self, _message: str = "") -> None:
        """Count a failed cron.yaml load."""
        self._file_errors.labels(self.queue).inc()

    def value(self, name: str, **labels: str) -> float:
        """One sample's value (0 if absent)."""
        return self.registry.get_sample_value(name, {"queue": self.queue, **labels}) or 0.0
