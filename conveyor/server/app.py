"""The API handler: request in, protocol decode, auth, service call, long-poll wait, out.

It sits between the HTTP transport (http.py) and the service; it alone knows both the
wire protocols and the service, and it runs the background sweeps.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from conveyor import __version__
from conveyor.ids import UuidSequence
from conveyor.server import authz, console, s3subset, sigv4
from conveyor.server.access import AccessKey
from conveyor.server.http import Request, Response
from conveyor.server.metrics import CONTENT_TYPE_LATEST, ServerMetrics
from conveyor.server.waiters import Key, Waiters, Watch, worker_key
from conveyor.service import (
    RequestContext,
    Service,
    StoreError,
    StoreUnavailable,
    attempts,
    controls,
    leases,
    polls,
    tenants,
    workers,
)
from conveyor.service.base import queue_name_from
from conveyor.service.messages import apply_trace_header
from conveyor.service.validate import plain_name
from conveyor.sqs import jsonproto, queryproto
from conveyor.sqs.errors import InternalError, RequestTooLarge, ServiceUnavailable, SqsError

log = logging.getLogger("conveyor.server")

# Conveyor's own APIs beside SQS on the same port and protocol: target prefix -> actions.
EXTENSIONS = {leases.TARGET_PREFIX: frozenset(leases.ACTIONS),
              controls.TARGET_PREFIX: frozenset(controls.ACTIONS),
              workers.TARGET_PREFIX: frozenset(workers.ACTIONS + polls.ACTIONS
                                               + attempts.ACTIONS)}

EXPIRE_EVERY_S = 5.0
MOVE_EVERY_S = 0.2
SKEW_EVERY_S = 10.0
SAMPLE_EVERY_S = 60.0  # the console's charts hold a point a minute
SAMPLED_QUEUES = 200  # the most recently active queues whose oldest message is sampled
# How far behind another node's counts may be on a node's charts; one small write per
# node this often (only when it counted anything).
ACTIVITY_SAVE_EVERY_S = 5.0


@dataclass
class ServerSettings:
    account_id: str = "000000000000"
    default_region: str = "us-east-1"
    access_keys: dict[str, AccessKey] = field(default_factory=dict)  # empty: no signatures
    dev_clock: bool = False  # expose POST /_conveyor/clock?advance=S for tests
    metrics_token: str = ""  # set: GET /metrics needs `Authorization: Bearer <it>`
    metrics_port: int | None = None  # set: /metrics is served there (handle_operator) only
    console_session_s: int = console.auth.DEFAULT_SESSION_S


def _protocol(req: Request) -> str:
    """"json" (X-Amz-Target), or the Query protocol answered in XML ("query") or, when the
    client accepts only JSON, in JSON ("query-json": AWS does so, LocalStack's validated
    test_get_queue_attributes_json_format)."""
    if "x-amz-target" in req.headers:
        return "json"
    return "query-json" if req.headers.get("accept") == "application/json" else "query"


_CONTENT_TYPES = {"json": jsonproto.CONTENT_TYPE, "query": queryproto.CONTENT_TYPE,
                  "query-json": queryproto.JSON_CONTENT_TYPE}


def _landing(req: Request) -> Response:
    """A plain GET of `/` (no action, no signature: no SQS client sends one): a browser goes
    to the console, anything else gets a few lines saying what answers where."""
    if "text/html" in req.headers.get("accept", ""):
        return Response(303, b"", b"text/plain", [(b"location", console.PREFIX.encode())])
    text = (f"Conveyor {__version__}: an Amazon SQS-compatible queue server.\n"
            "SQS API:  POST / (AWS JSON 1.0 or Query), e.g. aws sqs list-queues "
            "--endpoint-url <this address>\n"
            f"Console:  {console.PREFIX}\nHealth:   /health (alive), /ready (can serve)\n"
            "Metrics:  /metrics (Prometheus)\n")
    return Response(200, text.encode(), b"text/plain; charset=utf-8")


# init=False and __init__ written out: compiled, it is a quarter of the cost (setup.py)
@dataclass(slots=True, init=False)
class Call:
    """One decoded API request."""

    protocol: str  # "json", "query" or "query-json"
    action: str
    request: dict[str, Any]
    request_id: str

    def __init__(self, protocol: str, action: str, request: dict[str, Any],
                 request_id: str) -> None:
        self.protocol, self.action, self.request, self.request_id = (protocol, action,
                                                                      request, request_id)


class App:
    def __init__(self, service: Service, settings: ServerSettings) -> None:
        self.service = service
        self.settings = settings
        self.metrics = ServerMetrics(service.store_figures, service.activity.totals,
                                     service.held_back.totals)
        self.waiters = Waiters()
        self.service.wakeups = self.waiters  # sends, releases and other nodes wake long polls
        self._tasks: list[asyncio.Task[None]] = []
        self.blobs: s3subset.S3Subset | None = None  # the embedded blob store, if served
        self.stopping = False
        self._request_id = UuidSequence().next
        self._contexts: dict[tuple[str, str, str], RequestContext] = {}
        self.console = console.Console(service, settings.account_id, settings.access_keys,
                                       settings.console_session_s, self.metrics.requests.observe,
                                       settings.default_region, self.metrics.sign_in)

    # --- life cycle: background sweeps ----------------------------------------------------

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._every(EXPIRE_EVERY_S, self._expire)),
                       asyncio.create_task(self._every(MOVE_EVERY_S, self._move)),
                       asyncio.create_task(self._every(SKEW_EVERY_S, self._follow_skew)),
                       asyncio.create_task(self._every(SAMPLE_EVERY_S, self._sample)),
                       # the charts' figures go to the store (every node draws from there)
                       asyncio.create_task(self._every(ACTIVITY_SAVE_EVERY_S,
                                                       self.service.save_activity))]

    def stop(self) -> None:
        """Stop sweeping; answer parked long polls now (empty) so clients move on."""
        self.stopping = True
        for task in self._tasks:
            task.cancel()
        self.waiters.notify_all()

    async def _every(self, period_s: float, job: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(period_s)
            try:
                await job()
            except StoreUnavailable:  # the store logs the outage, once
                pass
            except Exception:  # a supervisor loop: log and carry on
                log.exception("background job %s failed", job.__name__)

    async def _sample(self) -> None:
        await self.service.sample_oldest_ages(SAMPLED_QUEUES)

    async def _follow_skew(self) -> None:
        self.service.follow_store_clock()

    async def _expire(self) -> None:
        removed = await self.service.expire_messages()
        if removed:
            log.info("retention: deleted %d expired messages", removed)

    async def _move(self) -> None:
        ctx = RequestContext(self.settings.default_region, self.settings.account_id, "")
        await self.service.run_move_tasks(ctx)

    # --- requests ---------------------------------------------------------------------------

    async def handle(self, req: Request) -> Response | None:
        probe = self._probe(req)
        if probe is not None:
            return probe
        if req.method == "GET" and req.path == "/metrics":
            if self.settings.metrics_port is not None:
                return Response(404, b'{"message":"Not found."}')
            return await self._metrics(req)
        if req.path == console.PREFIX or req.path.startswith(console.PREFIX + "/"):
            return await self.console.page(req)
        if req.method == "GET" and req.path == "/favicon.ico":  # asked by browsers unbidden
            return console.favicon()
        if self.blobs is not None and self.blobs.owns(req.path):
            return await self.blobs.handle(req)
        if req.path == "/_conveyor/clock" and req.method == "POST" and self.settings.dev_clock:
            return self._advance_clock(req)
        started = time.perf_counter()
        protocol = _protocol(req)
        request_id = self._request_id()
        action = "Unknown"
        try:
            claim, key = self._authenticate(req)
            call = self._decode(protocol, req, request_id)
            action = call.action
            ctx = self._context(req, claim, key)
            await authz.authorize(key, action, call.request, ctx, self.service)
            result = await self._dispatch(ctx, call, req)
            if result is None:  # the client went away during a long poll
                return None
            extra: list[tuple[bytes, bytes]] = []
            status, payload = 200, self._encode(call, result)
            outcome = "ok"
            log.debug("%s %s ok", action, call.request.get("QueueUrl", ""))
        except SqsError as error:
            status, extra, payload = self._encode_error(protocol, error, request_id)
            outcome = error.code
            action = error.action or action
            log.info("%s failed: %s %s", action, error.code, error.message)
        except StoreUnavailable as exc:  # the store logs the outage once, not per request
            log.debug("%s failed: %s", action, exc)
            status, extra, payload = self._encode_error(protocol, ServiceUnavailable(),
                                                        request_id)
            outcome = ServiceUnavailable.code
        except StoreError as exc:
            log.error("%s failed in the store: %s", action, exc)
            status, extra, payload = self._encode_error(protocol, InternalError(), request_id)
            outcome = "InternalFailure"
        except Exception:  # never a traceback on the wire; log it for us instead
            log.exception("%s failed unexpectedly", action)
            status, extra, payload = self._encode_error(protocol, InternalError(), request_id)
            outcome = "InternalFailure"
        self.metrics.requests.observe(action, outcome, time.perf_counter() - started)
        content_type = _CONTENT_TYPES[protocol]
        return Response(status, payload, content_type,
                        [(b"x-amzn-requestid", request_id.encode()), *extra])

    def _decode(self, protocol: str, req: Request, request_id: str) -> Call:
        if req.body_too_large:
            raise RequestTooLarge(
                f"Request body is larger than {self.service.limits.max_request_bytes} bytes.")
        if protocol == "json":
            action, request = jsonproto.decode(req.headers["x-amz-target"], req.body,
                                               EXTENSIONS)
            return Call(protocol, action, request, request_id)
        path_queue = req.path if queue_name_from(req.path, self.settings.account_id) else None
        action, request = queryproto.decode(req.query_string, req.body, path_queue)
        return Call(protocol, action, request, request_id)

    def _authenticate(self, req: Request) -> tuple[sigv4.Claim | None, AccessKey | None]:
        """Who signed the request: checked before anything of it is decoded or acted on.
        Without access keys nothing is checked, and a claim only names the region."""
        query = req.query_string.decode("latin-1")
        keys = self.settings.access_keys
        if not keys:
            try:
                return sigv4.read(query, req.headers), None
            except SqsError:
                return None, None
        claim = sigv4.read(query, req.headers)
        sigv4.verify(claim, keys, req.method, req.path, query, req.headers, req.body,
                     datetime.now(UTC))
        assert claim is not None
        return claim, keys[claim.access_key]

    def _context(self, req: Request, claim: sigv4.Claim | None,
                 key: AccessKey | None) -> RequestContext:
        cached = (claim.region if claim else self.settings.default_region,
                  f"{req.scheme}://{req.headers.get('host') or 'localhost'}",
                  claim.access_key if claim else "")
        ctx = self._contexts.get(cached)
        if ctx is None:  # a client sends the same key, region and host every time
            if len(self._contexts) >= 1024:
                self._contexts.clear()
            # An unchecked (unsigned) claim may name anything: only a plain name is a region.
            region = cached[0] if plain_name(cached[0]) else self.settings.default_region
            ctx = self._contexts[cached] = authz.scoped(
                RequestContext(region, self.settings.account_id, cached[1], cached[2]), key)
        return ctx

    async def _dispatch(self, ctx: RequestContext, call: Call,
                        req: Request) -> dict[str, Any] | None:
        result: dict[str, Any] | None
        trace = req.headers.get("x-amzn-trace-id")
        if trace:
            apply_trace_header(call.action, call.request, trace)
        if call.action == "ReceiveMessage":
            poll = polls.PollPlan.of(await self.service.plan_receive(ctx, call.request))
        elif call.action == polls.ACTION:  # a longer long poll (service/polls.py)
            poll = await polls.plan_poll(self.service, ctx, call.request)
            if "Announce" in call.request:
                self.metrics.announced(polls.ACTION)
        else:
            result = await self.service.action(call.action)(ctx, call.request)
            if call.action == "AnnounceWorker":
                self.metrics.announced(call.action)
            return result
        if poll.wait_s == 0 or self.stopping or poll.answer_extra:
            result = await poll.fetch(self.service, ctx)
        else:
            result = await self._long_poll(ctx, poll, req.client_gone)
        if poll.answer_extra and result is not None:
            result = {**result, **poll.answer_extra}
        if call.action == polls.ACTION and result is not None:
            result = poll.hinted(result, self.service.clock.now_ms())
        return result

    async def _long_poll(self, ctx: RequestContext, poll: polls.PollPlan,
                         gone: asyncio.Future[None]) -> dict[str, Any] | None:
        """Look at the poll's queues; if empty, wait for a message. ReceiveMessage returns
        "as soon as a message is available" (SQS API reference, WaitTimeSeconds): the
        queues are watched from before the first look, so one sent during it counts."""
        with self.waiters.watch(poll.queue_ids) as watch:
            result: dict[str, Any] | None = await poll.fetch(self.service, ctx)
            if result:
                return result
            if poll.worker_id is None:
                return await self._park(ctx, poll, watch, gone)
            # A drain request for the worker ends the wait: watched from before its check.
            with self.waiters.watching(worker_key(poll.worker_id)) as drained:
                if await self.service.drain_requested(ctx, poll.worker_id):
                    return {"Drain": True}
                result = await self._park(ctx, poll, watch, gone, drained)
                if drained.done() and await self.service.drain_requested(ctx, poll.worker_id):
                    return {"Drain": True}
                return result

    async def _park(self, ctx: RequestContext, poll: polls.PollPlan, watch: Watch,
                    gone: asyncio.Future[None], *drained: asyncio.Future[Key]
                    ) -> dict[str, Any] | None:
        """Wait for a message on any of the poll's queues (or the end of the wait)."""
        deadline = self._wait_clock_s() + poll.wait_s
        self.metrics.waiting.inc()
        try:
            while (remaining := deadline - self._wait_clock_s()) > 0 and not self.stopping:
                sleep_s = remaining
                for plan in poll.plans:
                    until_visible = await self.service.seconds_until_visible(plan)
                    if until_visible is not None:
                        sleep_s = min(sleep_s, until_visible)
                await watch.wait(sleep_s, gone, *drained)
                if gone.done():
                    return None
                if any(d.done() for d in drained):
                    return {}
                watch.rearm()  # before the look: a send during it ends the next wait
                result = await poll.fetch(self.service, ctx)
                if result:
                    return result
            return {}
        finally:
            self.metrics.waiting.dec()

    def _wait_clock_s(self) -> float:
        """What long polls wait on: loop time, plus what --dev-clock moved the clock by (never
        moved otherwise), so tests end a wait by moving time, as they end a delay."""
        return asyncio.get_running_loop().time() + self.service.clock.advanced_ms / 1000

    def _encode(self, call: Call, result: dict[str, Any]) -> bytes:
        if call.protocol == "json":
            return jsonproto.encode(result)
        if call.protocol == "query-json":
            return queryproto.encode_json(call.action, result, call.request_id)
        return queryproto.encode(call.action, result, call.request_id)

    def _encode_error(self, protocol: str, error: SqsError,
                      request_id: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        if protocol == "json":
            return jsonproto.encode_error(error)
        return queryproto.encode_error(error, request_id, as_json=protocol == "query-json")

    # --- operator endpoints -----------------------------------------------------------------

    async def handle_operator(self, req: Request) -> Response:
        """The --metrics-port listener (loopback only): the probes and /metrics, nothing else."""
        probe = self._probe(req)
        if probe is not None:
            return probe
        if req.method == "GET" and req.path == "/metrics":
            return await self._metrics(req)
        return Response(404, b'{"message":"Not found."}')

    def _probe(self, req: Request) -> Response | None:
        """GET /health (liveness: the process answers) or GET /ready (readiness: it can
        serve requests now), open like each other, or the landing page at a plain GET /;
        None for any other request.

        Kept apart as Kubernetes keeps its probes apart: a failing liveness probe restarts
        the container, which cannot bring back a database, while a failing readiness probe
        only takes the node out of its Service until it can serve again."""
        if req.method != "GET":
            return None
        if req.path == "/" and not req.query_string and "authorization" not in req.headers:
            return _landing(req)
        if req.path == "/health":
            return Response(200, b'{"status":"ok"}')
        if req.path != "/ready":
            return None
        reason = "shutting down" if self.stopping else self.service.unready()
        if reason is None:
            return Response(200, b'{"status":"ready"}')
        return Response(503, orjson.dumps({"status": "unavailable", "reason": reason}))

    async def _metrics(self, req: Request) -> Response:
        refusal = self._refuse_bearer(req.headers.get("authorization", ""))
        if refusal is not None:
            return refusal
        gauge = self.metrics.messages
        gauge.clear()
        try:
            queues = await self.service.queue_counts()
        except StoreUnavailable:  # the rest still tells how the node fares meanwhile
            queues = []
        self.metrics.paused.set(sum(controls.is_paused(queue) for queue, _ in queues))
        self.metrics.set_limits([(queue.region, queue.name, tenants.settings(queue))
                                 for queue, _ in queues])
        for queue, counts in queues:
            for state, value in (("visible", counts.visible), ("in_flight", counts.in_flight),
                                 ("delayed", counts.delayed)):
                gauge.labels(queue.region, queue.name, state).set(value)
        return Response(200, self.metrics.render(), CONTENT_TYPE_LATEST.encode())

    def _refuse_bearer(self, authorization: str) -> Response | None:
        """None if /metrics is open or `authorization` carries the --metrics-token, else a
        401 with a Bearer challenge (RFC 6750 §3): an `error="invalid_token"` when a Bearer
        token was sent and is wrong, none when none was (§3.1)."""
        token = self.settings.metrics_token
        if not token:
            return None
        scheme, _, given = authorization.partition(" ")
        bearer = scheme.lower() == "bearer"  # auth schemes are case-insensitive (RFC 9110)
        if bearer and hmac.compare_digest(given.strip().encode("latin-1"), token.encode()):
            return None
        challenge = b'Bearer realm="conveyor"' + (b', error="invalid_token"' if bearer else b"")
        return Response(401, b'{"message":"Send Authorization: Bearer <the metrics token>."}',
                        headers=[(b"www-authenticate", challenge)])

    def _advance_clock(self, req: Request) -> Response:
        query = dict(p.split("=", 1) for p in req.query_string.decode().split("&") if "=" in p)
        try:
            seconds = float(query.get("advance", "0"))
        except ValueError:
            seconds = math.nan
        if not math.isfinite(seconds):
            return Response(400, b'{"message":"advance must be a number of seconds"}')
        self.service.clock.advance(seconds)
        self.waiters.notify_all()  # let parked receivers re-check what became visible
        return Response(200, orjson.dumps({"advanced_ms": self.service.clock.advanced_ms}))
