"""What the worker does while its app is unavailable: the daemon's side of the circuit
breaker (breaker.py holds its state and says what each POST's outcome means).

When the app is unavailable, each failure would cost a receive, and an outage of a few
minutes would dead-letter every message the worker touched. So the breaker opens: no more
receives (`wait_closed`); what the worker holds stays invisible, its visibility extended by
the heartbeats, and is tried again here after a short back-off, by POST or after a passing
HealthCheckPath. Nothing is released while the app is unavailable: a message released
would be received again (by this worker's polls still parked on the server, or by another
worker's) and each receive counts towards maxReceiveCount, so an outage would spend the
receives that MaxRetries gives the app's own failures (issue 34; settlement.py states the
rule). What the parked polls still bring is held too. Once the app answers, what was held
goes to it, in order, and receiving resumes.

It acts on messages only through their owner (settlement.py): it tells the outage each
POST's outcome (`hold_if_unavailable`) and each message it is done with (`forget`), parks
untried messages here while it is open (`park`), and the daemon stops it on drain (`stop`).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Protocol

from conveyor.clock import Clock
from conveyor.worker.breaker import Breaker, Verdict, verdict
from conveyor.worker.delivery import Outcome
from conveyor.worker.job import Job, Waiting, log_fields
from conveyor.worker.metrics import WorkerMetrics

# The daemon's logger: its lines read (and are filtered) as they did when this was daemon.py.
log = logging.getLogger("conveyor.worker.daemon")

# Repeat "app still unavailable" at most this often while it stays so.
_REMIND_EVERY_S = 30.0


class Owner(Protocol):
    """What the outage asks of the owner of the messages' fates (settlement.py)."""

    waiting: Waiting

    def attempted(self, job: Job, outcome: Outcome) -> None: ...

    async def settle(self, job: Job, outcome: Outcome) -> None: ...

    async def retry(self, job: Job, outcome: Outcome, *, counted: bool = False) -> None: ...

    def dispatch(self, job: Job) -> None: ...


