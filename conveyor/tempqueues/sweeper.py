"""Orphan clean-up: delete idle, empty host queues left behind by clients that died.

Every live client runs a `Sweeper`. Clients sharing a prefix split the work through one
shared FIFO queue, `<prefix>ConveyorSweeper.fifo`: each period every sweeper offers a `list`
task whose deduplication id is the period number, so SQS keeps one; whoever receives it
lists the prefix and fans out one `check` task per queue (deduplicated per period too);
the checks spread over every live sweeper. A sweeper dying mid-task only delays it: the
task reappears after the work queue's visibility timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .core import (
    EMPTY_COUNT_ATTRIBUTES,
    Message,
    SweepTask,
    is_empty,
    is_idle,
    is_stale,
    sweep_epoch,
)
from .errors import is_name_taken, is_queue_missing
from .names import SWEEP_QUEUE_SUFFIX

log = logging.getLogger(__name__)

_MAX_WAIT_S = 20  # SQS long-poll maximum
_STATS_KEPT = 1000  # recent entries of each kind: enough to inspect, bounded for long runs
_WORK_QUEUE_ATTRIBUTES = {
    "FifoQueue": "true",
    "MessageRetentionPeriod": "60",  # a task older than a minute is covered by a newer sweep
    "VisibilityTimeout": "30",  # a task held by a dead sweeper comes back this soon
}


@dataclass
class SweepStats:
    """What one sweeper did recently: for tests and metrics."""

    # epochs it listed; (epoch, queue URL) pairs it checked; queues it deleted
    lists: deque[int] = field(default_factory=lambda: deque(maxlen=_STATS_KEPT))
    checks: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=_STATS_KEPT))
    deleted: deque[str] = field(default_factory=lambda: deque(maxlen=_STATS_KEPT))


class Sweeper:
    """One client's share of sweeping the queues whose names start with `prefix`."""

    def __init__(self, sqs: Any, prefix: str, period_s: float, *,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.sqs = sqs
        self.prefix = prefix
        self.period_s = period_s
        self.stats = SweepStats()
        self.work_queue_url = ""
        self._wall_clock = wall_clock
        self._last_offered = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="tempqueues-sweeper")

    def start(self) -> Sweeper:
        """Create (or find) the shared work queue and start sweeping."""
        self.work_queue_url = self._work_queue()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop after the current long poll or task."""
        self._stop.set()

    def join(self, timeout_s: float) -> bool:
        """Wait for the thread; True if it ended."""
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _work_queue(self) -> str:
        name = self.prefix + SWEEP_QUEUE_SUFFIX
        try:
            return self.sqs.create_queue(QueueName=name,
                                         Attributes=_WORK_QUEUE_ATTRIBUTES)["QueueUrl"]
        except Exception as exc:
            if not is_name_taken(exc):
                raise
            return self.sqs.get_queue_url(QueueName=name)["QueueUrl"]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._step()
            except Exception:  # supervisor loop: log and carry on
                log.exception("sweeping prefix %s failed", self.prefix)
                self._stop.wait(min(self.period_s, 5.0))

    def _step(self) -> None:
        now_s = self._wall_clock()
        epoch = sweep_epoch(now_s, self.period_s)
        if epoch != self._last_offered:
            self._send([SweepTask("list", epoch)])
            self._last_offered = epoch
        until_tick_s = (epoch + 1) * self.period_s - now_s
        wait_s = int(min(_MAX_WAIT_S, max(0.0, until_tick_s)))
        messages = self.sqs.receive_message(QueueUrl=self.work_queue_url,
                                            MaxNumberOfMessages=10,
                                            WaitTimeSeconds=wait_s).get("Messages", [])
        for message in messages:
            if self._stop.is_set():
                return
            self._handle(message, epoch)
        if not messages:
            self._stop.wait(max(0.0, (epoch + 1) * self.period_s - self._wall_clock()))

    def _handle(self, message: Message, epoch: int) -> None:
        task = SweepTask.decode(message.get("Body", ""))
        if task is None:
            log.warning("unknown message %s on sweep queue %s: deleted",
                        message.get("MessageId"), self.work_queue_url)
        elif not is_stale(task, epoch):
            if task.kind == "list":
                self._list(task.epoch)
            elif task.kind == "check":
                self._check(task.epoch, task.queue_url)
        self.sqs.delete_message(QueueUrl=self.work_queue_url,
                                ReceiptHandle=message["ReceiptHandle"])

    def _list(self, epoch: int) -> None:
        self.stats.lists.append(epoch)
        urls = [u for u in self._list_prefix() if u != self.work_queue_url]
        log.debug("sweep %d of prefix %s: %d queues to check", epoch, self.prefix, len(urls))
        self._send([SweepTask("check", epoch, url) for url in urls])

    def _list_prefix(self) -> list[str]:
        urls: list[str] = []
        params: dict[str, Any] = {"QueueNamePrefix": self.prefix, "MaxResults": 1000}
        while True:
            page = self.sqs.list_queues(**params)
            urls.extend(page.get("QueueUrls", []))
            if not page.get("NextToken"):
                return urls
            params["NextToken"] = page["NextToken"]

    def _check(self, epoch: int, queue_url: str) -> None:
        self.stats.checks.append((epoch, queue_url))
        try:
            if self.is_orphan(queue_url):
                self.sqs.delete_queue(QueueUrl=queue_url)
                self.stats.deleted.append(queue_url)
                log.info("deleted orphaned idle queue %s", queue_url)
        except Exception as exc:
            if not is_queue_missing(exc):  # already gone: nothing to do
                raise

    def is_orphan(self, queue_url: str) -> bool:
        """True if the queue's heartbeat is older than its retention and it is empty."""
        tags = self.sqs.list_queue_tags(QueueUrl=queue_url).get("Tags", {})
        if not is_idle(tags, int(self._wall_clock() * 1000)):
            return False
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=list(EMPTY_COUNT_ATTRIBUTES)).get("Attributes", {})
        return is_empty(attributes)

    def _send(self, tasks: list[SweepTask]) -> None:
        for start in range(0, len(tasks), 10):
            entries = [{"Id": str(i), **t.encode()} for i, t in enumerate(tasks[start:start + 10])]
            result = self.sqs.send_message_batch(QueueUrl=self.work_queue_url, Entries=entries)
            for failure in result.get("Failed", []):
                log.warning("could not queue sweep task on %s: %s", self.work_queue_url,
                            failure.get("Message"))
