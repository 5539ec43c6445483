"""Typed views of the SQS answers the worker tier reads most."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Message:
    """One received message, as ReceiveMessage returns it."""

    message_id: str
    receipt_handle: str
    body: str
    attributes: dict[str, str] = field(default_factory=dict)
    message_attributes: dict[str, dict[str, Any]] = field(default_factory=dict)
    md5_of_body: str = ""

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> Message:
        """Build from one element of ReceiveMessage's `Messages` list."""
        return cls(
            message_id=raw["MessageId"],
            receipt_handle=raw["ReceiptHandle"],
            body=raw.get("Body", ""),
            attributes=raw.get("Attributes") or {},
            message_attributes=raw.get("MessageAttributes") or {},
            md5_of_body=raw.get("MD5OfBody", ""),
        )

    @property
    def receive_count(self) -> int:
        """ApproximateReceiveCount, 1 when the server did not send it."""
        return int(self.attributes.get("ApproximateReceiveCount", "1"))

    @property
    def first_receive_ms(self) -> int | None:
        """ApproximateFirstReceiveTimestamp in epoch milliseconds, if sent."""
        raw = self.attributes.get("ApproximateFirstReceiveTimestamp")
        return int(raw) if raw else None

    @property
    def group_id(self) -> str | None:
        """MessageGroupId (FIFO queues, and fair standard queues), if sent."""
        return self.attributes.get("MessageGroupId") or None

    @property
    def sent_ms(self) -> int | None:
        """SentTimestamp in epoch milliseconds, if sent."""
        raw = self.attributes.get("SentTimestamp")
        return int(raw) if raw else None


@dataclass(slots=True)
class BatchFailure:
    """One failed entry of a *Batch call."""

    id: str
    code: str
    message: str = ""
    sender_fault: bool = True


@dataclass(slots=True)
class BatchResult:
    """Which entries of a *Batch call succeeded and which failed."""

    successful: list[str] = field(default_factory=list)
    failed: list[BatchFailure] = field(default_factory=list)

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> BatchResult:
        """Build from a *Batch answer's `Successful` / `Failed` lists."""
        return cls(
            successful=[entry["Id"] for entry in raw.get("Successful") or []],
            failed=[
                BatchFailure(entry["Id"], entry.get("Code", ""), entry.get("Message", ""),
                             bool(entry.get("SenderFault", True)))
                for entry in raw.get("Failed") or []
            ],
        )
