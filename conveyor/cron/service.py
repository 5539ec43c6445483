"""Periodic tasks inside one worker daemon: the scheduler and the run ledger, wired up as
the worker's hook (conveyor/runtime/hooks.py)."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import uuid
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from conveyor import lease_names
from conveyor.client import Message, SQSClient, endpoint_from_queue_url, queue_name_from_url
from conveyor.cron.clock import CronClock
from conveyor.cron.cronfile import CronFileError, load_cron_file
from conveyor.cron.guard import CLOCK_SKEW_S, JobGuard
from conveyor.cron.jobs import ATTR_PREFIX, ScheduledJob, send_runs
from conveyor.cron.leader import Scheduler
from conveyor.cron.leases import (
    LeaseBackend,
    LeaseRefused,
    LeaseSpecError,
    LeaseUnavailable,
    open_leases,
    parse_lease_spec,
)
from conveyor.cron.leases.server import ServerLeases
from conveyor.cron.ledger import LedgerBusy, RunLedger
from conveyor.cron.metrics import CronMetrics
from conveyor.cron.source import CronSource
from conveyor.runtime.hooks import DeliveryRequest, WorkerHook

log = logging.getLogger(__name__)

# A scheduled job's own attributes: sent as X-Aws-Sqsd-Taskname / -Scheduled-At instead.
_ATTR_HEADER = "X-Aws-Sqsd-Attr-" + ATTR_PREFIX

__all__ = ["DEFAULT_CRON_FILE", "CronConfigError", "CronService", "LedgerBusy",
           "check_cron_config", "check_cron_settings",
           "check_cron_endpoint", "lease_name_for", "new_holder"]

# How long the start-up look at the endpoint's lease API may take before the daemon
# starts anyway (and its scheduler finds out later).
_PROBE_TIMEOUT_S = 10.0


DEFAULT_CRON_FILE = "cron.yaml"  # CronFile's default (worker/options.py), optional


class CronConfigError(ValueError):
    """The worker's periodic-task settings cannot work (bad lease spec, FIFO queue)."""


def check_cron_config(config: Any) -> None:
    """Refuse at start what cannot run: a bad CronLease, a cron file given by name that is
    missing, one that is invalid (its file, line and problem), or tasks on a FIFO worker
    queue. A reload that breaks a running file later keeps the last good schedule
    (CronSource); only the start is strict, so a typo is seen before anything runs."""
    check_cron_settings(config.cron_file, config.cron_lease, config.worker_queue_url)


def check_cron_settings(cron_file: str, lease_spec: str, queue_url: str) -> None:
    """check_cron_config's rules, for `conveyor cron run` too (which has no WorkerConfig)."""
    try:
        parse_lease_spec(lease_spec)
    except LeaseSpecError as exc:
        raise CronConfigError(str(exc)) from None
    path = Path(cron_file)
    # The default cron.yaml is optional, as in an Elastic Beanstalk source bundle; a file
    # named on purpose that is not there is a mistake worth stopping for.
    if not cron_file or (cron_file == DEFAULT_CRON_FILE and not path.exists()):
        return
    try:
        tasks = load_cron_file(path)
    except CronFileError as exc:
        raise CronConfigError(f"{exc} (fix it, or run without periodic tasks: --cron '')"
                              ) from None
    if tasks and queue_name_from_url(queue_url).endswith(".fifo"):
        msg = (f"periodic tasks are not supported on a FIFO worker queue, as in Elastic "
               f"Beanstalk: {cron_file} defines {len(tasks)} tasks and the queue is "
               f"{queue_url}. Use a standard queue, or --cron ''.")
        raise CronConfigError(msg)


async def check_cron_endpoint(cron_file: str, lease_spec: str, queue_url: str, *,
                              endpoint_url: str | None = None,
                              region: str | None = None) -> None:
    """Refuse at start a cron file with tasks whose lease backend the endpoint cannot
    serve: `CronLease server` (the default) on an endpoint without Conveyor's lease API
    (Amazon SQS, moto). Without this, a stray cron.yaml in the working directory would
    have the daemon ask for a lease the endpoint refuses, forever. One GetLease tells;
    an endpoint that does not answer yet lets the daemon start (its scheduler stops asking
    once it is refused, leader.py)."""
    try:
        kind, _table = parse_lease_spec(lease_spec)
    except LeaseSpecError as exc:
        raise CronConfigError(str(exc)) from None
    if kind != "server" or not cron_file:
        return
    try:
        tasks = load_cron_file(Path(cron_file))
    except CronFileError:  # missing or invalid: no tasks to run now
        return
    if not tasks:
        return
    endpoint = endpoint_url or endpoint_from_queue_url(queue_url)
    name = lease_name_for(queue_name_from_url(queue_url))
    async with SQSClient(endpoint, region=region or None) as sqs:
        try:
            await asyncio.wait_for(ServerLeases(sqs).get(name), _PROBE_TIMEOUT_S)
        except LeaseRefused as exc:
            count = f"{len(tasks)} periodic task{'s' if len(tasks) != 1 else ''}"
            msg = (f"{cron_file} defines {count}, whose leader election needs a lease "
                   f"backend, and CronLease 'server' cannot be used: {exc}. Set CronLease "
                   f"to dynamodb:TABLE, or run without periodic tasks (--cron '').")
            raise CronConfigError(msg) from None
        except (LeaseUnavailable, TimeoutError) as exc:
            log.warning("could not check the cron lease API of %s at start (%s): starting "
                        "anyway", endpoint, exc or "no answer")


