"""Long-poll waiters: receivers parked on queues until a message may be there.

Event-driven, no polling loop: a send wakes as many parked receivers as it made
messages ready; a receiver also sleeps only until the queue's next delayed or in-flight
message becomes visible, so timeouts and delays need no wake-up from anyone. A receiver
may park on several queues at once (PollMessages's QueueUrls), and on its worker's id,
which a drain request wakes (service/workers.py).

A receiver watches its queues from before it first looks at them (Watch), so that a
message sent while it looks, or while it plans its sleep, wakes it as surely as one sent
while it sleeps: without that, the wake-up would find nobody parked and be lost, and the
receiver would sleep out its wait beside a message.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from conveyor.service.base import Wakeups
from conveyor.service.polls import MAX_WAIT_S  # the longest wait: PollMessages's, not SQS's 20

# What a receiver parks on: a queue id, or ("worker", id) for a worker's drain.
Key = int | tuple[str, str]


class Waiters(Wakeups):
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

    def watch(self, keys: Sequence[Key]) -> Watch:
        """A receiver's watch on its queues, from now until it is closed."""
        return Watch(self, keys)

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


class Watch:
    """A long poll's watch on its queues, armed before each look at them: a wake-up that
    comes while it looks (fetches) or plans its sleep makes its next wait return at once.

    Why no message is left unclaimed while a receiver sleeps: a send wakes receivers
    after its commit, so a receiver whose look missed the message was already watching
    then (it armed before that look). `notify(queue, count)` wakes `count` watchers, each
    of which either looks again after the wake-up (its next wait returns at once; that
    look sees the commit) or leaves without looking again (its look had begun before the
    wake-up and found messages, or the client left, a drain or the deadline came): then
    `close` hands the wake-up to the next watcher of that queue. A wake-up is dropped
    only when nobody watches the queue, and anyone who parks later looks first.
    """

    def __init__(self, waiters: Waiters, keys: Sequence[Key]) -> None:
        self._waiters = waiters
        self._keys = keys
        self._woken = self._arm()

    def _arm(self) -> asyncio.Future[Key]:
        future: asyncio.Future[Key] = asyncio.get_running_loop().create_future()
        self._waiters._park(self._keys, future)
        return future

    def rearm(self) -> None:
        """Call before each look after the first: it acts on the wake-up that ended the
        wait; what comes from now on ends the next one."""
        self._waiters._unpark(self._keys, self._woken)
        self._woken = self._arm()

    async def wait(self, timeout_s: float, gone: asyncio.Future[None],
                   *also: asyncio.Future[Key]) -> Key | None:
        """Until a wake-up since the last (re)arming, at once if one came already (the key
        notified), or the timeout passes / the client left / one of `also` is done (None)."""
        waited: tuple[asyncio.Future[Any], ...] = (self._woken, gone, *also)
        done, _ = await asyncio.wait(waited, timeout=max(timeout_s, 0),
                                     return_when=asyncio.FIRST_COMPLETED)
        return self._woken.result() if self._woken in done else None

    def close(self) -> None:
        """Stop watching; a wake-up since the last look was not acted on: pass it on."""
        woken = self._woken
        missed = woken.done() and not woken.cancelled()
        self._waiters._unpark(self._keys, woken)
        if missed:
            self._waiters.notify(woken.result(), 1)

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
