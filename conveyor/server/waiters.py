"""Long-poll waiters: receivers parked on queues until a message may be there.

Event-driven, no polling loop: a send wakes as many parked receivers as it made
messages ready; a receiver also sleeps only until the queue's next delayed or in-flight
message becomes visible, so timeouts and delays need no wake-up from anyone. A receiver
may park on several queues at once (PollMessages's QueueUrls), and on its worker's id,
which a drain request wakes (service/workers.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Iterator, Sequence

from conveyor.service.polls import MAX_WAIT_S  # the longest wait: PollMessages's, not SQS's 20

# What a receiver parks on: a queue id, or ("worker", id) for a worker's drain.
Key = int | tuple[str, str]


class Waiters:
    def __init__(self) -> None:
        self._parked: dict[Key, deque[asyncio.Future[Key]]] = {}

    def notify(self, queue_id: Key, count: int) -> None:
        """Wake up to `count` receivers parked on the queue (or key)."""
        parked = self._parked.get(queue_id)
        while parked and count > 0:
            future = parked.popleft()
            if not future.done():  # done: already woken by another of its keys
                future.set_result(queue_id)
                count -= 1
        if parked is not None and not parked:
            del self._parked[queue_id]

    def wake_worker(self, worker_id: str) -> None:
        """Wake every receiver watching for the worker's drain."""
        key = worker_key(worker_id)
        self.notify(key, len(self._parked.get(key, ())))

    async def wait(self, keys: Sequence[Key], timeout_s: float, gone: asyncio.Future[None],
                   *also: asyncio.Future[Key]) -> Key | None:
        """Park on every key until one is notified (that key), or the timeout passes / the
        client left / one of `also` is done (None)."""
        future: asyncio.Future[Key] = asyncio.get_running_loop().create_future()
        self._park(keys, future)
        try:
            done, _ = await asyncio.wait((future, gone, *also), timeout=max(timeout_s, 0),
                                         return_when=asyncio.FIRST_COMPLETED)
            return future.result() if future in done else None
        finally:
            self._unpark(keys, future)

    @contextlib.contextmanager
    def watching(self, key: Key) -> Iterator[asyncio.Future[Key]]:
        """A future done once `key` is notified, watched from now for the whole block (a
        drain request must not slip in between a receiver's checks and its waits)."""
        future: asyncio.Future[Key] = asyncio.get_running_loop().create_future()
        self._park([key], future)
        try:
            yield future
        finally:
            self._unpark([key], future)

    def _park(self, keys: Sequence[Key], future: asyncio.Future[Key]) -> None:
        for key in keys:
            self._parked.setdefault(key, deque()).append(future)

    def _unpark(self, keys: Sequence[Key], future: asyncio.Future[Key]) -> None:
        if not future.done():
            future.cancel()
        for key in keys:  # a woken future stays queued on its other keys: take it out
            parked = self._parked.get(key)
            if parked is not None:
                with contextlib.suppress(ValueError):
                    parked.remove(future)
                if not parked:
                    del self._parked[key]

    def notify_later(self, queue_id: int, seconds: float) -> None:
        """A message of the queue becomes receivable in `seconds`: wake one parked receiver
        then (it re-checks, and re-plans its sleep). Nothing to do with nobody parked or
        past the longest long poll."""
        if self._parked.get(queue_id) and seconds < MAX_WAIT_S:
            asyncio.get_running_loop().call_later(seconds, self.notify, queue_id, 1)

    def notify_all(self) -> None:
        for queue_id in list(self._parked):
            self.notify(queue_id, len(self._parked.get(queue_id, ())))


def worker_key(worker_id: str) -> Key:
    """The key a worker's long polls park on, beside their queues."""
    return ("worker", worker_id)
