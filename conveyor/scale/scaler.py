"""The control loop: observe the queue and the fleet, ask the policy, tell the actuator."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from conveyor.client import SQSClient, SQSError, SQSTransportError, queue_name_from_url
from conveyor.client.partitions import PartitionedQueue
from conveyor.clock import Clock
from conveyor.runtime.presence import Presence
from conveyor.scale.actuator import Actuator, ScaleResult
from conveyor.scale.metrics import ScaleMetrics
from conveyor.scale.observe import backlog_counts
from conveyor.scale.policy import Decision, Observation, Policy
from conveyor.scale.protection import WorkerView, average_processing_s, fleet_counts
from conveyor.scale.timeline import Timeline, decision_json

log = logging.getLogger(__name__)


class Scaler:
    """Every `interval_s`: GetQueueAttributes + the fleet's reports → policy → actuator."""

    def __init__(self, policy: Policy, sqs: SQSClient, queue_url: str, actuator: Actuator, *,
                 interval_s: float = 2.0, concurrency: int = 1, partitions: int = 0,
                 clock: Clock | None = None) -> None:
        self.policy = policy
        self.queue_url = queue_url
        self.queue_name = queue_name_from_url(queue_url)
        # A partitioned queue's backlog is its partitions' (client/partitions.py).
        self.queue_urls = (PartitionedQueue(queue_url, partitions).urls if partitions
                           else [queue_url])
        self.actuator = actuator
        self.interval_s = interval_s
        self.metrics = ScaleMetrics(self.queue_name)
        self.last: Decision | None = None
        self.last_result = ScaleResult()
        self.workers: list[WorkerView] = []
        self._sqs = sqs
        self._concurrency = concurrency
        self._clock = clock or Clock()
        self._processing_s: float | None = None  # kept while no worker reports (zero fleet)
        self._stopping = asyncio.Event()
        # The console's decision timeline.
        self.timeline = Timeline(sqs, self.queue_name, clock=self._clock)

    def stop(self) -> None:
        """End `run()` after the current step."""
        self._stopping.set()

    async def run(self) -> None:
        """Step until stopped; an unreachable queue server skips a step, it does not stop."""
        # The last decision, in the queue server's console (the workers announce themselves).
        presence = Presence(self._sqs, self.queue_name, lambda: {
            k: v for k, v in self.status().items() if k != "workers"},
            clock=self._clock, kind="scaler")
        presence.start()
        try:
            while not self._stopping.is_set():
                try:
                    await self.step()
                except (SQSTransportError, SQSError) as exc:
                    log.warning("scaler skipped a step: queue=%s cannot read the queue: %s",
                                self.queue_name, exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.interval_s)
        finally:
            await presence.stop()

    async def step(self) -> Decision:
        """One observe → decide → act round."""
        counts = await backlog_counts(self._sqs, self.queue_urls)
        self.workers = await self.actuator.refresh()
        obs = self._observation(counts.visible, counts.in_flight, counts.delayed)
        decision = self.policy.decide(obs)
        result = await self.actuator.scale_to(decision.desired, self.workers)
        changed = self._changed(decision, result)
        self._log(decision, result, changed)
        if changed:
            await self.timeline.record(decision_json(decision, result.protected))
        self.metrics.record(decision, result)
        self.last, self.last_result = decision, result
        return decision

    def _observation(self, visible: int, in_flight: int, delayed: int) -> Observation:
        in_service, pending, busy = fleet_counts(self.workers)
        reported = average_processing_s(self.workers)
        if reported is not None:
            self._processing_s = reported
        open_requests = sum(w.in_flight for w in self.workers if w.in_service)
        utilization = (min(1.0, open_requests / (in_service * self._concurrency))
                       if in_service else None)
        return Observation(self._clock.monotonic_s(), visible, in_flight, delayed, in_service,
                           pending, busy, self._processing_s, utilization)

    def _changed(self, decision: Decision, result: ScaleResult) -> bool:
        """An action or a change of mind, not the same hold as the step before."""
        previous = self.last
        return not (previous is not None and decision.direction == "hold"
                    and previous.desired == decision.desired
                    and previous.reason == decision.reason and not result.protected)

    def _log(self, decision: Decision, result: ScaleResult, changed: bool) -> None:
        """Actions and changes of mind at INFO; identical holds at DEBUG (one every step)."""
        log.log(logging.INFO if changed else logging.DEBUG,
                "scale decision: queue=%s %s started=%d stopped=%d protected=%d",
                self.queue_name, decision.describe(), result.started, result.stopped,
                result.protected)

    def status(self) -> dict[str, Any]:
        """The last decision and the fleet, for /status and `conveyor scale status`."""
        report: dict[str, Any] = {"queue": self.queue_name, "policy": self.policy.name,
                                  "workers": [_worker_json(w) for w in self.workers]}
        if self.last is not None:
            d, obs = self.last, self.last.observation
            report.update(visible=obs.visible, in_flight=obs.in_flight, delayed=obs.delayed,
                          backlog=d.backlog, in_service=obs.in_service, pending=obs.pending,
                          busy=obs.busy, metric=round(d.metric, 3), target=round(d.target, 3),
                          processing_avg_s=obs.processing_s, current=d.current,
                          desired=d.desired, reason=d.reason,
                          protected=self.last_result.protected)
        return report


def _worker_json(view: WorkerView) -> dict[str, Any]:
    return {"id": view.worker_id, "state": view.state, "busy": view.busy,
            "in_flight": view.in_flight, "processing_avg_s": view.processing_avg_s,
            "processed": view.processed}
