"""A long poll gets a message sent while it was looking at its queues.

Amazon SQS API reference, ReceiveMessage, WaitTimeSeconds: "The duration (in seconds) for
which the call waits for a message to arrive in the queue before returning. If a message
is available, the call returns sooner than WaitTimeSeconds." (and "Amazon SQS short and
long polling": long polling returns messages "as soon as they become available").

A send wakes the long polls parked on its queue; one made after a poll's fetch looked but
before the poll parked used to find nobody and be lost, and the poll slept out its wait
beside the message. These tests make that moment explicit instead of hoping for a race:
the server runs in the test's event loop on a real store whose claim, right after it found
nothing, lets another sender send (this node's service on the embedded store; another
node, through PostgreSQL's NOTIFY, on PostgreSQL).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from conveyor.clock import Clock, ManualClock
from conveyor.server.app import App, ServerSettings
from conveyor.server.http import HttpServer
from conveyor.server.waiters import Waiters
from conveyor.service import RequestContext, Service
from conveyor.sqs.limits import STRICT
from conveyor.store.base import QueueRecord, Store
from conveyor.store.journal import JournaledStore
from conveyor.store.postgres import PostgresStore
from tests.server.helpers import RawClient
from tests.server.test_workers_api import workers_call
from tests.support import (
    ANSWERED_WITHIN_S,
    CREATED_SCHEMAS,
    LONGEST_WAIT_S,
    POSTGRES_URL,
    require_postgres,
    sqs_client,
)

Send = Callable[[QueueRecord], Awaitable[None]]


class _SendsWhileThePollLooks:
    """Makes `store` run `then(queue)` once, at a moment between a long poll's look at the
    queue and its parking: the other sender's send. `moment` is "claim" (right after a
    claim that found nothing: the poll's fetch) or "next_visible_ms" (right after the
    query that plans the poll's sleep). It wraps the store's methods on the instance: the
    compiled build's JournaledStore (setup.py) takes no subclasses."""

    def __init__(self, store: Store, moment: str) -> None:
        self.moment = moment
        self.then: Send | None = None
        claim, next_visible_ms = store.claim, store.next_visible_ms

        @contextlib.asynccontextmanager
        async def claim_then(queue: QueueRecord, *args: Any) -> AsyncIterator[Any]:
            async with claim(queue, *args) as claimed:
                yield claimed
            if not claimed.messages and self.moment == "claim":
                await self._then(queue)

        async def next_visible_then(queue: QueueRecord, now_ms: int) -> int | None:
            next_ms = await next_visible_ms(queue, now_ms)
            if self.moment == "next_visible_ms":
                await self._then(queue)
            return next_ms

        store.claim = claim_then  # type: ignore[method-assign]
        store.next_visible_ms = next_visible_then  # type: ignore[method-assign]

    async def _then(self, queue: QueueRecord) -> None:
        if self.then is not None:
            then, self.then = self.then, None
            await then(queue)


@contextlib.asynccontextmanager
async def _serving(store: Store, clock: Clock) -> AsyncIterator[tuple[Service, str]]:
    """The server (App over HttpServer) on `store`, on a free loopback port. The clock
    the tests give stands still: the message is sent in the millisecond the poll looked,
    so no query of the poll's sees it as "visible since" by luck (the wait itself runs on
    the event loop's time)."""
    service = Service(store, STRICT, clock)
    app = App(service, ServerSettings())
    http = HttpServer(app.handle, service.limits.max_request_bytes)
    port = await http.start("127.0.0.1", 0)
    try:
        yield service, f"http://127.0.0.1:{port}"
    finally:
        app.stop()  # a poll still parked answers now, so its client thread ends
        await http.stop()


