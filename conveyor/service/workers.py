"""Who is working: workers announce themselves, the console lists them.

Wire: the JSON 1.0 protocol with `X-Amz-Target: ConveyorWorkers.<Action>`, signed like
any SQS call, beside the lease API:

- AnnounceWorker {WorkerId, Queue, TtlSeconds, Status, Kind}: "I am alive for
  TtlSeconds, and this is how I am doing" (Status: a JSON object of its own figures;
  Kind: `worker`, the default, or `scaler` for an autoscaler and its last decision).
- ListWorkers {}: the workers whose announcement has not run out, oldest first.

Liveness is ephemeral, so the registry lives in this process's memory: after a restart
the workers are back within one announcement interval, and on a cluster of nodes each
node knows the workers that talk to it.
"""

from __future__ import annotations

import re
import time
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
    expires: float  # time.monotonic()


class WorkerActions(ServiceBase):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._workers: dict[str, WorkerRecord] = {}

    async def announce_worker(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        worker_id, queue = _text(req, "WorkerId", _ID), _text(req, "Queue", _ID)
        ttl_s = checked_ttl_ms(req) / 1000
        kind = req.get("Kind", "worker")
        if kind not in KINDS:
            raise InvalidParameterValue(f"Kind must be one of {', '.join(KINDS)}.")
        status = req.get("Status", {})
        if not isinstance(status, dict) or len(orjson.dumps(status)) > MAX_STATUS_BYTES:
            raise InvalidParameterValue(
                f"Status must be a JSON object of at most {MAX_STATUS_BYTES} bytes.")
        workers = self._live()
        now, now_ms = time.monotonic(), self.clock.now_ms()
        known = workers.get(worker_id)
        if known is None and len(workers) >= MAX_WORKERS:
            raise InvalidParameterValue(f"At most {MAX_WORKERS} workers can be announced.")
        workers[worker_id] = WorkerRecord(worker_id, kind, ctx.region, queue, status,
                                          known.first_seen_ms if known else now_ms, now_ms,
                                          now + ttl_s)
        return {}

    async def list_workers(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        return {"Workers": [_out(w) for w in self.live_workers()]}

    def live_workers(self) -> list[WorkerRecord]:
        """The workers whose last announcement has not run out, oldest first."""
        return sorted(self._live().values(), key=lambda w: (w.first_seen_ms, w.worker_id))

    def _live(self) -> dict[str, WorkerRecord]:
        """The registry, less the workers that stopped announcing themselves."""
        now = time.monotonic()
        for worker_id in [w for w, record in self._workers.items() if record.expires <= now]:
            del self._workers[worker_id]
        return self._workers


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
