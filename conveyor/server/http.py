"""A small HTTP/1.1 server on asyncio + httptools, made for the SQS API's shape.

Why not uvicorn: every SQS call is one small POST, and the generic ASGI machinery cost
about 45 µs of CPU per request here, more than the queue work of a batched send. This
keeps what the API needs: keep-alive, pipelining, Content-Length and chunked bodies,
`Expect: 100-continue`, size limits with clear errors, a future that tells a long
poll its client has gone, and bounds on what a slow or abusive client can hold: time
limits for receiving (408), a connection cap, and optional TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any, cast

import httptools

log = logging.getLogger("conveyor.server.http")

MAX_HEADER_BYTES = 64 * 1024  # URL + headers of one request
IDLE_TIMEOUT_S = 75.0  # close keep-alive connections idle this long (above common LB idle)
REQUEST_TIMEOUT_S = 30.0  # to receive a request's head and body once its first byte came
# A new connection's first byte (or TLS handshake): SDKs write as soon as they connect,
# so a silent connection this long is a scanner or a slowloris, not a client.
FIRST_BYTE_TIMEOUT_S = 10.0
# Open connections beyond which new ones are closed at accept: each costs a descriptor
# and a few KiB, and 10,000 is far above what a fleet of workers and producers opens.
MAX_CONNECTIONS = 10_000
CAP_WARNING_EVERY_S = 60.0  # log the cap being hit once a minute, not per connection
ACCEPT_RETRY_S = 1.0  # out of descriptors: accept again after this pause, as asyncio does
# A TLS connection being closed waits this long for its last bytes to drain and for the
# client's close_notify; asyncio's default, 30 s, kept closed connections' sockets open.
TLS_SHUTDOWN_TIMEOUT_S = 5.0


# init=False and __init__ written out: compiled, it is a quarter of the cost (setup.py)
@dataclass(slots=True, init=False)
class Request:
    method: str
    path: str
    query_string: bytes
    headers: dict[str, str]  # lower-cased names
    body: bytes
    client_gone: asyncio.Future[None]  # resolves when the connection closes
    scheme: str = "http"
    body_too_large: bool = False  # the body passed max_body_bytes and was dropped
    peer: str = ""  # the client's address: the socket's peer (no proxy header is trusted)

    def __init__(self, method: str, path: str, query_string: bytes, headers: dict[str, str],
                 body: bytes, client_gone: asyncio.Future[None], scheme: str = "http",
                 body_too_large: bool = False, peer: str = "") -> None:
        self.method, self.path, self.query_string = method, path, query_string
        self.headers, self.body, self.client_gone = headers, body, client_gone
        self.scheme, self.body_too_large, self.peer = scheme, body_too_large, peer


# init=False and __init__ written out: compiled, it is a quarter of the cost (setup.py)
@dataclass(slots=True, init=False)
class Response:
    status: int
    body: bytes
    content_type: bytes = b"application/json"
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    content_length: int | None = None  # a HEAD answer's: the length a GET's body would have

    def __init__(self, status: int, body: bytes, content_type: bytes = b"application/json",
                 headers: list[tuple[bytes, bytes]] | None = None,
                 content_length: int | None = None) -> None:
        self.status, self.body, self.content_type = status, body, content_type
        self.headers = [] if headers is None else headers
        self.content_length = content_length


Handler = Callable[[Request], Awaitable[Response | None]]

_REASONS = {200: b"OK", 204: b"No Content", 303: b"See Other", 400: b"Bad Request",
            401: b"Unauthorized", 429: b"Too Many Requests",
            403: b"Forbidden", 404: b"Not Found", 405: b"Method Not Allowed",
            408: b"Request Timeout", 413: b"Payload Too Large", 414: b"URI Too Long",
            431: b"Request Header Fields Too Large", 500: b"Internal Server Error",
            501: b"Not Implemented", 503: b"Service Unavailable"}


class _Connection(asyncio.Protocol):
    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.gone: asyncio.Future[None] = server.loop.create_future()
        # (request, keep-alive, the answer when the request was refused unread)
        self.pending: deque[tuple[Request, bool, Response | None]] = deque()
        self.worker: asyncio.Task[None] | None = None  # one per connection, see _serve
        self.wakeup: asyncio.Future[None] | None = None  # set while the worker is idle
        self.handshake: asyncio.Task[None] | None = None  # TLS: until it is done
        self.peer = ""  # the client's address, known once connected
        self._reset()
        # Time limits (checked by HttpServer's sweep, never by a timer per request):
        self.receiving = False  # between a request's first byte and its last
        self.request_started = 0.0  # when that first byte came
        self.last_active = server.loop.time()  # connected, or last answer written

    def _reset(self) -> None:
        self.url = b""
        self.url_bytes = 0
        self.headers: dict[str, str] = {}
        self.header_bytes = 0
        self.hosts = 0
        self.body: list[bytes] = []
        self.body_bytes = 0

    # --- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """At accept; with TLS once the handshake is done, the connection counted since
        its accept (HttpServer._accept_tls)."""
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = self.transport.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        if self.server.tls is None and not self.server.admit(self):
            self.transport.abort()
            return
        self.last_active = self.server.loop.time()

    async def start_tls(self, sock: socket.socket, context: ssl.SSLContext) -> None:
        """Serve HTTPS on an accepted socket; if the handshake fails, free its place."""
        transport = None
        try:
            transport, _ = await self.server.loop.connect_accepted_socket(
                lambda: self, sock, ssl=context,
                # A handshake gets no longer than a plain connection's first byte.
                ssl_handshake_timeout=self.server.first_byte_timeout_s,
                ssl_shutdown_timeout=TLS_SHUTDOWN_TIMEOUT_S)
        except Exception as exc:  # whatever ends a handshake, the place must be freed
            log.debug("TLS handshake failed: %r", exc)
        finally:  # also when cancelled (the server stopping)
            self.handshake = None
            if transport is None or transport.is_closing():  # failed, or closed midway
                self.connection_lost(None)  # idempotent: the TLS layer may call it too

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        if self.wakeup is not None:
            self.wakeup.cancel()  # ends the idle worker
        if not self.gone.done():
            self.gone.set_result(None)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(400, b"Upgrades are not supported.")
        except httptools.HttpParserError:
            self._fail(400, b"Malformed HTTP request.")

    # --- httptools callbacks ------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._reset()
        self.receiving = True
        self.request_started = self.server.loop.time()

    def on_url(self, url: bytes) -> None:
        self.url_bytes += len(url)
        self.header_bytes += len(url)
        if self.header_bytes <= MAX_HEADER_BYTES:
            self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        # Called once per header from C: keep it minimal; names are lowered once here.
        # Past the limit a head is only counted, so its size never costs memory (431).
        self.header_bytes += len(name) + len(value)
        if self.header_bytes <= MAX_HEADER_BYTES:
            key = name.lower().decode("latin-1")
            if key == "host":
                self.hosts += 1
            self.headers[key] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        if self.headers.get("expect", "").lower() == "100-continue" and self.transport:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self.body_bytes += len(body)
        if self.body_bytes <= self.server.body_limit(self.url):
            self.body.append(body)

    def on_message_complete(self) -> None:
        self.receiving = False
        rejected = self._refusal()
        if rejected is not None:
            self.url = b"/"  # never handled; what was kept of it may be cut anywhere
        url: Any = httptools.parse_url(self.url)  # its query is None when none (stub: bytes)
        too_large = self.body_bytes > self.server.body_limit(self.url)
        request = Request(self.parser.get_method().decode("ascii", "replace"),
                          url.path.decode("latin-1"), url.query or b"", self.headers,
                          b"" if too_large else b"".join(self.body), self.gone,
                          self.server.scheme, too_large, self.peer)
        self.pending.append((request, self.parser.should_keep_alive(), rejected))
        if self.wakeup is not None:
            wakeup, self.wakeup = self.wakeup, None
            wakeup.set_result(None)
        elif self.worker is None or self.worker.done():  # first request, or the worker failed
            self.worker = self.server.loop.create_task(self._serve())

    def _refusal(self) -> Response | None:
        """The answer to a request refused before its handler sees it, else None."""
        if self.header_bytes > MAX_HEADER_BYTES:
            if self.url_bytes > MAX_HEADER_BYTES:
                return Response(414, b'{"message":"Request URI too long."}')
            return Response(431, b'{"message":"Request headers too large."}')
        # RFC 9112 section 3.2: "A server MUST respond with a 400 (Bad Request) status code
        # to any HTTP/1.1 request message that lacks a Host header field and to any request
        # message that contains more than one Host header field line".
        if self.hosts > 1 or (not self.hosts and self.parser.get_http_version() != "1.0"):
            return Response(400, b'{"message":"A request must carry one Host header."}')
        return None

    # --- serving -------------------------------------------------------------------------

    async def _serve(self) -> None:
        """Answer pipelined requests in order, one at a time, then wait for more: one task
        for the connection's life costs less than a task per request."""
        while True:
            await self._serve_pending()
            if self.transport is None or self.transport.is_closing():
                return
            self.wakeup = self.server.loop.create_future()
            await self.wakeup

    async def _serve_pending(self) -> None:
        while self.pending:
            request, keep_alive, response = self.pending.popleft()
            if response is not None:  # refused unread: answer, then close
                keep_alive = False
            else:
                try:
                    response = await self.server.handler(request)
                except Exception:  # the handler maps its own errors; this is a last guard
                    log.exception("unhandled error answering %s %s", request.method,
                                  request.path)
                    response = Response(500, b'{"message":"Internal error."}')
            if self.transport is None or self.transport.is_closing():
                return
            if response is not None:
                self._write(response, keep_alive)
            if not keep_alive or response is None:
                self.transport.close()
                return
        self.last_active = self.server.loop.time()

    def _write(self, response: Response, keep_alive: bool) -> None:
        assert self.transport is not None
        head = [b"HTTP/1.1 %d %s\r\n" % (response.status, _REASONS.get(response.status, b"OK")),
                b"content-type: %s\r\ncontent-length: %d\r\ndate: %s\r\n"
                % (response.content_type, len(response.body) if response.content_length is None
                   else response.content_length, self.server.date())]
        head += [b"%s: %s\r\n" % pair for pair in response.headers]
        if not keep_alive:
            head.append(b"connection: close\r\n")
        head.append(b"\r\n")
        self.transport.write(b"".join(head) + response.body)

    def _fail(self, status: int, message: bytes) -> None:
        if self.transport and not self.transport.is_closing():
            self._write(Response(status, b'{"message":"%s"}' % message), keep_alive=False)
            self.transport.close()

    def busy(self) -> bool:
        working = self.worker is not None and self.wakeup is None and not self.worker.done()
        return bool(self.pending) or working

    def close_if_idle(self, idle_s: float = 0.0) -> None:
        quiet = self.server.loop.time() - self.last_active >= idle_s
        if quiet and not self.busy():
            self._drop()

    def enforce_time_limits(self, now: float) -> None:
        """Answer 408 to a request that is taking too long to arrive; close a connection
        that stays silent too long, new (first byte) or between requests (keep-alive).
        A request being answered (a long poll) is not timed: the limit is on receiving."""
        if self.receiving:
            if now - self.request_started >= self.server.request_timeout_s:
                self._time_out()
        elif not self.busy():
            # No worker yet means no request yet: a new connection.
            limit_s = (self.server.first_byte_timeout_s if self.worker is None
                       else IDLE_TIMEOUT_S)
            if now - self.last_active >= limit_s:
                self._drop()

    def _time_out(self) -> None:
        if self.busy():
            # An answer to an earlier pipelined request is still due, and a 408 must not
            # overtake it: close without one (the client stalled mid-request anyway).
            self._drop()
        else:
            self._fail(408, b"Request not received in time.")

    def _drop(self) -> None:
        """Close without a word. Once all that was written has gone, abort: a TLS close
        would wait for a close_notify that a client idling in its pool never sends."""
        if self.handshake is not None:
            self.handshake.cancel()  # closes the socket; start_tls frees the place
            return
        if self.transport is None or self.transport.is_closing():
            return
        if self.transport.get_write_buffer_size():
            self.transport.close()
        else:
            self.transport.abort()


