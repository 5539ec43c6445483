"""The model-based test's app: a raw HTTP/1.1 server whose behaviour over time follows a
seeded random schedule, and which logs every request it received and what it answered.

Modes (one at a time, each for a stretch of the schedule):
- up: 200; refusing: the port is closed (connections refused, open ones cut);
- slow: 200 after a short pause (well within InactivityTimeout);
- 500; 429 with Retry-After: 1;
- close: 200 whose body is delimited by closing the connection (RFC 9112 §6.3 (8));
- hang: no answer; the request ends when the worker gives up on it (InactivityTimeout: it
  closes the connection), or after `hang_s` at the latest.
The poison message is always answered 500. What the app answered is what the checker
counts: a 2xx it sent is final; every other answer (or a hang) is one failure of the
message's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field

from tests.support import free_port

MODES = ("up", "refusing", "slow", "500", "429", "close", "hang")
POISON = b"poison"


@dataclass
class Post:
    """One POST the app received: which message, when, and what it answered."""

    msgid: str
    body: bytes
    receive_count: int
    group: str
    started_s: float
    ended_s: float = 0.0
    answer: str = ""  # "200", "500", "429", "hang" (no answer in time), "cut" (dropped)

    @property
    def ok(self) -> bool:
        return self.answer == "200"


@dataclass
class Schedule:
    """Stretches of (mode, seconds), from a seed; after the last one the app stays up."""

    seed: int
    stretches: list[tuple[str, float]]
    fifo: bool
    restart_at_s: float | None  # the worker is stopped and started again then (a drain)
    messages: int
    poison: bool

    @classmethod
    def generate(cls, seed: int) -> Schedule:
        rng = random.Random(seed)
        stretches: list[tuple[str, float]] = []
        if rng.random() < 0.5:  # down at start: the worker starts while the app boots
            stretches.append(("refusing", rng.uniform(0.5, 6.0)))
        for _ in range(rng.randint(1, 5)):
            mode = rng.choice(MODES)
            stretches.append((mode, rng.uniform(0.3, 6.0 if mode == "refusing" else 2.0)))
        total = sum(seconds for _, seconds in stretches)
        restart = rng.uniform(0.5, total) if rng.random() < 0.25 else None
        return cls(seed, stretches, fifo=rng.random() < 0.3, restart_at_s=restart,
                   messages=rng.randint(5, 15), poison=rng.random() < 0.5)

    def mode_at(self, elapsed_s: float) -> str:
        for mode, seconds in self.stretches:
            if elapsed_s < seconds:
                return mode
            elapsed_s -= seconds
        return "up"

    @property
    def length_s(self) -> float:
        return sum(seconds for _, seconds in self.stretches)


@dataclass
class ScheduledApp:
    """The app; `start()` then it follows its schedule from that moment."""

    schedule: Schedule
    hang_s: float
    port: int = field(default_factory=free_port)
    posts: list[Post] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)
    _started_s: float = 0.0
    _task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._started_s = time.monotonic()
        self._task = asyncio.create_task(self._follow())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._down()

    def mode(self) -> str:
        return self.schedule.mode_at(time.monotonic() - self._started_s)

    async def _follow(self) -> None:
        while True:
            if self.mode() == "refusing":
                await self._down()
            elif self._server is None:
                # The port held for a moment by another socket: next tick. (Uncaught, this
                # task ended silently and the app stayed down for the rest of the run.)
                with contextlib.suppress(OSError):
                    self._server = await asyncio.start_server(self._serve, "127.0.0.1",
                                                              self.port, reuse_address=True)
            await asyncio.sleep(0.02)

    async def _down(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):  # open connections are cut too
            writer.transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if not lines[0].startswith("POST"):
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            return True
        post = Post(headers.get("x-aws-sqsd-msgid", ""), body,
                    int(headers.get("x-aws-sqsd-receive-count", "0")),
                    headers.get("x-aws-sqsd-attr-group", ""), time.monotonic())
        self.posts.append(post)
        mode = "500" if body == POISON else self.mode()
        try:
            return await self._answer(mode, post, reader, writer)
        finally:
            post.ended_s = time.monotonic()

    async def _answer(self, mode: str, post: Post, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> bool:
        if mode == "refusing":  # went down as this came in: cut it, unanswered (the request
            post.answer = "cut"  # reached the app: a failure of the message, as a hang is)
            writer.transport.abort()
            return False
        if mode == "hang":
            post.answer = "hang"
            # Its end is when the worker gave up, as the app sees it, not a guess from when
            # it came: under load the app may read a request well after it was sent.
            with contextlib.suppress(TimeoutError, ConnectionError):
                await asyncio.wait_for(reader.read(), self.hang_s)  # b"" once closed
            writer.transport.abort()
            return False
        if mode == "slow":
            await asyncio.sleep(0.2)
            if writer.transport.is_closing():  # the app went down meanwhile: never answered
                post.answer = "cut"
                return False
        if mode == "close":
            post.answer = "200"
            writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nok")
            await writer.drain()
            writer.close()
            return False
        status = {"500": b"500 Internal Server Error", "429": b"429 Too Many Requests"}.get(
            mode, b"200 OK")
        extra = b"Retry-After: 1\r\n" if mode == "429" else b""
        post.answer = status[:3].decode()
        writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 2\r\n" + extra
                     + b"\r\nok")
        await writer.drain()
        return True
