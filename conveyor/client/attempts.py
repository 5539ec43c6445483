"""A failed delivery attempt as Conveyor keeps it with its message (ConveyorWorkers.
RecordAttempts / GetMessageAttempts, the server's service/attempts.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The server keeps this much of the app's answer (its Limits.max_attempt_answer_bytes).
ANSWER_HEAD_BYTES = 512


@dataclass(frozen=True, slots=True)
class Attempt:
    """One failed attempt: when (epoch ms), why (a short word: `http-500`, `refused`,
    `timeout`...), the app's HTTP status if it answered, the start of its answer, and the
    worker that made it."""

    at_ms: int
    reason: str
    status: int | None = None
    answer_head: str = ""
    worker_id: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The members of a RecordAttempts entry (without Id and ReceiptHandle)."""
        wire: dict[str, Any] = {"At": self.at_ms, "Reason": self.reason}
        if self.status is not None:
            wire["Status"] = self.status
        if self.answer_head:
            wire["AnswerHead"] = self.answer_head
        if self.worker_id is not None:
            wire["WorkerId"] = self.worker_id
        return wire

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> Attempt:
        return cls(int(raw["At"]), str(raw["Reason"]), raw.get("Status"),
                   str(raw.get("AnswerHead", "")), raw.get("WorkerId"))


def answer_head(body: bytes, limit: int = ANSWER_HEAD_BYTES) -> str:
    """The first `limit` bytes of an answer as text that fits in `limit` bytes of UTF-8:
    undecodable bytes become U+FFFD (3 bytes each, so cut again), a character cut in two at
    the end is dropped."""
    text = body[:limit].decode("utf-8", "replace")
    encoded = text.encode()
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode("utf-8", "ignore")