class AppOutage:
    """The breaker's handling for one worker: holds, probes, resumes."""

    def __init__(self, owner: Owner, *, post: Callable[[Job], Awaitable[Outcome]],
                 metrics: WorkerMetrics, queue_name: str, stopping: asyncio.Event,
                 pause: Callable[[float], Awaitable[None]],
                 receive_one: Callable[[], Awaitable[None]],
                 healthy: Callable[[], Awaitable[bool]] | None, rng: random.Random,
                 clock: Clock) -> None:
        self._owner = owner
        self._post = post  # POST one message alone (the daemon's)
        self._waiting = owner.waiting
        self._metrics = metrics
        self._queue_name = queue_name
        self._stopping = stopping
        self._pause = pause  # sleeps, but wakes at once when the worker stops
        self._receive_one = receive_one  # one more message, parked here by a dispatcher
        self._healthy = healthy  # the HealthCheckPath look, if there is one
        self._clock = clock
        self._breaker: Breaker[Job] = Breaker(rng, clock)
        self._prober: asyncio.Task[None] | None = None

    @property
    def is_open(self) -> bool:
        """True while the app is unavailable."""
        return self._breaker.is_open

    async def wait_closed(self) -> None:
        """Wait until the app is available (pollers: no receiving while it is not)."""
        await self._breaker.closed.wait()

    def hold_if_unavailable(self, job: Job, outcome: Outcome) -> bool:
        """Learn from a POST's outcome; True when it says the app is unavailable: the
        message is then held here (tried again here, not given back with
        ErrorVisibilityTimeout), and the breaker open."""
        seen = verdict(outcome)
        if seen is Verdict.ANSWERED:
            self._breaker.answered()
            return False
        if seen is Verdict.DOWN or (seen is Verdict.SUSPECT and not self._own_failure(job)):
            self._app_unavailable(job, outcome)
            return True
        return False

    def park(self, job: Job) -> None:
        """Hold a message not yet tried while the app is unavailable (one received by a
        poll that was parked on the server when the breaker opened, too)."""
        self._waiting.add(job)
        self._breaker.parked.append(job)

    def forget(self, job: Job) -> None:
        """The daemon is done with `job` (deleted, released...): hold it no more."""
        self._breaker.forget(job)

    async def stop(self) -> None:
        """The worker drains: no more probes (the drain hands everything back)."""
        if self._prober is not None:
            self._prober.cancel()
            await asyncio.gather(self._prober, return_exceptions=True)

    # -- opening ------------------------------------------------------------------------

    def _own_failure(self, job: Job) -> bool:
        """Judge a SUSPECT answer (a reset, 502/503/504): the message's own failure, or a
        sign that the app is unavailable."""
        assert job.started_s is not None
        return self._breaker.own_failure(job.started_s)

    def _app_unavailable(self, job: Job, outcome: Outcome) -> None:
        """Hold a message the app could not take, and open the breaker if it is closed."""
        self._metrics.failed(outcome.status, outcome.elapsed_s)
        self._hold_failed(job, outcome, front=False)
        if self._breaker.open():
            self._opened(job, outcome)

    def _hold_failed(self, job: Job, outcome: Outcome, *, front: bool) -> None:
        job.started_s = None
        job.failure, job.failed_s = outcome, self._clock.monotonic_s()
        self._waiting.add(job)
        if front:
            self._breaker.failed.insert(0, job)
        else:
            self._breaker.failed.append(job)

    def _opened(self, job: Job, outcome: Outcome) -> None:
        self._metrics.app_available(False)
        detail = f": {outcome.detail}" if outcome.detail else ""
        log.warning("app unavailable (%s%s): queue=%s message=%s; receiving paused, messages "
                    "held and tried again here", outcome.status, detail, self._queue_name,
                    job.message.message_id,
                    extra=log_fields(self._queue_name, job.message, outcome="app-unavailable",
                                     status=outcome.status))
        self._prober = asyncio.create_task(self._probe_loop(), name="app-probe")

    # -- probing ------------------------------------------------------------------------

    async def _probe_loop(self) -> None:
        """Look at the app after a growing pause until it answers; then close the breaker."""
        breaker = self._breaker
        reminded_s = self._clock.monotonic_s()
        while not self._stopping.is_set():
            first = breaker.failed[0].failure if breaker.failed else None
            suspect = first is not None and verdict(first) is Verdict.SUSPECT
            await self._pause(breaker.next_pause_s(
                suspect=suspect, retry_after_s=first.retry_after_s if first else None))
            if self._stopping.is_set() or await self._app_back():
                return
            now = self._clock.monotonic_s()
            if now - reminded_s >= _REMIND_EVERY_S:
                reminded_s = now
                log.warning("app still unavailable after %.0fs: queue=%s held=%d",
                            now - breaker.opened_s, self._queue_name, breaker.held)

    async def _app_back(self) -> bool:
        """One look: the health check if there is one, else a held message; True when the
        app answered (the breaker is then closed)."""
        if await self._answered_since_suspects():
            return True
        if self._healthy is not None:
            if not await self._healthy():
                return False
            self._breaker.answered()
            self._close()
            return True
        job = await self._probe_job()
        if job is None:  # nothing held (all handed back meanwhile): nothing to protect
            self._close()
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
            self._waiting.discard(job)
        self._close()
        for job in own:
            assert job.failure is not None
            await self._owner.retry(job, job.failure, counted=True)
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
            await self._receive_one()
        return breaker.failed[0] if breaker.failed else None

    async def _try_app(self, job: Job) -> bool:
        """POST a held message as a probe; True when the app answered."""
        breaker = self._breaker
        was_failed = any(job is failed for failed in breaker.failed)
        breaker.forget(job)
        self._waiting.discard(job)
        outcome = await self._post(job)
        seen = verdict(outcome)
        if seen is not Verdict.ANSWERED:  # else settled below, which tells its owner
            self._owner.attempted(job, outcome)
        if seen is Verdict.ANSWERED:
            breaker.answered()
            self._close()
            await self._owner.settle(job, outcome)
            return True
        if seen is Verdict.NEUTRAL:  # no answer in time: the app is there, or hangs
            await self._owner.retry(job, outcome)
            return False
        self._metrics.failed(outcome.status, outcome.elapsed_s)
        self._hold_failed(job, outcome, front=was_failed)
        return False

    def _close(self) -> None:
        """The app answers: send it what was held, in order, and receive again."""
        breaker = self._breaker
        failed, parked = breaker.close()
        self._metrics.app_available(True)
        log.warning("app answers again after %.1fs: queue=%s; receiving resumed, %d held "
                    "messages go to it now", self._clock.monotonic_s() - breaker.opened_s,
                    self._queue_name, len(failed) + len(parked))
        for job in failed + parked:
            self._owner.dispatch(job)
