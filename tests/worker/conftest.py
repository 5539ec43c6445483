"""Helpers for the worker tests: a real HTTP app, a worker run in-process, and waiting."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web

from conveyor.clock import Clock
from conveyor.worker import Worker, load_config
from conveyor.worker.cli import WORKER_HOOKS
from conveyor.worker.daemon import HookFactory
from tests.support import MOTO, ServerProcess, running_moto, sqs_client

# Small values so every test runs in seconds; tests never assert how long anything took.
FAST = {
    "PollWaitTime": 1,
    "ExtendedPollWaitTime": 2,  # PollMessages on a Conveyor server (the default there)
    "IdleBackoffMin": 0.05,
    "IdleBackoffMax": 0.2,
    "ErrorVisibilityTimeout": 0,
    "DrainTimeout": 2,
}


@pytest.fixture(scope="module")
def clock_server(tmp_path_factory) -> Iterator[ServerProcess]:
    """A relaxed server whose clock tests move (tests.server.helpers.advance_clock)."""
    proc = ServerProcess(tmp_path_factory.mktemp("clock-server"), "--mode", "relaxed",
                         "--dev-clock").start()
    yield proc
    proc.stop()


@pytest.fixture
def clock_sqs(clock_server: ServerProcess) -> Any:
    return sqs_client(clock_server.url)


@pytest.fixture(scope="module")
def moto_sqs_url(tmp_path_factory) -> Iterator[str]:
    """moto's server (SQS, threaded) on a free port: a stand-in for Amazon SQS (no Conveyor
    calls)."""
    with running_moto(lambda port: [str(MOTO), "-H", "127.0.0.1", "-p", str(port)],
                      tmp_path_factory.mktemp("moto")) as url:
        yield url


def run(coro: Coroutine[Any, Any, Any], timeout_s: float = 90.0) -> Any:
    """Run one async scenario with an overall limit, so a broken test fails instead of hanging."""
    async def bounded() -> Any:
        async with asyncio.timeout(timeout_s):
            return await coro
    return asyncio.run(bounded())


async def aio(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a blocking boto3 function without blocking the loop that runs app and worker."""
    return await asyncio.to_thread(func, *args, **kwargs)


async def wait_until(predicate: Callable[[], Any], timeout_s: float = 30.0,
                     what: str = "condition") -> None:
    """Poll `predicate` (sync or async) until truthy; fail the test after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if isinstance(value, Awaitable):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@dataclass
class Recorded:
    """One request the app received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def msgid(self) -> str:
        return self.headers.get("X-Aws-Sqsd-Msgid", "")

    @property
    def receive_count(self) -> int:
        return int(self.headers.get("X-Aws-Sqsd-Receive-Count", "0"))


Behaviour = Callable[[Recorded], Awaitable[web.StreamResponse]]


async def ok(_request: Recorded) -> web.StreamResponse:
    return web.Response(status=200, text="ok")


class RecordingApp:
    """A real aiohttp app on a loopback port that records every request it gets."""

    def __init__(self, behaviour: Behaviour = ok) -> None:
        self.behaviour = behaviour
        self.requests: list[Recorded] = []
        self.active = 0
        self.max_active = 0
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self, port: int = 0) -> RecordingApp:
        # Large enough for claim-checked bodies (aiohttp refuses more than 1 MiB by default).
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True,
                                     shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", port).start()
        host, bound = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{bound}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        record = Recorded(request.method, request.path_qs, dict(request.headers),
                          await request.read())
        self.requests.append(record)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            return await self.behaviour(record)
        finally:
            self.active -= 1

    def calls_for(self, msgid: str) -> list[Recorded]:
        return [r for r in self.requests if r.msgid == msgid]


@asynccontextmanager
async def recording_app(behaviour: Behaviour = ok, port: int = 0) -> AsyncIterator[RecordingApp]:
    app = await RecordingApp(behaviour).start(port)
    try:
        yield app
    finally:
        await app.stop()


@asynccontextmanager
async def running_worker(queue_url: str, app_url: str, *, clock: Clock | None = None,
                         hooks: Sequence[HookFactory] = WORKER_HOOKS,
                         **options: Any) -> AsyncIterator[Worker]:
    """Run a Worker in this loop with FAST defaults (and the hooks `conveyor worker` gives
    it, unless told otherwise); drain and check it on exit."""
    config = load_config({"WorkerQueueURL": queue_url, "AppURL": app_url, **FAST, **options})
    worker = Worker(config, clock=clock, hooks=hooks)
    task = asyncio.create_task(worker.run())
    ready = asyncio.create_task(worker.ready.wait())
    await asyncio.wait({task, ready}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()  # raises what made the worker stop
    assert worker.ready.is_set(), "worker did not start"
    try:
        yield worker
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)


def make_queue(sqs: Any, name: str, **attributes: str) -> str:
    """Create a queue through boto3 (the real SDK) and return its URL."""
    return sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]


def queue_total(sqs: Any, url: str) -> int:
    """Visible + in flight + delayed messages."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
             "ApproximateNumberOfMessagesDelayed"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attributes.get(name, 0)) for name in names)
