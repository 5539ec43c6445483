"""A lean HTTP/1.1 keep-alive client for the one thing the daemon does most: POST to the app.

Why not aiohttp's client (already a dependency, for SQS): measured with
`bench/app_client.py` (a no-op app on loopback, uvloop, 256-byte POSTs with the sqsd headers,
50 connections; BENCHMARKS.md, "Worker → app HTTP client"), this client makes 51,000–72,000
POSTs/s at 14 µs of CPU each and adds 9 µs (p50) to a bare socket round trip; aiohttp 3.14,
set up as lean as it goes, makes 9,900–14,000/s at 71–73 µs each and adds 85–105 µs. Five
times the CPU per job is CPU the queue server and the app need on a small machine. aiohttp
would also not resend a POST on a kept-alive connection the app closed as it was reused
(it retries idempotent methods only), so it would need a layer of its own anyway. A general
client spends its extra CPU on machinery the daemon does not need (cookies, redirects,
multidicts, tracing, stream readers); this one writes the request bytes in one go and parses
the answer with httptools (llhttp, the parser of uvicorn and Node). Being hand-written, it
is held to a matrix: tests/worker/test_http1.py (every framing, apps that lie or break) and
tests/worker/test_app_servers.py (http.server, gunicorn, uvicorn, waitress, Node, nginx).

What it does, per RFC 9112, and only what the worker needs:

- framing of the answer (§6.3): Content-Length, chunked, and bodies delimited by the close
  of the connection (HTTP/1.0 style: `http.server`, many small frameworks and proxies) —
  complete at a clean EOF, never reused after; a body cut short (fewer bytes than its
  Content-Length, a chunked body without its last chunk, a reset) is a failure, not an
  answer. Bodies are drained without being kept, unless the caller asks for up to N bytes
  of one (a batch's answer, batch_delivery.py); past N the answer says so.
- persistence (§9.3): an HTTP/1.0 answer is kept alive only with `Connection: keep-alive`,
  an HTTP/1.1 one unless `Connection: close`; a connection is also dropped when the answer
  came before the whole request was written, or when bytes arrive that no request asked for.
- 1xx interim answers (100 Continue, 103 Early Hints) are skipped for the final answer;
  a 101 (never asked for) is bad HTTP.
- retrying (§9.3.1): a POST is sent again, once, only when it went out on a reused
  keep-alive connection that then closed without a byte of answer — the race where the app
  closes an idle connection as the request is written. Never after any byte of an answer,
  never on a new connection, never after a timeout. (If the app instead crashed on that
  request, this is one more delivery — the same as the SQS redelivery it would get anyway.)
- limits: the answer's head (status line, headers, interim answers) may not exceed
  MAX_HEAD_BYTES; the whole exchange is bounded by the caller's timeout (InactivityTimeout).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httptools

from conveyor.clock import Clock

# Idle connections older than this are closed rather than reused: servers drop idle
# keep-alive connections after 2 s (gunicorn) to 75 s, and a reused dead one costs a retry.
IDLE_REUSE_S = 1.5
# The most bytes of answer head read before the headers end: nginx's default buffers take
# 4 × 8 KiB, Node's limit is 16 KiB; past this the app is broken or hostile, and llhttp
# would otherwise buffer a header of any size in memory.
MAX_HEAD_BYTES = 64 * 1024


class ConnectFailed(OSError):
    """The connection to the app could not be made (refused, unreachable, DNS)."""


class ConnectTimeout(TimeoutError):
    """No connection to the app within ConnectTimeout."""


class ResponseTimeout(TimeoutError):
    """The app did not answer within InactivityTimeout."""


class ConnectionBroken(ConnectionError):
    """The connection closed or spoke bad HTTP before a complete answer. `answered` says
    whether any byte of an answer had arrived (a reset before any is how a restarting or
    crashing app, or its proxy, drops a request)."""

    def __init__(self, reason: str, *, answered: bool = True) -> None:
        super().__init__(reason)
        self.answered = answered


@dataclass(slots=True)
class Response:
    """What the daemon needs from an answer: the status and the headers it reads."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""  # only when asked for: its first keep_body_bytes at most
    body_too_large: bool = False  # the body was longer than keep_body_bytes (`body` its head)


