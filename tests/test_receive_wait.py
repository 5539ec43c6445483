"""How long a long poll sleeps: counted from its last fetch, so a message whose
visibility runs out between that fetch and the reckoning wakes it at once instead of
leaving it asleep for the rest of its wait."""

from __future__ import annotations

import asyncio
from pathlib import Path

from conveyor.clock import Clock
from conveyor.service import RequestContext, Service
from conveyor.sqs.limits import STRICT
from conveyor.store.sqlite import SqliteStore


class _StoppedClock(Clock):
    """Moves only when told to."""

    def __init__(self, now_ms: int) -> None:
        super().__init__()
        self.now = now_ms

    def local_ms(self) -> int:
        return self.now


def test_a_message_back_between_fetch_and_sleep_wakes_the_poll(tmp_path: Path) -> None:
    async def scenario() -> None:
        clock = _StoppedClock(1_800_000_000_000)
        service = Service(SqliteStore(tmp_path), STRICT, clock)
        ctx = RequestContext("us-east-1", "000000000000", "http://localhost")
        try:
            url = (await service.create_queue(ctx, {"QueueName": "q"}))["QueueUrl"]
            await service.action("SendMessage")(ctx, {"QueueUrl": url, "MessageBody": "m"})
            plan = await service.plan_receive(ctx, {"QueueUrl": url, "VisibilityTimeout": 1,
                                                    "WaitTimeSeconds": 10})
            assert (await service.fetch(ctx, plan))["Messages"]  # in flight for 1 s
            clock.now += 999
            assert await service.fetch(ctx, plan) == {}  # 1 ms before it is back
            clock.now += 2  # the clock passes its time before the poll plans its sleep
            assert await service.seconds_until_visible(plan) == 0.0
            assert (await service.fetch(ctx, plan))["Messages"][0]["Body"] == "m"
        finally:
            await service.store.close()

    asyncio.run(scenario())
