"""Which received scheduled-job messages are genuine: a forged one is deleted unposted.

A scheduled-job message is an ordinary SQS message with a known body and attributes, so
anyone who may send to the worker queue can make one. The receiving daemon checks it
before the run ledger and the POST:

- **With `CronSigningKey`**, the message must carry the leader's signature (signing.py)
  over exactly what it says; anything unsigned or mismatched is rejected. A signed run is
  trusted even if cron.yaml changed since it was sent, or if this daemon has no cron.yaml
  (a separate `conveyor cron run` enqueues the runs).
- **Without a key**, the message must name a task of this daemon's cron.yaml, with that
  task's url, at a time its schedule fires, not in the future. This stops invented runs
  (any task, any time, any path) but not a copy of a real run's message at a real time
  that the run ledger no longer remembers: only the key stops that. A daemon with no tasks
  in its cron.yaml cannot tell, and POSTs the job as Elastic Beanstalk does (warning once).

Both ways, a run older than any genuine message can be is rejected: the leader sends a
run at most the grace period after its time, and the daemon expires a message
RetentionPeriod after it was sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from conveyor.cron.clock import CronClock
from conveyor.cron.cronfile import Task
from conveyor.cron.jobs import ScheduledJob
from conveyor.cron.signing import signature_matches

log = logging.getLogger(__name__)

# How far ahead of this machine's clock a scheduled time may be: the leader runs on
# another machine, whose clock may be this much ahead. A forger can run a task at most
# this early (and the genuine run is then dropped as a duplicate).
CLOCK_SKEW_S = 60.0
# Why a scheduled job was rejected: the `reason` label of the metric (a fixed set, so that
# a forger cannot create label values).
REASONS = ("unsigned", "bad-signature", "bad-time", "unknown-task", "wrong-path",
           "unscheduled-time", "future-time", "too-old")


class JobGuard:
    """Says why a received scheduled job is not genuine, or None when it may be POSTed."""

    def __init__(self, queue_name: str, tasks: Callable[[], tuple[Task, ...]], *,
                 clock: CronClock, signing_key: str = "", max_age_s: float) -> None:
        self._queue_name = queue_name
        self._tasks = tasks
        self._clock = clock
        self._key = signing_key
        self._max_age_s = max_age_s
        self._warned_unchecked = False

    def reject_reason(self, job: ScheduledJob, body: str) -> str | None:
        """The reason (one of REASONS) to drop `job`, or None to let it through."""
        at = _parse_time(job.scheduled_at)
        if self._key:
            if not job.signature:
                return "unsigned"
            if not signature_matches(self._key, job.signature, self._queue_name, job.task,
                                     job.path, job.scheduled_at, body):
                return "bad-signature"
            return "bad-time" if at is None else self._age_problem(at, future_ok=True)
        if at is None:
            return "bad-time"
        tasks = self._tasks()
        if not tasks:
            self._warn_unchecked()
            return self._age_problem(at, future_ok=False)
        task = next((t for t in tasks if t.name == job.task), None)
        if task is None:
            return "unknown-task"
        if job.path != task.url:
            return "wrong-path"
        if task.schedule.next_after(at - timedelta(minutes=1)) != at:
            return "unscheduled-time"
        return self._age_problem(at, future_ok=False)

    def _age_problem(self, at: datetime, *, future_ok: bool) -> str | None:
        age_s = self._clock.now_ms() / 1000 - at.timestamp()  # sub-second, as the limits are
        if age_s < -CLOCK_SKEW_S and not future_ok:
            return "future-time"
        if age_s > self._max_age_s:
            return "too-old"
        return None

    def _warn_unchecked(self) -> None:
        if not self._warned_unchecked:
            self._warned_unchecked = True
            log.warning("scheduled jobs on queue %s cannot be checked: no CronSigningKey and "
                        "no tasks in this daemon's cron.yaml, so any sender can run any task; "
                        "set CronSigningKey (--cron-signing-key) on every daemon of the queue",
                        self._queue_name)


def _parse_time(text: str) -> datetime | None:
    """A scheduled time as the leader writes it (`2026-01-31T23:00:00Z`, whole minutes)."""
    try:
        at = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return at if at.second == 0 else None
