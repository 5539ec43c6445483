"""Several schedulers on one queue, driven through simulated time (one ManualClock), with
crashes injected."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from conveyor.client import SQSClient
from conveyor.clock import ManualClock
from conveyor.cron.clock import CronClock
from conveyor.cron.jobs import ATTR_TASK, ATTR_TIME, iso, send_runs
from conveyor.cron.leader import Scheduler
from conveyor.cron.metrics import CronMetrics
from conveyor.cron.source import CronSource
from conveyor.cron.state import Run
from tests.cron.leasekit import Kit


class Crash(Exception):
    """Stands for SIGKILL at an exact point of a step."""


class Fleet:
    """Schedulers sharing one queue and lease; `crash_next_send[i] = "claimed" | "sent"`
    kills scheduler i at its next send, before or after SendMessage."""

    def __init__(self, kit: Kit, sqs: SQSClient, queue_url: str, cron_file: Path,
                 clock: ManualClock, *, ttl_s: float = 10.0, grace_s: float = 300.0) -> None:
        self.kit, self.sqs, self.queue_url, self.cron_file = kit, sqs, queue_url, cron_file
        # One clock for every scheduler: the test moves it, wall and monotonic together.
        self.clock = CronClock(clock)
        self.ttl_s, self.grace_s = ttl_s, grace_s
        self.alive: dict[int, Scheduler] = {}
        self.crash_next_send: dict[int, str] = {}
        self.in_doubt: set[Run] = set()  # runs whose sender died after SendMessage
        self.metrics = CronMetrics("cron-fleet")
        self._ids = 0
        self.lease_name = "conveyor-cron:" + queue_url.rsplit("/", 1)[-1]

    def spawn(self) -> int:
        self._ids += 1
        ident = self._ids
        self.alive[ident] = Scheduler(
            leases=self.kit.leases, sqs=self.sqs, queue_url=self.queue_url,
            queue_name="cron-fleet", lease_name=self.lease_name, holder=f"s{ident}",
            source=CronSource(self.cron_file, clock=self.clock, reload_every_s=0),
            clock=self.clock, metrics=self.metrics, ttl_s=self.ttl_s, grace_s=self.grace_s,
            sender=self._sender(ident))
        return ident

    def leader(self) -> int | None:
        return next((i for i, s in self.alive.items() if s.leader), None)

    def kill(self, ident: int) -> None:
        """SIGKILL between steps: the lease is not released, it has to expire."""
        self.alive.pop(ident, None)

    async def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        await asyncio.to_thread(self.kit.advance, seconds)

    async def step(self, rng: random.Random) -> None:
        order = list(self.alive)
        rng.shuffle(order)
        for ident in order:
            try:
                await self.alive[ident].step()
            except Crash:
                self.kill(ident)

    def _sender(self, ident: int):
        async def send(sqs: SQSClient, url: str, runs: Sequence[Run]) -> list[Run]:
            mode = self.crash_next_send.pop(ident, None)
            if mode == "claimed":
                raise Crash
            sent = await send_runs(sqs, url, runs)
            if mode == "sent":
                self.in_doubt.update(sent)
                raise Crash
            return sent
        return send


async def drain(sqs: SQSClient, queue_url: str) -> list[tuple[str, str, str]]:
    """(task, scheduled time, message id) of every message in the queue."""
    got: dict[str, tuple[str, str, str]] = {}
    empty = 0
    while empty < 3:
        messages = await sqs.receive_messages(queue_url, max_messages=10, wait_time_s=0,
                                              visibility_timeout_s=3600)
        empty = 0 if messages else empty + 1
        for m in messages:
            attrs = m.message_attributes
            got[m.message_id] = (attrs[ATTR_TASK]["StringValue"],
                                 attrs[ATTR_TIME]["StringValue"], m.message_id)
    return list(got.values())


def expected_runs(cron_tasks: dict[str, str], after, until) -> Counter:
    """Every (task, ISO time) due in (after, until]."""
    from conveyor.cron.expr import CronExpr

    return Counter((name, iso(at)) for name, text in cron_tasks.items()
                   for at in CronExpr.parse(text).runs_between(after, until))
