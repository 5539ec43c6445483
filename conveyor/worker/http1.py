"""A lean HTTP/1.1 keep-alive client for the one thing the daemon does most: POST to the app.

Why not aiohttp here: a general client spends ~200 µs of CPU per request on machinery the
daemon does not need (cookies, redirects, multidicts, tracing); this one writes the request
bytes in one go and parses the answer with httptools (the parser uvicorn uses), which is
most of the difference between ~2,000 and ~4,000 messages/s on a 2-core machine.
It only needs what the worker uses: POST with a body, status + a few headers back, the
body drained, keep-alive, connect and response timeouts. The SQS client keeps aiohttp.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httptools

# Idle connections older than this are closed rather than reused: servers drop idle
# keep-alive connections after 2 s (gunicorn) to 75 s, and a reused dead one costs a retry.
IDLE_REUSE_S = 1.5


class ConnectFailed(OSError):
    """The connection to the app could not be made (refused, unreachable, DNS)."""


class ConnectTimeout(TimeoutError):
    """No connection to the app within ConnectTimeout."""


class ResponseTimeout(TimeoutError):
    """The app did not answer within InactivityTimeout."""


class ConnectionBroken(ConnectionError):
    """The connection closed or spoke bad HTTP before a complete answer."""


@dataclass(slots=True)
class Response:
    """What the daemon needs from an answer: the status and the headers it reads."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)


_KEPT_HEADERS = frozenset({b"retry-after"})


class _Connection(asyncio.Protocol):
    """One keep-alive connection; handles one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = time.monotonic()
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[Response] | None = None
        self._headers: dict[str, str] = {}
        self._got_bytes = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._got_bytes = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionBroken(f"bad HTTP from the app: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(ConnectionBroken(str(exc) if exc else "the app closed the connection"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() in _KEPT_HEADERS:
            self._headers[name.decode().lower()] = value.decode("latin-1")

    def on_message_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self._headers = {}  # an interim answer (100 Continue, 103 Early Hints): wait on
            return
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(Response(status, self._headers))
        if not self._parser.should_keep_alive():
            self.close()

    # use
    @property
    def answered_nothing(self) -> bool:
        """True if not a byte of the current request's answer has arrived."""
        return not self._got_bytes

    def send(self, request: bytes) -> asyncio.Future[Response]:
        """Write one request; the future resolves with its answer."""
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._headers = {}
        self._got_bytes = False
        self.transport.write(request)
        return self._waiter

    def close(self) -> None:
        """Close the connection (pending request fails)."""
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, exc: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)


class AppClient:
    """Keep-alive connections to one base URL (the app). Concurrency is the caller's to
    limit: the daemon runs exactly HttpConnections dispatchers, so at most that many open."""

    def __init__(self, base_url: str, connect_timeout_s: float) -> None:
        parts = urlsplit(base_url)
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        default_port = self._port == (443 if self._ssl else 80)
        host_header = self._host if default_port else f"{self._host}:{self._port}"
        self._host_header = host_header.encode()
        self._connect_timeout_s = connect_timeout_s
        self._idle: deque[_Connection] = deque()

    async def post(self, path: str, headers: dict[str, str], body: bytes,
                   timeout_s: float) -> Response:
        """POST `body` to `path`; raise ConnectFailed / ConnectTimeout / ResponseTimeout /
        ConnectionBroken when there is no complete answer."""
        request = self._request_bytes(path, headers, body)
        conn = self._reuse()
        if conn is not None:
            try:
                return await self._exchange(conn, request, timeout_s)
            except ConnectionBroken:
                if not conn.answered_nothing:
                    raise
                # The app closed an idle connection as we reused it: once more, on a new
                # one. (If it crashed mid-job instead, this is one more delivery — the same
                # at-least-once an SQS redelivery would give.)
        conn = await self._connect()
        return await self._exchange(conn, request, timeout_s)

    def close(self) -> None:
        """Close every idle connection."""
        while self._idle:
            self._idle.pop().close()

    def _request_bytes(self, path: str, headers: dict[str, str], body: bytes) -> bytes:
        lines = [b"POST ", path.encode(), b" HTTP/1.1\r\nHost: ", self._host_header,
                 b"\r\nContent-Length: ", str(len(body)).encode(), b"\r\n"]
        for name, value in headers.items():
            lines += [name.encode(), b": ", value.encode(), b"\r\n"]
        lines += [b"\r\n", body]
        return b"".join(lines)

    def _reuse(self) -> _Connection | None:
        now = time.monotonic()
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

    async def _exchange(self, conn: _Connection, request: bytes, timeout_s: float) -> Response:
        try:
            async with asyncio.timeout(timeout_s):
                response = await conn.send(request)
        except TimeoutError as exc:
            conn.close()
            raise ResponseTimeout(f"no answer within {timeout_s:g}s") from exc
        except BaseException:
            conn.close()
            raise
        if not conn.closed:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        return response
