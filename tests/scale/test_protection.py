"""Scale-in protection: busy workers are never chosen; starting, then idle ones go first."""

from __future__ import annotations

from conveyor.scale.protection import (
    WorkerView,
    average_processing_s,
    choose_to_stop,
    fleet_counts,
)


def fleet() -> list[WorkerView]:
    return [WorkerView("old-idle", "running", busy=False, started_s=1.0),
            WorkerView("busy-1", "running", busy=True, started_s=2.0),
            WorkerView("new-idle", "running", busy=False, started_s=3.0),
            WorkerView("busy-2", "running", busy=True, started_s=4.0),
            WorkerView("starting", "starting", started_s=5.0),
            WorkerView("draining", "stopping", started_s=0.5)]


def test_busy_workers_are_never_chosen_however_many_are_asked_for():
    for count in range(10):
        chosen = {w.worker_id for w in choose_to_stop(fleet(), count)}
        assert not chosen & {"busy-1", "busy-2", "draining"}
    assert len(choose_to_stop(fleet(), 10)) == 3


def test_starting_first_then_newest_idle():
    assert [w.worker_id for w in choose_to_stop(fleet(), 3)] == [
        "starting", "new-idle", "old-idle"]
    assert [w.worker_id for w in choose_to_stop(fleet(), 1)] == ["starting"]
    assert choose_to_stop(fleet(), 0) == []


def test_counts_and_weighted_processing_time():
    assert fleet_counts(fleet()) == (4, 1, 2)
    views = [WorkerView("a", "running", processing_avg_s=1.0, processed=3),
             WorkerView("b", "running", processing_avg_s=3.0, processed=1),
             WorkerView("c", "running", processing_avg_s=None, processed=0)]
    assert average_processing_s(views) == 1.5
    assert average_processing_s(views[2:]) is None
