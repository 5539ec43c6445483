"""A virtual queue's local state: buffered messages, waiters and idleness. No I/O.

The host queue's receiver thread puts messages in; consumers take them out. A waiter is a
plain callback, so the same buffer wakes a `threading.Event` (thread front end) or an
asyncio future through `call_soon_threadsafe` (asyncio front end).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from .core import Message, VirtualQueueId

Waiter = Callable[[], None]


class MessageBuffer:
    """Thread-safe FIFO of received messages, keyed by MessageId.

    A message that reappears on the host queue (its visibility timeout ran out while it sat
    here) replaces its older copy, so the consumer sees it once, with the newest receipt handle.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._messages: OrderedDict[str, Message] = OrderedDict()
        self._waiters: set[Waiter] = set()
        self.closed = False

    def put(self, messages: list[Message]) -> bool:
        """Buffer messages and wake every waiter; False if the buffer is closed."""
        with self._lock:
            if self.closed:
                return False
            for message in messages:
                self._messages[message["MessageId"]] = message
            waiters = list(self._waiters)
        for wake in waiters:
            wake()
        return True

    def take(self, max_count: int) -> list[Message]:
        """Up to `max_count` buffered messages, oldest first, without waiting."""
        with self._lock:
            count = min(max_count, len(self._messages))
            return [self._messages.popitem(last=False)[1] for _ in range(count)]

    def add_waiter(self, wake: Waiter) -> None:
        """Call `wake` (from any thread) whenever messages arrive or the buffer closes."""
        with self._lock:
            self._waiters.add(wake)

    def remove_waiter(self, wake: Waiter) -> None:
        """Stop calling `wake`."""
        with self._lock:
            self._waiters.discard(wake)

    def close(self) -> list[Message]:
        """Close for good, wake every waiter; returns the messages still buffered."""
        with self._lock:
            self.closed = True
            left = list(self._messages.values())
            self._messages.clear()
            waiters = list(self._waiters)
        for wake in waiters:
            wake()
        return left

    def __len__(self) -> int:
        return len(self._messages)


class VirtualQueue:
    """A virtual queue: its id, its buffer, and when it was last used (monotonic seconds)."""

    def __init__(self, queue_id: VirtualQueueId, retention_s: int | None, now_s: float) -> None:
        self.id = queue_id
        self.retention_s = retention_s
        self.buffer = MessageBuffer()
        self.tags: dict[str, str] = {}
        self._lock = threading.Lock()
        self._last_used_s = now_s
        self._receivers = 0

    def touch(self, now_s: float) -> None:
        """Record an API call on the queue (it is not idle)."""
        with self._lock:
            self._last_used_s = max(self._last_used_s, now_s)

    def receiver_started(self, now_s: float) -> None:
        """A ReceiveMessage is waiting: the queue is in use until it ends."""
        with self._lock:
            self._receivers += 1
            self._last_used_s = max(self._last_used_s, now_s)

    def receiver_ended(self, now_s: float) -> None:
        """A waiting ReceiveMessage returned."""
        with self._lock:
            self._receivers -= 1
            self._last_used_s = max(self._last_used_s, now_s)

    def is_expired(self, now_s: float) -> bool:
        """True if unused for longer than its retention period (never without one)."""
        with self._lock:
            if self.retention_s is None or self._receivers:
                return False
            return now_s - self._last_used_s > self.retention_s
