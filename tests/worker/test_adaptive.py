"""The adaptive concurrency rule (conveyor/worker/adaptive.py) against a simulated app on a
ManualClock: time is moved from one answer to the next, never slept.

The simulated app is a textbook queue: `capacity` requests served at once, each for
`service_s`, the rest waiting in line (FIFO), or, with `shed=True`, answered 503 at once
(what an app behind a concurrency-limiting proxy does). What the rule should find is the
app's capacity (Little's law: more open requests than that only lengthen the line).
"""

from __future__ import annotations

import heapq
import itertools
import random
from dataclasses import dataclass, field

from conveyor.clock import ManualClock
from conveyor.worker.adaptive import START_LIMIT, ConcurrencyLimit


@dataclass
class SimulatedApp:
    """An app on a ManualClock, fed by a worker with an endless backlog."""

    clock: ManualClock
    limit: ConcurrencyLimit
    capacity: int
    service_s: float = 0.05
    shed: bool = False
    jitter: float = 0.0  # each job takes service_s × (1 ± jitter)
    supply: int | None = None  # at most this many requests at once (a thin backlog)
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    latencies: list[float] = field(default_factory=list)
    _events: list[tuple[float, int, float, str]] = field(default_factory=list)
    _servers: list[float] = field(default_factory=list)
    _seq: itertools.count = field(default_factory=itertools.count)

    def now(self) -> float:
        return self.clock.monotonic_s()

    def run(self, answers: int) -> None:
        """Keep `limit.current` requests open; process `answers` answers."""
        for _ in range(answers):
            self._fill()
            done_s, _, started_s, status = heapq.heappop(self._events)
            # ManualClock counts whole milliseconds: move it by the rounded step exactly
            self.clock.advance((round((done_s - self.now()) * 1000) + 0.5) / 1000)
            self.limit.finish(started_s, status)
            self.latencies.append(done_s - started_s)

    def _fill(self) -> None:
        open_now = self.limit.in_flight
        wanted = self.limit.current if self.supply is None else min(self.supply,
                                                                     self.limit.current)
        for _ in range(wanted - open_now):
            started = self.limit.start()
            self._admit(started)

    def _admit(self, started_s: float) -> None:
        in_service = [free for free in self._servers if free > started_s]
        if self.shed and len(in_service) >= self.capacity:
            self._answer(started_s + 0.001, started_s, "503")
            return
        self._servers = sorted(in_service)
        begin = started_s if len(self._servers) < self.capacity else self._servers[
            len(self._servers) - self.capacity]
        took = round(self.service_s * (1 + self.jitter * (2 * self.rng.random() - 1)), 3)
        self._servers.append(begin + took)
        self._answer(begin + took, started_s, "200")

    def _answer(self, done_s: float, started_s: float, status: str) -> None:
        heapq.heappush(self._events, (done_s, next(self._seq), started_s, status))


def simulate(capacity: int, *, max_limit: int = 50, **kwargs) -> SimulatedApp:
    clock = ManualClock()
    return SimulatedApp(clock, ConcurrencyLimit(clock, max_limit), capacity, **kwargs)


def test_grows_to_http_connections_while_latency_stays_flat():
    app = simulate(capacity=1000)
    assert app.limit.current == START_LIMIT
    app.run(3000)
    assert app.limit.current == 50


def test_settles_just_above_a_queueing_apps_capacity():
    """Capacity 8, queueing beyond: the limit keeps a short line (Vegas' alpha..beta),
    nowhere near the 50 that a fixed HttpConnections would hold open."""
    app = simulate(capacity=8, jitter=0.3)
    app.run(4000)
    settled = []
    for _ in range(20):
        app.run(200)
        settled.append(int(app.limit.limit))  # not halved by a probe
    assert min(settled) >= 8 and max(settled) <= 20, settled
    recent = app.latencies[-2000:]
    assert sum(recent) / len(recent) < 3 * app.service_s  # 50 open would be 6.25×


def _limits(app: SimulatedApp, rounds: int, answers: int = 100) -> list[int]:
    """The limit after each of `rounds` runs of `answers` answers."""
    seen = []
    for _ in range(rounds):
        app.run(answers)
        seen.append(int(app.limit.limit))  # not halved by a probe
    return seen


def test_503s_bring_the_limit_down_and_it_comes_back():
    """An app that answers 503 beyond its capacity: the limit saws just under and over
    it (AIMD), follows it down when it shrinks from 40 to 4, and back up after."""
    app = simulate(capacity=40, shed=True)
    app.run(3000)
    assert min(_limits(app, 20)) >= 25
    app.capacity = 4
    app.run(1000)
    low = _limits(app, 20)
    assert max(low) <= 10 and sum(low) / len(low) <= 6, low
    app.capacity = 40
    app.run(3000)
    assert min(_limits(app, 20)) >= 25


def test_a_slower_app_is_measured_anew_not_taken_for_a_congested_one():
    """The probe (half the limit for one window) refreshes the unloaded latency: after
    a release that makes each job four times slower's time the limit still finds capacity 8."""
    app = simulate(capacity=8)
    app.run(3000)
    app.service_s *= 4
    app.run(6000)
    assert 8 <= app.limit.current <= 20


def test_no_growth_while_the_worker_has_too_little_to_send():
    app = simulate(capacity=1000, supply=3)
    app.run(2000)
    assert app.limit.current == START_LIMIT


def test_fixed_limit_stays_at_http_connections():
    clock = ManualClock()
    limit = ConcurrencyLimit(clock, 50, adaptive=False)
    app = SimulatedApp(clock, limit, capacity=4, shed=True)
    app.run(2000)
    assert limit.current == 50 and limit.cuts == 0


def test_an_unavailable_app_is_not_a_measurement():
    """Refused or dropped connections are the circuit breaker's (breaker.py), not load."""
    clock = ManualClock()
    limit = ConcurrencyLimit(clock, 50)
    for status in ("connect-failed", "no-answer", "connection-error") * 20:
        started = limit.start()
        clock.advance(0.01)
        limit.finish(started, status)
    assert limit.current == START_LIMIT and limit.cuts == 0


def test_one_cut_per_round_trip():
    """Requests sent before a cut cannot cut again (RFC 5681 §3.1: once per window)."""
    clock = ManualClock()
    limit = ConcurrencyLimit(clock, 50)
    starts = [limit.start() for _ in range(10)]
    clock.advance(0.1)
    for started in starts:
        limit.finish(started, "503")
    assert limit.cuts == 1 and limit.current == int(START_LIMIT * 0.7)
    started = limit.start()
    clock.advance(0.1)
    limit.finish(started, "429")
    assert limit.cuts == 2
