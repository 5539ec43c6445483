"""A stored message as a receive would describe it, for the console's message view."""

from __future__ import annotations

from typing import Any

from conveyor.service.messages import _decode_attributes, _system_attributes
from conveyor.store.base import QueueRecord, StoredMessage


def system_attributes(queue: QueueRecord, message: StoredMessage) -> dict[str, str]:
    """The system attributes ReceiveMessage would return with AttributeNames All."""
    return _system_attributes(queue, message)


def message_attributes(message: StoredMessage) -> dict[str, Any]:
    """The message attributes as sent (Binary values as bytes)."""
    return _decode_attributes(message.attributes) if message.attributes else {}
