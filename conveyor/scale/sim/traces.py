"""Workload traces: arrival rate over time, processing-time distribution, worker start-up
delay and the latency goal. Three are bundled; any JSON file of the same shape works:

    {"name": "mine", "duration_s": 3600, "rate": [[0, 2.0], [600, 10.0], [900, 2.0]],
     "processing_mean_s": 1.0, "processing_cv": 0.5, "startup_s": 20,
     "concurrency": 1, "latency_goal_s": 60, "description": "..."}

`rate` is a step function: [t_s, messages per second] holds until the next point.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HOUR_S = 3600.0


@dataclass(frozen=True, slots=True)
class Trace:
    """One workload to replay."""

    name: str
    duration_s: float
    rate: tuple[tuple[float, float], ...]
    processing_mean_s: float
    processing_cv: float
    startup_s: float
    latency_goal_s: float
    concurrency: int = 1  # jobs one worker runs at once
    description: str = ""

    def rate_at(self, t_s: float) -> float:
        """Messages per second at `t_s`."""
        times = [t for t, _ in self.rate]
        i = bisect.bisect_right(times, t_s) - 1
        return self.rate[i][1] if i >= 0 else 0.0

    @property
    def peak_rate(self) -> float:
        """The highest arrival rate in the trace."""
        return max(r for _, r in self.rate)

    def to_json(self) -> dict[str, Any]:
        """The JSON form `load_trace` reads."""
        data = asdict(self)
        data["rate"] = [list(point) for point in self.rate]
        return data


def load_trace(path: Path) -> Trace:
    """Read a JSON trace file; a ValueError says what is wrong with it."""
    try:
        data = json.loads(path.read_text())
        data["rate"] = tuple((float(t), float(r)) for t, r in data["rate"])
        trace = Trace(**data)
    except (OSError, KeyError, TypeError, ValueError) as exc:
        msg = f"{path} is not a trace ({type(exc).__name__}: {exc}); --dump-traces shows the form"
        raise ValueError(msg) from None
    if not trace.rate or min(r for _, r in trace.rate) < 0:
        raise ValueError(f"{path}: rate must list [seconds, messages per second] pairs, >= 0")
    positive = ("duration_s", "processing_mean_s", "latency_goal_s", "concurrency")
    if any(getattr(trace, name) <= 0 for name in positive) or trace.processing_cv < 0:
        raise ValueError(f"{path}: {', '.join(positive)} must be above 0, processing_cv >= 0")
    return trace


def steady() -> Trace:
    """Two hours at a constant 5 msg/s of 2 s jobs (10 workers' worth of work)."""
    return Trace("steady", 2 * HOUR_S, ((0.0, 5.0),), processing_mean_s=2.0,
                 processing_cv=0.5, startup_s=30.0, latency_goal_s=60.0,
                 description="constant 5 msg/s, 2 s jobs (cv 0.5), 30 s start-up")


def business_hours() -> Trace:
    """Seed 004's billing system: work arrives only in business hours (9:00-17:00) and even
    then only a quarter of the time, in four half-hour batches; nothing for 22 h a day."""
    rate: list[tuple[float, float]] = [(0.0, 0.0)]
    for start_h, msgs_per_s in ((9.5, 6.0), (11.5, 4.0), (14.0, 8.0), (16.0, 5.0)):
        rate += [(start_h * HOUR_S, msgs_per_s), (start_h * HOUR_S + 1800.0, 0.0)]
    return Trace("business-hours", 24 * HOUR_S, tuple(rate), processing_mean_s=3.0,
                 processing_cv=0.7, startup_s=60.0, latency_goal_s=120.0,
                 description="24 h; four 30-min batches at 4-8 msg/s in business hours, "
                             "idle the other 22 h; 3 s jobs (cv 0.7), 60 s start-up")


def bursts() -> Trace:
    """A low trickle with sudden two-minute bursts at 15× the base rate."""
    rate: list[tuple[float, float]] = [(0.0, 1.0)]
    for start_s in (900.0, 2400.0, 3000.0, 5400.0, 6000.0, 6300.0):
        rate += [(start_s, 15.0), (start_s + 120.0, 1.0)]
    return Trace("bursts", 2 * HOUR_S, tuple(rate), processing_mean_s=1.0, processing_cv=0.5,
                 startup_s=10.0, latency_goal_s=60.0,
                 description="1 msg/s with six 2-min bursts of 15 msg/s; 1 s jobs (cv 0.5), "
                             "10 s start-up")


BUILTIN = {trace.name: trace for trace in (steady(), business_hours(), bursts())}


def resolve(name_or_path: str) -> Trace:
    """A bundled trace by name, or a JSON file by path."""
    if name_or_path in BUILTIN:
        return BUILTIN[name_or_path]
    path = Path(name_or_path)
    if not path.exists():
        msg = f"no trace {name_or_path!r}: use one of {', '.join(BUILTIN)} or a JSON file"
        raise ValueError(msg)
    return load_trace(path)
