"""Adaptive concurrency end to end: a `conveyor worker` process with AdaptiveConcurrency
against a real app that answers 503 beyond its capacity (issue 24, part 5).

503 is the answer RFC 9110 §15.6.4 gives a server "currently unable to handle the request
due to a temporary overload". The test follows the worker's limit on its own /health
(`concurrency_limit`) while the app's capacity changes: it goes down when the app sheds
load and comes back when the app has room again; with one message a POST, and with
BatchSize 5, where each batch POST counts once against the limit. It asserts where the
limit goes, never how fast.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.support import free_port, wait_http
from tests.worker.conftest import Recorded, aio, make_queue, recording_app, run, wait_until

HTTP_CONNECTIONS = 40
SEND_AT_MOST = 60_000  # the backlog kept topped up is bounded


class SheddingApp:
    """Serves `capacity` requests at once, 0.2 s each; answers 503 to the rest. Jobs this
    long keep the app's latency flat below its capacity even on a busy machine."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.active = 0
        self.shed = 0

    async def __call__(self, _request: Recorded) -> web.StreamResponse:
        if self.active >= self.capacity:
            self.shed += 1
            return web.Response(status=503, text="over capacity")
        self.active += 1
        try:
            await asyncio.sleep(0.2)
            # An empty 200: success for one message, and for a batch (AWS Lambda's partial
            # batch response: an empty answer means no item failed)
            return web.Response(status=200)
        finally:
            self.active -= 1


def _limit(status_url: str) -> int:
    with urllib.request.urlopen(status_url + "/health", timeout=5) as resp:
        return int(json.loads(resp.read())["concurrency_limit"])


def _metric(status_url: str, name: str) -> float:
    with urllib.request.urlopen(status_url + "/metrics", timeout=5) as resp:
        lines = resp.read().decode().splitlines()
    [value] = [line.rsplit(" ", 1)[1] for line in lines if line.startswith(name + "{")]
    return float(value)


async def _keep_backlog(sqs: Any, url: str) -> None:
    """Keep a few hundred messages visible, so the worker always has work to send."""
    sent = 0
    while sent < SEND_AT_MOST:
        attributes = (await aio(sqs.get_queue_attributes, QueueUrl=url,
                                AttributeNames=["ApproximateNumberOfMessages"]))["Attributes"]
        if int(attributes["ApproximateNumberOfMessages"]) < 300:
            entries = [{"Id": str(i), "MessageBody": f"job-{sent + i}"} for i in range(10)]
            for _ in range(10):
                await aio(sqs.send_message_batch, QueueUrl=url, Entries=entries)
            sent += 100
        else:
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("batch_size", [0, 5])  # one message a POST, or BatchSize 5
def test_limit_goes_down_when_the_app_sheds_load_and_comes_back(sqs, queue_name, tmp_path,
                                                                batch_size):
    url = make_queue(sqs, queue_name)
    port = free_port()
    status_url = f"http://127.0.0.1:{port}"
    behaviour = SheddingApp(capacity=1000)

    def limit_is(test: Callable[[int], bool]) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return test(await aio(_limit, status_url))
        return check

    async def scenario() -> None:
        async with recording_app(behaviour) as app:
            feeder = asyncio.create_task(_keep_backlog(sqs, url))
            worker = _start_worker(url, app.url, port, tmp_path / "worker.log", batch_size)
            try:
                await aio(wait_http, status_url + "/health", 30, worker)
                await wait_until(limit_is(lambda n: n >= 25), 120,
                                 "the limit growing while latency stays flat")
                behaviour.capacity = 3
                await wait_until(limit_is(lambda n: n <= 6), 120,
                                 "the limit coming down to the app's capacity")
                assert behaviour.shed > 0
                behaviour.capacity = 1000
                await wait_until(limit_is(lambda n: n >= 25), 120,
                                 "the limit coming back")
                shown = await aio(_metric, status_url, "conveyor_worker_concurrency_limit")
                assert 1 <= shown <= HTTP_CONNECTIONS
                assert await aio(_metric, status_url, "conveyor_worker_concurrency_cuts_total") > 0
            finally:
                feeder.cancel()
                await asyncio.gather(feeder, return_exceptions=True)
                worker.terminate()
                await aio(worker.wait, 30)

    run(scenario(), timeout_s=400)


def _start_worker(queue_url: str, app_url: str, port: int, log: Path,
                  batch_size: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "conveyor", "worker", "--worker-queue-url", queue_url,
         "--app-url", app_url, "--adaptive-concurrency",
         "--http-connections", str(HTTP_CONNECTIONS), "--status-port", str(port),
         "--max-retries", "100", "--error-visibility-timeout", "0", "--poll-wait-time", "1",
         "--drain-timeout", "2", "--batch-size", str(batch_size)],
        stdout=log.open("ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