def lease_name_for(queue_name: str) -> str:
    """The lease every daemon of one queue campaigns for (named in conveyor/lease_names.py,
    so that the queue's deletion ends it)."""
    return lease_names.cron_leader(queue_name)


def new_holder() -> str:
    """A holder id unique to this process: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class CronService(WorkerHook):
    """Owns the cron.yaml source, the lease backend, the scheduler task and the run ledger.

    In a worker it campaigns while the worker runs, hands the lease over before the drain,
    and vets each scheduled job before it is POSTed (`before_delivery`), then sends it to
    its task's url (`request`)."""

    def __init__(self, queue_name: str, *, cron_file: str = "cron.yaml",
                 lease_spec: str = "server", grace_s: float = 300.0, ttl_s: float = 10.0,
                 registry: CollectorRegistry | None = None, clock: CronClock | None = None,
                 run_scheduler: bool = True, signing_key: str = "",
                 retention_s: float = 1_209_600) -> None:
        self.queue_name = queue_name
        self.metrics = CronMetrics(queue_name, registry)
        # One clock for the source, the guard and the scheduler.
        self._clock = clock or CronClock.from_env()
        self.source = CronSource(Path(cron_file) if cron_file else None, clock=self._clock,
                                 on_error=self.metrics.file_error)
        self.holder = new_holder()
        self.lease_name = lease_name_for(queue_name)
        self.scheduler: Scheduler | None = None
        self._lease_spec = lease_spec
        self._grace_s = grace_s
        self._ttl_s = ttl_s
        self._run_scheduler = run_scheduler and bool(cron_file)
        self._signing_key = signing_key
        # No genuine message is older: sent within the grace period of its time (cron
        # time), expired RetentionPeriod (real time) after it was sent.
        max_age_s = grace_s + retention_s * self._clock.speed + CLOCK_SKEW_S
        self.guard = JobGuard(queue_name, self.source.refresh, clock=self._clock,
                              signing_key=signing_key, max_age_s=max_age_s)
        self._leases: LeaseBackend | None = None
        self._ledger: RunLedger | None = None
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_config(cls, config: Any, queue_name: str,
                    registry: CollectorRegistry | None = None) -> CronService:
        """Build from a WorkerConfig (its cron_* fields)."""
        return cls(queue_name, cron_file=config.cron_file, lease_spec=config.cron_lease,
                   grace_s=config.cron_grace_period, ttl_s=config.cron_lease_ttl,
                   registry=registry, signing_key=config.cron_signing_key,
                   retention_s=config.retention_period)

    def health(self) -> dict[str, Any]:
        """The schedule in force and, after a reload that failed, why (the last good
        schedule is kept meanwhile): an operator sees a broken cron.yaml in /health."""
        if not self._run_scheduler:
            return {}
        return {"cron": {"file": str(self.source.path), "tasks": len(self.source.tasks),
                         "error": self.source.error}}

    async def start(self, sqs: SQSClient, queue_url: str) -> None:
        """Open the lease backend and start campaigning (when a cron file is configured)."""
        self._leases = open_leases(self._lease_spec, sqs)
        self._ledger = RunLedger(self._leases, self.lease_name, self.holder)
        if not self._run_scheduler:
            return
        self.scheduler = Scheduler(
            leases=self._leases, sqs=sqs, queue_url=queue_url, queue_name=self.queue_name,
            lease_name=self.lease_name, holder=self.holder, source=self.source,
            clock=self._clock, metrics=self.metrics, ttl_s=self._ttl_s, grace_s=self._grace_s,
            fifo=self.queue_name.endswith(".fifo"),
            sender=functools.partial(send_runs, signing_key=self._signing_key))
        self._task = asyncio.create_task(self.scheduler.run(self._stopping), name="cron")

    async def stop(self) -> None:
        """Stop scheduling and hand the lease back (the ledger keeps working)."""
        self._stopping.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def close(self) -> None:
        """Stop, then close the lease backend."""
        await self.stop()
        if self._leases is not None:
            await self._leases.close()

    def request(self, message: Message, request: DeliveryRequest) -> DeliveryRequest:
        """A scheduled job goes alone to its task's url (under AppURL's path) with an empty
        body and sqsd's periodic-task headers, not its own attributes."""
        job = ScheduledJob.from_message(message)
        if job is None:
            return request
        headers = {name: value for name, value in request.headers.items()
                   if not name.startswith(_ATTR_HEADER)}
        headers.update(job.headers(message))
        return DeliveryRequest(request.base_path + job.path, headers, b"", alone=True,
                               base_path=request.base_path)

    async def before_delivery(self, message: Message) -> bool:
        """False for a scheduled job that is not genuine (guard.py) or whose run another
        message already carries (delete it unposted); True otherwise. Raises LedgerBusy
        when the ledger cannot be reached."""
        job = ScheduledJob.from_message(message)
        if job is None:
            return True
        reason = self.guard.reject_reason(job, message.body)
        if reason is not None:
            self.metrics.rejected(reason)
            log.warning("scheduled job rejected, deleted unposted: queue=%s message=%s "
                        "reason=%s task=%r scheduled=%r path=%r", self.queue_name,
                        message.message_id, reason, job.task, job.scheduled_at, job.path,
                        extra={"queue": self.queue_name, "message_id": message.message_id,
                               "outcome": "rejected", "reason": reason})
            return False
        if self._ledger is None:
            return True
        if await self._ledger.admit(job.task, job.scheduled_at, message.message_id):
            return True
        self.metrics.duplicate(job.task)
        log.warning("duplicate scheduled job deleted unposted: queue=%s message=%s task=%s "
                    "scheduled=%s", self.queue_name, message.message_id, job.task,
                    job.scheduled_at)
        return False
