"""The asyncio front end: the same core and background receivers, awaited instead of blocked.

Waiting for a message is native (an asyncio event woken from the receiver thread through
`call_soon_threadsafe`); SQS calls run in worker threads with `asyncio.to_thread`, since
boto3 is synchronous.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from .core import Message, Params
from .errors import ResponseTimeout
from .requester import Requester, Responder
from .virtual import VirtualQueuesClient


async def wait_for_messages(virtual: VirtualQueuesClient, queue_url: str, max_count: int,
                            wait_s: float) -> list[Message]:
    """Up to `max_count` messages of a virtual queue, awaiting up to `wait_s` seconds."""
    queue = virtual.virtual_queue(queue_url)
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def wake() -> None:  # runs in the receiver thread
        with contextlib.suppress(RuntimeError):  # the loop already closed: nobody waits
            loop.call_soon_threadsafe(woken.set)

    queue.receiver_started(virtual.monotonic())
    queue.buffer.add_waiter(wake)
    try:
        deadline_s = time.monotonic() + wait_s
        while True:
            messages = queue.buffer.take(max_count)
            remaining_s = deadline_s - time.monotonic()
            if messages or queue.buffer.closed or remaining_s <= 0:
                return messages
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), remaining_s)
            woken.clear()
    finally:
        queue.buffer.remove_waiter(wake)
        queue.receiver_ended(virtual.monotonic())


class AsyncRequester:
    """`Requester` for asyncio code; shares the thread front end's queues and receivers."""

    def __init__(self, requester: Requester) -> None:
        self.requester = requester

    @classmethod
    def create(cls, sqs: Any, **options: Any) -> AsyncRequester:
        """An async requester over a new `Requester(sqs, **options)`."""
        return cls(Requester(sqs, **options))

    async def send_message_and_get_response(self, request: Params, timeout_s: float) -> Message:
        """Send `request`, await the first reply; ResponseTimeout after `timeout_s`."""
        requester = self.requester
        url = await asyncio.to_thread(requester.create_response_queue)
        try:
            await asyncio.to_thread(requester.send_request, request, url)
            replies = await wait_for_messages(requester.temporary.virtual, url, 1, timeout_s)
            if not replies:
                raise ResponseTimeout(url, timeout_s)
            await asyncio.to_thread(requester.acknowledge, url, replies[0])
            return replies[0]
        finally:
            requester.temporary.delete_queue(QueueUrl=url)  # local: no SQS call

    async def shutdown(self) -> None:
        """Shut the requester down without blocking the event loop."""
        await asyncio.to_thread(self.requester.shutdown)


class AsyncResponder:
    """`Responder` for asyncio code."""

    def __init__(self, sqs: Any) -> None:
        self.responder = Responder(sqs)

    @staticmethod
    def is_response_message_requested(message: Message) -> bool:
        """True if the request expects a reply."""
        return Responder.is_response_message_requested(message)

    async def send_response_message(self, request: Message, response: Params) -> bool:
        """Send the response in a worker thread; False if it was dropped (see Responder)."""
        return await asyncio.to_thread(self.responder.send_response_message, request, response)
