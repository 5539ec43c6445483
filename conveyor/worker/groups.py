"""Message groups the worker holds: per MessageGroupId, its messages in receive order, of
which at most `cap` may go to the app at once (the group's front); the others wait here,
kept invisible, until a place at the front frees (one of it is done: deleted,
dead-lettered, handed back or expired).

FIFO is a cap of 1 with order (`ordered`): only the first message of a group is ever at
the app (with BatchSize, also those behind it in the same batch, in order). SQS returns a
group's messages in order and no more of a group while one of it is in flight (Amazon SQS
Developer Guide, "FIFO queue delivery logic"), so a group is only ever held by one
receive's worth of messages.

On a standard queue whose server does not cap its groups, the worker's GroupConcurrency
is the cap (local_limits.py), without order: a message that fails is handed back to SQS
as any other, and its place goes to the next one waiting.
"""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import Generic, TypeVar

T = TypeVar("T")


class GroupQueues(Generic[T]):
    """The messages held per group, in order. Items are compared by identity. A cap of 0
    holds no group (the worker's messages go as they come)."""

    def __init__(self, cap: int = 1, *, ordered: bool = True) -> None:
        self.cap = cap
        self.ordered = ordered  # FIFO: a group's messages go in order, one after another
        self._groups: dict[str, deque[T]] = {}

    def add(self, group: str, item: T) -> bool:
        """Append `item` to its group; True when it is at the group's front (it may go now)."""
        waiting = self._groups.get(group)
        if waiting is None:
            self._groups[group] = deque([item])
            return True
        waiting.append(item)
        return len(waiting) <= self.cap

    def remove(self, group: str, item: T) -> T | None:
        """Drop `item`; if it was at its group's front, return the message that takes its
        place there (it may go now), if one waits."""
        waiting = self._groups.get(group)
        at = next((i for i, held in enumerate(waiting or ()) if held is item), None)
        if waiting is None or at is None:
            return None
        del waiting[at]
        if not waiting:
            del self._groups[group]
            return None
        return waiting[self.cap - 1] if at < self.cap <= len(waiting) else None

    def at_front(self, group: str, item: T) -> bool:
        """Whether `item` is among its group's first `cap` (the ones that may be at the app)."""
        return any(held is item for held in islice(self._groups.get(group) or (), self.cap))

    def following(self, group: str, count: int) -> list[T]:
        """FIFO: up to `count` of the messages waiting behind the group's first, in order
        (without copying the whole group)."""
        return list(islice(self._groups.get(group) or (), 1, count + 1))

    def behind(self, group: str) -> int:
        """How many messages wait behind the group's front."""
        waiting = self._groups.get(group)
        return max(0, len(waiting) - self.cap) if waiting else 0
