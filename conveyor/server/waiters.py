"""Long-poll waiters: receivers parked on a queue until a message may be there.

Event-driven, no polling loop: a send wakes as many parked receivers as it made
messages ready; a receiver also sleeps only until the queue's next delayed or in-flight
message becomes visible, so timeouts and delays need no wake-up from anyone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from conveyor.service.polls import MAX_WAIT_S  # the longest wait: PollMessages's, not SQS's 20


class Waiters:
    def __init__(self) -> None:
        self._parked: dict[int, deque[asyncio.Future[None]]] = {}

    def notify(self, queue_id: int, count: int) -> None:
        """Wake up to `count` receivers parked on the queue."""
        parked = self._parked.get(queue_id)
        while parked and count > 0:
            future = parked.popleft()
            if not future.done():
                future.set_result(None)
                count -= 1
        if parked is not None and not parked:
            del self._parked[queue_id]

    async def wait(self, queue_id: int, timeout_s: float, gone: asyncio.Future[None]) -> bool:
        """Park until notified (True), or the timeout passes / the client left (False)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._parked.setdefault(queue_id, deque()).append(future)
        try:
            done, _ = await asyncio.wait((future, gone), timeout=max(timeout_s, 0),
                                         return_when=asyncio.FIRST_COMPLETED)
            return future in done
        finally:
            if not future.done():
                future.cancel()
                parked = self._parked.get(queue_id)
                if parked is not None:
                    with contextlib.suppress(ValueError):
                        parked.remove(future)
                    if not parked:
                        del self._parked[queue_id]

    def notify_later(self, queue_id: int, seconds: float) -> None:
        """A message of the queue becomes receivable in `seconds`: wake one parked receiver
        then (it re-checks, and re-plans its sleep). Nothing to do with nobody parked or
        past the longest long poll."""
        if self._parked.get(queue_id) and seconds < MAX_WAIT_S:
            asyncio.get_running_loop().call_later(seconds, self.notify, queue_id, 1)

    def notify_all(self) -> None:
        for queue_id in list(self._parked):
            self.notify(queue_id, len(self._parked.get(queue_id, ())))
