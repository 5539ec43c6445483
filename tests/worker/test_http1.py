"""The daemon's HTTP/1.1 client against a raw socket app: valid answers in every framing
RFC 9112 allows, and apps that lie or break. Each test runs on asyncio's loop and on uvloop
(the loop the worker runs on), whose transports report closes and write errors differently.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvloop

from conveyor.clock import Clock
from conveyor.worker.http1 import (
    MAX_HEAD_BYTES,
    AppClient,
    ConnectionBroken,
    Response,
    ResponseTimeout,
)


@pytest.fixture(params=["asyncio", "uvloop"])
def go(request: pytest.FixtureRequest) -> Callable[[Coroutine[Any, Any, Any]], Any]:
    """Run a scenario on one loop, bounded so a broken client fails instead of hanging."""
    factory = uvloop.new_event_loop if request.param == "uvloop" else None

    def run(coro: Coroutine[Any, Any, Any]) -> Any:
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(asyncio.wait_for(coro, 30))
    return run


@dataclass
class RawApp:
    """What the raw app saw: connections accepted and request bodies read."""

    url: str = ""
    connections: int = 0
    bodies: list[bytes] = field(default_factory=list)

    async def read_request(self, reader: asyncio.StreamReader) -> bytes:
        """Read one request (head and Content-Length body) and record its body."""
        head = await reader.readuntil(b"\r\n\r\n")
        body = await reader.readexactly(_content_length(head))
        self.bodies.append(body)
        return body


Script = Callable[[RawApp, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _content_length(head: bytes) -> int:
    return next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:"))


@asynccontextmanager
async def raw_app(script: Script) -> AsyncIterator[RawApp]:
    """A loopback server that runs `script` on each connection it accepts."""
    app = RawApp()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        app.connections += 1
        try:
            await script(app, reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    app.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        yield app
    finally:
        server.close()


def answering(answer: bytes, *, then_close: bool = False) -> Script:
    """Answer every request on the connection with `answer` (closing after it if told)."""
    async def script(app: RawApp, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        while True:
            await app.read_request(reader)
            writer.write(answer)
            await writer.drain()
            if then_close:
                return
    return script


async def post(app: RawApp, times: int = 1, body: bytes = b"job",
               timeout_s: float = 10) -> list[Response]:
    """POST `times` times in turn through one client, as the daemon would."""
    client = AppClient(app.url, connect_timeout_s=5, clock=Clock())
    try:
        return [await client.post("/", {"X-Aws-Sqsd-Msgid": str(i)}, body, timeout_s)
                for i in range(times)]
    finally:
        client.close()


async def post_to(script: Script, times: int = 1, **kwargs: Any) -> tuple[list[int], RawApp]:
    async with raw_app(script) as app:
        responses = await post(app, times, **kwargs)
    return [r.status for r in responses], app


BIG = 4 << 20  # larger than a socket buffer: the body arrives in many reads
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


# -- valid answers: complete, and the connection kept only when both sides may ----------------

@pytest.mark.parametrize(("answer", "server_closes", "kept_alive"), [
    (OK, False, True),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"3\r\none\r\n3;ext=1\r\ntwo\r\n0\r\nX-Trailer: t\r\n\r\n", False, True),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nxy\r\n0\r\n\r\n",
     False, True),
    (b"HTTP/1.1 204 No Content\r\n\r\n", False, True),
    (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (BIG, b"x" * BIG), False, True),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"
     % (BIG, b"x" * BIG), False, True),
    # Connection: close, and HTTP/1.0 without keep-alive: the client must not reuse it
    # even though this server would take another request on it.
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", False, False),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", False, False),
    (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", False, True),
    # Bodies ended by the close (http.server's default, Node with chunking off, nginx...)
    (b"HTTP/1.0 200 OK\r\nServer: BaseHTTP/0.6\r\n\r\ndone", True, False),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\ndone", True, False),
    (b"HTTP/1.1 200 OK\r\n\r\ndone", True, False),
    (b"HTTP/1.0 200 OK\r\n\r\n" + b"x" * BIG, True, False),
    (b"HTTP/1.0 200 OK\r\n\r\n", True, False),  # an empty one
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzzz", True, False),  # §6.3 (4)
], ids=["length", "chunked+trailer", "gzip,chunked", "204", "big-length", "big-chunked",
        "1.1-close", "1.0-length", "1.0-keep-alive", "1.0-close-delimited",
        "1.1-close-delimited", "1.1-close-delimited-no-header", "big-close-delimited",
        "empty-close-delimited", "te-not-chunked"])
def test_complete_answers_and_keep_alive(go, answer, server_closes, kept_alive):
    statuses, app = go(post_to(answering(answer, then_close=server_closes), times=2))
    assert statuses == [int(answer.split()[1])] * 2
    assert app.connections == (1 if kept_alive else 2)
    assert len(app.bodies) == 2  # each request sent once


@pytest.mark.parametrize(("answer", "server_closes"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\none,two,x", False),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"4\r\none,\r\n4;ext=1\r\ntwo,\r\n1\r\nx\r\n0\r\nX-Trailer: t\r\n\r\n", False),
    (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\n\r\none,two,x", True),
], ids=["length", "chunked", "close-delimited-after-100"])
def test_a_body_asked_for_is_kept_in_every_framing(go, answer, server_closes):
    """BatchSize reads the answer's body (RFC 9112 §6.3 framing, chunk extensions and
    trailers left out); past the caller's limit it is flagged and only its head kept (a
    failed attempt's answer head, worker/attempts.py); unasked, dropped."""
    async def scenario() -> list[Response]:
        async with raw_app(answering(answer, then_close=server_closes)) as app:
            client = AppClient(app.url, connect_timeout_s=5, clock=Clock())
            try:
                return [await client.post("/", {}, b"job", 10, keep_body_bytes=limit)
                        for limit in (9, 8, 0)]
            finally:
                client.close()

    kept, over, unasked = go(scenario())
    assert (kept.body, kept.body_too_large) == (b"one,two,x", False)
    assert (over.body, over.body_too_large) == (b"one,two,", True)
    assert (unasked.body, unasked.body_too_large) == (b"", False)


