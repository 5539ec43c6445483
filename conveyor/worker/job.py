"""A message the worker holds: what its owner (settlement.py) and the pieces that decide
when it acts (batch_dispatch.py, outage.py, heartbeat.py) know of it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from conveyor.client import Message
from conveyor.worker.delivery import Outcome
from conveyor.worker.flow import Slots


@dataclass(slots=True)
class Job:
    """A received message and what the daemon knows about its visibility."""

    message: Message
    received_s: float  # monotonic time the ReceiveMessage call was sent
    visible_until_s: float  # monotonic; conservative (counted from before the receive)
    accepted_s: float = 0.0  # monotonic time the answer was read
    started_s: float | None = None
    extending: bool = False
    released: bool = False
    group: str | None = None  # MessageGroupId of a group held here (FIFO, GroupConcurrency)
    waiting: bool = False  # held back here without a slot (behind its FIFO group, a retry)
    retry: asyncio.TimerHandle | None = None  # when a retry here is due
    exhausted: bool = False  # failed maxReceiveCount times: for the dead-letter queue
    failure: Outcome | None = None  # the POST that found the app unavailable (held since)
    failed_s: float = 0.0  # monotonic time of that POST's answer


class Waiting:
    """The messages held here without a slot: behind their FIFO group's first, waiting for
    a retry here, or held while the app is unavailable. They take no slot, but they are
    counted: past `capacity` of them the pollers wait (see _HELD_PER_SLOT in daemon.py)."""

    def __init__(self, capacity: int) -> None:
        self._slots = Slots(capacity)

    def add(self, job: Job) -> None:
        if not job.waiting:
            job.waiting = True
            self._slots.overdraw(1)

    def discard(self, job: Job) -> None:
        if job.waiting:
            job.waiting = False
            self._slots.give(1)

    async def room(self) -> None:
        """Wait until fewer than `capacity` messages wait here."""
        await self._slots.wait_free()


def log_fields(queue_name: str, message: Message, **more: Any) -> dict[str, Any]:
    """What a JSON log line (conveyor.logs) about a message carries besides its text."""
    return {"queue": queue_name, "message_id": message.message_id, **more}
