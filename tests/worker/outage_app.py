"""A test app that refuses connections until told to come up (and can go down again), and
the checks the outage tests share: what was POSTed, what was dead-lettered."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from conveyor.clock import Clock
from tests.server.helpers import advance_clock
from tests.support import free_port
from tests.worker.conftest import Recorded, RecordingApp, aio

POISON = "poison"  # the body the app always answers 500


async def poison_fails(request: Recorded) -> web.StreamResponse:
    """200, but 500 for the poison message."""
    if request.body == POISON.encode():
        return web.Response(status=500, text="I fail on this one")
    return web.Response(status=200, text="ok")


class SwitchedApp:
    """A RecordingApp on a fixed port that refuses connections while down, keeping one record
    of every request across its lives."""

    def __init__(self, behaviour: Callable[[Recorded], Awaitable[web.StreamResponse]]
                 = poison_fails) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests: list[Recorded] = []
        self._behaviour = behaviour
        self._app: RecordingApp | None = None

    async def up(self) -> None:
        async def answer(request: Recorded) -> web.StreamResponse:
            self.requests.append(request)
            return await self._behaviour(request)

        self._app = await RecordingApp(answer).start(self.port)

    async def down(self) -> None:
        if self._app is not None:
            await self._app.stop()
            self._app = None

    def posts(self, body: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == "POST" and r.body == body.encode()]


class DevClock(Clock):
    """The worker's clock moved together with a --dev-clock server's: its monotonic time
    moves by what `advance` adds, so heartbeats see the time pass that the server sees."""

    def monotonic_s(self) -> float:
        return time.monotonic() + self.advanced_ms / 1000


async def advance_both(server_url: str, clock: DevClock, seconds: float, *,
                       step_s: float = 5.0, settle_s: float = 0.3) -> None:
    """Move the server's and the worker's clock by `seconds`, in steps with a short real pause
    between, so that the worker's heartbeats run between the steps as they would."""
    moved = 0.0
    while moved < seconds:
        step = min(step_s, seconds - moved)
        await aio(advance_clock, server_url, step)
        clock.advance(step)
        moved += step
        await asyncio.sleep(settle_s)


def bodies_in(sqs: Any, url: str) -> list[str]:
    """Every message body a queue holds now (made visible by VisibilityTimeout 0 receives)."""
    found: list[str] = []
    for _ in range(20):
        answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                     VisibilityTimeout=30)
        messages = answer.get("Messages", [])
        if not messages:
            break
        found += [m["Body"] for m in messages]
    return found
