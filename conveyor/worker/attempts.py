"""Each failed attempt at a message, where operators can see it.

Every failed POST (or a body that could not be fetched) is logged, one line per attempt
(queue, message id, status, reason, the head of the app's answer), and on a Conveyor server
also recorded with the message (`ConveyorWorkers.RecordAttempts`, the server's
service/attempts.py): a message keeps its last few attempts, and carries them to its
dead-letter queue, so a dead letter says why it died (GetMessageAttempts, `conveyor message
attempts`, the console).

Records go in batches of up to 10 per queue, at most FLUSH_AFTER_S after the failure
(batcher.py): no call of its own on the path of a message. An endpoint without the call
(Amazon SQS, moto) refuses the first batch; that is said once, and from then on attempts
are only logged (rechecked hourly, runtime/extensions.py).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from conveyor.client import Attempt, BatchResult, Message, SQSClient, SQSError
from conveyor.client.attempts import answer_head
from conveyor.clock import Clock
from conveyor.runtime.extensions import Extension
from conveyor.worker.batcher import Batcher
from conveyor.worker.delivery import Outcome

log = logging.getLogger(__name__)

# A failure's record waits this long for others to share its call: a failing app fails
# many messages at once, and a record is read by people, not by the next delivery.
FLUSH_AFTER_S = 1.0
# Outcome.status (delivery.py, batch_delivery.py) -> the recorded reason; an HTTP status
# is `http-<code>`, anything else keeps its own name.
_REASONS = {"connect-failed": "refused", "inactivity-timeout": "timeout"}
_NOT_REASON = re.compile(r"[^a-z0-9_.:-]+")


def reason_of(outcome: Outcome) -> tuple[str, int | None]:
    """(reason, HTTP status or None) of a failed outcome: `http-500` and 500, `refused`
    (the connection was refused), `timeout` (no answer within InactivityTimeout),
    `payload-unavailable`, `batch-item-failure`..."""
    if outcome.status.isdigit():
        return f"http-{outcome.status}", int(outcome.status)
    reason = _REASONS.get(outcome.status) or _NOT_REASON.sub("-", outcome.status.lower())
    return reason.strip("-")[:64] or "failed", None


class AttemptLog:
    """Logs every failed attempt and records it with its message (see the module)."""

    def __init__(self, queue_name: str, *, clock: Clock,
                 flush_after_s: float = FLUSH_AFTER_S) -> None:
        self._queue_name = queue_name
        self._clock = clock
        self._flush_after_s = flush_after_s
        self.extension = Extension("RecordAttempts", clock=clock)
        self._sqs: SQSClient | None = None
        self._worker_id: str | None = None
        self._batchers: dict[str, Batcher] = {}  # queue URL -> its records' batcher

    def start(self, sqs: SQSClient, worker_id: str | None = None) -> None:
        """Record through `sqs` from now on (before, attempts are only logged)."""
        self._sqs, self._worker_id = sqs, worker_id

    def failed(self, queue_url: str, message: Message, outcome: Outcome) -> None:
        """One failed attempt at `message` of the queue at `queue_url`: log it now (at
        DEBUG: the settlement's "job failed" line is the one people read), record it with
        the message at the next flush."""
        reason, status = reason_of(outcome)
        head = answer_head(outcome.answer_head)
        log.debug("attempt failed: queue=%s message=%s status=%s reason=%s answer=%r%s",
                 self._queue_name, message.message_id, status or "-", reason, head,
                 f" ({outcome.detail})" if outcome.detail else "",
                 extra={"queue": self._queue_name, "message_id": message.message_id,
                        "outcome": "attempt-failed", "reason": reason, "status": status})
        if self._sqs is None or not self.extension.usable:
            return
        attempt = Attempt(self._clock.now_ms(), reason, status, head, self._worker_id)
        self._batcher(queue_url).submit(message.message_id, (message.receipt_handle, attempt))

    async def close(self, timeout_s: float) -> None:
        """Send what is pending (up to `timeout_s`), then stop."""
        for batcher in self._batchers.values():
            await batcher.close(timeout_s)

    def _batcher(self, queue_url: str) -> Batcher:
        batcher = self._batchers.get(queue_url)
        if batcher is None:
            batcher = self._batchers[queue_url] = Batcher(
                "RecordAttempts", self._queue_name,
                lambda entries: self._send(queue_url, entries), clock=self._clock,
                linger_s=self._flush_after_s, max_concurrent=2)
            batcher.start()
        return batcher

    async def _send(self, queue_url: str, entries: Sequence[Any]) -> BatchResult:
        """One RecordAttempts call; an endpoint that refuses the call is told once, and
        what it refused is dropped (it was logged)."""
        everything = BatchResult(successful=[entry_id for entry_id, _ in entries])
        if not self.extension.usable:
            return everything
        assert self._sqs is not None
        try:
            answer = await self._sqs.record_attempts(
                queue_url, [(entry_id, receipt, attempt)
                            for entry_id, (receipt, attempt) in entries])
        except SQSError as exc:
            if not self.extension.refused(exc):
                raise  # passing trouble: the batcher tries again
            log.info("%s does not keep attempts (%s): failed attempts are only logged",
                     self._sqs.endpoint_url, exc.code or exc.status)
            return everything
        self.extension.worked()
        return answer
