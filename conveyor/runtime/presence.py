"""Tell a Conveyor server that this worker is alive, so that its console lists it.

The worker sends `ConveyorWorkers.AnnounceWorker` with its health figures; an announcement
lasts its TtlSeconds, so a worker that dies drops off the list by itself, and one that stops
says so with a last, short announcement. How often:

- while its figures change (it is working), at most every ANNOUNCE_EVERY_S, each lasting
  TTL_MARGIN_S past the next;
- while they do not (it is idle), every IDLE_ANNOUNCE_EVERY_S: an idle worker costs the
  server 12 calls an hour instead of 360;
- on a server with `PollMessages` (service/polls.py), the announcement rides on the
  worker's long polls when one is due (`for_poll`), lasting as long as the poll plus
  TTL_MARGIN_S: an idle worker then makes no AnnounceWorker call at all.

An operator may ask a worker to drain (the console's Drain button: DrainWorker); the answer
to its next announcement says so (`"Drain": true`), and so does, at once, the answer to its
parked PollMessages (which names the worker, `WorkerId`); `on_drain` is called, once.

An endpoint without that API (Amazon SQS, other emulators) refuses the first call, and the
worker stops trying (see extensions.py): the announcements cost nothing there and never get
in the way of the work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import uuid
from collections.abc import Callable
from typing import Any

from conveyor.client import SQSClient, SQSError, SQSTransportError
from conveyor.clock import Clock
from conveyor.runtime.extensions import Extension

log = logging.getLogger("conveyor.runtime.presence")

TARGET_PREFIX = "ConveyorWorkers."
ANNOUNCE_EVERY_S = 10.0
IDLE_ANNOUNCE_EVERY_S = 300.0
# An announcement outlives the moment the next one is due by this much, so that a late
# call (a slow server, a long poll's answer in transit) never lets a live worker drop off.
TTL_MARGIN_S = 30.0
GOODBYE_TTL_S = 1  # a stopped worker leaves the list this soon
CALL_TIMEOUT_S = 5.0


class Presence:
    """Announces one worker (or autoscaler) to the server it talks to."""

    target_prefix = TARGET_PREFIX

    def __init__(self, sqs: SQSClient, queue_name: str, status: Callable[[], dict[str, Any]],
                 *, clock: Clock, kind: str = "worker",
                 on_drain: Callable[[], None] | None = None) -> None:
        self.sqs = sqs
        self.on_drain = on_drain  # the server asked this worker to drain
        self.queue_name = queue_name
        self.status = status
        self.kind = kind  # or "scaler": conveyor scale announces itself the same way
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.extension = Extension("AnnounceWorker", clock=clock)
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._last_status: dict[str, Any] | None = None
        self._sent_s = -math.inf
        self._expires_s = -math.inf
        self._undo: tuple[dict[str, Any] | None, float, float] | None = None

    @property
    def enabled(self) -> bool:
        """False while the endpoint is known not to list workers."""
        return self.extension.usable

    def start(self) -> None:
        self._task = asyncio.create_task(self._announce_every(), name="presence")

    async def stop(self) -> None:
        """Stop announcing; tell the server at once (best effort)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.enabled:
            await self._announce(self.request(GOODBYE_TTL_S))

    async def announce_now(self) -> None:
        """Tell the server the figures at once (best effort): a change of state an operator
        should see now, not at the next announcement (a drain)."""
        if self.enabled:
            await self._announce(self.request(ANNOUNCE_EVERY_S + TTL_MARGIN_S))

    def for_poll(self, wait_s: float) -> dict[str, Any] | None:
        """The announcement a long poll of `wait_s` should carry, or None when none is due
        before it ends. It counts as made from now (the server records it before the poll
        waits): call `carried` when the poll is answered, `lost` when it fails."""
        if not self.enabled or not self._due(horizon_s=wait_s + ANNOUNCE_EVERY_S):
            return None
        request = self.request(wait_s + TTL_MARGIN_S)
        self._undo = (self._last_status, self._sent_s, self._expires_s)
        self._note(request, self._clock.monotonic_s())
        return request

    def carried(self, request: dict[str, Any], sent_s: float,
                answer: dict[str, Any] | None = None) -> None:
        """The server took `request` (an AnnounceWorker request) at monotonic `sent_s`,
        answering `answer` (AnnounceWorker's, or the PollMessages answer that carried it)."""
        self.extension.worked()
        self._note(request, sent_s)
        self.answered(answer)

    def answered(self, answer: dict[str, Any] | None) -> None:
        """An answer from the server (an announcement's, or any PollMessages's: a drain
        request wakes this worker's parked poll at once): drain if it says so."""
        if answer and answer.get("Drain") is True and self.on_drain is not None:
            log.info("the server asked this %s to drain: worker=%s", self.kind,
                     self.worker_id)
            on_drain, self.on_drain = self.on_drain, None
            on_drain()

    def lost(self) -> None:
        """The poll that carried the last announcement failed: it was not made."""
        if self._undo is not None:
            self._last_status, self._sent_s, self._expires_s = self._undo
            self._undo = None

    def _note(self, request: dict[str, Any], sent_s: float) -> None:
        self._last_status = request["Status"]
        self._sent_s = sent_s
        self._expires_s = sent_s + request["TtlSeconds"]

    def request(self, ttl_s: float) -> dict[str, Any]:
        """An AnnounceWorker request with the current figures, lasting `ttl_s`."""
        return {"WorkerId": self.worker_id, "Kind": self.kind, "Queue": self.queue_name,
                "TtlSeconds": ttl_s, "Status": self._figures()}

    def _figures(self) -> dict[str, Any]:
        try:
            return self.status()
        except Exception:  # a report that fails must not stop the work, nor its shutdown
            log.exception("could not gather this %s's figures; announcing without them",
                          self.kind)
            return {}

    def _due(self, horizon_s: float) -> bool:
        """True when the figures changed since the last announcement (and it is at least
        ANNOUNCE_EVERY_S old), or when the last one runs out within `horizon_s`."""
        now = self._clock.monotonic_s()
        if self._expires_s - now < horizon_s:
            return True
        return now - self._sent_s >= ANNOUNCE_EVERY_S and self._figures() != self._last_status

    async def _announce_every(self) -> None:
        while True:
            await self.tick()
            await asyncio.sleep(ANNOUNCE_EVERY_S)

    async def tick(self) -> None:
        """Announce if an announcement is due before the next tick (ANNOUNCE_EVERY_S on)
        and no long poll carried it: lasting until shortly after the next tick while the
        figures change, until shortly after IDLE_ANNOUNCE_EVERY_S while they do not."""
        if not self.enabled or not self._due(horizon_s=ANNOUNCE_EVERY_S + TTL_MARGIN_S / 2):
            return
        changed = self._figures() != self._last_status
        every_s = ANNOUNCE_EVERY_S if changed else IDLE_ANNOUNCE_EVERY_S
        await self._announce(self.request(every_s + TTL_MARGIN_S))

    async def _announce(self, request: dict[str, Any]) -> None:
        sent_s = self._clock.monotonic_s()
        try:
            answer = await self.sqs.call("AnnounceWorker", request, timeout_s=CALL_TIMEOUT_S,
                                         target_prefix=self.target_prefix)
        except SQSError as exc:
            if self.extension.refused(exc):
                log.debug("%s does not list workers (%s): not announcing this %s",
                          self.sqs.endpoint_url, exc.code, self.kind)
            return  # else the endpoint's passing trouble: try again next time
        except SQSTransportError:
            return  # unreachable for now: the pollers report it; try again next time
        self.carried(request, sent_s, answer)
