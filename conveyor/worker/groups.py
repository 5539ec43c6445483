"""FIFO message groups the worker holds: per MessageGroupId, its messages in receive order.

Only the first message of a group is ever at the app (with BatchSize, also those behind it
in the same batch, in order); the others wait here until it is done (deleted,
dead-lettered or expired). SQS returns a group's messages in order and no
more of a group while one of it is in flight (Amazon SQS Developer Guide, "FIFO queue
delivery logic"), so a group is only ever held by one receive's worth of messages.
"""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import Generic, TypeVar

T = TypeVar("T")


class GroupQueues(Generic[T]):
    """The messages held per group, in order. Items are compared by identity."""

    def __init__(self) -> None:
        self._groups: dict[str, deque[T]] = {}

    def add(self, group: str, item: T) -> bool:
        """Append `item` to its group; True when it is the group's first (it may go now)."""
        waiting = self._groups.get(group)
        if waiting is None:
            self._groups[group] = deque([item])
            return True
        waiting.append(item)
        return False

    def remove(self, group: str, item: T) -> T | None:
        """Drop `item`; if it was its group's first, return the group's next (now first)."""
        waiting = self._groups.get(group)
        at = next((i for i, held in enumerate(waiting or ()) if held is item), None)
        if waiting is None or at is None:
            return None
        del waiting[at]
        first = at == 0
        if not waiting:
            del self._groups[group]
            return None
        return waiting[0] if first else None

    def following(self, group: str, count: int) -> list[T]:
        """Up to `count` of the messages waiting behind the group's first, in order (without
        copying the whole group)."""
        return list(islice(self._groups.get(group) or (), 1, count + 1))

    def first(self, group: str) -> T | None:
        """The group's first message (the one that may be at the app), if any."""
        waiting = self._groups.get(group)
        return waiting[0] if waiting else None

    def behind(self, group: str) -> int:
        """How many messages wait behind the group's first."""
        waiting = self._groups.get(group)
        return len(waiting) - 1 if waiting else 0
