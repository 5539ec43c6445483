"""The PostgreSQL store across a restart of its database (an instance of the test's own).

While the database is down, calls fail with StoreUnavailable; once it is back the store
has, by itself, replaced its broken pool connections, re-subscribed to notifications and
asked the server to wake every long poll, and it logged the outage once each way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from conveyor.store.base import StoreUnavailable
from conveyor.store.postgres import PostgresStore
from tests.pg_instance import PostgresInstance, own_postgres, require_own_postgres


@pytest.fixture
def database() -> Iterator[PostgresInstance]:
    with own_postgres() as instance:
        yield instance


def test_the_store_recovers_by_itself_from_a_database_restart(
        database: PostgresInstance, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="conveyor.store.postgres")

    async def scenario() -> None:
        a = await PostgresStore(database.url, pool_size=4).open()
        b = await PostgresStore(database.url, pool_size=4).open()
        missed = asyncio.Event()
        heard = asyncio.Queue[tuple[int, int]]()
        b.on_remote_missed = missed.set
        b.on_remote_ready = lambda queue_id, count: heard.put_nowait((queue_id, count))
        try:
            await a.announce(7, 1)
            assert await asyncio.wait_for(heard.get(), 5) == (7, 1)
            # Every pool connection in use, so that the restart breaks them all.
            await asyncio.gather(*(a.list_queues(None, "") for _ in range(a.pool_size)))

            await asyncio.to_thread(database.stop)
            with pytest.raises(StoreUnavailable):
                await a.list_queues(None, "")
            with pytest.raises(StoreUnavailable):
                await a.announce(7, 2)
            await asyncio.to_thread(database.start)

            await asyncio.wait_for(missed.wait(), 15)  # b listens again, and said so
            for _ in range(300):  # and a has found the database again (its own watch)
                if a.outage() is None:
                    break
                await asyncio.sleep(0.05)
            # Broken connections were replaced: a burst as wide as the pool succeeds.
            await asyncio.gather(*(a.list_queues(None, "") for _ in range(a.pool_size)))
            await a.announce(7, 3)
            assert await asyncio.wait_for(heard.get(), 5) == (7, 3)
        finally:
            await a.close()
            await b.close()

    asyncio.run(scenario())
    lines = [r.getMessage() for r in caplog.records]
    # One line each way per store (a and b): not one per failed call, and no traceback.
    assert sum("is unreachable" in line for line in lines) == 2, lines
    assert sum("is reachable again" in line for line in lines) == 2, lines
    assert not [r for r in caplog.records if r.exc_info], lines


def test_a_database_out_of_connections_is_unavailable_and_the_store_still_closes() -> None:
    """"too many clients": the calls that get no connection, and those cut short by the
    store's closing, are answered StoreUnavailable (retryable; "pool is closing" was a
    StoreError), and close() returns (it hung, seen under CI's load, when the refusals woke
    the watch loop just as close() cancelled it: Python 3.11's wait_for swallowed the
    cancellation)."""
    require_own_postgres()
    database = PostgresInstance({"max_connections": "4", "superuser_reserved_connections": "0"})
    try:
        database.create()

        async def scenario() -> None:
            store = await PostgresStore(database.url, pool_size=8).open()
            # The LISTEN connection holds one of 4: 8 calls at once cannot all have one.
            calls = [asyncio.create_task(store.count_sign_in_failure([f"ip:{n}"], 1, 0))
                     for n in range(8)]
            try:
                await asyncio.wait(calls, return_when=asyncio.FIRST_EXCEPTION)
            finally:  # closed at the first refusal, the others still going, as a node stops
                await asyncio.wait_for(store.close(), 30)
            answers = await asyncio.gather(*calls, return_exceptions=True)
            refused = [a for a in answers if isinstance(a, BaseException)]
            assert refused and all(isinstance(a, StoreUnavailable) for a in refused)

        for _ in range(10):  # the race is timing's: ten tries found it on the old code
            asyncio.run(scenario())
    finally:
        database.destroy()
