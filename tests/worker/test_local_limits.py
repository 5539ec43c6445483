"""ReceiveRate: where the server enforces no receive rate (it does not answer Conveyor's
PollMessages: Amazon SQS, any other SQS server), the worker bounds its own receives and
says so in one line at its first receive (worker/local_limits.py). Here the server is a
real Conveyor server that the worker is told not to poll with PollMessages
(ExtendedPollWaitTime 0), so it reads it as it reads any SQS server; the app records
every POST.

Checked from the app's log: a message is received before its POST starts, and no receive
came before the worker began, so by any POST's start no more POSTs can have started than
the rate's worth since then plus the burst.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web

from tests.cluster.test_tenant_limits import most_ahead_of_the_rate
from tests.worker.conftest import (
    Recorded,
    aio,
    make_queue,
    queue_total,
    recording_app,
    run,
    running_worker,
    wait_until,
)

RATE, BURST, MESSAGES = 10, 3, 20


def test_a_worker_applies_its_receive_rate_where_the_server_cannot(sqs, queue_name, caplog):
    starts: list[float] = []

    async def answer(_request: Recorded) -> web.StreamResponse:
        starts.append(time.monotonic())
        return web.Response(text="ok")

    async def scenario() -> float:
        url = await aio(make_queue, sqs, queue_name)
        for start in range(0, MESSAGES, 10):
            await aio(sqs.send_message_batch, QueueUrl=url, Entries=[
                {"Id": str(i), "MessageBody": str(i)} for i in range(start, start + 10)])
        async with recording_app(answer) as app:
            began = time.monotonic()
            async with running_worker(url, app.url, ExtendedPollWaitTime=0,
                                      ReceiveRate=RATE, ReceiveBurst=BURST):
                await wait_until(lambda: queue_total(sqs, url) == 0, timeout_s=30,
                                 what="every message deleted")
                await asyncio.sleep(0)
        return began

    with caplog.at_level(logging.INFO, logger="conveyor.worker.daemon"):
        began = run(scenario())
    assert len(starts) == MESSAGES
    assert most_ahead_of_the_rate(starts, began, RATE) <= BURST
    said = [r.getMessage() for r in caplog.records if "ReceiveRate" in r.getMessage()]
    assert len(said) == 1 and "this worker applies ReceiveRate=10/s (burst 3)" in said[0]
