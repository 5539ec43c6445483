"""Heartbeats (heartbeat.py), driven directly, one beat at a time on a ManualClock.

Extending a message's visibility while its request is open is seed 003's heartbeat; the
extension is ChangeMessageVisibility with VisibilityTimeout, whose seconds "begin to count
from the time that you make the ChangeMessageVisibility call" (Amazon SQS API Reference,
ChangeMessageVisibility): so a message stays hidden until the beat's time plus
VisibilityTimeout. The real worker keeps held FIFO groups invisible end to end in
test_fifo.py, and lets a dead worker's messages reappear in test_crash.py.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from conveyor.client import Message
from conveyor.clock import ManualClock
from conveyor.worker.heartbeat import Heartbeat
from conveyor.worker.job import Job
from conveyor.worker.metrics import WorkerMetrics
from tests.worker.conftest import run

VISIBILITY_S = 30
REQUEST_LIMIT_S = 185.0  # ConnectTimeout 5 + InactivityTimeout 180


def test_a_beat_extends_what_is_at_the_app_waits_here_or_is_buffered(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    t0 = clock.monotonic_s()
    jobs: dict[str, Job] = {}

    def job(name: str, **fields: object) -> Job:
        made = Job(Message(name, f"handle-{name}", ""), t0, t0 + VISIBILITY_S, **fields)
        jobs[made.message.receipt_handle] = made
        return made

    at_app = job("at-app", started_s=t0)
    job("buffered")  # every connection busy: extended, not released (issue 34: a release
    # would cost it a receive, one attempt fewer at the app before maxReceiveCount)
    behind = job("behind", group="g", waiting=True)  # behind its FIFO group's first
    job("held", waiting=True)  # held while the app is unavailable
    job("hung", started_s=t0 - REQUEST_LIMIT_S)  # past InactivityTimeout: left to reappear
    fresh = job("fresh")
    fresh.visible_until_s = t0 + 2 * VISIBILITY_S
    changes: dict[str, tuple[tuple[str, int], asyncio.Future[str | None]]] = {}
    asked: list[str] = []
    released: list[str] = []
    metrics = WorkerMetrics("jobs")

    async def scenario() -> None:
        def change(message_id: str, entry: tuple[str, int]) -> asyncio.Future[str | None]:
            asked.append(message_id)
            changes[message_id] = entry, asyncio.get_running_loop().create_future()
            return changes[message_id][1]

        heartbeat = Heartbeat(jobs, change, visibility_timeout_s=VISIBILITY_S,
                              request_limit_s=REQUEST_LIMIT_S, metrics=metrics,
                              queue_name="jobs", clock=clock)
        clock.advance(VISIBILITY_S / 2 - 1)  # not yet within half the visibility of its end
        heartbeat.beat(clock.monotonic_s())
        assert (asked, released) == ([], [])
        clock.advance(2)
        now = clock.monotonic_s()
        heartbeat.beat(now)
        assert released == []
        assert {name: entry for name, (entry, _) in changes.items()} == {
            name: (f"handle-{name}", VISIBILITY_S)
            for name in ("at-app", "buffered", "behind", "held")}
        heartbeat.beat(now)  # an extension under way is not asked for again
        assert sorted(asked) == ["at-app", "behind", "buffered", "held"]
        changes["at-app"][1].set_result(None)
        changes["behind"][1].set_result("ReceiptHandleIsInvalid")
        await asyncio.sleep(0)  # the futures' callbacks run
        assert (at_app.extending, at_app.visible_until_s) == (False, now + VISIBILITY_S)
        assert behind.extending  # refused: not asked again every tick
        assert metrics.value("conveyor_worker_visibility_extensions_total") == 1

    with caplog.at_level(logging.WARNING, "conveyor.worker.daemon"):
        run(scenario(), timeout_s=10)
    assert [r.getMessage() for r in caplog.records] == [
        "could not extend visibility, the message may be delivered again while this worker "
        "holds it: queue=jobs message=behind code=ReceiptHandleIsInvalid"]
