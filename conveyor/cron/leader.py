"""The scheduler: every daemon campaigns for one lease per queue; the holder enqueues due runs.

How a run is enqueued exactly once, across crashes and handovers:

1. **Claim (write-ahead).** The leader computes the due runs from the `last` times in its
   lease Data, then writes, in one conditional UpdateLease (holder + version, also the
   renewal), `last` moved past them and the runs listed as `pending`. If the write is
   refused, someone else leads: nothing is sent.
2. **Send**, only while the lease is certainly still ours.
3. **Confirm**: a second conditional write removes the sent runs from `pending`.

A leader that dies before 1 leaves `last` untouched: its successor finds the same runs due
(within the grace period) and sends them. One that dies after 3 leaves nothing to redo.
One that dies between 1 and 3 leaves its runs *in doubt*: SQS cannot be asked whether a
message was sent, so the successor sends them again — a run is never missed. The copies
carry the same deterministic identity (task name + scheduled time in the message
attributes), and the receiving daemon's run ledger (ledger.py) POSTs only the first
message per run and deletes any other unposted, so the app sees each run exactly once.
Claim-then-send was chosen over send-then-record because the opposite order would also
re-send in doubt but could not be told apart from a run the leader never reached, and
over plain "trust the claim" because that would silently miss the in-doubt run.

What it costs while nothing is due. The lease only has to change hands in time for the
next due run, so an idle leader asks for it until shortly after that run (`ttl_s` past
it, at most MAX_HOLD_S) and renews it only then: an idle worker's leader writes it about
twice an hour, not every `ttl_s / 4`. The claim at a due time is itself the renewal.
While runs are pending (a send failed) the lease is held `ttl_s` at a time, renewed every
quarter of it, as before. A follower reads the lease (GetLease, which says how long it
has left by the clock that judges it) and sleeps until it ends or until its own next due
run, whichever is sooner, and only then campaigns: about as many calls as the leader's
renewals, instead of one every few seconds. Safety does not rest on these times: every
claim is a conditional write at the version the leader holds, judged by the backend's
clock, and a leader sends only while its last write is certainly still in force.
A leader killed without a word is therefore replaced `ttl_s` after the run it would have
enqueued (plus a quarter TTL at most, as when followers looked every quarter TTL); one
that hands its lease back (SIGTERM) is replaced at the next due run, whose message then
goes a quarter TTL late at most. Nothing due in between needed a leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from conveyor.client import SQSClient, SQSError, SQSTransportError
from conveyor.cron.clock import CronClock
from conveyor.cron.cronfile import Task
from conveyor.cron.jobs import iso, send_runs
from conveyor.cron.leases.base import (
    Lease,
    LeaseBackend,
    LeaseConflict,
    LeaseRefused,
    LeaseUnavailable,
)
from conveyor.cron.metrics import CronMetrics
from conveyor.cron.source import CronSource
from conveyor.cron.state import LeaderState, Run, due_runs
from conveyor.runtime.extensions import RECHECK_S

log = logging.getLogger(__name__)

FIFO_REFUSAL = ("periodic tasks are not supported on a FIFO worker queue (Elastic Beanstalk "
                "refuses them too): the cron.yaml tasks are ignored for queue %s")
Sender = Callable[[SQSClient, str, Sequence[Run]], Awaitable[list[Run]]]
# Stop sending this fraction of the TTL before the lease would lapse unrenewed.
_SEND_MARGIN = 0.25
# Renew when this fraction of the TTL is left: a failed renewal has that long to be
# retried before the leader must step down.
_RENEW_MARGIN = 0.75
_MAX_WAIT_S = 1.0  # look at the file and the clock at least this often
# The longest an idle leader holds its lease unrenewed (below the server's 3600-s limit):
# about two renewals an hour, and as many looks by each follower. Only when no run is due
# sooner does a silently killed leader keep its lease this long, which delays nothing the
# leader's cron.yaml schedules.
MAX_HOLD_S = 1800.0


class Scheduler:
    """Campaigns for the queue's cron lease and, while holding it, enqueues due runs."""

    def __init__(self, *, leases: LeaseBackend, sqs: SQSClient, queue_url: str, queue_name: str,
                 lease_name: str, holder: str, source: CronSource, clock: CronClock,
                 metrics: CronMetrics, ttl_s: float = 10.0, grace_s: float = 300.0,
                 fifo: bool = False, sender: Sender = send_runs,
                 rng: random.Random | None = None) -> None:
        self.lease_name = lease_name
        self.holder = holder
        self._leases = leases
        self._sqs = sqs
        self._queue_url = queue_url
        self._queue_name = queue_name
        self._source = source
        self._clock = clock
        self._metrics = metrics
        self._ttl_s = ttl_s
        self._grace_ms = int(grace_s * 1000)
        self._fifo = fifo
        self._send = sender
        self._rng = rng or random.Random()
        self._lease: Lease | None = None
        self._state = LeaderState()
        self._valid_until_s = -math.inf  # monotonic; the lease is surely ours before this
        self._renew_at_s = -math.inf  # monotonic; write again from then on
        self._must_write = False  # a new leader persists the state it adopted at once
        self._campaign_at_s = -math.inf  # monotonic; a follower looks at the lease then
        self._reads_expiry = True  # the backend says how long a lease has left
        self._in_doubt: set[Run] = set()
        self._tasks_seen: tuple[Task, ...] | None = None
        self._refused: tuple[Task, ...] | None = None
        self._unavailable_logged_s = -math.inf
        self._refusal_logged = False

    @property
    def leader(self) -> bool:
        """True while this daemon holds the lease."""
        return self._lease is not None

    @property
    def state(self) -> LeaderState:
        """The leader state as last written (empty when not leading)."""
        return self._state

    async def run(self, stopping: asyncio.Event) -> None:
        """Step until `stopping` is set, then hand the lease back."""
        while not stopping.is_set():
            try:
                wait_s = await self.step()
            except Exception:  # supervisor loop: log, carry on
                log.exception("cron scheduler step failed: queue=%s", self._queue_name)
                wait_s = self._renew_every_s
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), timeout=wait_s)
        await self.resign()

    async def step(self) -> float:
        """One round: campaign when due, or lead (claim, send, confirm, renew). Returns the
        real seconds to wait before the next round."""
        tasks = self._tasks()
        if self._lease is None:
            if not tasks:
                return _MAX_WAIT_S
            if self._clock.monotonic_s() < self._campaign_at_s or not await self._campaign(tasks):
                return max(0.001, min(self._campaign_at_s - self._clock.monotonic_s(),
                                      _MAX_WAIT_S))
        elif not tasks and not self._state.pending:
            await self.resign()
            return _MAX_WAIT_S
        return await self._lead(tasks)

    async def resign(self) -> None:
        """Release the lease (its data stays for the next leader)."""
        if self._lease is None:
            return
        try:
            await self._leases.release(self.lease_name, self.holder)
        except LeaseUnavailable as exc:
            log.warning("could not release the cron lease (it expires by itself): queue=%s %s",
                        self._queue_name, exc)
        self._lost("resigned")

    # -- following ------------------------------------------------------------

    @property
    def _renew_every_s(self) -> float:
        return self._ttl_s / 4

    def _tasks(self) -> tuple[Task, ...]:
        tasks = self._source.refresh()
        self._metrics.tasks(len(tasks))
        if tasks is not self._tasks_seen:  # a changed schedule: a follower looks again now
            self._tasks_seen = tasks
            self._campaign_at_s = -math.inf
        if tasks and self._fifo:
            if tasks is not self._refused:
                log.error(FIFO_REFUSAL, self._queue_name)
                self._refused = tasks
            return ()
        return tasks

    async def _campaign(self, tasks: tuple[Task, ...]) -> bool:
        """Read the lease; take it if nobody else holds it. Otherwise note when to look
        again: when it ends or the next run is due, whichever is sooner."""
        started = self._clock.monotonic_s()
        try:
            if self._reads_expiry:
                current = await self._leases.get(self.lease_name)
                if current is not None and current.expires_in_ms is None:
                    self._reads_expiry = False  # an older server: campaign as before
                elif current is not None and current.holder != self.holder \
                        and current.expires_in_ms:
                    self._follow(current.expires_in_ms / 1000, tasks)
                    return False
            lease = await self._leases.acquire(self.lease_name, self.holder,
                                               self._hold_s(LeaderState(), tasks))
        except LeaseConflict:  # another daemon took it meanwhile: read it soon
            self._campaign_at_s = started + self._pause_s()
            return False
        except LeaseRefused as exc:
            self._log_refused(exc)
            self._campaign_at_s = started + RECHECK_S
            return False
        except LeaseUnavailable as exc:
            self._log_unavailable(exc)
            self._campaign_at_s = started + self._pause_s()
            return False
        self._refusal_logged = False
        self._lease, self._must_write = lease, True  # persist the adopted state at once
        self._set_valid(started, self._hold_s(LeaderState(), tasks))
        self._state = LeaderState.decode(lease.data)
        self._in_doubt = set(self._state.pending)
        self._metrics.leading(True)
        log.info("cron leader: queue=%s holder=%s lease=%s version=%d in_doubt=%d",
                 self._queue_name, self.holder, self.lease_name, lease.version,
                 len(self._in_doubt))
        return True

    def _follow(self, expires_in_s: float, tasks: tuple[Task, ...]) -> None:
        """Someone else holds the lease for `expires_in_s` more (read just now): look
        again just after it ends, or just after our own next due run if that is sooner
        (by then a live leader has claimed it and moved the end on)."""
        now = self._clock.monotonic_s()
        self._campaign_at_s = now + min(expires_in_s, self._due_in_s(tasks)) + self._pause_s()

    def _pause_s(self) -> float:
        """A quarter TTL, jittered so that followers do not look in step."""
        return self._renew_every_s * (0.75 + 0.25 * self._rng.random())

    # -- leading --------------------------------------------------------------

    async def _lead(self, tasks: tuple[Task, ...]) -> float:
        now_ms = self._clock.now_ms()
        state = self._state.adopt(tasks, now_ms)
        due = due_runs(tasks, state, now_ms, self._grace_ms)
        for task, count in due.skipped.items():
            self._metrics.skipped(task, count)
            log.warning("cron: %d runs of task %s are older than the grace period (%ds) and "
                        "were not enqueued: queue=%s", count, task, self._grace_ms // 1000,
                        self._queue_name)
        if due.runs or due.skipped:
            state = state.claim(due, now_ms, self._grace_ms)
        renew = self._must_write or self._clock.monotonic_s() >= self._renew_at_s
        if (state != self._state or renew) and not await self._write(state, tasks):
            return self._renew_every_s / 4 if self._lease else self._pause_s()
        if self._state.pending:
            await self._send_pending(tasks)
        return self._next_wait(tasks)

    def _hold_s(self, state: LeaderState, tasks: tuple[Task, ...]) -> float:
        """How long to ask for the lease: `ttl_s` while runs are pending; otherwise until
        `ttl_s` after the next due run (at most MAX_HOLD_S), since nothing needs a new
        leader sooner."""
        if state.pending or not tasks:
            return self._ttl_s
        return min(self._ttl_s + self._due_in_s(tasks), max(self._ttl_s, MAX_HOLD_S))

    def _set_valid(self, started_s: float, hold_s: float) -> None:
        self._valid_until_s = started_s + hold_s
        self._renew_at_s = self._valid_until_s - self._ttl_s * _RENEW_MARGIN

    async def _write(self, state: LeaderState, tasks: tuple[Task, ...]) -> bool:
        """Conditional UpdateLease: renew and persist `state`. False if it did not happen."""
        assert self._lease is not None
        started = self._clock.monotonic_s()
        hold_s = self._hold_s(state, tasks)
        try:
            lease = await self._leases.update(self.lease_name, self.holder, self._lease.version,
                                              hold_s, state.encode())
        except LeaseConflict:
            log.warning("cron lease lost (taken over or expired): queue=%s holder=%s",
                        self._queue_name, self.holder)
            self._lost("conflict")
            return False
        except LeaseUnavailable as exc:
            self._log_unavailable(exc)
            if self._clock.monotonic_s() >= self._valid_until_s:
                log.warning("cron lease not renewed in time, stepping down: queue=%s",
                            self._queue_name)
                self._lost("expired")
            return False
        self._lease, self._state, self._must_write = lease, state, False
        self._set_valid(started, hold_s)
        return True

    async def _send_pending(self, tasks: tuple[Task, ...]) -> None:
        margin_s = self._ttl_s * _SEND_MARGIN
        if self._clock.monotonic_s() >= self._valid_until_s - margin_s:
            return  # renew first (next round); a lapsed leader must not send
        runs = list(self._state.pending)
        try:
            sent = await self._send(self._sqs, self._queue_url, runs)
        except (SQSError, SQSTransportError) as exc:
            log.warning("cron: sending %d runs failed, will retry: queue=%s %s", len(runs),
                        self._queue_name, exc)
            return
        now_ms = self._clock.now_ms()
        for run in sent:
            resent = run in self._in_doubt
            self._metrics.enqueued(run.task, (now_ms - run.at_ms) / 1000, resent)
            log.info("cron: enqueued task=%s scheduled=%s queue=%s%s", run.task, iso(run.at),
                     self._queue_name, " (re-sent: in doubt after a handover)" if resent else "")
        self._in_doubt -= set(sent)
        if sent:
            await self._write(self._state.confirm(sent), tasks)

    def _due_in_s(self, tasks: tuple[Task, ...]) -> float:
        """Real seconds until the next scheduled time of any task (inf when none)."""
        now_s = self._clock.now_ms() / 1000  # not now_s(): the wait is to the millisecond
        moment = datetime.fromtimestamp(now_s, UTC)
        next_s = min((t.schedule.next_after(moment).timestamp() for t in tasks),
                     default=math.inf)
        return self._clock.real_seconds(next_s - now_s)

    def _next_wait(self, tasks: tuple[Task, ...]) -> float:
        renew_in = self._renew_at_s - self._clock.monotonic_s()
        if self._state.pending:
            return max(0.01, min(renew_in, self._renew_every_s / 4))
        due_in = self._due_in_s(tasks) + 0.001
        return max(0.001, min(renew_in, due_in, _MAX_WAIT_S))

    def _lost(self, why: str) -> None:
        if self._lease is not None:
            self._metrics.leading(False)
            log.info("cron leadership ended (%s): queue=%s holder=%s", why, self._queue_name,
                     self.holder)
        self._lease = None
        self._state = LeaderState()
        self._in_doubt = set()
        self._valid_until_s = self._renew_at_s = -math.inf
        self._campaign_at_s = -math.inf  # read who leads now at the next round

    def _log_unavailable(self, exc: Exception) -> None:
        now = self._clock.monotonic_s()
        if now - self._unavailable_logged_s >= 30:
            self._unavailable_logged_s = now
            log.warning("cron lease backend unavailable: queue=%s %s", self._queue_name, exc)

    def _log_refused(self, exc: Exception) -> None:
        if not self._refusal_logged:
            self._refusal_logged = True
            log.error("periodic tasks are off for queue %s: %s; asking again in %d minutes "
                      "(set CronLease to dynamodb:TABLE on such an endpoint, or CronFile to '')",
                      self._queue_name, exc, RECHECK_S // 60)
