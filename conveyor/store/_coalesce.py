"""Group commit for a database reached over the network: calls of one kind that arrive
while one of their statements runs go together in the next.

On PostgreSQL a writing statement's cost is mostly its own (the round trip, the
transaction, the commit's WAL flush), hardly the rows it carries: ten sends from ten
clients cost about ten times one send of ten messages. So a node sends the first call at
once, and whatever of the same kind arrives before that statement returns waits and goes
in one statement after it, however many. A lone call pays nothing; under load the
statements per message fall as the load rises.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class Coalescer(Generic[Item, Result]):
    """Runs `flush(items)` -> one result per item, one flush at a time, over every item
    submitted since the last flush began (at most `max_items`). Each caller gets its
    item's result, or the flush's exception: its items were in one transaction, so none
    of them was written."""

    def __init__(self, flush: Callable[[list[Item]], Awaitable[list[Result]]],
                 max_items: int) -> None:
        self._flush = flush
        self._max_items = max_items
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
                batch = self._pending[:self._max_items]
                del self._pending[:self._max_items]
                await self._run(batch)
        finally:
            self._running = None

    async def _run(self, batch: list[tuple[Item, asyncio.Future[Result]]]) -> None:
        try:
            results = await self._flush([item for item, _ in batch])
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as exc:  # every caller of the batch gets it, as its own error
            for _, future in batch:
                if not future.done():  # a caller may have been cancelled meanwhile
                    future.set_exception(exc)
            return
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)