class HttpServer:
    def __init__(self, handler: Handler, max_body_bytes: int, *,
                 request_timeout_s: float = REQUEST_TIMEOUT_S,
                 max_connections: int = MAX_CONNECTIONS,
                 tls: ssl.SSLContext | None = None,
                 large_bodies: tuple[bytes, int] | None = None) -> None:
        self.handler = handler
        self.max_body_bytes = max_body_bytes
        # (path prefix, limit): requests under that prefix may carry bodies up to the
        # limit (the embedded blob store's objects), all others up to max_body_bytes.
        self.large_bodies = large_bodies
        self.request_timeout_s = request_timeout_s
        # Never longer than a whole request may take: a short --request-timeout (tests,
        # or a deliberately strict setup) shortens the wait for the first byte too.
        self.first_byte_timeout_s = min(FIRST_BYTE_TIMEOUT_S, request_timeout_s)
        self.max_connections = max_connections
        self.tls = tls
        self.scheme = "https" if tls else "http"
        self.loop = asyncio.get_running_loop()
        self.connections: set[_Connection] = set()
        self._server: asyncio.Server | None = None
        self._listeners: list[socket.socket] = []  # TLS: accepted by _accept_tls
        self._acceptors: list[asyncio.Task[None]] = []
        self._reaper: asyncio.Task[None] | None = None
        self._date = b""
        self._date_at = 0.0
        self._refused = 0  # connections refused at the cap since the last warning
        self._warned_at = float("-inf")

    def body_limit(self, url: bytes) -> int:
        """The most body bytes a request for `url` may carry."""
        if self.large_bodies is not None and url.startswith(self.large_bodies[0]):
            return self.large_bodies[1]
        return self.max_body_bytes

    def date(self) -> bytes:
        now = self.loop.time()
        if now - self._date_at >= 1:
            self._date = formatdate(usegmt=True).encode()
            self._date_at = now
        return self._date

    async def start(self, host: str, port: int) -> int:
        """Listen; return the port, the one the system picked when `port` is 0."""
        self._reaper = self.loop.create_task(self._sweep())
        if self.tls is None:
            self._server = await self.loop.create_server(
                lambda: _Connection(self), host, port, reuse_address=True, backlog=1024)
            server: Any = self._server  # its sockets: uvloop's are a list, not typeshed's tuple
            return server.sockets[0].getsockname()[1]
        # asyncio's own TLS server hands a connection to its protocol only once the
        # handshake is done, and never tells of one that fails: the cap could not count
        # connections in their handshake. So accept here, count, then begin TLS.
        self._listeners = await _listen(host, port)
        self._acceptors = [self.loop.create_task(self._accept_tls(listener, self.tls))
                           for listener in self._listeners]
        return self._listeners[0].getsockname()[1]

    async def _accept_tls(self, listener: socket.socket, context: ssl.SSLContext) -> None:
        while True:
            try:
                sock, _ = await self.loop.sock_accept(listener)
            except ConnectionAbortedError:  # the client gave up while in the backlog
                continue
            except OSError as exc:  # out of descriptors or memory: pause, as asyncio does
                log.warning("accepting a connection failed: %s", exc)
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            connection = _Connection(self)
            if not self.admit(connection):
                sock.close()
                continue
            connection.handshake = self.loop.create_task(connection.start_tls(sock, context))

    async def _sweep(self) -> None:
        """One sweep for all connections, instead of a timer re-armed on every request:
        a limit is enforced between 1 and 1.25 times its length."""
        every_s = self.first_byte_timeout_s / 4  # the shortest limit
        while True:
            await asyncio.sleep(every_s)
            now = self.loop.time()
            for connection in list(self.connections):
                connection.enforce_time_limits(now)

    def admit(self, connection: _Connection) -> bool:
        """Count a connection just accepted; False if it is over the cap: the caller then
        closes it at once. It is counted until connection_lost."""
        if len(self.connections) < self.max_connections:
            self.connections.add(connection)
            return True
        self._refused += 1  # warned of now and then, not each time
        now = self.loop.time()
        if now - self._warned_at >= CAP_WARNING_EVERY_S:
            log.warning("%d connections open, the --max-connections limit: refusing new ones "
                        "(%d since the last warning)", len(self.connections), self._refused)
            self._warned_at, self._refused = now, 0
        return False

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting; close idle connections; give busy ones `grace_s` to finish."""
        if self._server:
            self._server.close()
        for task in self._acceptors:
            task.cancel()
        for listener in self._listeners:
            listener.close()
        if self._reaper:
            self._reaper.cancel()
        deadline = self.loop.time() + grace_s
        while self.connections and self.loop.time() < deadline:
            for connection in list(self.connections):
                connection.close_if_idle()
            await asyncio.sleep(0.05)
        for connection in list(self.connections):
            if connection.transport:
                connection.transport.abort()
        if self._server:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1)


async def _listen(host: str, port: int) -> list[socket.socket]:
    """Listening sockets on every address `host` names, bound as loop.create_server binds
    them (SO_REUSEADDR; IPv6 sockets IPv6-only, beside the IPv4 ones)."""
    loop = asyncio.get_running_loop()
    found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    listeners: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(found):
            listener = socket.socket(family, kind, proto)
            listeners.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            listener.bind(address)
            listener.listen(1024)
            listener.setblocking(False)
    except OSError:
        for listener in listeners:
            listener.close()
        raise
    return listeners
