"""The hooks' `prepare` steps run for one message or a batch (runtime/hooks.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from conveyor.client import Message
from conveyor.runtime.hooks import Unavailable, WorkerHook


class DeliverySteps:
    """Runs each hook's `prepare` in order; only the hooks that override it."""

    def __init__(self, hooks: Sequence[WorkerHook]) -> None:
        self._preparers = [hook for hook in hooks
                           if type(hook).prepare is not WorkerHook.prepare]

    async def prepare(self, message: Message) -> Message:
        """The message the app is to get; Unavailable when it cannot be had now."""
        for hook in self._preparers:
            message = await hook.prepare(message)
        return message

    async def prepare_each(self, messages: Sequence[Message]) -> list[Message | Unavailable]:
        """`prepare` for several messages at once, each one's failure in its place."""
        if not self._preparers:
            return list(messages)

        async def one(message: Message) -> Message | Unavailable:
            try:
                return await self.prepare(message)
            except Unavailable as exc:
                return exc

        return list(await asyncio.gather(*(one(message) for message in messages)))
