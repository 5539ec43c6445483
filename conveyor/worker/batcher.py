"""Group DeleteMessage / ChangeMessageVisibility calls into batches of up to 10.

Entries wait at most `linger_s` for companions; a full batch goes at once. Each entry gets
a future that resolves to None when SQS applied it, or to the error code when SQS refused
it for good (the caller decides whether that deserves a log line).
Transport and server errors are retried with back-off until `give_up_s` has passed.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from conveyor.client import BatchResult, SQSError, SQSTransportError
from conveyor.clock import Clock
from conveyor.worker import telemetry
from conveyor.worker.backoff import ErrorBackoff

log = logging.getLogger(__name__)

SQS_MAX_BATCH = 10
# Failures for one entry that are not worth another try.
_PERMANENT = frozenset({
    "ReceiptHandleIsInvalid", "InvalidParameterValue", "MessageNotInflight",
    "AWS.SimpleQueueService.MessageNotInflight", "InvalidReceiptHandle",
})

SendBatch = Callable[[Sequence[Any]], Awaitable[BatchResult]]


@dataclass(slots=True)
class _Entry:
    message_id: str
    payload: Any
    future: asyncio.Future[str | None]
    created_s: float  # monotonic


class Batcher:
    """Collects entries for one batch action on one queue and sends them."""

    def __init__(self, action: str, queue: str, send: SendBatch, *, clock: Clock,
                 linger_s: float = 0.005, max_concurrent: int = 8, give_up_s: float = 300.0,
                 rng: random.Random | None = None) -> None:
        self._action = action
        self._clock = clock
        self._queue = queue
        self._send = send
        self._linger_s = linger_s
        self._give_up_s = give_up_s
        self._slots = asyncio.Semaphore(max_concurrent)
        self._pending: list[_Entry] = []
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._backoff = ErrorBackoff(rng or random.Random())
        self._runner: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the background sender."""
        self._runner = asyncio.create_task(self._run(), name=f"batcher-{self._action}")

    def submit(self, message_id: str, payload: Any) -> asyncio.Future[str | None]:
        """Queue one entry; `payload` is what `send` expects per entry."""
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._pending.append(_Entry(message_id, payload, future, self._clock.monotonic_s()))
        self._wake.set()
        return future

    async def close(self, timeout_s: float) -> None:
        """Send everything pending (retrying up to `timeout_s`), then stop."""
        deadline = self._clock.monotonic_s() + timeout_s
        self._linger_s = 0.0
        while (self._pending or self._tasks) and self._clock.monotonic_s() < deadline:
            self._wake.set()
            await asyncio.sleep(0.01)
        if self._runner is not None:
            self._runner.cancel()
        for task in list(self._tasks):
            task.cancel()
        for entry in self._pending:
            log.warning("%s not sent before shutdown: queue=%s message=%s",
                        self._action, self._queue, entry.message_id)
            _resolve(entry, "NotSent")
        self._pending.clear()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            if len(self._pending) < SQS_MAX_BATCH and self._linger_s:
                await asyncio.sleep(self._linger_s)
            await self._slots.acquire()
            batch = self._pending[:SQS_MAX_BATCH]
            del self._pending[:SQS_MAX_BATCH]
            if not self._pending:
                self._wake.clear()
            if not batch:
                self._slots.release()
                continue
            task = asyncio.create_task(self._send_batch(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send_batch(self, batch: list[_Entry]) -> None:
        attributes = telemetry.messaging(self._queue, self._action, "settle", **{
            "messaging.batch.message_count": len(batch)})
        try:
            with telemetry.span(f"{self._action} {self._queue}", "CLIENT", attributes):
                result = await self._send([(str(i), entry.payload)
                                           for i, entry in enumerate(batch)])
        except (SQSTransportError, SQSError) as exc:
            self._slots.release()
            await self._call_failed(batch, exc)
            return
        self._slots.release()
        self._backoff.reset()
        self._apply(batch, result)

    def _apply(self, batch: list[_Entry], result: BatchResult) -> None:
        for entry_id in result.successful:
            _resolve(batch[int(entry_id)], None)
        retry: list[_Entry] = []
        for failure in result.failed:
            entry = batch[int(failure.id)]
            if failure.code in _PERMANENT or failure.sender_fault:
                log.debug("%s refused: queue=%s message=%s code=%s %s", self._action,
                          self._queue, entry.message_id, failure.code, failure.message)
                _resolve(entry, failure.code or "Refused")
            else:
                retry.append(entry)
        self._requeue(retry)

    async def _call_failed(self, batch: list[_Entry], exc: Exception) -> None:
        if isinstance(exc, SQSError) and not exc.retryable:
            for entry in batch:
                log.error("%s failed: queue=%s message=%s: %s", self._action, self._queue,
                          entry.message_id, exc)
                _resolve(entry, exc.code)
            return
        if self._backoff.failures == 0:
            log.warning("%s failed, will retry: queue=%s entries=%d: %s", self._action,
                        self._queue, len(batch), exc)
        await asyncio.sleep(self._backoff.next_pause())
        self._requeue(batch)

    def _requeue(self, entries: list[_Entry]) -> None:
        now = self._clock.monotonic_s()
        for entry in entries:
            if now - entry.created_s > self._give_up_s:
                log.error("%s given up after %.0fs: queue=%s message=%s", self._action,
                          self._give_up_s, self._queue, entry.message_id)
                _resolve(entry, "GaveUp")
            else:
                self._pending.append(entry)
        if self._pending:
            self._wake.set()


def _resolve(entry: _Entry, refusal: str | None) -> None:
    if not entry.future.done():
        entry.future.set_result(refusal)