@pytest.mark.parametrize("interims", [
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
    b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
])
def test_interim_answers_are_skipped_for_the_final_one(go, interims):
    final = b"HTTP/1.1 503 Busy\r\nRetry-After: 7\r\nContent-Length: 2\r\n\r\nno"
    async def scenario() -> tuple[list[Response], RawApp]:
        async with raw_app(answering(interims + final)) as app:
            return await post(app, times=2), app
    responses, app = go(scenario())
    # Twice on one kept-alive connection: the parser is back in step after each.
    assert [(r.status, r.headers) for r in responses] == [(503, {"retry-after": "7"})] * 2
    assert app.connections == 1


def test_slow_headers_within_the_timeout_are_an_answer(go):
    async def trickle(app: RawApp, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        await app.read_request(reader)
        for byte in OK:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.005)
        await reader.read()

    statuses, _app = go(post_to(trickle))
    assert statuses == [200]


def test_an_answer_before_the_whole_request_is_sent_is_taken(go):
    """The app answers after reading only the head, then reads the rest (lingering close,
    RFC 9112 §9.6). The answer counts; the connection, out of step, is not reused."""
    async def early(app: RawApp, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        writer.write(OK)
        await writer.drain()
        await asyncio.sleep(0.1)  # the client is still writing
        await reader.readexactly(_content_length(head))
        app.bodies.append(b"read")
        await reader.read()

    statuses, app = go(post_to(early, times=2, body=b"x" * (32 << 20)))
    assert statuses == [200, 200]
    assert app.connections == 2


# -- broken or lying apps: a failure, never a success, and never a resend after an answer ----

@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part of it",
    b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",  # no last chunk
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
    b"HTTP/1.1 200 OK\r\nContent-",  # the head cut short
], ids=["length-truncated", "length-no-body", "chunked-no-last-chunk", "chunk-truncated",
        "head-truncated"])
def test_an_answer_cut_short_by_the_close_is_a_failure(go, answer):
    with pytest.raises(ConnectionBroken, match="before its answer was complete"):
        go(post_to(answering(answer, then_close=True)))


