"""Who is working: workers announce themselves, the console lists them.

Wire: the JSON 1.0 protocol with `X-Amz-Target: ConveyorWorkers.<Action>`, signed like
any SQS call, beside the lease API:

- AnnounceWorker {WorkerId, Queue, TtlSeconds, Status, Kind}: "I am alive for
  TtlSeconds, and this is how I am doing" (Status: a JSON object of its own figures;
  Kind: `worker`, the default, or `scaler` for an autoscaler and its last decision).
- ListWorkers {}: the workers whose announcement has not run out, oldest first (of the
  queues the caller may see: RequestContext.visible).
- DrainWorker {WorkerId}: ask a live worker to drain (finish its jobs, stop receiving and
  exit, as on SIGTERM). The request waits in the store for the worker's next announcement,
  whose answer is then `{"Drain": true}` (also on a PollMessages answer that carried one);
  a PollMessages of that worker parked on any node is answered at once with it (polls.py,
  ServiceBase.on_drain: this node's waiters, other nodes' through the store's NOTIFY).
- RecordScalingDecision {Queue, Decision}: an autoscaler's decision (a JSON object of its
  figures), kept with the queue's last MAX_DECISIONS for the console's timeline.
- ListScalingDecisions {Queue}: those decisions, the newest first, each with `At` (ms).

The announcements are kept in the store, so on a cluster every node lists the workers
that talk to any of them; one that stops announcing itself drops out when its TTL runs
out. Drain requests and decision timelines are kept as lease records (the store's
conditional-write records, leases.py) under names with a space, which the lease API
refuses: no lease call can make, lift or overwrite them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson
from mypy_extensions import trait

from conveyor import lease_names
from conveyor.service.base import ServiceBase
from conveyor.service.context import RequestContext
from conveyor.service.leases import checked_ttl_ms
from conveyor.sqs.errors import InvalidParameterValue
from conveyor.store.base import LeaseRecord

TARGET_PREFIX = "ConveyorWorkers."
ACTIONS: tuple[str, ...] = ("AnnounceWorker", "ListWorkers", "DrainWorker", "RecordScalingDecision",
           "ListScalingDecisions")
MAX_WORKERS = 10_000
MAX_STATUS_BYTES = 16 * 1024
# A drain request waits this long for its worker's next announcement (an idle worker
# announces at least every 5 minutes; one that never does again has gone anyway).
DRAIN_WAIT_MS = 15 * 60_000
MAX_DECISIONS = 50  # a queue's timeline: the last 50 decisions, ~ 50 x 0.5 KB
MAX_DECISION_BYTES = 2 * 1024
DECISIONS_KEPT_MS = 7 * 24 * 3600_000  # a timeline no scaler writes to goes after a week
_WRITE_TRIES = 5  # two scalers of one queue racing: retry the conditional write
KINDS = ("worker", "scaler")
ID_PATTERN = re.compile(r"[A-Za-z0-9_.:/#@-]{1,256}")  # worker ids and queue names

Request = dict[str, Any]


@dataclass(slots=True)
class WorkerRecord:
    worker_id: str
    kind: str
    region: str
    queue: str
    status: dict[str, Any]
    first_seen_ms: int
    last_seen_ms: int


@trait  # one of Service's parts (setup.py: mypyc compiles them as traits)
class WorkerActions(ServiceBase):
    async def announce_worker(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        worker_id, queue = _text(req, "WorkerId", ID_PATTERN), _text(req, "Queue", ID_PATTERN)
        ttl_ms = checked_ttl_ms(req)
        kind = req.get("Kind", "worker")
        if kind not in KINDS:
            raise InvalidParameterValue(f"Kind must be one of {', '.join(KINDS)}.")
        status = req.get("Status", {})
        if not isinstance(status, dict) or len(orjson.dumps(status)) > MAX_STATUS_BYTES:
            raise InvalidParameterValue(
                f"Status must be a JSON object of at most {MAX_STATUS_BYTES} bytes.")
        now_ms = self.clock.now_ms()
        record = orjson.dumps({"kind": kind, "region": ctx.region, "queue": queue,
                               "status": status, "last_seen_ms": now_ms}).decode()
        if not await self.store.save_worker(worker_id, record, now_ms, now_ms + ttl_ms,
                                            MAX_WORKERS):
            raise InvalidParameterValue(f"At most {MAX_WORKERS} workers can be announced.")
        return {"Drain": True} if await self.drain_requested(ctx, worker_id) else {}

    async def drain_requested(self, ctx: RequestContext, worker_id: str) -> bool:
        """True while a DrainWorker for this worker of the caller's region waits."""
        drain = await self.store.lease_get(ctx.region, lease_names.drain(worker_id))
        return drain is not None and drain.expires_ms > self.clock.now_ms()

    async def drain_worker(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        """Ask a live worker of the caller's region to drain, at its next announcement."""
        worker_id = _text(req, "WorkerId", ID_PATTERN)
        if not any(w.worker_id == worker_id and w.kind == "worker" and w.region == ctx.region
                   for w in await self.live_workers()):
            raise InvalidParameterValue(f"No live worker {worker_id} in {ctx.region}.")
        who = ctx.sender_id or "anonymous"
        await self.store.lease_acquire(ctx.region, lease_names.drain(worker_id), who,
                                       DRAIN_WAIT_MS, self.clock.now_ms())
        self.log.info("drain requested: worker=%s by access key %s", worker_id, who)
        self.on_drain(worker_id)
        return {}

    async def record_scaling_decision(self, ctx: RequestContext, req: Request
                                      ) -> dict[str, Any]:
        queue = _text(req, "Queue", ID_PATTERN)
        decision = req.get("Decision")
        if not isinstance(decision, dict) or len(orjson.dumps(decision)) > MAX_DECISION_BYTES:
            raise InvalidParameterValue(
                f"Decision must be a JSON object of at most {MAX_DECISION_BYTES} bytes.")
        name, now_ms = lease_names.scaling_decisions(queue), self.clock.now_ms()
        entry = {**decision, "At": now_ms}
        for _ in range(_WRITE_TRIES):
            # Always ours to take (one holder for all), so never None; read at this version.
            lease = await self.store.lease_acquire(ctx.region, name, _TIMELINE,
                                                   DECISIONS_KEPT_MS, now_ms)
            if lease is None:
                continue
            kept = [entry, *_decisions(lease, now_ms)][:MAX_DECISIONS]
            if await self.store.lease_update(ctx.region, name, _TIMELINE, lease.version,
                                             orjson.dumps(kept).decode(), DECISIONS_KEPT_MS,
                                             now_ms):
                return {}
        raise InvalidParameterValue("Too many decisions recorded at once for this queue; "
                                    "try again.")

    async def list_scaling_decisions(self, ctx: RequestContext, req: Request
                                     ) -> dict[str, Any]:
        queue = _text(req, "Queue", ID_PATTERN)
        return {"Decisions": await self.scaling_decisions(ctx.region, queue)}

    async def scaling_decisions(self, region: str, queue: str) -> list[dict[str, Any]]:
        """The queue's recorded scaling decisions, the newest first."""
        lease = await self.store.lease_get(region, lease_names.scaling_decisions(queue))
        return _decisions(lease, self.clock.now_ms()) if lease is not None else []

    async def list_workers(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        return {"Workers": [_out(w) for w in await self.live_workers() if ctx.sees(w.queue)]}

    async def worker_queue(self, ctx: RequestContext, worker_id: str) -> str | None:
        """The queue that the live worker `worker_id` of the caller's region announced it
        serves (what a DrainWorker of it touches); None when there is no such worker."""
        return next((w.queue for w in await self.live_workers() if w.worker_id == worker_id
                     and w.kind == "worker" and w.region == ctx.region), None)

    async def live_workers(self) -> list[WorkerRecord]:
        """The workers whose last announcement has not run out, oldest first."""
        workers = []
        for worker_id, first_seen_ms, text in await self.store.workers(self.clock.now_ms()):
            record = orjson.loads(text)
            workers.append(WorkerRecord(worker_id, record["kind"], record["region"],
                                        record["queue"], record["status"], first_seen_ms,
                                        record["last_seen_ms"]))
        return workers


_TIMELINE = "timeline"  # the holder of every timeline record: any scaler may append


def _decisions(lease: LeaseRecord, now_ms: int) -> list[dict[str, Any]]:
    """A timeline record's decisions; none once it ran out (no scaler wrote for a week)."""
    if not lease.data or lease.expires_ms <= now_ms:
        return []
    kept = orjson.loads(lease.data)
    return kept if isinstance(kept, list) else []


def _text(req: Request, name: str, pattern: re.Pattern[str]) -> str:
    value = req.get(name)
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise InvalidParameterValue(f"{name} must be 1-256 characters of letters, digits and "
                                    "_ . : / # @ -.")
    return value


def _out(worker: WorkerRecord) -> dict[str, Any]:
    return {"WorkerId": worker.worker_id, "Kind": worker.kind, "Region": worker.region,
            "Queue": worker.queue,
            "Status": worker.status,
            "FirstSeen": worker.first_seen_ms, "LastSeen": worker.last_seen_ms}
