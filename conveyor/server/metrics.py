"""Prometheus metrics of the queue server."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from conveyor.service import leases, polls, workers
from conveyor.service.activity import KINDS
from conveyor.sqs.shapes import operation_names

__all__ = ["CONTENT_TYPE_LATEST", "ServerMetrics"]

# Conveyor's own actions beside SQS's (server/app.py's EXTENSIONS): each its own label.
EXTENSION_ACTIONS = frozenset(leases.ACTIONS + workers.ACTIONS + polls.ACTIONS)

SIGN_IN_OUTCOMES = ("ok", "failed", "throttled")

LATENCY_BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5,
                                      1, 5, 20)


class _RequestStats(Collector):
    """Requests by action and outcome, and their latency, as plain numbers.

    Counting is on every request's path: a dict update and a list slot here, where
    prometheus_client's labelled children take a lock and touch several objects each,
    which showed as several per cent of the server's CPU under load. The families are
    built only when /metrics is scraped."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}
        # action -> [count in each bucket (the last one is +Inf)..., sum of seconds]
        self.latency: dict[str, list[float]] = {}
        self._labels: dict[str, str] = {}

    def observe(self, action: str, outcome: str, seconds: float) -> None:
        label = self._labels.get(action)
        if label is None:  # an unknown action name must not grow the label set
            known = action in operation_names() or action in EXTENSION_ACTIONS
            label = self._labels[action] = action if known else "Unknown"
        key = (label, outcome)
        self.counts[key] = self.counts.get(key, 0) + 1
        slots = self.latency.get(label)
        if slots is None:
            slots = self.latency[label] = [0.0] * (len(LATENCY_BUCKETS) + 2)
        slots[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        slots[-1] += seconds

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "conveyor_requests", "SQS API requests by action and outcome (ok or error code).",
            labels=["action", "outcome"])
        for (action, outcome), count in sorted(self.counts.items()):
            requests.add_metric([action, outcome], count)
        yield requests
        latency = HistogramMetricFamily(
            "conveyor_request_seconds", "Time to answer SQS API requests, long polls included.",
            labels=["action"])
        for action, slots in sorted(self.latency.items()):
            cumulative, buckets = 0.0, []
            for bound, in_bucket in zip((*LATENCY_BUCKETS, float("inf")), slots, strict=False):
                cumulative += in_bucket
                buckets.append((_bound(bound), cumulative))
            latency.add_metric([action], buckets, sum_value=slots[-1])
        yield latency


# The store's own gauges and counters (metric name -> (help, value)), as the service hands
# them on: the journal's backlog and checkpoints.
Figures = Callable[[], tuple[dict[str, tuple[str, float]], dict[str, tuple[str, float]]]]


class _StoreFigures(Collector):
    """What the store reports of itself, read at scrape."""

    def __init__(self, figures: Figures) -> None:
        self.figures = figures

    def collect(self) -> Iterator[Metric]:
        gauges, counters = self.figures()
        for name, (text, value) in gauges.items():
            yield GaugeMetricFamily(name, text, value=value)
        for name, (text, value) in counters.items():
            yield CounterMetricFamily(name, text, value=value)


# Each queue's counts of activity.KINDS (region, name, [sent, received, ...]) since this
# node began counting it: the service's Activity.totals.
Totals = Callable[[], list[tuple[str, str, list[int]]]]
# Each kind's family and help text.
_ACTIVITY_FAMILIES = {
    "sent": ("conveyor_queue_messages_sent", "Messages sent per queue"),
    "received": ("conveyor_queue_messages_received", "Messages received per queue"),
    "deleted": ("conveyor_queue_messages_deleted", "Messages deleted per queue"),
    "dead_lettered": ("conveyor_queue_messages_dead_lettered",
                      "Dead letters that arrived per dead-letter queue"),
    "failed": ("conveyor_queue_attempts_failed",
               "Failed attempts workers recorded per queue (RecordAttempts)"),
}


class _QueueActivity(Collector):
    """Each queue's counts as the console charts them, counted where the service does each
    (bounded: the most recently active queues)."""

    def __init__(self, totals: Totals) -> None:
        self.totals = totals

    def collect(self) -> Iterator[Metric]:
        families = [CounterMetricFamily(_ACTIVITY_FAMILIES[kind][0],
                                        f"{_ACTIVITY_FAMILIES[kind][1]} (bounded: the most "
                                        "recently active queues).", labels=["region", "queue"])
                    for kind in KINDS]
        for region, name, counts in self.totals():
            for family, count in zip(families, counts, strict=True):
                family.add_metric([region, name], count)
        yield from families


