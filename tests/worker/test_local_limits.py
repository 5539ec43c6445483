"""What the worker applies itself where the queue server cannot (worker/local_limits.py).

ReceiveRate: where the server enforces no receive rate (it does not answer Conveyor's
PollMessages: Amazon SQS, any other SQS server), the worker bounds its own receives and
says so in one line at its first receive. Here the server is a real Conveyor server that
the worker is told not to poll with PollMessages (ExtendedPollWaitTime 0), so it reads it
as it reads any SQS server; the app records every POST. Checked from the app's log: a
message is received before its POST starts, and no receive came before the worker began,
so by any POST's start no more POSTs can have started than the rate's worth since then
plus the burst.

GroupConcurrency: where the queue has no ConveyorGroupConcurrency (moto, as Amazon SQS,
knows no such attribute), the worker keeps each message group at that many POSTs at once,
read from the app's log of each POST's start and end.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from aiohttp import web

from tests.cluster.test_tenant_limits import most_ahead_of_the_rate
from tests.support import sqs_client
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


# -- GroupConcurrency ---------------------------------------------------------------------

GROUP_CAP, NOISY, QUIET_GROUPS, QUIET = 2, 20, 3, 5


def at_once(events: list[tuple[str, str]], counted: Callable[[str], bool]) -> int:
    """The most POSTs open at once, from the app's log of starts and ends, of the groups
    `counted` picks."""
    open_, most = 0, 0
    for what, group in events:
        if counted(group):
            open_ += 1 if what == "start" else -1
            most = max(most, open_)
    return most


def test_on_moto_a_worker_caps_each_message_group_itself(moto_sqs_url, queue_name, caplog):
    """moto, like Amazon SQS, caps no group: the worker keeps each at GroupConcurrency at
    its app, and the other groups' messages pass the noisy group's line."""
    moto = sqs_client(moto_sqs_url)
    url = make_queue(moto, queue_name)
    events: list[tuple[str, str]] = []
    alongside: list[int] = []  # for each quiet POST, how many noisy ones were open

    async def answer(request: Recorded) -> web.StreamResponse:
        group = request.body.decode().split("-")[0]
        if group != "noisy":
            alongside.append(at_once(events, lambda g: g == "noisy"))
        events.append(("start", group))
        await asyncio.sleep(0.1)  # long enough for the noisy group's line to form
        events.append(("end", group))
        return web.Response(text="ok")

    # The noisy group first: its messages fill the first receives, the quiet ones after.
    sent = [(f"noisy-{i}", "noisy") for i in range(NOISY)] + [
        (f"quiet{g}-{i}", f"quiet{g}") for g in range(QUIET_GROUPS) for i in range(QUIET)]

    async def scenario() -> None:
        for start in range(0, len(sent), 10):
            await aio(moto.send_message_batch, QueueUrl=url, Entries=[
                {"Id": str(i), "MessageBody": body, "MessageGroupId": group}
                for i, (body, group) in enumerate(sent[start:start + 10])])
        async with recording_app(answer) as app, running_worker(
                url, app.url, CreateQueue=False, HttpConnections=10,
                GroupConcurrency=GROUP_CAP) as worker:
            await wait_until(lambda: len(events) == 2 * len(sent), timeout_s=60,
                             what="every message POSTed")
            await wait_until(lambda: queue_total(moto, url) == 0, what="every message deleted")
            assert sorted(r.body.decode() for r in app.requests) == sorted(b for b, _ in sent)
            assert worker.settlement.invariants.broken == []

    with caplog.at_level(logging.INFO, logger="conveyor.worker.daemon"):
        run(scenario())
    for group in {group for _, group in sent}:
        assert at_once(events, lambda g, group=group: g == group) <= GROUP_CAP, group
    assert at_once(events, lambda g: g == "noisy") == GROUP_CAP
    assert max(alongside) == GROUP_CAP  # the quiet groups went on while noisy was capped
    said = [r.getMessage() for r in caplog.records if "GroupConcurrency" in r.getMessage()]
    assert said == [f"queue {queue_name}: the server caps no message group: this worker "
                    f"keeps at most GroupConcurrency={GROUP_CAP} of each at its app at once"]


def test_a_conveyor_queue_with_its_own_cap_keeps_it_and_one_without_is_capped_here(
        sqs, queue_name, caplog):
    """A queue's ConveyorGroupConcurrency holds for every worker: the worker leaves the cap
    to it; without one, it applies its own."""

    async def scenario() -> dict[str, int]:
        caps = {}
        for name, attributes in ((f"{queue_name}-server", {"ConveyorGroupConcurrency": "3"}),
                                 (f"{queue_name}-local", {})):
            url = await aio(make_queue, sqs, name, **attributes)
            async with running_worker(url, "http://127.0.0.1:9", GroupConcurrency=2) as worker:
                caps[name] = worker.settlement.groups.cap
        return caps

    with caplog.at_level(logging.INFO, logger="conveyor.worker.daemon"):
        caps = run(scenario())
    assert caps == {f"{queue_name}-server": 0, f"{queue_name}-local": 2}
    said = [r.getMessage() for r in caplog.records if "GroupConcurrency" in r.getMessage()]
    assert said == [
        f"queue {queue_name}-server: the Conveyor server caps each message group at 3 in "
        "flight (ConveyorGroupConcurrency, for every worker); GroupConcurrency=2 is left to it",
        f"queue {queue_name}-local: the server caps no message group: this worker keeps at "
        "most GroupConcurrency=2 of each at its app at once"]
