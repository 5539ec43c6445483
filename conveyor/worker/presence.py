"""Tell a Conveyor server that this worker is alive, so that its console lists it.

Every ANNOUNCE_EVERY_S the worker sends `ConveyorWorkers.AnnounceWorker` with its health
figures; an announcement lasts TTL_S, so a worker that dies drops off the list by itself,
and one that stops says so with a last, short announcement. An endpoint without that API
(Amazon SQS, other emulators) refuses the first call (HTTP 4xx), and the worker stops
trying: the announcements cost nothing there and never get in the way of the work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Callable
from typing import Any

from conveyor.client import SQSClient, SQSError, SQSTransportError

log = logging.getLogger("conveyor.worker.presence")

TARGET_PREFIX = "ConveyorWorkers."
ANNOUNCE_EVERY_S = 10.0
TTL_S = 30
GOODBYE_TTL_S = 1  # a stopped worker leaves the list this soon
CALL_TIMEOUT_S = 5.0


class Presence:
    target_prefix = TARGET_PREFIX

    def __init__(self, sqs: SQSClient, queue_name: str, status: Callable[[], dict[str, Any]],
                 kind: str = "worker") -> None:
        self.sqs = sqs
        self.queue_name = queue_name
        self.status = status
        self.kind = kind  # or "scaler": conveyor scale announces itself the same way
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.enabled = True
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._announce_every(), name="presence")

    async def stop(self) -> None:
        """Stop announcing; tell the server at once (best effort)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.enabled:
            await self._announce(GOODBYE_TTL_S)

    async def _announce_every(self) -> None:
        while self.enabled:
            await self._announce(TTL_S)
            await asyncio.sleep(ANNOUNCE_EVERY_S)

    async def _announce(self, ttl_s: float) -> None:
        try:
            status = self.status()
        except Exception:  # a report that fails must not stop the work, nor its shutdown
            log.exception("could not gather this %s's figures; announcing without them",
                          self.kind)
            status = {}
        try:
            await self.sqs.call("AnnounceWorker", {
                "WorkerId": self.worker_id, "Kind": self.kind, "Queue": self.queue_name,
                "TtlSeconds": ttl_s, "Status": status,
            }, timeout_s=CALL_TIMEOUT_S, target_prefix=self.target_prefix)
        except SQSError as exc:
            if exc.status >= 500:
                return  # the endpoint's trouble, not a refusal: try again next time
            self.enabled = False
            log.debug("%s does not list workers (%s): not announcing this one",
                      self.sqs.endpoint_url, exc.code)
        except SQSTransportError:
            pass  # unreachable for now: the pollers report it; try again next time
