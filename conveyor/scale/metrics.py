"""The scaler's Prometheus gauges (`conveyor_scale_*`), in a registry of its own.

`conveyor_scale_backlog_messages` divided by the replica count is the backlog per instance:
an HPA External metric with an `AverageValue` target, or KEDA's Prometheus scaler, can use
it directly (see conveyor/scale/README.md).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from conveyor.scale.actuator import ScaleResult
from conveyor.scale.policy import Decision


class ScaleMetrics:
    """Gauges of the last decision and counters of actions, labelled by queue."""

    def __init__(self, queue: str) -> None:
        self.registry = CollectorRegistry()
        self.queue = queue
        reg, q = self.registry, ("queue",)

        def gauge(name: str, text: str) -> Gauge:
            return Gauge(f"conveyor_scale_{name}", text, q, registry=reg)

        self._gauges = {
            "visible": gauge("visible_messages", "ApproximateNumberOfMessages."),
            "in_flight": gauge("in_flight_messages", "ApproximateNumberOfMessagesNotVisible."),
            "delayed": gauge("delayed_messages", "ApproximateNumberOfMessagesDelayed."),
            "backlog": gauge("backlog_messages", "Messages the policy counts as backlog."),
            "metric": gauge("backlog_per_instance", "Backlog ÷ in-service workers."),
            "target": gauge("target_backlog_per_instance", "The policy's target."),
            "in_service": gauge("in_service_workers", "Workers running and receiving."),
            "pending": gauge("pending_workers", "Workers starting up."),
            "busy": gauge("busy_workers", "Workers holding a message (protected)."),
            "desired": gauge("desired_workers", "The policy's last answer."),
            "processing": gauge("processing_seconds_avg", "Average processing time reported."),
        }
        self._actions = Counter("conveyor_scale_actions", "Workers started or stopped.",
                                ("queue", "direction"), registry=reg)
        self._protected = Counter("conveyor_scale_protected",
                                  "Scale-in steps held back because every candidate was busy.",
                                  q, registry=reg)

    def record(self, decision: Decision, result: ScaleResult) -> None:
        """Set every gauge from one decision and count what the actuator did."""
        obs = decision.observation
        values = {"visible": obs.visible, "in_flight": obs.in_flight, "delayed": obs.delayed,
                  "backlog": decision.backlog, "metric": decision.metric,
                  "target": decision.target, "in_service": obs.in_service,
                  "pending": obs.pending, "busy": obs.busy, "desired": decision.desired,
                  "processing": obs.processing_s or 0.0}
        for key, value in values.items():
            self._gauges[key].labels(self.queue).set(value)
        if result.started:
            self._actions.labels(self.queue, "out").inc(result.started)
        if result.stopped:
            self._actions.labels(self.queue, "in").inc(result.stopped)
        if result.protected:
            self._protected.labels(self.queue).inc(result.protected)

    def value(self, name: str, **labels: str) -> float:
        """One sample's current value (0 if absent)."""
        return self.registry.get_sample_value(name, {"queue": self.queue, **labels}) or 0.0

    def exposition(self) -> bytes:
        """Prometheus text format."""
        return generate_latest(self.registry)
