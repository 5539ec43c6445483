"""Group commit for a database reached over the network: calls of one kind that arrive
while one of their statements runs go together in the next.

On PostgreSQL a writing statement's cost is mostly its own (the round trip, the
transaction, the commit's WAL flush), hardly the rows it carries: ten sends from ten
clients cost about ten times one send of ten messages. So a node sends the first call at
once, and whatever of the same kind arrives before that statement returns waits and goes
in one statement after it, however many. A lone call pays nothing; under load the
statements per message fall as the load rises.

One bad call must not fail its neighbours: when the database refuses a shared statement
for what one call carried, each call runs again alone, and only the bad one fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class Coalescer(Generic[Item, Result]):
    """Runs `flush(items)` -> one result per item, one flush at a time, over the items
    submitted since the last flush began: at most `max_items`, and at most one per `key`
    if given (an item whose key is taken waits for the next flush).

    A flush is one statement, so one transaction: when it fails, none of its items was
    written. Its error goes to every caller of it, unless `refused(error)` says the
    database refused the statement for what it carried (not an outage): then each item
    runs again alone, so that each caller gets its own result or its own error."""

    def __init__(self, flush: Callable[[list[Item]], Awaitable[list[Result]]],
                 max_items: int, refused: Callable[[Exception], bool] = lambda exc: False,
                 key: Callable[[Item], Hashable] | None = None) -> None:
        self._flush = flush
        self._max_items = max_items
        self._refused = refused
        self._key = key
        self._pending: list[tuple[Item, asyncio.Future[Result]]] = []
        self._running: asyncio.Task[None] | None = None

    async def submit(self, item: Item) -> Result:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Result] = loop.create_future()
        self._pending.append((item, future))
        if self._running is None:  # starts on the loop's next turn: this turn's calls join
            self._running = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        try:
            while self._pending:
                await self._run(self._take())
        finally:
            self._running = None

    def _take(self) -> list[tuple[Item, asyncio.Future[Result]]]:
        """The next flush's items, oldest first."""
        if self._key is None:
            batch = self._pending[:self._max_items]
            del self._pending[:self._max_items]
            return batch
        batch, later, keys = [], [], set()
        for entry in self._pending:
            key = self._key(entry[0])
            if key in keys or len(batch) == self._max_items:
                later.append(entry)
            else:
                keys.add(key)
                batch.append(entry)
        self._pending = later
        return batch

    async def _run(self, batch: list[tuple[Item, asyncio.Future[Result]]]) -> None:
        try:
            await self._settle(batch)
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise

    async def _settle(self, batch: list[tuple[Item, asyncio.Future[Result]]]
                      ) -> Exception | None:
        """Give each caller of `batch` its result or its error; return the flush's error."""
        try:
            results = await self._flush([item for item, _ in batch])
        except Exception as exc:
            if len(batch) > 1 and self._refused(exc):
                await self._one_by_one(batch)
            else:
                _fail(batch, exc)
            return exc
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():  # a caller may have been cancelled meanwhile
                future.set_result(result)
        return None

    async def _one_by_one(self, batch: list[tuple[Item, asyncio.Future[Result]]]) -> None:
        """Each item of a refused shared statement alone, in a statement of its own. None
        is applied twice: the shared statement was one transaction and rolled back as a
        whole, so none of its items was applied before."""
        for n, entry in enumerate(batch):
            if entry[1].done():  # its caller went away: nothing to do for it
                continue
            error = await self._settle([entry])
            if error is not None and not self._refused(error):
                _fail(batch[n + 1:], error)  # an outage: no more tries, all get it at once
                return


def _fail(batch: Sequence[tuple[object, asyncio.Future[Any]]], error: Exception) -> None:
    """Every caller of `batch` gets `error`, as its own."""
    for _, future in batch:
        if not future.done():  # a caller may have been cancelled meanwhile
            future.set_exception(error)
