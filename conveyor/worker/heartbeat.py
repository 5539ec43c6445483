"""Heartbeats: the visibility of what the worker holds, kept from running out.

Every tick, each message whose visibility ends within half of VisibilityTimeout is
- extended by VisibilityTimeout while its request is open (seed 003), up to
  ConnectTimeout + InactivityTimeout (`request_limit_s`);
- extended when it is only buffered (every connection busy) or waits here (FIFO: behind its
  group's first, or for a retry here; behind its group's cap, GroupConcurrency; or held
  while the app is unavailable). Released, it
  would be received again, and each receive counts towards maxReceiveCount: a message
  would lose an attempt at the app to the worker's own pace (issue 34; settlement.py);
  on a FIFO queue SQS would also hand its group out again behind this worker's back.

A request open past ConnectTimeout + InactivityTimeout is not extended: it is over, and
the message reappears when its visibility ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from conveyor.clock import Clock
from conveyor.worker.job import Job
from conveyor.worker.metrics import WorkerMetrics

# The daemon's logger: its lines read (and are filtered) as they did when this was daemon.py.
log = logging.getLogger("conveyor.worker.daemon")

# ChangeMessageVisibility through the daemon's batcher: (message id, (receipt handle,
# seconds)) → a future of the server's refusal code, None when it was changed.
SubmitChange = Callable[[str, tuple[str, int]], asyncio.Future[str | None]]


class Heartbeat:
    """One worker's heartbeats: `run()` as a task until cancelled."""

    def __init__(self, jobs: Mapping[str, Job], change: SubmitChange, *,
                 visibility_timeout_s: int, request_limit_s: float, metrics: WorkerMetrics,
                 queue_name: str, clock: Clock) -> None:
        self._jobs = jobs  # every message the worker holds, by receipt handle (its owner's)
        self._change = change
        self._visibility_timeout_s = visibility_timeout_s
        self._request_limit_s = request_limit_s
        self._metrics = metrics
        self._queue_name = queue_name
        self._clock = clock

    async def run(self) -> None:
        vt = self._visibility_timeout_s
        if vt == 0:
            return  # the operator asked for messages never to be hidden
        tick_s = min(1.0, max(0.05, vt / 4))
        while True:
            await asyncio.sleep(tick_s)
            self.beat(self._clock.monotonic_s())

    def beat(self, now: float) -> None:
        """One tick at monotonic time `now`: extend what is due."""
        margin_s = self._visibility_timeout_s / 2
        for job in list(self._jobs.values()):
            if job.extending or job.visible_until_s - now > margin_s:
                continue
            if job.started_s is None or now - job.started_s < self._request_limit_s:
                self._extend(job, now)

    def _extend(self, job: Job, now: float) -> None:
        job.extending = True
        seconds = self._visibility_timeout_s
        future = self._change(job.message.message_id, (job.message.receipt_handle, seconds))

        def done(f: asyncio.Future[str | None]) -> None:
            refusal = f.result()
            if refusal is None:
                job.extending = False
                job.visible_until_s = now + seconds
                self._metrics.extended(1)
            elif job.message.receipt_handle in self._jobs:
                # left `extending` so it is not retried every tick
                log.warning("could not extend visibility, the message may be delivered again "
                            "while this worker holds it: queue=%s message=%s code=%s",
                            self._queue_name, job.message.message_id, refusal)

        future.add_done_callback(done)
