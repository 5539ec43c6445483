"""Tenant limits hold fleet-wide: two server nodes on one PostgreSQL database, four workers
(two on each node) and a real app; a queue with a group cap of 3 and a receive rate of
50 messages a second (burst 10).

Checked from the app's own log of each POST's start and end (monotonic times): no group
ever has more than 3 POSTs open at once (a message is in flight from its receive until its
delete, which comes after the app's answer, so the app's overlap is within the server's),
and by any POST's start no more POSTs have started than the rate's worth since the
workers began plus the burst (a message is handed out by a receive before its POST starts,
so a late start only counts against the test). Every message is delivered. The load is
a few seconds: 200 messages at 50 a second.

Nothing here times the server: the bounds are counts within the app's own windows, and
they hold however slow the machine is (a slow machine only spreads the starts out).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.server.helpers import RawClient, unique
from tests.server.test_workers_api import workers_call
from tests.support import POSTGRES_URL, ServerProcess, isolated, require_postgres, sqs_client
from tests.worker.conftest import running_worker, wait_until

GROUPS = 5
PER_GROUP = 40
CAP, RATE, BURST = 3, 50, 10
APP_SLEEP_S = 0.2  # so that each group's cap binds: 3 / 0.2 s = 15 a second per group


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[ServerProcess]]:
    require_postgres()
    store = isolated(["--store", POSTGRES_URL])
    started = [ServerProcess(tmp_path / f"node{i}", *store).start() for i in range(2)]
    yield started
    for node in started:
        node.stop()


class LoggingApp:
    """The app: each POST sleeps APP_SLEEP_S; (group, start, end) of each is logged."""

    def __init__(self) -> None:
        self.log: list[tuple[str, float, float]] = []

    async def handle(self, request: web.Request) -> web.Response:
        started = time.monotonic()
        group = (await request.text()).split(":")[0]
        await asyncio.sleep(APP_SLEEP_S)
        self.log.append((group, started, time.monotonic()))
        return web.Response(text="ok")


def most_open_at_once(spans: list[tuple[float, float]]) -> int:
    """The most spans open at one moment (an end before a start at the same time)."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = current = 0
    for _, step in events:
        current += step
        most = max(most, current)
    return most


def most_ahead_of_the_rate(starts: list[float], since: float, per_s: float) -> float:
    """How far the starts ran ahead of the rate: the most, over every start, of how many
    had started by then less the rate's worth since `since` (the count a bucket full at
    `since` lets go is that plus the burst)."""
    return max(n - per_s * (at - since) for n, at in enumerate(sorted(starts), start=1))


def test_two_nodes_and_four_workers_hold_a_group_cap_and_a_rate(
        nodes: list[ServerProcess]) -> None:
    name = unique("tenants")
    sqs = sqs_client(nodes[0].url)
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
    done = workers_call(RawClient(nodes[0].url), "SetConveyorAttributes", {
        "QueueUrl": url, "Attributes": {"ConveyorGroupConcurrency": str(CAP),
                                        "ConveyorReceiveRate": str(RATE),
                                        "ConveyorReceiveBurst": str(BURST)}},
        "ConveyorQueues.")
    assert done.status == 200, done.body
    for group in range(GROUPS):
        for start in range(0, PER_GROUP, 10):
            sqs.send_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "MessageBody": json.dumps(f"g{group}:{i}")[1:-1],
                 "MessageGroupId": f"g{group}"} for i in range(start, start + 10)])
    app = LoggingApp()
    began = time.monotonic()  # before any worker could receive

    async def scenario() -> None:
        server = web.Application()
        server.router.add_post("/", app.handle)
        runner = web.AppRunner(server)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        app_url = f"http://127.0.0.1:{port}"
        urls = [url.replace(nodes[0].url, node.url) for node in nodes]
        try:
            async with running_worker(urls[0], app_url, CreateQueue=False) as w0, \
                    running_worker(urls[0], app_url, CreateQueue=False) as w1, \
                    running_worker(urls[1], app_url, CreateQueue=False) as w2, \
                    running_worker(urls[1], app_url, CreateQueue=False) as w3:
                workers = (w0, w1, w2, w3)
                await wait_until(lambda: len(app.log) >= GROUPS * PER_GROUP, timeout_s=120,
                                 what="every message POSTed")
                assert all(w.receiver is not None and w.receiver.extended for w in workers)
        finally:
            await runner.cleanup()

    asyncio.run(scenario())
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for group, start, end in app.log:
        spans[group].append((start, end))
    assert sorted(spans) == [f"g{g}" for g in range(GROUPS)]
    assert all(len(s) == PER_GROUP for s in spans.values())  # each once: no redelivery
    assert max(most_open_at_once(s) for s in spans.values()) <= CAP
    assert max(most_open_at_once(s) for s in spans.values()) == CAP  # the cap did bind
    # A POST starts after its message's receive, and no receive came before `began`: so
    # by any start, no more can have started than the bucket let go since `began`.
    starts = [start for _, start, _ in app.log]
    assert most_ahead_of_the_rate(starts, began, RATE) <= BURST
    receives: dict[str, Any] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages"])["Attributes"]
    assert receives["ApproximateNumberOfMessages"] == "0"
