"""Who is working: workers announce themselves, the console lists them.

Wire: the JSON 1.0 protocol with `X-Amz-Target: ConveyorWorkers.<Action>`, signed like
any SQS call, beside the lease API:

- AnnounceWorker {WorkerId, Queue, TtlSeconds, Status, Kind}: "I am alive for
  TtlSeconds, and this is how I am doing" (Status: a JSON object of its own figures;
  Kind: `worker`, the default, or `scaler` for an autoscaler and its last decision).
- ListWorkers {}: the workers whose announcement has not run out, oldest first.

The announcements are kept in the store, so on a cluster every node lists the workers
that talk to any of them; one that stops announcing itself drops out when its TTL runs
out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from conveyor.service.base import ServiceBase
from conveyor.service.context import RequestContext
from conveyor.service.leases import checked_ttl_ms
from conveyor.sqs.errors import InvalidParameterValue

TARGET_PREFIX = "ConveyorWorkers."
ACTIONS = ("AnnounceWorker", "ListWorkers")
MAX_WORKERS = 10_000
MAX_STATUS_BYTES = 16 * 1024
KINDS = ("worker", "scaler")
_ID = re.compile(r"[A-Za-z0-9_.:/#@-]{1,256}")

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


class WorkerActions(ServiceBase):
    async def announce_worker(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        worker_id, queue = _text(req, "WorkerId", _ID), _text(req, "Queue", _ID)
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
        return {}

    async def list_workers(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        return {"Workers": [_out(w) for w in await self.live_workers()]}

    async def live_workers(self) -> list[WorkerRecord]:
        """The workers whose last announcement has not run out, oldest first."""
        workers = []
        for worker_id, first_seen_ms, text in await self.store.workers(self.clock.now_ms()):
            record = orjson.loads(text)
            workers.append(WorkerRecord(worker_id, record["kind"], record["region"],
                                        record["queue"], record["status"], first_seen_ms,
                                        record["last_seen_ms"]))
        return workers


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
