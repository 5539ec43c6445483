"""PostgreSQL's shared statements (store/_coalesce.py): calls made at once go in one
statement, and one call the database refuses fails alone, never its neighbours.

The bad calls are ones PostgreSQL itself refuses, which the service would have turned
away earlier (so these tests drive the store directly):
- a text value holding the character of code zero: "the character with code zero
  (sometimes called NUL) cannot be stored" (PostgreSQL documentation, 8.3 Character
  Types); asyncpg reports the server's invalid_byte_sequence error, SQLSTATE 22021;
- a negative LIMIT: "LIMIT must not be negative", SQLSTATE 2201W
  invalid_row_count_in_limit_clause (src/backend/executor/nodeLimit.c).
Each test fails where the shared statement's error goes to every call in it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conveyor.clock import ManualClock
from conveyor.service import rules
from conveyor.store.base import OK, Counts, Handle, QueueRecord, StoreError, StoreUnavailable
from conveyor.store.postgres import PostgresStore
from tests.pg_instance import PostgresInstance, own_postgres
from tests.store.conformance import open_store
from tests.store.helpers import ATTRIBUTES, message
from tests.support import require_postgres

NOW = 1_800_000_000_000
FAR = 1 << 40  # a cut-off no message is sent before: nothing has expired
PICK = rules.Picking(fifo_scan=100, fair_groups=rules.FAIR_GROUPS)
NUL = "\x00"


def _run(scenario: Any) -> None:
    require_postgres()

    async def main() -> None:
        store = await open_store("postgresql", Path(), ManualClock(NOW))
        try:
            await scenario(store)
        finally:
            await store.close()

    asyncio.run(main())


async def _claim(store: PostgresStore, queue: QueueRecord, max_messages: int
                 ) -> dict[str, Handle]:
    """A receive's messages by body, with their handles."""
    async with store.claim(queue, max_messages, NOW, NOW - FAR, NOW + 30_000, PICK) as claim:
        return {m.body: Handle(m.seq, m.receipt) for m in claim.messages}


async def _counts(store: PostgresStore, queue: QueueRecord) -> Counts:
    return rules.counts(await store.tally(queue, NOW, NOW - FAR))


def _refused(outcome: object) -> bool:
    """The database's refusal of a statement, not an outage."""
    return isinstance(outcome, StoreError) and not isinstance(outcome, StoreUnavailable)


def test_a_send_the_database_refuses_fails_alone() -> None:
    """Three sends at once, the middle one's body holding NUL: the others are written
    and receivable, the bad one gets a StoreError and wrote nothing."""
    async def scenario(store: PostgresStore) -> None:
        q1 = await store.create_queue("us-east-1", "q1", ATTRIBUTES, {}, 0)
        q2 = await store.create_queue("us-east-1", "q2", ATTRIBUTES, {}, 0)
        outcomes = await asyncio.gather(
            store.send(q1, [message("good-1", NOW)], NOW, 0),
            store.send(q1, [message("fine", NOW), message(f"bad{NUL}", NOW)], NOW, 0),
            store.send(q2, [message("good-2", NOW)], NOW, 0), return_exceptions=True)
        assert [s.message_id for s in outcomes[0]] == ["good-1"]
        assert _refused(outcomes[1]), outcomes[1]
        assert [s.message_id for s in outcomes[2]] == ["good-2"]
        assert list(await _claim(store, q1, 10)) == ["good-1"]  # "fine" went with the bad one
        assert list(await _claim(store, q2, 10)) == ["good-2"]

    _run(scenario)


def test_a_delete_the_database_refuses_fails_alone() -> None:
    """Two delete batches at once, one with a receipt token holding NUL: the other's
    message is gone; the bad one gets a StoreError and its message stays in flight."""
    async def scenario(store: PostgresStore) -> None:
        queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
        await store.send(queue, [message("a", NOW), message("b", NOW)], NOW, 0)
        taken = await _claim(store, queue, 10)
        outcomes = await asyncio.gather(
            store.delete(queue, [taken["a"]]),
            store.delete(queue, [Handle(taken["b"].seq, f"bad{NUL}")]),
            return_exceptions=True)
        assert outcomes[0] == [OK]
        assert _refused(outcomes[1]), outcomes[1]
        assert await _counts(store, queue) == Counts(0, 1, 0)  # b, still in flight

    _run(scenario)