_KEPT_HEADERS = frozenset({b"retry-after"})
_NO_BODY_STATUSES = frozenset({204, 304})


class _Connection(asyncio.Protocol):
    """One keep-alive connection; handles one request at a time.

    State of the current exchange: `_waiter` is resolved with the final answer once its
    body is complete (or failed); `_head_bytes` counts what arrived before the final
    answer's headers ended; `_close_delimited` says the final answer's body ends at EOF."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0  # monotonic; set when the pool takes it back
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[Response] | None = None
        self._headers: dict[str, str] = {}
        self._got_bytes = False
        self._head_bytes = 0
        self._in_head = True
        self._framed = False  # the message being parsed has a Content-Length or is chunked
        self._close_delimited = False
        self._keep_body_bytes = 0
        self._body: list[bytes] = []
        self._body_bytes = 0

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self._expecting:
            self.close()  # bytes no request asked for: the stream is out of step
            return
        self._got_bytes = True
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self._broken(f"bad HTTP from the app: {exc or type(exc).__name__}")
            return
        if self._in_head:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._broken(f"the app's answer head exceeds {MAX_HEAD_BYTES} bytes")

    def eof_received(self) -> bool | None:
        self.closed = True  # before the waiter's task runs: never pooled
        if self._expecting and self._close_delimited:
            self._resolve()  # RFC 9112 §6.3 (8): the close is the end of this body
        return None  # close our side too; connection_lost fails anything left pending

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if exc is not None:
            reason = f"connection lost: {exc}"
        elif not self._got_bytes:
            reason = "the app closed the connection without answering"
        else:
            reason = "the app closed the connection before its answer was complete"
        self._fail(ConnectionBroken(reason, answered=self._got_bytes))

    # httptools callbacks
    def on_message_begin(self) -> None:
        if not self._expecting:
            self.close()  # another answer after the final one: the stream is out of step
        self._framed = False

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length":
            self._framed = True
        elif name == b"transfer-encoding":
            # chunked only if it is the last coding (§6.3 (4)); the parser checks the rest
            self._framed = value.rsplit(b",", 1)[-1].strip().lower() == b"chunked"
        if name in _KEPT_HEADERS:
            self._headers[name.decode()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            return  # an interim answer: no body, its head counts towards the limit
        self._in_head = False
        self._close_delimited = not self._framed and status not in _NO_BODY_STATUSES

    def on_body(self, body: bytes) -> None:
        if not self._keep_body_bytes or self._in_head:
            return
        room = self._keep_body_bytes - self._body_bytes
        self._body_bytes += len(body)
        if room > 0:
            self._body.append(body[:room])

    def on_message_complete(self) -> None:
        if self._in_head:
            self._headers = {}  # an interim answer (100 Continue, 103 Early Hints): wait on
            return
        self._resolve()
        # Keep the connection only if both sides agree and the stream is in step.
        assert self.transport is not None
        if not self._parser.should_keep_alive() or self.transport.get_write_buffer_size():
            self.close()

    # use
    @property
    def answered_nothing(self) -> bool:
        """True if not a byte of the current request's answer has arrived."""
        return not self._got_bytes

    def send(self, request: bytes, keep_body_bytes: int = 0) -> asyncio.Future[Response]:
        """Write one request; the future resolves with its complete answer (and up to
        `keep_body_bytes` of its body)."""
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._headers = {}
        self._got_bytes = False
        self._head_bytes = 0
        self._in_head = True
        self._close_delimited = False
        self._keep_body_bytes = keep_body_bytes
        self._body = []
        self._body_bytes = 0
        self.transport.write(request)
        return self._waiter

    def close(self) -> None:
        """Close the connection (a pending request fails); unsent bytes are dropped."""
        self.closed = True
        if self.transport is not None:
            if self.transport.get_write_buffer_size():
                self.transport.abort()  # do not go on sending a body nobody will read
            else:
                self.transport.close()

    @property
    def _expecting(self) -> bool:
        return self._waiter is not None and not self._waiter.done()

    def _resolve(self) -> None:
        if self._expecting:
            assert self._waiter is not None
            too_large = self._body_bytes > self._keep_body_bytes
            self._waiter.set_result(Response(self._parser.get_status_code(), self._headers,
                                             b"".join(self._body), too_large))

    def _broken(self, reason: str) -> None:
        self._fail(ConnectionBroken(reason))
        self.close()

    def _fail(self, exc: Exception) -> None:
        if self._expecting:
            assert self._waiter is not None
            self._waiter.set_exception(exc)