# Receives a tenant limit held back (region, queue, limit, count): the service's HeldBack.
HeldTotals = Callable[[], list[tuple[str, str, str, int]]]


class _HeldBack(Collector):
    """Receives each queue's limits held back, as the service counts them."""

    def __init__(self, totals: HeldTotals) -> None:
        self.totals = totals

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "conveyor_queue_receives_held_back", "Receives that a queue's limit held back, by "
            "limit: receive_rate (the queue's rate granted fewer messages than asked, and the "
            "claim handed out all it granted), group_concurrency or group_receive_rate (a "
            "group was left short and the receive handed out fewer than asked). Only queues "
            "with limits.",
            labels=["region", "queue", "limit"])
        for region, name, limit, count in self.totals():
            family.add_metric([region, name, limit], count)
        yield family


# Each queue's limits (service/tenants.py settings): gauge name -> help.
LIMIT_GAUGES = {
    "group_concurrency": "Most messages of one message group in flight at once "
                         "(ConveyorGroupConcurrency), for queues with a cap.",
    "receive_rate": "Messages a second receives hand out from the queue "
                    "(ConveyorReceiveRate), for queues with a rate.",
    "receive_burst": "Most messages the queue's rate lets go at once (ConveyorReceiveBurst "
                     "or the rate's one second), for queues with a rate.",
    "group_receive_rate": "Messages a second receives hand out from each message group "
                          "(ConveyorGroupReceiveRate), for queues with a group rate.",
    "group_receive_burst": "Most messages a group's rate lets go at once "
                           "(ConveyorGroupReceiveBurst or the rate's one second).",
    "max_delay_seconds": "The longest DelaySeconds the queue takes (ConveyorMaxDelaySeconds), "
                         "for queues that opted in to delays past 15 minutes.",
}


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


class ServerMetrics:
    def __init__(self, store_figures: Figures, queue_totals: Totals,
                 held_back: HeldTotals) -> None:
        self.registry = CollectorRegistry()
        self.requests = _RequestStats()  # requests.observe(action, outcome, seconds)
        self.registry.register(self.requests)
        self.registry.register(_StoreFigures(store_figures))
        self.registry.register(_QueueActivity(queue_totals))
        self.registry.register(_HeldBack(held_back))
        # Set at each scrape from the queues' records (service/tenants.py settings).
        self.limits = {name: Gauge(f"conveyor_queue_{name}", text, ["region", "queue"],
                                   registry=self.registry)
                       for name, text in LIMIT_GAUGES.items()}
        self.messages = Gauge(
            "conveyor_queue_messages", "Messages per queue by state (visible, in_flight, delayed).",
            ["region", "queue", "state"], registry=self.registry)
        self.paused = Gauge(
            "conveyor_queues_paused", "Queues whose delivery is paused (ConveyorQueues."
            "PauseQueue): receives answer nothing until they are resumed.",
            registry=self.registry)
        self.waiting = Gauge("conveyor_long_polls_waiting", "Receivers parked in a long poll.",
                             registry=self.registry)
        self._announcements = Counter(
            "conveyor_worker_announcements", "Announcements of workers and autoscalers, by the "
            "call that carried them: AnnounceWorker, or a PollMessages long poll.", ["via"],
            registry=self.registry)
        self._sign_ins = Counter(
            "conveyor_console_sign_ins", "Console sign-ins by outcome: ok, failed (a wrong key "
            "or secret) or throttled (refused unchecked: too many failures, see "
            "service/signins.py).", ["outcome"], registry=self.registry)
        for outcome in SIGN_IN_OUTCOMES:  # shown at 0 before the first of each
            self._sign_ins.labels(outcome)

    def sign_in(self, outcome: str) -> None:
        """Count one console sign-in by its outcome (one of SIGN_IN_OUTCOMES)."""
        self._sign_ins.labels(outcome).inc()

    def announced(self, via: str) -> None:
        """Count one announcement recorded (see service/workers.py and polls.py)."""
        self._announcements.labels(via).inc()

    def set_limits(self, queues: list[tuple[str, str, dict[str, float]]]) -> None:
        """Each queue's limits, as (region, name, settings): only those that apply."""
        for gauge in self.limits.values():
            gauge.clear()
        for region, name, settings in queues:
            for setting, value in settings.items():
                self.limits[setting].labels(region, name).set(value)

    def render(self) -> bytes:
        return generate_latest(self.registry)
