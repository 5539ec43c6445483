"""A test's clock jump survives a shared store's clock correction."""

from __future__ import annotations

import asyncio
import os
import time

from conveyor.clock import Clock
from conveyor.store.postgres import PostgresStore
from tests.support import CREATED_SCHEMAS, POSTGRES_URL, require_postgres


def test_a_shared_store_does_not_correct_an_advanced_clock_away() -> None:
    """The store measures how far this machine's clock is from the database's; a test that
    moved the service's time 62 s on (--dev-clock) must keep those 62 s after that."""
    require_postgres()

    async def scenario() -> None:
        clock = Clock(offset_s=3600)  # a machine an hour fast, as --dev-clock-skew makes it
        schema = "t_" + os.urandom(6).hex()
        CREATED_SCHEMAS.append(schema)
        store = await PostgresStore(f"{POSTGRES_URL}?schema={schema}", 1, clock).open()
        try:
            clock.advance(62)
            await store._measure_skew()  # what the store does every SKEW_REFRESH_S
            clock.skew_ms = store.clock_skew_ms
            ahead_ms = clock.now_ms() - time.time_ns() // 1_000_000
            assert 61_000 < ahead_ms < 63_000  # the database's time (ours) plus 62 s
        finally:
            await store.close()

    asyncio.run(scenario())
