"""Lease backends under test, each with a way to move its clock."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from conveyor.client import SQSClient
from conveyor.clock import Clock
from conveyor.cron.leases.base import LeaseBackend
from conveyor.cron.leases.dynamodb import DynamoDBLeases
from conveyor.cron.leases.server import ServerLeases
from tests.cron.conftest import advance_server, dynamodb_client
from tests.support import ServerProcess

BACKENDS = ["server", "dynamodb"]


@dataclass
class Kit:
    """A backend plus `advance(seconds)`, which makes leases expire without waiting."""

    leases: LeaseBackend
    advance: Callable[[float], None]


@asynccontextmanager
async def open_kit(kind: str, server: ServerProcess | None, moto_url: str | None,
                   now: Clock | None = None) -> AsyncIterator[Kit]:
    """The backend `kind` on the given server or moto."""
    if kind == "server":
        assert server is not None
        sqs = SQSClient(server.url, access_key="test", secret_key="test")
        try:
            yield Kit(ServerLeases(sqs), lambda s: advance_server(server, s))
        finally:
            await sqs.close()
        return
    assert moto_url is not None
    clock = now or Clock()  # real time that the test moves (DynamoDB expiry is the writer's)
    leases = DynamoDBLeases("leases-" + uuid.uuid4().hex[:8], client=dynamodb_client(moto_url),
                            clock=clock)
    try:
        yield Kit(leases, clock.advance)
    finally:
        await leases.close()
