"""What plugs into a worker daemon: a hook class whose methods do nothing by default.

Like Dramatiq's middleware: the daemon calls each hook it was given at fixed points of
its life and of each delivery, and knows nothing of what a hook does. Periodic tasks
(conveyor/cron) are one: they campaign for the cron lease while the worker runs and
vet scheduled-job messages before they are POSTed.
"""

from __future__ import annotations

from conveyor.client import Message, SQSClient


class TryLater(Exception):
    """A hook cannot decide on a message now: the worker retries it as a failed delivery
    with status `reason`."""

    reason = "hook-unavailable"


class WorkerHook:
    """One part that takes part in a worker's life; override what it needs."""

    async def start(self, sqs: SQSClient, queue_url: str) -> None:
        """The worker is about to receive from `queue_url`, calling SQS through `sqs`."""

    async def stop(self) -> None:
        """The worker stops receiving and begins its drain."""

    async def close(self) -> None:
        """The worker has drained; release what `start` opened."""

    async def before_delivery(self, message: Message) -> bool:
        """Before the POST: False has the message deleted unposted; TryLater retries it."""
        return True
