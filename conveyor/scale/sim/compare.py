"""Run every policy on a trace with the settings `conveyor scale simulate` reports."""

from __future__ import annotations

import math
from dataclasses import dataclass

from conveyor.scale.policy import (
    BacklogPolicy,
    BacklogSettings,
    CpuSettings,
    CpuStepPolicy,
    Policy,
    StaticPolicy,
)
from conveyor.scale.sim.engine import SimResult, Simulation, arrivals
from conveyor.scale.sim.traces import Trace

# A fleet "sized for the peak" runs its busiest minute at 80 % utilization: the usual
# headroom, and what keeps its queue from growing without bound at the peak.
PEAK_UTILIZATION = 0.8
POLICIES = ("backlog", "cpu", "static")


@dataclass(frozen=True, slots=True)
class Tuning:
    """The knobs the comparison uses; the defaults are the ones BENCHMARKS.md reports."""

    latency_share: float = 0.5  # backlog policy: acceptable latency = goal × this
    interval_s: float = 10.0  # seconds between decisions
    scale_in_cooldown_s: float = 60.0
    scale_in_stabilization_s: float = 120.0
    tolerance: float = 0.1
    max_factor: float = 1.5  # max workers = static fleet × this


def static_size(trace: Trace) -> int:
    """Workers that handle the peak rate at PEAK_UTILIZATION."""
    return math.ceil(trace.peak_rate * trace.processing_mean_s
                     / (trace.concurrency * PEAK_UTILIZATION))


def warm_size(trace: Trace) -> int:
    """Workers that handle the trace's opening rate at PEAK_UTILIZATION: every policy
    starts from the fleet a running system would have (0 when the trace opens idle)."""
    return math.ceil(trace.rate_at(0.0) * trace.processing_mean_s
                     / (trace.concurrency * PEAK_UTILIZATION))


def make_policy(name: str, trace: Trace, tuning: Tuning) -> tuple[Policy, int]:
    """(policy, workers ready at t=0) for one of POLICIES."""
    peak = static_size(trace)
    high = max(1, math.ceil(peak * tuning.max_factor))
    warm = min(high, warm_size(trace))
    if name == "backlog":
        return BacklogPolicy(BacklogSettings(
            min_workers=0, max_workers=high, latency_s=trace.latency_goal_s * tuning.latency_share,
            concurrency=trace.concurrency, tolerance=tuning.tolerance,
            scale_in_cooldown_s=tuning.scale_in_cooldown_s,
            scale_in_stabilization_s=tuning.scale_in_stabilization_s)), warm
    if name == "cpu":
        return CpuStepPolicy(CpuSettings(min_workers=1, max_workers=high)), max(1, warm)
    if name == "static":
        return StaticPolicy(peak), peak
    msg = f"unknown policy {name!r}: one of {', '.join(POLICIES)}"
    raise ValueError(msg)


def compare(trace: Trace, seed: int, policies: tuple[str, ...] = POLICIES,
            tuning: Tuning | None = None) -> list[SimResult]:
    """Every policy on the same arrivals (same seed), one result each."""
    tuning = tuning or Tuning()
    messages = arrivals(trace, seed)
    results = []
    for name in policies:
        policy, initial = make_policy(name, trace, tuning)
        sim = Simulation(trace, policy, messages, interval_s=tuning.interval_s,
                         initial_workers=initial)
        results.append(sim.run())
    return results
