"""One logical queue over several SQS queues: `jobs` = `jobs-p0` … `jobs-p{N-1}`.

One queue has limits that a busy logical queue outgrows (on Amazon SQS a FIFO queue
without high throughput takes 300 calls/s; the Azure guidance of seed 004 partitions
its queues for the same reason). The partitions are plain SQS queues, so producers and
workers only make plain SQS calls, against Amazon SQS as against Conveyor.

Where a message goes:

- with a partition key: partition = CRC-32(key, UTF-8) mod N. CRC-32 (ISO-HDLC, as zlib
  and gzip compute it) is the same in every process and language, where Python's `hash()`
  of a string changes with each interpreter (PYTHONHASHSEED), so every producer, in any
  language, puts one key in one partition;
- on a FIFO queue the key is the MessageGroupId unless another is given, so each group
  lives in one partition and keeps its order; round robin would split a group and is
  refused;
- without a key (standard queues): round robin.

Names: the partition index goes before a `.fifo` suffix (`jobs.fifo` → `jobs-p0.fifo`),
as SQS requires FIFO queue names to end in `.fifo`.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from conveyor.client.client import SQSClient, queue_name_from_url

FIFO_SUFFIX = ".fifo"
PARTITION_MARK = "-p"
# A bound on fan-out: a worker's rotation visits every partition, and SQS's
# ListQueues pages hold 1000 names.
MAX_PARTITIONS = 64
# SQS: "A queue name can have up to 80 characters" (CreateQueue, QueueName).
_MAX_QUEUE_NAME = 80


class PartitionError(ValueError):
    """A partitioned queue declared or used wrongly; the message says how."""


def partition_name(logical_name: str, index: int) -> str:
    """`jobs`, 2 → `jobs-p2`; `jobs.fifo`, 2 → `jobs-p2.fifo`."""
    stem, suffix = _split_fifo(logical_name)
    return f"{stem}{PARTITION_MARK}{index}{suffix}"


def split_partition_name(name: str) -> tuple[str, int] | None:
    """The inverse of partition_name: `jobs-p2.fifo` → (`jobs.fifo`, 2); None for a
    name that is not a partition's."""
    stem, suffix = _split_fifo(name)
    base, mark, index = stem.rpartition(PARTITION_MARK)
    if not mark or not base or not index.isdigit() or (index != "0" and index[0] == "0"):
        return None
    return base + suffix, int(index)


def partition_index(key: str, count: int) -> int:
    """The partition of a key: CRC-32 of its UTF-8 bytes, modulo `count`."""
    return zlib.crc32(key.encode()) % count


def check_partitions(logical_name: str, count: int) -> None:
    """PartitionError unless `count` partitions of `logical_name` can exist."""
    if not 1 <= count <= MAX_PARTITIONS:
        msg = f"partitions must be between 1 and {MAX_PARTITIONS}, got {count}"
        raise PartitionError(msg)
    longest = partition_name(logical_name, count - 1)
    if len(longest) > _MAX_QUEUE_NAME:
        msg = (f"partition name {longest!r} is longer than SQS's {_MAX_QUEUE_NAME} "
               f"characters: shorten the queue name {logical_name!r}")
        raise PartitionError(msg)


def _split_fifo(name: str) -> tuple[str, str]:
    if name.endswith(FIFO_SUFFIX):
        return name[: -len(FIFO_SUFFIX)], FIFO_SUFFIX
    return name, ""


@dataclass(slots=True)
class PartitionedQueue:
    """A logical queue of `count` partitions. `url` is the logical queue's URL (the
    partitions' URLs with the logical name in place of theirs); it names no real queue."""

    url: str
    count: int
    _turn: Iterator[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_partitions(self.name, self.count)
        self._turn = itertools.cycle(range(self.count))

    @property
    def name(self) -> str:
        """The logical name, e.g. `jobs` or `jobs.fifo`."""
        return queue_name_from_url(self.url)

    @property
    def fifo(self) -> bool:
        """True for a FIFO logical queue (its partitions are FIFO queues)."""
        return self.name.endswith(FIFO_SUFFIX)

    @property
    def names(self) -> list[str]:
        """The partitions' queue names, in index order."""
        return [partition_name(self.name, i) for i in range(self.count)]

    @property
    def urls(self) -> list[str]:
        """The partitions' queue URLs, in index order."""
        return [self.partition_url(i) for i in range(self.count)]

    def partition_url(self, index: int) -> str:
        """Partition `index`'s queue URL."""
        base = self.url.rstrip("/").rsplit("/", 1)[0]
        return f"{base}/{partition_name(self.name, index)}"

    def index_for(self, key: str | None = None, *, group_id: str | None = None) -> int:
        """The partition for a message: by `key`, else by `group_id`, else round robin
        (refused on FIFO, where it would break a group's order)."""
        key = key if key is not None else group_id
        if key is not None:
            return partition_index(key, self.count)
        if self.fifo:
            msg = (f"{self.name} is a FIFO queue: a message needs a MessageGroupId (or a "
                   "partition key) to pick its partition; round robin would split a group")
            raise PartitionError(msg)
        return next(self._turn)

    def url_for(self, key: str | None = None, *, group_id: str | None = None) -> str:
        """The URL to send a message to (see index_for): for apps that send with boto3,
        `sqs.send_message(QueueUrl=jobs.url_for(group_id=g), MessageGroupId=g, ...)`."""
        return self.partition_url(self.index_for(key, group_id=group_id))


class PartitionedProducer:
    """Sends to a partitioned queue with the project's asyncio client."""

    def __init__(self, sqs: SQSClient, queue: PartitionedQueue) -> None:
        self.sqs = sqs
        self.queue = queue

    async def send(self, body: str, *, key: str | None = None, group_id: str | None = None,
                   deduplication_id: str | None = None, delay_s: int | None = None,
                   attributes: dict[str, dict[str, Any]] | None = None) -> tuple[str, str]:
        """SendMessage to the message's partition; returns (partition URL, message id)."""
        url = self.queue.url_for(key, group_id=group_id)
        message_id = await self.sqs.send_message(url, body, delay_s=delay_s,
                                                 attributes=attributes, group_id=group_id,
                                                 deduplication_id=deduplication_id)
        return url, message_id
