"""Read what the policies need: the queue's counts (GetQueueAttributes) and each worker's
own report (GET /health on its status port)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from conveyor.client import SQSClient

QUEUE_COUNTS = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed")


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """Visible, in-flight and delayed messages of one queue."""

    visible: int
    in_flight: int
    delayed: int


async def queue_counts(sqs: SQSClient, queue_url: str) -> QueueCounts:
    """The three approximate counts, in one GetQueueAttributes call."""
    attributes = await sqs.get_queue_attributes(queue_url, QUEUE_COUNTS)
    visible, in_flight, delayed = (int(attributes.get(name, 0)) for name in QUEUE_COUNTS)
    return QueueCounts(visible, in_flight, delayed)


async def backlog_counts(sqs: SQSClient, queue_urls: Sequence[str]) -> QueueCounts:
    """The counts of a logical queue: its partitions' added up (one call each, at once)."""
    parts = await asyncio.gather(*(queue_counts(sqs, url) for url in queue_urls))
    return QueueCounts(sum(c.visible for c in parts), sum(c.in_flight for c in parts),
                       sum(c.delayed for c in parts))


async def worker_health(session: aiohttp.ClientSession, url: str,
                        timeout_s: float = 1.0) -> dict[str, Any] | None:
    """A worker's /health report (200 or 503 both carry one); None when it does not answer."""
    try:
        async with session.get(url + "/health",
                               timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            report = await resp.json(content_type=None)
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
        return None
    return report if isinstance(report, dict) else None