async def _answer(call: Callable[[], Any]) -> Any:
    """`call`'s answer (made on a thread); fails if it is still waiting ANSWERED_WITHIN_S
    later: nothing woke the poll, which sits out its LONGEST_WAIT_S."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(call), ANSWERED_WITHIN_S)
    except TimeoutError:
        raise AssertionError(f"the long poll is still waiting {ANSWERED_WITHIN_S} s later "
                             "although a message was sent while it looked") from None


def _sender(service: Service, urls: dict[str, str], grouped: bool = False) -> Send:
    """A send through `service` to the queue just looked at, as another sender's; with a
    message group if `grouped` (a fair queue) or the queue is FIFO."""
    async def send(queue: QueueRecord) -> None:
        ctx = RequestContext("us-east-1", "000000000000", "http://127.0.0.1")
        group = {"MessageGroupId": "g"} if grouped or queue.fifo else {}
        if queue.fifo:
            group["MessageDeduplicationId"] = "d"
        await service.action("SendMessage")(
            ctx, {"QueueUrl": urls[queue.name], "MessageBody": "sent while it looked", **group})
    return send


RECEIVES = ["ReceiveMessage", "ReceiveMessage FIFO", "ReceiveMessage fair",
            "PollMessages QueueUrls"]
MOMENTS = ["claim", "next_visible_ms"]


@pytest.mark.parametrize("moment", MOMENTS)
@pytest.mark.parametrize("receive", RECEIVES)
def test_a_send_while_the_poll_looks_wakes_it(tmp_path: Path, receive: str,
                                              moment: str) -> None:
    """On the embedded store: the send is this node's own (its on_ready wakes the poll).
    Every kind of long poll: one queue, a FIFO queue, a fair queue (a standard queue
    with message groups), several queues (partitions)."""
    async def scenario() -> None:
        store = JournaledStore(tmp_path)
        looks = _SendsWhileThePollLooks(store, moment)
        try:
            async with _serving(store, ManualClock()) as (service, url):
                sqs = sqs_client(url, read_timeout=LONGEST_WAIT_S + 30)
                names = ["a.fifo"] if receive.endswith("FIFO") else ["a", "b"]
                urls = {}
                for name in names:
                    attributes = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
                    urls[name] = (await asyncio.to_thread(
                        sqs.create_queue, QueueName=name, Attributes=attributes))["QueueUrl"]
                looks.then = _sender(service, urls, grouped=receive.endswith("fair"))
                if receive.startswith("PollMessages"):
                    raw = RawClient(url, timeout_s=LONGEST_WAIT_S + 30)
                    resp = await _answer(lambda: workers_call(raw, "PollMessages", {
                        "QueueUrls": list(urls.values()), "WaitTimeSeconds": LONGEST_WAIT_S}))
                    assert resp.status == 200, resp.body
                    answer = resp.json()
                else:
                    answer = await _answer(lambda: sqs.receive_message(
                        QueueUrl=urls[names[0]], WaitTimeSeconds=LONGEST_WAIT_S))
                assert looks.then is None  # the send was made, while the poll looked
                assert [m["Body"] for m in answer["Messages"]] == ["sent while it looked"]
        finally:
            await store.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("moment", MOMENTS)
def test_another_nodes_send_while_the_poll_looks_wakes_it(moment: str) -> None:
    """On PostgreSQL: the send is another node's, on the same schema; its NOTIFY reaches
    this node's store (and wakes its polls) before the store returns to the poll, i.e.
    before the poll parks."""
    require_postgres()
    schema = "t_" + os.urandom(6).hex()
    CREATED_SCHEMAS.append(schema)
    dsn = f"{POSTGRES_URL}?schema={schema}"

    async def scenario() -> None:
        clock = ManualClock()  # both nodes' (their stores measure their skew against it)
        store = await PostgresStore(dsn, 4, clock).open()
        looks = _SendsWhileThePollLooks(store, moment)
        other = await PostgresStore(dsn, 4, clock).open()
        try:
            async with _serving(store, clock) as (_service, url):
                sqs = sqs_client(url, read_timeout=LONGEST_WAIT_S + 30)
                queue_url = (await asyncio.to_thread(sqs.create_queue,
                                                     QueueName="q"))["QueueUrl"]
                heard = asyncio.Event()
                wake = store.on_remote_ready  # set by this node's service: wakes its polls
                store.on_remote_ready = lambda queue_id, count: (wake(queue_id, count),
                                                                 heard.set())
                send = _sender(Service(other, STRICT, clock), {"q": queue_url})

                async def send_and_wait_for_the_notification(queue: QueueRecord) -> None:
                    await send(queue)
                    await asyncio.wait_for(heard.wait(), ANSWERED_WITHIN_S)

                looks.then = send_and_wait_for_the_notification
                answer = await _answer(lambda: sqs.receive_message(
                    QueueUrl=queue_url, WaitTimeSeconds=LONGEST_WAIT_S))
                assert looks.then is None and heard.is_set()
                assert [m["Body"] for m in answer["Messages"]] == ["sent while it looked"]
        finally:
            await other.close()
            await store.close()

    asyncio.run(scenario())


# --------------------------------------------------------------------------- Waiters


def test_a_wake_up_before_the_wait_ends_it_at_once() -> None:
    """A wake-up while the receiver looks (armed, not yet waiting) is kept for its wait."""
    async def scenario() -> None:
        waiters = Waiters()
        gone = asyncio.get_running_loop().create_future()
        with waiters.watch([1]) as watch:
            waiters.notify(1, 1)  # during the look
            assert await watch.wait(LONGEST_WAIT_S, gone) == 1
            watch.rearm()  # the look it leads to spends it
            assert await watch.wait(0, gone) is None

    asyncio.run(scenario())


def test_a_watcher_that_leaves_without_looking_again_hands_its_wake_up_on() -> None:
    """`notify(queue, 1)` wakes one watcher. If that one was mid-look and leaves with
    what the look found (older messages), the parked receiver behind it must get the
    wake-up, or the new message sits unclaimed while it sleeps."""
    async def scenario() -> None:
        waiters = Waiters()
        gone = asyncio.get_running_loop().create_future()
        looking = waiters.watch([1])  # armed first: first in line for a wake-up
        with waiters.watch([1, 2]) as parked:  # looked, found nothing, about to wait
            waiters.notify(1, 1)  # a send: wakes `looking`, who is still looking
            looking.close()  # its look found messages: it answers with them
            assert await parked.wait(0, gone) == 1

    asyncio.run(scenario())
