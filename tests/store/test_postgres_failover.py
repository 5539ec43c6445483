"""The PostgreSQL store across a failover of its database: a primary and its streaming
standby of the test's own (tests/pg_instance.py), named together in one multi-host DSN.

While no host takes writes (the primary crashed, the standby not yet promoted) calls fail
with StoreUnavailable, never as a user's error; once a standby is promoted the store finds
it by itself, with its wake-ups, and what was acknowledged before is there. A server that
stops being the primary without dying (fenced read-only) is the same outage, not a user's
error. A commit that waits for a synchronous standby none of which is connected (the
promoted one still names one, the issue's "never answers another request") is answered
StoreUnavailable within the store's statement bound instead of never.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from conveyor.store.base import NewMessage, StoreUnavailable
from conveyor.store.postgres import PostgresStore
from tests.pg_instance import PostgresInstance, multi_host_url, own_pair
from tests.tcp_proxy import TcpProxy

# Synchronous replication as an operator sets it: a commit waits for a standby's flush.
SYNC = {"synchronous_standby_names": "'*'", "synchronous_commit": "on"}
BOUND_S = 2.0  # the stores' statement bound here: a commit left waiting answers after it
RECOVERED_WITHIN_S = 30.0  # a bound on a hang, not a timing
CUT_WITHIN_S = 60.0  # the same, past the statement bound of a request on a cut link


def _message(n: int) -> NewMessage:
    return NewMessage(message_id=f"m-{n}", body=str(n), md5_body="", attributes=None,
                      md5_attributes=None, system=None, sent_ms=1, sender_id="t",
                      visible_at_ms=0, group_id=None, dedup_key=None)


async def _until_served(call: Callable[[], Awaitable[Any]],
                        within_s: float = RECOVERED_WITHIN_S) -> Any:
    """Retry `call` while it answers StoreUnavailable (as a client retries a 503)."""
    async def loop() -> Any:
        while True:
            try:
                return await call()
            except StoreUnavailable:
                await asyncio.sleep(0.1)
    return await asyncio.wait_for(loop(), within_s)


async def _until_back(store: PostgresStore) -> None:
    """Until the store has noticed that the database is back (and logged it)."""
    async def loop() -> None:
        while store.outage() is not None:
            await asyncio.sleep(0.05)
    await asyncio.wait_for(loop(), RECOVERED_WITHIN_S)


async def _heard(heard: asyncio.Queue[tuple[int, int]], word: tuple[int, int]) -> bool:
    """Whether `word` reaches the listener (after whatever the sends announced)."""
    async def loop() -> bool:
        while await heard.get() != word:
            pass
        return True
    return await asyncio.wait_for(loop(), RECOVERED_WITHIN_S)


async def _sql(instance: PostgresInstance, *statements: str) -> None:
    conn = await asyncpg.connect(instance.url)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


def test_the_store_follows_a_failover_to_the_promoted_standby(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="conveyor.store.postgres")
    with own_pair(SYNC) as (primary, standby):
        url = multi_host_url(primary, standby, target_session_attrs="read-write")

        async def scenario() -> None:
            a = await PostgresStore(url, pool_size=4, statement_timeout_s=BOUND_S).open()
            b = await PostgresStore(url, pool_size=4, statement_timeout_s=BOUND_S).open()
            heard = asyncio.Queue[tuple[int, int]]()
            b.on_remote_ready = lambda queue_id, count: heard.put_nowait((queue_id, count))
            try:
                queue = await a.create_queue("r", "q", {}, {}, 1)
                acked = await a.send(queue, [_message(n) for n in range(5)], 1, 0)
                await asyncio.gather(*(a.list_queues(None, "") for _ in range(a.pool_size)))

                await asyncio.to_thread(primary.crash)
                for call in (lambda: a.list_queues(None, ""),
                             lambda: a.send(queue, [_message(5)], 1, 0)):
                    with pytest.raises(StoreUnavailable):  # not StoreError: an outage
                        await asyncio.wait_for(call(), RECOVERED_WITHIN_S)

                await asyncio.to_thread(standby.promote)
                # The promoted standby still names a synchronous standby and has none: its
                # commits wait. The store answers, StoreUnavailable, within its bound.
                await _until_served(lambda: a.list_queues(None, ""))
                await _until_back(a)  # (its return replaces the pool: a send would fail)
                with pytest.raises(StoreUnavailable):
                    await asyncio.wait_for(a.send(queue, [_message(6)], 1, 0),
                                           RECOVERED_WITHIN_S)

                await asyncio.to_thread(primary.rebuild_as_standby_of, standby)
                await _until_served(lambda: a.send(queue, [_message(7)], 1, 0))
                assert {m.message_id for m in acked} <= {
                    m.message_id for m, _ in await a.peek(queue, 100, 0)}
                # b listens on the new primary: a's word reaches it again.
                await _until_served(lambda: b.list_queues(None, ""))
                await _until_served(lambda: a.announce(7, 3))
                assert await _heard(heard, (7, 3))
            finally:
                await a.close()
                await b.close()

        asyncio.run(scenario())
    stalls = [r.getMessage() for r in caplog.records if "synchronous standby" in r.getMessage()]
    assert len(stalls) == 1, stalls  # the operator is told why writes fail, once
    assert "synchronous_standby_names = '*'" in stalls[0]


def test_a_primary_fenced_read_only_is_left_for_the_promoted_standby() -> None:
    """No server dies: the old primary is made read-only and the standby promoted. The
    store's connections on the old primary must not turn writes into user errors; they
    are replaced, and the LISTEN connection moves too."""
    with own_pair() as (primary, standby):
        url = multi_host_url(primary, standby, target_session_attrs="read-write")

        async def scenario() -> None:
            a = await PostgresStore(url, pool_size=4).open()
            b = await PostgresStore(url, pool_size=4).open()
            heard = asyncio.Queue[tuple[int, int]]()
            b.on_remote_ready = lambda queue_id, count: heard.put_nowait((queue_id, count))
            try:
                queue = await a.create_queue("r", "q", {}, {}, 1)
                await a.send(queue, [_message(0)], 1, 0)
                await asyncio.to_thread(standby.promote)
                await _sql(primary, "ALTER SYSTEM SET default_transaction_read_only = on",
                           "SELECT pg_reload_conf()")
                await asyncio.sleep(0.5)  # the reload reaches every session

                with pytest.raises(StoreUnavailable):
                    await a.send(queue, [_message(1)], 1, 0)
                await _until_served(lambda: a.send(queue, [_message(2)], 1, 0))
                # The message sent before the promotion was streamed to the standby.
                assert [m.message_id for m, _ in await a.peek(queue, 10, 0)] == ["m-0", "m-2"]
                await _until_served(lambda: b.send(queue, [_message(3)], 1, 0))
                await _until_served(lambda: a.announce(7, 4))
                assert await _heard(heard, (7, 4))
            finally:
                await a.close()
                await b.close()

        asyncio.run(scenario())


def test_sends_waiting_on_their_commit_when_the_primary_dies_all_fail() -> None:
    """Several sends grouped into shared statements (_coalesce.py), their commits waiting
    for the synchronous standby (stopped), when the primary dies: none of their callers
    hears an acknowledgement, and none of the messages is on the standby promoted after."""
    with own_pair(SYNC) as (primary, standby):
        url = multi_host_url(primary, standby, target_session_attrs="read-write")

        async def scenario() -> None:
            a = await PostgresStore(url, pool_size=4).open()
            try:
                queue = await a.create_queue("r", "q", {}, {}, 1)
                await asyncio.to_thread(standby.stop)
                sends = [asyncio.create_task(a.send(queue, [_message(n)], 1, 0))
                         for n in range(6)]
                await asyncio.sleep(1.0)  # the first shared statement waits on its commit
                assert not any(send.done() for send in sends)
                await asyncio.to_thread(primary.crash)
                outcomes = await asyncio.wait_for(
                    asyncio.gather(*sends, return_exceptions=True), RECOVERED_WITHIN_S)
                assert all(isinstance(o, StoreUnavailable) for o in outcomes), outcomes

                await asyncio.to_thread(standby.start)
                await asyncio.to_thread(standby.promote)
                assert await _until_served(lambda: a.peek(queue, 10, 0)) == []
            finally:
                await a.close()

        asyncio.run(scenario())


def test_a_primary_cut_off_without_a_word_is_left_for_the_promoted_standby() -> None:
    """A partition: the primary's link drops everything (no RST, no FIN; tcp_proxy.py)
    and the standby is promoted. Connections to the old primary would wait forever; the
    store notices by its own probe, and each host of the DSN gets its own connect timeout,
    so the dead first host does not keep it from the second."""
    with own_pair() as (primary, standby):
        links = [TcpProxy(primary.port), TcpProxy(standby.port)]
        url = (f"postgresql://postgres@127.0.0.1:{links[0].port},127.0.0.1:{links[1].port}"
               "/postgres?target_session_attrs=read-write")

        async def scenario() -> None:
            a = await PostgresStore(url, pool_size=4).open()
            b = await PostgresStore(url, pool_size=4).open()
            heard = asyncio.Queue[tuple[int, int]]()
            b.on_remote_ready = lambda queue_id, count: heard.put_nowait((queue_id, count))
            try:
                queue = await a.create_queue("r", "q", {}, {}, 1)
                await a.send(queue, [_message(0)], 1, 0)
                links[0].cut()
                await asyncio.to_thread(standby.promote)
                # A request on a connection to the cut-off server waits for its answer
                # until the statement bound (20 s), then answers 503; later ones go to the
                # new primary.
                await _until_served(lambda: a.send(queue, [_message(1)], 1, 0), CUT_WITHIN_S)
                await _until_served(lambda: b.send(queue, [_message(2)], 1, 0), CUT_WITHIN_S)
                assert [m.message_id for m, _ in await a.peek(queue, 10, 0)] == [
                    "m-0", "m-1", "m-2"]
                await _until_served(lambda: a.announce(7, 5))
                assert await _heard(heard, (7, 5))
            finally:
                await a.close()
                await b.close()

        try:
            asyncio.run(scenario())
        finally:
            for link in links:
                link.close()
