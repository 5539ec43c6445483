"""The ASGI app: bytes in, protocol decode, auth, service call, long-poll wait, bytes out.

A plain ASGI callable (no framework): every SQS request is a POST to one path, so a
router would only cost time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from conveyor.server import sigv4
from conveyor.server.metrics import CONTENT_TYPE_LATEST, ServerMetrics
from conveyor.server.waiters import Waiters
from conveyor.service import ReceivePlan, RequestContext, Service
from conveyor.service.base import queue_name_from
from conveyor.sqs import jsonproto, queryproto, shapes
from conveyor.sqs.errors import InternalError, RequestTooLarge, SqsError
from conveyor.store.base import StoreError

log = logging.getLogger("conveyor.server")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

EXPIRE_EVERY_S = 5.0
MOVE_EVERY_S = 0.2


@dataclass
class ServerSettings:
    account_id: str = "000000000000"
    default_region: str = "us-east-1"
    access_keys: dict[str, str] = field(default_factory=dict)  # empty: no signature check
    dev_clock: bool = False  # expose POST /_conveyor/clock?advance=S for tests


@dataclass
class Call:
    """One decoded API request."""

    protocol: str  # "json" or "query"
    action: str
    request: dict[str, Any]
    request_id: str


class App:
    def __init__(self, service: Service, settings: ServerSettings,
                 on_startup: Callable[[], Awaitable[None]] | None = None) -> None:
        self.service = service
        self.settings = settings
        self.metrics = ServerMetrics()
        self.waiters = Waiters()
        self.service.on_ready = lambda queue, count: self.waiters.notify(queue.id, count)
        self._on_startup = on_startup
        self._tasks: list[asyncio.Task[None]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    # --- lifespan: background sweeps ----------------------------------------------------

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    if self._on_startup:
                        await self._on_startup()
                except Exception as exc:  # startup failure: report it and let uvicorn exit
                    log.error("startup failed: %s", exc)
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                self._tasks = [asyncio.create_task(self._every(EXPIRE_EVERY_S, self._expire)),
                               asyncio.create_task(self._every(MOVE_EVERY_S, self._move))]
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for task in self._tasks:
                    task.cancel()
                await self.service.store.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _every(self, period_s: float, job: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(period_s)
            try:
                await job()
            except Exception:  # a supervisor loop: log and carry on
                log.exception("background job %s failed", job.__name__)

    async def _expire(self) -> None:
        removed = await self.service.store.expire(self.service.clock.now_ms())
        if removed:
            log.info("retention: deleted %d expired messages", removed)

    async def _move(self) -> None:
        ctx = RequestContext(self.settings.default_region, self.settings.account_id, "")
        await self.service.run_move_tasks(ctx)

    # --- HTTP -----------------------------------------------------------------------------

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, path = scope["method"], scope["path"]
        if method == "GET" and path in ("/health", "/metrics"):
            await (self._health(send) if path == "/health" else self._metrics(send))
            return
        if path == "/_conveyor/clock" and method == "POST" and self.settings.dev_clock:
            await self._advance_clock(scope, send)
            return
        started = time.perf_counter()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        protocol = "json" if "x-amz-target" in headers else "query"
        request_id = str(uuid.uuid4())
        action = "Unknown"
        try:
            body = await _read_body(receive, self.service.limits.max_request_bytes)
            call = self._decode(protocol, scope, headers, body, request_id)
            action = call.action
            ctx = self._authorize(scope, headers, body)
            result = await self._dispatch(ctx, call, receive)
            if result is None:  # the client went away during a long poll
                return
            status, extra, payload = 200, [], self._encode(call, result)
            outcome = "ok"
            log.debug("%s %s ok", action, call.request.get("QueueUrl", ""))
        except SqsError as error:
            status, extra, payload = self._encode_error(protocol, error, request_id)
            outcome = error.code
            log.info("%s failed: %s %s", action, error.code, error.message)
        except StoreError as exc:
            log.error("%s failed in the store: %s", action, exc)
            status, extra, payload = self._encode_error(protocol, InternalError(), request_id)
            outcome = "InternalFailure"
        except Exception:  # never a traceback on the wire; log it for us instead
            log.exception("%s failed unexpectedly", action)
            status, extra, payload = self._encode_error(protocol, InternalError(), request_id)
            outcome = "InternalFailure"
        content_type = jsonproto.CONTENT_TYPE if protocol == "json" else queryproto.CONTENT_TYPE
        await _respond(send, status, payload, content_type,
                       [(b"x-amzn-requestid", request_id.encode()), *extra])
        label = action if action in shapes.operation_names() else "Unknown"
        self.metrics.requests.labels(label, outcome).inc()
        self.metrics.latency.labels(label).observe(time.perf_counter() - started)

    def _decode(self, protocol: str, scope: Scope, headers: dict[str, str], body: bytes,
                request_id: str) -> Call:
        if protocol == "json":
            action, request = jsonproto.decode(headers["x-amz-target"], body)
            return Call(protocol, action, request, request_id)
        action, request, _ = queryproto.decode(scope.get("query_string", b""), body)
        # Older SDKs POST to the queue URL itself instead of passing QueueUrl.
        if ("QueueUrl" not in request and "QueueUrl" in shapes.input_shape(action).members
                and queue_name_from(scope["path"], self.settings.account_id)):
            request["QueueUrl"] = scope["path"]
        return Call(protocol, action, request, request_id)

    def _authorize(self, scope: Scope, headers: dict[str, str], body: bytes) -> RequestContext:
        credential = sigv4.parse_authorization(headers.get("authorization", ""))
        if self.settings.access_keys:
            sigv4.verify(credential, self.settings.access_keys, scope["method"], scope["path"],
                         scope.get("query_string", b"").decode("latin-1"), headers, body)
        region = credential.region if credential else self.settings.default_region
        host = headers.get("host") or "{}:{}".format(*scope.get("server") or ("localhost", 80))
        return RequestContext(region, self.settings.account_id,
                              f"{scope.get('scheme', 'http')}://{host}",
                              credential.access_key if credential else "")

    async def _dispatch(self, ctx: RequestContext, call: Call,
                        receive: Receive) -> dict[str, Any] | None:
        if call.action != "ReceiveMessage":
            return await self.service.action(call.action)(ctx, call.request)
        plan = await self.service.plan_receive(ctx, call.request)
        result = await self.service.fetch(ctx, plan)
        if result or plan.wait_s == 0:
            return result
        return await self._long_poll(ctx, plan, receive)

    async def _long_poll(self, ctx: RequestContext, plan: ReceivePlan,
                         receive: Receive) -> dict[str, Any] | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + plan.wait_s
        gone = asyncio.ensure_future(_disconnected(receive))
        self.metrics.waiting.inc()
        try:
            while (remaining := deadline - loop.time()) > 0:
                until_visible = await self.service.seconds_until_visible(plan)
                sleep_s = remaining if until_visible is None else min(remaining, until_visible)
                await self.waiters.wait(plan.queue.id, sleep_s, gone)
                if gone.done():
                    return None
                result = await self.service.fetch(ctx, plan)
                if result:
                    return result
            return {}
        finally:
            self.metrics.waiting.dec()
            gone.cancel()

    def _encode(self, call: Call, result: dict[str, Any]) -> bytes:
        if call.protocol == "json":
            return jsonproto.encode(result)
        return queryproto.encode(call.action, result, call.request_id)

    def _encode_error(self, protocol: str, error: SqsError,
                      request_id: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        if protocol == "json":
            return jsonproto.encode_error(error)
        return queryproto.encode_error(error, request_id)

    # --- operator endpoints -----------------------------------------------------------------

    async def _health(self, send: Send) -> None:
        await _respond(send, 200, b'{"status":"ok"}', b"application/json")

    async def _metrics(self, send: Send) -> None:
        gauge = self.metrics.messages
        gauge.clear()
        for queue, counts in await self.service.queue_counts():
            for state, value in (("visible", counts.visible), ("in_flight", counts.in_flight),
                                 ("delayed", counts.delayed)):
                gauge.labels(queue.region, queue.name, state).set(value)
        await _respond(send, 200, self.metrics.render(), CONTENT_TYPE_LATEST.encode())

    async def _advance_clock(self, scope: Scope, send: Send) -> None:
        query = dict(p.split("=", 1) for p in scope["query_string"].decode().split("&") if "=" in p)
        try:
            self.service.clock.advance(float(query.get("advance", "0")))
        except ValueError:
            await _respond(send, 400, b'{"error":"advance must be a number"}', b"application/json")
            return
        for waiting_queue in list(self.waiters._parked):
            self.waiters.notify(waiting_queue, 1 << 30)  # re-check what became visible
        body = orjson.dumps({"offset_ms": self.service.clock.offset_ms})
        await _respond(send, 200, body, b"application/json")


async def _read_body(receive: Receive, limit: int) -> bytes:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge(f"Request body is larger than {limit} bytes.")
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _respond(send: Send, status: int, body: bytes, content_type: bytes,
                   headers: list[tuple[bytes, bytes]] | None = None) -> None:
    with contextlib.suppress(OSError):
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", content_type),
                                (b"content-length", str(len(body)).encode()), *(headers or [])]})
        await send({"type": "http.response.body", "body": body})