def test_a_close_delimited_body_cut_by_a_reset_is_a_failure(go):
    """Only a clean close ends such a body: a reset may have lost its end."""
    async def reset(app: RawApp, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        await app.read_request(reader)
        writer.write(b"HTTP/1.0 200 OK\r\n\r\n" + b"x" * 1000)
        await writer.drain()
        await asyncio.sleep(0.05)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    with pytest.raises(ConnectionBroken):
        go(post_to(reset))


@pytest.mark.parametrize("answer", [
    b"garbage\r\n\r\n",
    b"\x00\x01\x02\x03\r\n\r\n",
    b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 OK\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nBad Header: x\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
], ids=["garbage", "binary", "status-2000", "no-status", "two-lengths", "negative-length",
        "length-and-chunked", "space-in-name", "101-upgrade"])
def test_bad_http_is_a_failure(go, answer):
    with pytest.raises(ConnectionBroken, match="bad HTTP"):
        go(post_to(answering(answer)))


@pytest.mark.parametrize("chunks", [
    b"zz\r\nab\r\n0\r\n\r\n",
    b"-1\r\nab\r\n0\r\n\r\n",
    b"fffffffffffffffffffff\r\nab\r\n0\r\n\r\n",  # overflows 64 bits
    b"3\r\nabcdef\r\n0\r\n\r\n",  # more data than the size said
    b"5\r\nab\r\n0\r\n\r\n",  # less data than the size said: the rest is read as data
], ids=["not-hex", "negative", "overflow", "longer-than-size", "shorter-than-size"])
def test_bad_chunk_sizes_are_a_failure(go, chunks):
    answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks
    with pytest.raises(ConnectionBroken):
        go(post_to(answering(answer, then_close=True)))


@pytest.mark.parametrize("flood", [
    b"X-Flood: yes\r\n" * 100_000,  # endless headers
    b"X-Flood: " + b"y" * (4 << 20),  # one endless header
    b"HTTP/1.1 100 Continue\r\n\r\n" * 100_000,  # endless interim answers
], ids=["many-headers", "one-huge-header", "interim-answers"])
def test_a_header_flood_is_cut_off(go, flood):
    async def flooding(app: RawApp, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> None:
        await app.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n" + flood if flood[:4] != b"HTTP" else flood)
        await writer.drain()
        await reader.read()

    # Cut off by the limit, well before the (long) timeout.
    with pytest.raises(ConnectionBroken, match=f"exceeds {MAX_HEAD_BYTES} bytes"):
        go(post_to(flooding, timeout_s=25))


def test_bytes_nobody_asked_for_end_the_connection(go):
    """Two answers to one request, or bytes on an idle connection: the stream is out of
    step, so the next request goes on a new connection and gets its own answer."""
    statuses, app = go(post_to(answering(OK + OK), times=2))
    assert statuses == [200, 200]
    assert app.connections == 2

    async def chatty(app: RawApp, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        await app.read_request(reader)
        writer.write(OK)
        await asyncio.sleep(0.05)
        writer.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        await answering(OK)(app, reader, writer)

    async def scenario() -> tuple[list[int], RawApp]:
        async with raw_app(chatty) as app:
            client = AppClient(app.url, connect_timeout_s=5, clock=Clock())
            first = await client.post("/", {}, b"a", 10)
            await asyncio.sleep(0.2)  # the unasked-for 408 arrives while idle
            second = await client.post("/", {}, b"b", 10)
            client.close()
            return [first.status, second.status], app

    statuses, app = go(scenario())
    assert statuses == [200, 200]
    assert app.connections == 2


def test_no_answer_in_time_is_a_timeout_and_not_resent(go):
    async def silent(app: RawApp, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        await app.read_request(reader)
        await reader.read()

    async def scenario() -> RawApp:
        async with raw_app(silent) as app:
            with pytest.raises(ResponseTimeout):
                await post(app, timeout_s=0.2)
            return app

    assert go(scenario()).bodies == [b"job"]


# -- keep-alive reuse: resent once only when the request provably got no answer --------------

def _then(first: Script, later: Script) -> Script:
    """Run `first` on the first connection and `later` on every other one."""
    async def script(app: RawApp, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        await (first if app.connections == 1 else later)(app, reader, writer)
    return script


async def _once_then_close_unanswered(app: RawApp, reader: asyncio.StreamReader,
                                      writer: asyncio.StreamWriter) -> None:
    """Answer one request and keep the connection; read the next and close without a word
    (as an app that closes an idle keep-alive connection while the request is on its way)."""
    await app.read_request(reader)
    writer.write(OK)
    await writer.drain()
    await app.read_request(reader)


async def _close_unanswered(app: RawApp, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> None:
    await app.read_request(reader)


def test_a_connection_closed_while_idle_is_not_reused(go):
    statuses, app = go(post_to(answering(OK, then_close=True), times=3))
    assert statuses == [200] * 3
    assert app.connections == 3
    assert len(app.bodies) == 3


def test_a_reused_connection_closed_unanswered_is_retried_once_on_a_new_one(go):
    statuses, app = go(post_to(_then(_once_then_close_unanswered, answering(OK)), times=2))
    assert statuses == [200, 200]
    assert app.connections == 2
    assert app.bodies == [b"job", b"job", b"job"]  # the second request: lost, then resent


def test_the_retry_is_made_once_only(go):
    with pytest.raises(ConnectionBroken, match="without answering"):
        go(post_to(_then(_once_then_close_unanswered, _close_unanswered), times=2))


def test_a_new_connection_closed_unanswered_is_not_retried(go):
    async def scenario() -> RawApp:
        async with raw_app(_close_unanswered) as app:
            with pytest.raises(ConnectionBroken, match="without answering"):
                await post(app)
            return app

    app = go(scenario())
    assert app.connections == 1
    assert app.bodies == [b"job"]


@pytest.mark.parametrize("partial", [
    b"H",
    b"HTTP/1.1 200 OK\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
    b"HTTP/1.1 100 Continue\r\n\r\n",
], ids=["one-byte", "status-line", "part-of-body", "interim-only"])
def test_never_resent_after_any_byte_of_answer(go, partial):
    async def part_then_close(app: RawApp, reader: asyncio.StreamReader,
                              writer: asyncio.StreamWriter) -> None:
        await app.read_request(reader)
        writer.write(OK)
        await app.read_request(reader)
        writer.write(partial)
        await writer.drain()

    async def scenario() -> RawApp:
        async with raw_app(part_then_close) as app:
            client = AppClient(app.url, connect_timeout_s=5, clock=Clock())
            assert (await client.post("/", {}, b"one", 10)).status == 200
            with pytest.raises(ConnectionBroken):
                await client.post("/", {}, b"two", 10)
            client.close()
            return app

    app = go(scenario())
    assert app.bodies == [b"one", b"two"]
    assert app.connections == 1
