"""Prometheus metrics of the queue server."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from conveyor.service.leases import ACTIONS
from conveyor.sqs.shapes import operation_names

__all__ = ["CONTENT_TYPE_LATEST", "ServerMetrics"]


class ServerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "conveyor_requests", "SQS API requests by action and outcome (ok or error code).",
            ["action", "outcome"], registry=self.registry)
        self.latency = Histogram(
            "conveyor_request_seconds", "Time to answer SQS API requests, long polls included.",
            ["action"], registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 20))
        self.messages = Gauge(
            "conveyor_queue_messages", "Messages per queue by state (visible, in_flight, delayed).",
            ["region", "queue", "state"], registry=self.registry)
        self.waiting = Gauge("conveyor_long_polls_waiting", "Receivers parked in a long poll.",
                             registry=self.registry)
        self._children: dict[tuple[str, str], tuple[Any, Any]] = {}

    def observe(self, action: str, outcome: str, seconds: float) -> None:
        """Count one request. Label children are cached: labels() costs more than inc()."""
        key = (action, outcome)
        children = self._children.get(key)
        if children is None:
            label = action if action in operation_names() or action in ACTIONS else "Unknown"
            children = (self.requests.labels(label, outcome), self.latency.labels(label))
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
