"""The daemon's side of the circuit breaker (outage.py), driven directly: what it holds,
releases and probes while the app is unavailable, and how it resumes.

The rules are the worker's own (issues 22 and 34; breaker.py, outage.py and settlement.py
say them): a refused connection or an unexplained SUSPECT answer opens the breaker; what
the worker holds stays held, however long (nothing is released: a release costs a
receive); a look that finds the app answering closes it and sends what was held, in order.
The real worker against a real app is tested in test_breaker.py; here the daemon is a
recorder of what the outage asks of it, time a ManualClock, and each pause between looks a
step the test takes.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

from conveyor.client import Message
from conveyor.clock import ManualClock
from conveyor.worker.breaker import PROBE_FIRST_S
from conveyor.worker.delivery import Outcome
from conveyor.worker.job import Job, Waiting
from conveyor.worker.metrics import WorkerMetrics
from conveyor.worker.outage import AppOutage
from tests.worker.conftest import run

OK = Outcome(True, "200", 0.01)
REFUSED = Outcome(False, "connect-failed", 0.0)
UNAVAILABLE = Outcome(False, "503", 0.01)


class Daemon:
    """Records what the outage asks of the daemon, and keeps the daemon's books as it does:
    a message handed on (released, settled, retried) is no longer held."""

    def __init__(self, clock: ManualClock,
                 healthy: Callable[[], Awaitable[bool]] | None = None) -> None:
        self.clock = clock
        self.jobs: dict[str, Job] = {}
        self.calls: list[tuple[str, str]] = []
        self.answers: list[Outcome] = []  # what the app answers the next probes
        self.waiting = Waiting(100)
        self.metrics = WorkerMetrics("jobs")
        self.pauses: asyncio.Queue[float] = asyncio.Queue()  # asked for by the probe loop
        self._go: asyncio.Queue[None] = asyncio.Queue()
        self.outage = AppOutage(
            self, post=self.post, metrics=self.metrics,
            queue_name="jobs", stopping=asyncio.Event(), pause=self.pause,
            receive_one=self.receive_one, healthy=healthy, rng=random.Random(1),
            clock=clock)

    def job(self, name: str, *, group: str | None = None, posted: bool = False) -> Job:
        """A message the worker received (and, when `posted`, has at the app)."""
        now = self.clock.monotonic_s()
        job = Job(Message(name, f"handle-{name}", name), now, now + 30, accepted_s=now,
                  group=group, started_s=now if posted else None)
        self.jobs[job.message.receipt_handle] = job
        return job

    async def look(self) -> float:
        """Let the probe loop take its next look; returns the pause it asked for first."""
        pause_s = await self.pauses.get()
        self.clock.advance(pause_s)
        self._go.put_nowait(None)
        return pause_s

    async def pause(self, seconds: float) -> None:
        self.pauses.put_nowait(seconds)
        await self._go.get()

    async def admit(self, job: Job) -> bool:
        return True

    async def post(self, job: Job) -> Outcome:
        self.calls.append(("post", job.message.message_id))
        job.started_s = self.clock.monotonic_s()
        return self.answers.pop(0)

    def attempted(self, job: Job, outcome: Outcome) -> None:
        pass  # the owner hears of every POST's outcome; these tests look at what follows

    async def settle(self, job: Job, outcome: Outcome) -> None:
        self.calls.append(("settle", job.message.message_id))
        if not self.outage.hold_if_unavailable(job, outcome):
            self._finish(job)

    async def retry(self, job: Job, outcome: Outcome, *, counted: bool = False) -> None:
        self.calls.append(("retry counted" if counted else "retry", job.message.message_id))
        self._finish(job)

    def release(self, job: Job) -> None:
        self.calls.append(("release", job.message.message_id))
        job.released = True
        self._finish(job)

    def dispatch(self, job: Job) -> None:
        self.calls.append(("dispatch", job.message.message_id))
        self.waiting.discard(job)

    async def receive_one(self) -> None:
        self.calls.append(("receive one", ""))

    def _finish(self, job: Job) -> None:
        self.jobs.pop(job.message.receipt_handle, None)
        self.outage.forget(job)
        self.waiting.discard(job)

    def metric(self, name: str, **labels: str) -> float:
        return self.metrics.value(name, **labels)


def scenario(test: Callable[[Daemon], Awaitable[Any]], **options: Any) -> None:
    async def body() -> None:
        daemon = Daemon(ManualClock(), **options)
        try:
            await test(daemon)
        finally:
            await daemon.outage.stop()
    run(body(), timeout_s=10)


def test_a_refused_connection_holds_the_message_and_a_probe_that_answers_resumes() -> None:
    async def test(daemon: Daemon) -> None:
        outage = daemon.outage
        first = daemon.job("first", posted=True)
        assert outage.hold_if_unavailable(first, REFUSED)
        assert outage.is_open and first.waiting and first.started_s is None
        assert daemon.metric("conveyor_worker_app_available") == 0
        assert daemon.metric("conveyor_worker_app_outages_total") == 1
        later = daemon.job("later")
        outage.park(later)  # received after the breaker opened: not tried, held
        assert later.waiting and daemon.calls == []

        daemon.answers = [REFUSED, OK]
        assert await daemon.look() <= PROBE_FIRST_S  # the oldest failure is the probe
        await daemon.look()
        await asyncio.wait_for(outage.wait_closed(), 5)
        assert daemon.calls == [("post", "first"), ("post", "first"),
                                ("dispatch", "later"), ("settle", "first")]
        assert not outage.is_open and not later.waiting
        assert daemon.metric("conveyor_worker_app_available") == 1
        assert daemon.metric("conveyor_worker_messages_failed_total",
                             status="connect-failed") == 2  # both refusals

    scenario(test)


def test_however_long_the_app_is_down_nothing_is_released() -> None:
    """Issue 34: a message released while the app is down is received again (by a poll of
    this worker still parked on the server, or another's), and each receive counts towards
    maxReceiveCount: so nothing is given back, however long the outage, and whatever a
    parked poll still brings is held too. (Before, all but MAX_PROBES were released 3 s
    into the outage, and the parked polls took them back at once, again and again.)"""
    async def test(daemon: Daemon) -> None:
        outage = daemon.outage
        failed = daemon.job("failed", group="g", posted=True)
        behind = daemon.job("behind", group="g")  # waits behind its group's first
        daemon.waiting.add(behind)
        at_app = daemon.job("at-app", posted=True)  # its request is still open
        parked = [daemon.job(f"parked-{i}") for i in range(3)]
        assert outage.hold_if_unavailable(failed, REFUSED)
        for job in parked:
            outage.park(job)
        daemon.clock.advance(3600)  # an hour: the heartbeats keep them invisible meanwhile
        late = daemon.job("late")  # what a poll parked on the server still brings
        outage.park(late)
        assert outage.hold_if_unavailable(at_app, REFUSED)  # likewise a failure now
        assert daemon.calls == []
        assert sorted(daemon.jobs) == sorted(f"handle-{name}" for name in [
            "failed", "behind", "at-app", "late", *(f"parked-{i}" for i in range(3))])
        assert all(job.waiting for job in daemon.jobs.values())
        assert daemon.metric("conveyor_worker_messages_released_total") == 0

    scenario(test)


def test_a_503_is_the_messages_own_once_the_app_answers_a_request_open_meanwhile() -> None:
    async def test(daemon: Daemon) -> None:
        outage = daemon.outage
        poison = daemon.job("poison", posted=True)
        other = daemon.job("other", posted=True)
        daemon.clock.advance(0.1)
        assert outage.hold_if_unavailable(poison, UNAVAILABLE)  # the app never answered yet
        daemon.clock.advance(0.1)
        assert not outage.hold_if_unavailable(other, OK)  # the app answers after it
        await daemon.look()
        await asyncio.wait_for(outage.wait_closed(), 5)
        # Not POSTed again as a probe: retried as any failure (already counted) is.
        assert daemon.calls == [("retry counted", "poison")]
        assert daemon.metric("conveyor_worker_messages_failed_total", status="503") == 1

    scenario(test)


def test_with_a_health_check_the_probe_looks_there_and_posts_nothing() -> None:
    health = [False, True]

    async def healthy() -> bool:
        return health.pop(0)

    async def test(daemon: Daemon) -> None:
        outage = daemon.outage
        for name in ("failed", "failed too"):
            assert outage.hold_if_unavailable(daemon.job(name, posted=True), REFUSED)
        outage.park(daemon.job("untried"))
        await daemon.look()
        await daemon.look()
        await asyncio.wait_for(outage.wait_closed(), 5)
        assert health == []  # looked twice
        # No POST: what was held goes to the app, the failed first, each in its order.
        assert daemon.calls == [("dispatch", "failed"), ("dispatch", "failed too"),
                                ("dispatch", "untried")]

    scenario(test, healthy=healthy)


def test_while_closed_a_failure_is_the_messages_own() -> None:
    async def test(daemon: Daemon) -> None:
        outage = daemon.outage
        job = daemon.job("job", posted=True)
        assert not outage.hold_if_unavailable(job, OK)
        failing = daemon.job("failing", posted=True)
        for outcome in (Outcome(False, "500", 0.0), Outcome(False, "inactivity-timeout", 0.0)):
            assert not outage.hold_if_unavailable(failing, outcome)
        assert not outage.is_open and daemon.pauses.empty()

    scenario(test)
