"""What the conformance suite shares: a service on a store of each kind, on a clock that
moves only when the test says, and SQS calls made on it as a client would make them."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from conveyor.clock import ManualClock
from conveyor.service import RequestContext, Service
from conveyor.sqs.limits import STRICT
from conveyor.store import journal, postgres, shards, sqlite
from tests.store.helpers import KINDS
from tests.support import CREATED_SCHEMAS, POSTGRES_URL, require_postgres

CTX = RequestContext("us-east-1", "000000000000", "http://localhost")


# The stores the conformance suite runs on: beside every store kind, PostgreSQL sharded over
# two schemas, each new queue on the other shard than the last, so that a queue and its
# dead-letter queue live on different shards.
CONFORMANCE_KINDS = [*KINDS, "sharded"]


def alternating() -> Any:
    """A placement rule for tests: each new queue on the next shard in turn."""
    turn = iter(range(1 << 30))
    return lambda region, name, names: names[next(turn) % len(names)]


async def open_store(kind: str, tmp_path: Path, clock: ManualClock,
                     schema: str | None = None) -> Any:
    """A fresh store of `kind`; PostgreSQL in a schema of its own (or `schema`, shared)."""
    if kind == "sharded":
        members = {}
        for name in ("a", "b"):
            CREATED_SCHEMAS.append(own := "t_" + os.urandom(6).hex())
            members[name] = postgres.PostgresStore(f"{POSTGRES_URL}?schema={own}", 4, clock)
        return await shards.ShardedStore(members, alternating()).open()
    if kind == "sqlite":
        return sqlite.SqliteStore(tmp_path)
    if kind == "journal":
        return journal.JournaledStore(tmp_path)
    if schema is None:
        schema = "t_" + os.urandom(6).hex()
        CREATED_SCHEMAS.append(schema)
    return await postgres.PostgresStore(f"{POSTGRES_URL}?schema={schema}", 4, clock).open()


class Sqs:
    """The service called as a client calls it (one method per SQS action used here)."""

    def __init__(self, service: Service, clock: ManualClock) -> None:
        self.service, self.clock = service, clock

    async def call(self, action: str, **request: Any) -> dict[str, Any]:
        return await self.service.action(action)(CTX, request)

    async def create(self, name: str, **attributes: Any) -> str:
        attrs = {k: str(v) for k, v in attributes.items()}
        return (await self.call("CreateQueue", QueueName=name, Attributes=attrs))["QueueUrl"]

    async def send(self, url: str, *bodies: str, **extra: Any) -> None:
        for body in bodies:
            await self.call("SendMessage", QueueUrl=url, MessageBody=body, **extra)

    async def receive(self, url: str, n: int = 10, **extra: Any) -> list[dict[str, Any]]:
        plan = await self.service.plan_receive(CTX, {
            "QueueUrl": url, "MaxNumberOfMessages": n, "WaitTimeSeconds": 0,
            "MessageSystemAttributeNames": ["All"], **extra})
        return (await self.service.fetch(CTX, plan)).get("Messages", [])

    async def bodies(self, url: str, n: int = 10, **extra: Any) -> list[str]:
        return [m["Body"] for m in await self.receive(url, n, **extra)]

    async def counts(self, url: str) -> tuple[int, int, int]:
        """(visible, in flight, delayed), as GetQueueAttributes reports them."""
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                 "ApproximateNumberOfMessagesDelayed"]
        got = (await self.call("GetQueueAttributes", QueueUrl=url,
                               AttributeNames=names))["Attributes"]
        visible, in_flight, delayed = (int(got[n]) for n in names)
        return visible, in_flight, delayed

    async def arn(self, url: str) -> str:
        return (await self.call("GetQueueAttributes", QueueUrl=url,
                                AttributeNames=["QueueArn"]))["Attributes"]["QueueArn"]

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)


def run(kind: str, tmp_path: Path, scenario: Callable[[Sqs], Awaitable[None]]) -> None:
    """Run `scenario` against a service on a fresh store of `kind`, on a ManualClock."""
    if kind in ("postgresql", "sharded"):
        require_postgres()

    async def main() -> None:
        clock = ManualClock()
        store = await open_store(kind, tmp_path, clock)
        try:
            await scenario(Sqs(Service(store, STRICT, clock), clock))
        finally:
            await asyncio.sleep(0)  # let announcements to other nodes finish
            await store.close()

    asyncio.run(main())