def test_a_claim_the_database_refuses_fails_alone() -> None:
    """Three receives at once, two on q1 and, between them, one on q2 asking for -1
    messages: each receive on q1 gets one message of its own (never one both), the bad
    one a StoreError; nothing is left in flight that no receive was given. (Two receives
    on one queue never share a statement: they would find the same rows.)"""
    async def scenario(store: PostgresStore) -> None:
        q1 = await store.create_queue("us-east-1", "q1", ATTRIBUTES, {}, 0)
        q2 = await store.create_queue("us-east-1", "q2", ATTRIBUTES, {}, 0)
        await store.send(q1, [message(body, NOW - 4 + i) for i, body in enumerate("xyab")],
                         NOW, 0)
        await store.send(q2, [message("c", NOW)], NOW, 0)
        both = await asyncio.gather(_claim(store, q1, 1), _claim(store, q1, 1))
        assert [list(taken) for taken in both] == [["x"], ["y"]]
        first, bad, second = await asyncio.gather(
            _claim(store, q1, 1), _claim(store, q2, -1), _claim(store, q1, 1),
            return_exceptions=True)
        assert _refused(bad), bad
        assert (list(first), list(second)) == (["a"], ["b"])
        assert await _counts(store, q1) == Counts(0, 4, 0)
        assert await _counts(store, q2) == Counts(1, 0, 0)  # c, untouched

    _run(scenario)


@pytest.fixture
def database() -> Iterator[PostgresInstance]:
    with own_postgres() as instance:
        yield instance


def test_an_outage_is_not_tried_again_call_by_call(database: PostgresInstance) -> None:
    """With the database stopped, two sends made at once both get StoreUnavailable from
    the one statement they share: no call is tried again alone (that would multiply the
    load on a database that is down)."""
    async def scenario() -> None:
        store = await PostgresStore(database.url, pool_size=2).open()
        flushes: list[int] = []
        flush = store._sends._flush

        async def counted(calls: list[Any]) -> Any:
            flushes.append(len(calls))
            return await flush(calls)

        store._sends._flush = counted
        try:
            queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
            await asyncio.to_thread(database.stop)
            outcomes = await asyncio.gather(
                store.send(queue, [message("a", NOW)], NOW, 0),
                store.send(queue, [message("b", NOW)], NOW, 0), return_exceptions=True)
            assert all(isinstance(o, StoreUnavailable) for o in outcomes), outcomes
            assert flushes == [2]
        finally:
            await store.close()

    asyncio.run(scenario())



def test_pooled_connections_plan_each_statement_once() -> None:
    """The claim runs on its generic plan, never planned afresh (store/postgres.py,
    _plan_once): "force_generic_plan" makes a prepared statement use its generic plan
    from the first execution on (PostgreSQL documentation, 20.7.2 Planner Method
    Configuration, plan_cache_mode). Fails where a pooled connection keeps the default
    ("auto"), under which this claim was custom-planned on every execution."""
    async def scenario(store: PostgresStore) -> None:
        queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
        for i in range(8):  # past the five custom plans "auto" tries first
            await store.send(queue, [message(f"m{i}", NOW)], NOW, 0)
            assert list(await _claim(store, queue, 10)) == [f"m{i}"]
        async with store._conn() as db:
            assert await db.fetchval("SHOW plan_cache_mode") == "force_generic_plan"
            plans = await db.fetch("SELECT generic_plans, custom_plans FROM"
                                   " pg_prepared_statements WHERE statement LIKE"
                                   " 'WITH c AS MATERIALIZED%'")
        assert all(row["custom_plans"] == 0 for row in plans)
    _run(scenario)
