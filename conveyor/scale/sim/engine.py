"""Replay a trace against a policy: a queue, a fleet of workers with start-up delay and
`concurrency` slots each, and the same observe → decide → act loop as the real scaler.

Time advances in ticks (1 s); inside a tick, messages start in arrival order on the slot
that frees first, at exact times, so queue latency is not rounded to the tick. Every
`interval_s` the policy sees an `Observation` built like the real one: visible messages,
in-flight, in-service / starting / busy workers, the average processing time of jobs done
so far, and the busy share of the in-service slots since the last decision (the CPU
stand-in). Scale-in goes through the same `choose_to_stop` as the real actuators, so busy
workers are never stopped. Worker-seconds run from launch (start-up is paid for) to stop.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field

from conveyor.scale.policy import Observation, Policy
from conveyor.scale.protection import WorkerView, choose_to_stop
from conveyor.scale.sim.traces import Trace


@dataclass(frozen=True, slots=True)
class Arrival:
    """One message: when it arrives and how long its job will take."""

    at_s: float
    work_s: float


def arrivals(trace: Trace, seed: int) -> list[Arrival]:
    """The trace's messages: a Poisson process at the trace's rate, lognormal job times."""
    rng = random.Random(seed)
    sigma = math.sqrt(math.log(1 + trace.processing_cv ** 2))
    mu = math.log(trace.processing_mean_s) - sigma ** 2 / 2
    out: list[Arrival] = []
    t = 0.0
    while t < trace.duration_s:
        rate = trace.rate_at(t)
        end = min(trace.duration_s, _next_change(trace, t))
        if rate <= 0:
            t = end
            continue
        t += rng.expovariate(rate)
        if t < end:
            out.append(Arrival(t, rng.lognormvariate(mu, sigma)))
        else:
            t = end  # memoryless: start afresh at the new rate
    return out


def _next_change(trace: Trace, t_s: float) -> float:
    later = [t for t, _ in trace.rate if t > t_s]
    return min(later) if later else math.inf


@dataclass(slots=True)
class SimWorker:
    """A simulated worker: launch and ready times, and when each slot is next free."""

    worker_id: str
    launched_s: float
    ready_s: float
    slots: list[float]
    stopped_s: float | None = None

    def busy_at(self, now_s: float) -> bool:
        """A job is open at `now_s`."""
        return any(free > now_s for free in self.slots)


@dataclass(frozen=True, slots=True)
class Sample:
    """The state every decision interval, for the plots."""

    t_s: float
    fleet: int  # in service + starting
    in_service: int
    depth: int
    oldest_age_s: float


@dataclass(slots=True)
class SimResult:
    """What one policy did on one trace."""

    trace: str
    policy: str
    latencies_s: list[float]
    over_goal_s: float
    duration_s: float
    worker_seconds: float
    actions: int
    unfinished: int
    samples: list[Sample] = field(default_factory=list)

    def percentile(self, q: float) -> float:
        """Queue latency at quantile q (0..1), nearest rank."""
        if not self.latencies_s:
            return 0.0
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    @property
    def share_over_goal(self) -> float:
        """Share of the time the oldest waiting message was older than the goal."""
        return self.over_goal_s / self.duration_s


@dataclass(slots=True)
class Simulation:
    """One trace, one policy; `run()` once."""

    trace: Trace
    policy: Policy
    messages: list[Arrival]
    interval_s: float = 10.0
    tick_s: float = 1.0
    initial_workers: int = 0  # ready at t=0 (a static fleet is pre-warmed)
    _queue: deque[Arrival] = field(default_factory=deque)
    _workers: list[SimWorker] = field(default_factory=list)
    _latencies: list[float] = field(default_factory=list)
    _samples: list[Sample] = field(default_factory=list)
    _done_work_s: float = 0.0
    _done_jobs: int = 0
    _busy_slot_s: float = 0.0
    _slot_s: float = 0.0
    _actions: int = 0
    _over_goal_s: float = 0.0
    _ids: int = 0

    def run(self) -> SimResult:
        """Replay the whole trace."""
        self._launch(self.initial_workers, -self.trace.startup_s)
        pending = deque(self.messages)
        next_decision = 0.0
        t = 0.0
        while t < self.trace.duration_s:
            end = t + self.tick_s
            while pending and pending[0].at_s < end:
                self._queue.append(pending.popleft())
            self._serve(end)
            self._account(end)
            if end >= next_decision:
                self._decide(end)
                next_decision += self.interval_s
            t = end
        return self._result(t)

    # -- the queue and the workers ---------------------------------------------

    def _serve(self, end: float) -> None:
        """Start queued messages, in order, on the slot that frees first."""
        if not self._queue:
            return
        free: list[tuple[float, int, int]] = []
        for wi, worker in enumerate(self._workers):
            if worker.stopped_s is None and worker.ready_s < end:
                for si, at in enumerate(worker.slots):
                    start = max(at, worker.ready_s)
                    if start < end:
                        free.append((start, wi, si))
        heapq.heapify(free)
        while free and self._queue:
            at, wi, si = heapq.heappop(free)
            message = self._queue[0]
            start = max(at, message.at_s)
            if start >= end:
                break
            self._queue.popleft()
            self._latencies.append(start - message.at_s)
            self._done_work_s += message.work_s
            self._done_jobs += 1
            finish = start + message.work_s
            self._workers[wi].slots[si] = finish
            if finish < end:
                heapq.heappush(free, (finish, wi, si))

    def _account(self, now: float) -> None:
        """Busy share of the in-service slots, and time the oldest message is over goal."""
        for worker in self._live(now):
            if worker.ready_s <= now:
                self._slot_s += len(worker.slots) * self.tick_s
                self._busy_slot_s += sum(
                    min(self.tick_s, max(0.0, free - (now - self.tick_s)))
                    for free in worker.slots)
        if self._queue and now - self._queue[0].at_s > self.trace.latency_goal_s:
            self._over_goal_s += self.tick_s

    def _live(self, _now: float) -> list[SimWorker]:
        return [w for w in self._workers if w.stopped_s is None]

    def _launch(self, count: int, now: float) -> None:
        for _ in range(count):
            self._ids += 1
            self._workers.append(SimWorker(f"w{self._ids}", max(0.0, now),
                                           now + self.trace.startup_s,
                                           [0.0] * self.trace.concurrency))

    # -- the scaler --------------------------------------------------------------

    def _decide(self, now: float) -> None:
        live = self._live(now)
        views = [WorkerView(w.worker_id, "running" if w.ready_s <= now else "starting",
                            busy=w.busy_at(now), started_s=w.launched_s) for w in live]
        in_service = sum(v.state == "running" for v in views)
        obs = Observation(
            now_s=now, visible=len(self._queue),
            in_flight=sum(free > now for w in live for free in w.slots),
            in_service=in_service, pending=len(views) - in_service,
            busy=sum(v.busy and v.state == "running" for v in views),
            processing_s=self._done_work_s / self._done_jobs if self._done_jobs else None,
            utilization=self._busy_slot_s / self._slot_s if self._slot_s else None)
        self._busy_slot_s = self._slot_s = 0.0
        decision = self.policy.decide(obs)
        if decision.desired > obs.current:
            self._launch(decision.desired - obs.current, now)
            self._actions += 1
        elif decision.desired < obs.current:
            stop = {v.worker_id for v in choose_to_stop(views, obs.current - decision.desired)}
            for worker in live:
                if worker.worker_id in stop:
                    worker.stopped_s = now
            self._actions += bool(stop)
        oldest = now - self._queue[0].at_s if self._queue else 0.0
        self._samples.append(Sample(now, len(self._live(now)), in_service, len(self._queue),
                                    oldest))

    def _result(self, end: float) -> SimResult:
        worker_s = sum((w.stopped_s if w.stopped_s is not None else end) - w.launched_s
                       for w in self._workers)
        # Messages never started count with the wait they had when the trace ended.
        waiting = [end - m.at_s for m in self._queue]
        return SimResult(self.trace.name, self.policy.name, self._latencies + waiting,
                         self._over_goal_s, self.trace.duration_s, worker_s, self._actions,
                         len(self._queue), self._samples)
