"""A stored message as a receive would describe it, for the console's message view."""

from __future__ import annotations

from typing import Any

import orjson

from conveyor.service.attempts import after_failure, attempts_of
from conveyor.service.messages import _decode_attributes, _system_attributes
from conveyor.service.rules import DIED
from conveyor.store.base import QueueRecord, StoredMessage


def system_attributes(queue: QueueRecord, message: StoredMessage) -> dict[str, str]:
    """The system attributes ReceiveMessage would return with AttributeNames All."""
    return _system_attributes(queue, message)


def message_attributes(message: StoredMessage) -> dict[str, Any]:
    """The message attributes as sent (Binary values as bytes)."""
    return _decode_attributes(message.attributes) if message.attributes else {}


def death(message: StoredMessage) -> dict[str, Any] | None:
    """Why a dead letter died (rules.with_death): receive_count, first_receive_ms and
    last_receive_ms; None when not known (not dead-lettered here, or before this was kept)."""
    if not message.dlq_source_arn or not message.system:
        return None
    found = orjson.loads(message.system).get(DIED)
    return found if isinstance(found, dict) else None


def attempts(message: StoredMessage) -> list[dict[str, Any]]:
    """The failed delivery attempts workers recorded with it (service/attempts.py), oldest
    first: At (ms), Reason, and Status, AnswerHead, WorkerId when known."""
    return attempts_of(message.system)


def backing_off(message: StoredMessage, visible_at_ms: int, now_ms: int) -> bool:
    """Whether the message is invisible only because its latest delivery failed: waiting
    out the back-off a worker set after that failure, received by nobody since."""
    return visible_at_ms > now_ms and after_failure(message.receipt, message.system)
