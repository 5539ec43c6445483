"""Scale-in protection (seed 001): which workers may stop, and in what order.

A worker busy with a job is never chosen. Workers still starting go first (they hold
nothing and cost the most to keep waiting), then idle workers, the newest first so the
warm, long-running ones stay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WorkerView:
    """One worker as the scaler sees it."""

    worker_id: str
    state: str  # starting | running | stopping
    busy: bool = False  # holds a message (open request or received, not yet posted)
    started_s: float = 0.0
    in_flight: int = 0
    processing_avg_s: float | None = None
    processed: int = 0

    @property
    def in_service(self) -> bool:
        """Running and receiving."""
        return self.state == "running"


def choose_to_stop(workers: Sequence[WorkerView], count: int) -> list[WorkerView]:
    """Up to `count` workers that may stop now: starting ones, then idle ones; never busy."""
    starting = [w for w in workers if w.state == "starting"]
    idle = [w for w in workers if w.state == "running" and not w.busy]
    order = sorted(starting, key=lambda w: -w.started_s) + sorted(idle, key=lambda w: -w.started_s)
    return order[:max(0, count)]


def fleet_counts(workers: Sequence[WorkerView]) -> tuple[int, int, int]:
    """(in service, pending, busy) of a fleet; stopping workers count as none of them."""
    in_service = sum(w.in_service for w in workers)
    pending = sum(w.state == "starting" for w in workers)
    busy = sum(w.in_service and w.busy for w in workers)
    return in_service, pending, busy


def average_processing_s(workers: Sequence[WorkerView]) -> float | None:
    """Processing time averaged over the workers, weighted by the jobs each has done."""
    weighted = [(w.processing_avg_s, w.processed) for w in workers
                if w.processing_avg_s is not None and w.processed > 0]
    total = sum(n for _, n in weighted)
    if not total:
        return None
    return sum(avg * n for avg, n in weighted) / total
