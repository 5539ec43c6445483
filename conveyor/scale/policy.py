"""Scaling policies: pure arithmetic, no I/O. Time comes in with each observation.

Three policies answer one question — how many workers now? — from one `Observation`:

- `BacklogPolicy`: target tracking on backlog per instance (seed 001). The metric is
  visible messages ÷ in-service workers; the target is given, or follows from an acceptable
  latency ÷ the average processing time the workers report; desired = ceil(in-service ×
  metric ÷ target), within min/max, with a tolerance band, a scale-out cooldown, a scale-in
  cooldown and a scale-in stabilization window.
- `CpuStepPolicy`: Elastic Beanstalk's default kind of trigger: a utilization average over a
  period, breached for a duration, moves the fleet one step; then a cooldown.
- `StaticPolicy`: a fixed fleet.

Each `decide()` assumes its answer is carried out (the caller retries what protection
held back on the next round), so cooldowns count from the decision.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

# Float noise must not turn 15.000000001 into 16 workers.
_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class Observation:
    """What the scaler saw at `now_s`: the queue's counts and the fleet's state."""

    now_s: float
    visible: int
    in_flight: int = 0  # received, not yet deleted (ApproximateNumberOfMessagesNotVisible)
    delayed: int = 0  # ApproximateNumberOfMessagesDelayed
    in_service: int = 0  # workers running and receiving
    pending: int = 0  # launched, not in service yet (starting up)
    busy: int = 0  # in-service workers with a job open (protected from scale-in)
    processing_s: float | None = None  # average processing time the workers report
    utilization: float | None = None  # 0..1 busy (CPU) share of the in-service workers

    @property
    def current(self) -> int:
        """Workers that count as the fleet: in service plus starting."""
        return self.in_service + self.pending


@dataclass(frozen=True, slots=True)
class Decision:
    """A policy's answer with every input it used, ready to log."""

    policy: str
    now_s: float
    current: int
    desired: int
    reason: str
    backlog: int
    metric: float
    target: float
    observation: Observation

    @property
    def direction(self) -> str:
        """`out`, `in` or `hold`."""
        if self.desired > self.current:
            return "out"
        return "in" if self.desired < self.current else "hold"

    def describe(self) -> str:
        """One log line's worth: depth, in-service, metric, target, desired, reason."""
        obs = self.observation
        return (f"policy={self.policy} depth={obs.visible} in_flight={obs.in_flight} "
                f"delayed={obs.delayed} backlog={self.backlog} in_service={obs.in_service} "
                f"pending={obs.pending} busy={obs.busy} metric={self.metric:.2f} "
                f"target={self.target:.2f} current={self.current} desired={self.desired} "
                f"reason={self.reason}")


class Policy(Protocol):
    """Anything that turns an observation into a decision."""

    name: str

    def decide(self, obs: Observation) -> Decision:
        """How many workers now, and why."""
        ...


def ceil_clean(value: float) -> int:
    """ceil() that ignores float noise just above a whole number."""
    return math.ceil(value - _EPSILON)


def clamp(value: int, low: int, high: int) -> int:
    """`value` within [low, high]."""
    return max(low, min(high, value))


@dataclass(frozen=True, slots=True)
class BacklogSettings:
    """Target tracking on backlog per instance. Give `target`, or `latency_s` (then the
    target is latency_s × concurrency ÷ the reported processing time)."""

    min_workers: int = 0
    max_workers: int = 10
    target: float | None = None
    latency_s: float | None = None
    concurrency: int = 1  # jobs one worker runs at once (its HttpConnections)
    default_processing_s: float = 1.0  # until a worker has reported a processing time
    tolerance: float = 0.1  # |metric ÷ target − 1| within this: no change
    scale_out_cooldown_s: float = 0.0
    scale_in_cooldown_s: float = 60.0
    scale_in_stabilization_s: float = 120.0  # scale in to the highest desire in this window
    count_in_flight: bool = False  # KEDA's scaleOnInFlight
    count_delayed: bool = False  # KEDA's scaleOnDelayed

    def __post_init__(self) -> None:
        if self.target is None and self.latency_s is None:
            msg = "give a target backlog per instance or an acceptable latency"
            raise ValueError(msg)
        if not 0 <= self.min_workers <= self.max_workers:
            msg = f"need 0 <= min ({self.min_workers}) <= max ({self.max_workers})"
            raise ValueError(msg)
        if self.target is not None and self.target <= 0:
            msg = f"target must be positive, got {self.target}"
            raise ValueError(msg)

    def target_for(self, processing_s: float | None) -> float:
        """The backlog one worker may hold: given, or acceptable latency ÷ time per message."""
        if self.target is not None:
            return self.target
        assert self.latency_s is not None
        per_message_s = (processing_s or self.default_processing_s) / self.concurrency
        return max(1.0, self.latency_s / per_message_s)