class AppClient:
    """Keep-alive connections to one base URL (the app). Concurrency is the caller's to
    limit: the daemon runs exactly HttpConnections dispatchers, so at most that many open."""

    def __init__(self, base_url: str, connect_timeout_s: float, *, clock: Clock) -> None:
        parts = urlsplit(base_url)
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        default_port = self._port == (443 if self._ssl else 80)
        host_header = self._host if default_port else f"{self._host}:{self._port}"
        self._host_header = host_header.encode()
        self._connect_timeout_s = connect_timeout_s
        self._idle: deque[_Connection] = deque()
        self._clock = clock

    async def post(self, path: str, headers: dict[str, str], body: bytes,
                   timeout_s: float, *, keep_body_bytes: int = 0) -> Response:
        """POST `body` to `path`; raise ConnectFailed / ConnectTimeout / ResponseTimeout /
        ConnectionBroken when there is no complete answer. The answer's body is kept up to
        `keep_body_bytes` (Response.body_too_large says when there was more)."""
        return await self._send(self._request_bytes(b"POST", path, headers, body), timeout_s,
                                keep_body_bytes)

    async def get(self, path: str, headers: dict[str, str], timeout_s: float) -> Response:
        """GET `path` (the health check), raising as `post` does."""
        return await self._send(self._request_bytes(b"GET", path, headers, None), timeout_s)

    async def _send(self, request: bytes, timeout_s: float,
                    keep_body_bytes: int = 0) -> Response:
        conn = self._reuse()
        if conn is not None:
            try:
                return await self._exchange(conn, request, timeout_s, keep_body_bytes)
            except ConnectionBroken:
                if not conn.answered_nothing:
                    raise
                # The app closed this idle connection as we reused it: once more, on a
                # new one (see the module's docstring).
        conn = await self._connect()
        return await self._exchange(conn, request, timeout_s, keep_body_bytes)

    def close(self) -> None:
        """Close every idle connection."""
        while self._idle:
            self._idle.pop().close()

    def _request_bytes(self, method: bytes, path: str, headers: dict[str, str],
                       body: bytes | None) -> bytes:
        lines = [method, b" ", path.encode(), b" HTTP/1.1\r\nHost: ", self._host_header,
                 b"\r\n"]
        if body is not None:
            lines += [b"Content-Length: ", str(len(body)).encode(), b"\r\n"]
        for name, value in headers.items():
            lines += [name.encode(), b": ", value.encode(), b"\r\n"]
        lines += [b"\r\n", body or b""]
        return b"".join(lines)

    def _reuse(self) -> _Connection | None:
        now = self._clock.monotonic_s()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < IDLE_REUSE_S:
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                _transport, conn = await loop.create_connection(
                    _Connection, self._host, self._port, ssl=self._ssl)
        except TimeoutError as exc:
            msg = f"no connection to {self._host}:{self._port} in {self._connect_timeout_s}s"
            raise ConnectTimeout(msg) from exc
        except OSError as exc:
            msg = f"cannot connect to {self._host}:{self._port}: {exc.strerror or exc}"
            raise ConnectFailed(msg) from exc
        return conn

    async def _exchange(self, conn: _Connection, request: bytes, timeout_s: float,
                        keep_body_bytes: int = 0) -> Response:
        try:
            async with asyncio.timeout(timeout_s):
                response = await conn.send(request, keep_body_bytes)
        except TimeoutError as exc:
            conn.close()
            raise ResponseTimeout(f"no answer within {timeout_s:g}s") from exc
        except BaseException:
            conn.close()
            raise
        if not conn.closed:
            conn.idle_since = self._clock.monotonic_s()
            self._idle.append(conn)
        return response
