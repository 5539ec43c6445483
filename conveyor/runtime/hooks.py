"""What plugs into a worker daemon: a hook class whose methods do nothing by default.

Like Dramatiq's middleware: the daemon calls each hook it was given at fixed points of
its life and of each delivery, and knows nothing of what a hook does. Each delivery goes

    before_delivery ─► prepare (the message to POST) ─► request (where and how) ─► POST
                                                                 ─► after_delivery
                                                                 ─► after_delete

Periodic tasks (conveyor/cron) are one hook: they campaign for the cron lease while the
worker runs, vet scheduled-job messages and route them to their task's url. RetentionPeriod
(worker/retention.py) and claim-checked bodies (conveyor/payloads/step.py) are others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conveyor.client import Message, SQSClient


class TryLater(Exception):
    """A hook cannot decide on a message now: the worker retries it as a failed delivery
    with status `reason`."""

    reason = "hook-unavailable"


class PastRetention(Exception):
    """The message is older than RetentionPeriod: the worker expires it unposted."""

    def __init__(self, age_s: float) -> None:
        super().__init__(f"age {age_s:.0f}s")
        self.age_s = age_s


class Unavailable(Exception):
    """What the POST needs cannot be had now (an offloaded body): the attempt fails with
    `status`, which says nothing about the app (breaker.py: NEUTRAL)."""

    status = "payload-unavailable"


@dataclass(slots=True)
class DeliveryRequest:
    """What one message's POST will be: a hook's `request` may change any of it."""

    path: str
    headers: dict[str, str]
    body: bytes
    alone: bool = False  # True: never in a batch (BatchSize), to its own `path`
    base_path: str = ""  # AppURL's path: a hook's own path goes under it


class WorkerHook:
    """One part that takes part in a worker's life; override what it needs."""

    async def start(self, sqs: SQSClient, queue_url: str) -> None:
        """The worker is about to receive from `queue_url`, calling SQS through `sqs`."""

    async def stop(self) -> None:
        """The worker stops receiving and begins its drain."""

    async def close(self) -> None:
        """The worker has drained; release what `start` opened."""

    async def before_delivery(self, message: Message) -> bool:
        """Before the POST: False has the message deleted unposted; TryLater retries it;
        PastRetention expires it."""
        return True

    async def prepare(self, message: Message) -> Message:
        """The message the app is to get (e.g. its offloaded body fetched); Unavailable
        fails this attempt."""
        return message

    def request(self, message: Message, request: DeliveryRequest) -> DeliveryRequest:
        """Rewrite the POST of `message` (path, headers, body, whether it goes alone)."""
        return request

    def after_delivery(self, message: Message, ok: bool, status: str) -> None:
        """The app answered (or did not): `status` as the worker's Outcome says it."""

    def after_delete(self, message: Message, refusal: str | None) -> None:
        """A message done with for good was deleted (`refusal` None) or not."""

    def health(self) -> dict[str, Any]:
        """What this part adds to the worker's /health report (and its announcement)."""
        return {}