@dataclass(slots=True)
class BacklogPolicy:
    """Target tracking on backlog per instance (see the module docstring)."""

    settings: BacklogSettings
    name: str = "backlog"
    _last_out_s: float = -math.inf
    _last_action_s: float = -math.inf
    _recent: deque[tuple[float, int]] = field(default_factory=deque)

    def decide(self, obs: Observation) -> Decision:
        """Desired = ceil(in-service × metric ÷ target) within the bounds and the windows."""
        s = self.settings
        backlog = obs.visible + (obs.in_flight if s.count_in_flight else 0) + (
            obs.delayed if s.count_delayed else 0)
        target = s.target_for(obs.processing_s)
        current = obs.current
        if obs.in_service > 0:
            metric = backlog / obs.in_service
            raw = ceil_clean(obs.in_service * metric / target)
        else:  # nobody in service: the metric is the whole backlog
            metric = float(backlog)
            raw = ceil_clean(backlog / target)
        desired, reason = self._bounded(raw, obs, metric / target)
        self._remember(obs.now_s, desired)
        desired, reason = self._windows(obs, current, desired, reason)
        if desired > current:
            self._last_out_s = obs.now_s
        if desired != current:
            self._last_action_s = obs.now_s
        return Decision(self.name, obs.now_s, current, desired, reason, backlog, metric,
                        target, obs)

    def _bounded(self, raw: int, obs: Observation, ratio: float) -> tuple[int, str]:
        s = self.settings
        current = obs.current
        if obs.in_service > 0 and current > 0 and abs(ratio - 1) <= s.tolerance:
            return clamp(current, s.min_workers, s.max_workers), "within tolerance"
        desired = clamp(raw, s.min_workers, s.max_workers)
        if desired != raw:
            return desired, "at max" if raw > s.max_workers else "at min"
        return desired, "backlog above target" if ratio > 1 else "backlog below target"

    def _remember(self, now_s: float, desired: int) -> None:
        self._recent.append((now_s, desired))
        horizon = now_s - self.settings.scale_in_stabilization_s
        while self._recent and self._recent[0][0] < horizon:
            self._recent.popleft()

    def _windows(self, obs: Observation, current: int, desired: int,
                 reason: str) -> tuple[int, str]:
        s = self.settings
        now = obs.now_s
        if desired > current:
            if current == 0:
                return desired, "scale out from zero"
            if now - self._last_out_s < s.scale_out_cooldown_s:
                return current, "scale-out cooldown"
            return desired, reason
        if desired < current:
            stable = max(d for _, d in self._recent)
            if stable >= current:
                return current, "scale-in stabilization"
            if now - self._last_action_s < s.scale_in_cooldown_s:
                return current, "scale-in cooldown"
            return stable, reason
        return desired, reason


@dataclass(frozen=True, slots=True)
class CpuSettings:
    """A step policy on utilization, shaped like Elastic Beanstalk's default trigger
    (period and breach duration 5 minutes, ±1 instance, Auto Scaling's 360 s cooldown)."""

    min_workers: int = 1
    max_workers: int = 10
    upper: float = 0.7
    lower: float = 0.3
    period_s: float = 300.0
    breach_s: float = 300.0
    upper_increment: int = 1
    lower_increment: int = -1
    cooldown_s: float = 360.0


@dataclass(slots=True)
class CpuStepPolicy:
    """Step up when average utilization stays above `upper`, down when below `lower`."""

    settings: CpuSettings
    name: str = "cpu"
    _samples: deque[tuple[float, float]] = field(default_factory=deque)
    _above_since: float | None = None
    _below_since: float | None = None
    _last_action_s: float = -math.inf

    def decide(self, obs: Observation) -> Decision:
        """Move one step once a threshold has been breached for the breach duration."""
        s = self.settings
        current = obs.current
        average = self._average(obs)
        desired, reason = current, "within thresholds"
        if current < s.min_workers or current > s.max_workers:
            desired = clamp(current, s.min_workers, s.max_workers)
            reason = "outside min/max"
        elif obs.in_service and average > s.upper:
            desired, reason = self._breach(obs.now_s, current, +1)
        elif obs.in_service and average < s.lower:
            desired, reason = self._breach(obs.now_s, current, -1)
        else:
            self._above_since = self._below_since = None
        if desired != current:
            self._last_action_s = obs.now_s
        return Decision(self.name, obs.now_s, current, desired, reason, obs.visible, average,
                        s.upper, obs)

    def _average(self, obs: Observation) -> float:
        self._samples.append((obs.now_s, obs.utilization or 0.0))
        while self._samples[0][0] < obs.now_s - self.settings.period_s:
            self._samples.popleft()
        return sum(u for _, u in self._samples) / len(self._samples)

    def _breach(self, now: float, current: int, sign: int) -> tuple[int, str]:
        s = self.settings
        if sign > 0:
            self._below_since = None
            self._above_since = now if self._above_since is None else self._above_since
            since, step, word = self._above_since, s.upper_increment, "above upper"
        else:
            self._above_since = None
            self._below_since = now if self._below_since is None else self._below_since
            since, step, word = self._below_since, s.lower_increment, "below lower"
        if now - since < s.breach_s:
            return current, f"{word}, breach pending"
        if now - self._last_action_s < s.cooldown_s:
            return current, "cooldown"
        self._above_since = self._below_since = None
        return clamp(current + step, s.min_workers, s.max_workers), f"{word} threshold"


@dataclass(slots=True)
class StaticPolicy:
    """A fixed fleet of `workers`."""

    workers: int
    name: str = "static"

    def decide(self, obs: Observation) -> Decision:
        """Always `workers`."""
        metric = obs.visible / obs.in_service if obs.in_service else float(obs.visible)
        return Decision(self.name, obs.now_s, obs.current, self.workers, "static fleet",
                        obs.visible, metric, 0.0, obs)


def parse_bounds(text: str) -> tuple[int, int]:
    """`2:10` → (2, 10); `0:4` allowed; raises ValueError with a clear message."""
    try:
        low_text, high_text = text.split(":")
        low, high = int(low_text), int(high_text)
    except ValueError:
        msg = f"expected MIN:MAX such as 0:4, got {text!r}"
        raise ValueError(msg) from None
    if not 0 <= low <= high or high == 0:
        msg = f"need 0 <= MIN <= MAX and MAX >= 1, got {text!r}"
        raise ValueError(msg)
    return low, high
