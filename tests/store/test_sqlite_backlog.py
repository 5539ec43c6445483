"""The SQLite store with a big backlog: bulk deletes (purge, queue deletion, retention)
go a chunk per transaction, so other requests are served while they run; the counts,
the retention sweep and a FIFO receive find what they need without reading the whole
queue (tests/store/test_receive.py checks the receive on both stores)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path

from conveyor.service.messages import Redrive
from conveyor.store.base import Counts, Handle, QueueRecord
from conveyor.store.sqlite import DELETE_CHUNK, SqliteStore
from tests.store.helpers import (
    change_visibility,
    counts,
    expire,
    message,
    movable,
    now_ms,
    receive,
    run,
)

RETENTION_S = 60
ATTRIBUTES = {"MessageRetentionPeriod": str(RETENTION_S), "VisibilityTimeout": "30",
              "DelaySeconds": "0"}
BACKLOG = 5 * DELETE_CHUNK + 7


async def _fill(store: SqliteStore, queue: QueueRecord, count: int, sent_ms: int,
                prefix: str = "old") -> None:
    for start in range(0, count, 500):
        batch = [message(f"{prefix}-{i}", sent_ms) for i in range(start, min(start + 500, count))]
        await store.send(queue, batch, sent_ms, 300_000)


def _bodies(store: SqliteStore, queue: QueueRecord) -> set[str]:
    return {row[0] for row in store.db.execute("SELECT body FROM messages WHERE queue_id=?",
                                               (queue.id,))}


async def _served_meanwhile(store: SqliteStore, queue: QueueRecord,
                            bulk: Awaitable[object]) -> asyncio.Task[object]:
    """Start `bulk`, then send one message: the send must be answered while the bulk
    delete is still going (in one transaction, the send would wait for all of it)."""
    task = asyncio.ensure_future(bulk)
    await asyncio.sleep(0)  # the bulk delete starts first
    await store.send(queue, [message("during", now_ms())], now_ms(), 300_000)
    assert not task.done(), "the send waited for the whole bulk delete"
    await task
    return task


def test_purge_of_a_big_queue_serves_others_meanwhile(tmp_path: Path) -> None:
    async def scenario(store: SqliteStore) -> None:
        queue = await store.create_queue("us-east-1", "big", ATTRIBUTES, {}, 0)
        other = await store.create_queue("us-east-1", "other", ATTRIBUTES, {}, 0)
        await _fill(store, queue, BACKLOG, now_ms() - 1000)
        await _fill(store, other, 3, now_ms() - 1000)
        await _served_meanwhile(store, queue, store.purge(queue, now_ms() - 1))
        assert _bodies(store, queue) == {"during"}  # sent after the purge: kept
        assert len(_bodies(store, other)) == 3
        refreshed = await store.get_queue("us-east-1", "big")
        assert refreshed is not None and refreshed.purged_s > 0

    run("sqlite", tmp_path, scenario)


def test_deleting_a_big_queue_serves_others_meanwhile(tmp_path: Path) -> None:
    async def scenario(store: SqliteStore) -> None:
        queue = await store.create_queue("us-east-1", "big", ATTRIBUTES, {}, 0)
        await _fill(store, queue, BACKLOG, now_ms())
        await _served_meanwhile(store, queue, store.delete_queue(queue, now_ms() // 1000))
        assert await store.get_queue("us-east-1", "big") is None
        assert _bodies(store, queue) == set()  # what was sent meanwhile went with it

    run("sqlite", tmp_path, scenario)


def test_retention_sweep_deletes_the_expired_a_chunk_at_a_time(tmp_path: Path) -> None:
    async def scenario(store: SqliteStore) -> None:
        queue = await store.create_queue("us-east-1", "big", ATTRIBUTES, {}, 0)
        now = now_ms()
        await _fill(store, queue, BACKLOG, now - RETENTION_S * 1000 - 1)
        await _fill(store, queue, 4, now - RETENTION_S * 1000 + 5000, prefix="young")
        task = await _served_meanwhile(store, queue, expire(store, now))
        assert task.result() == BACKLOG
        assert _bodies(store, queue) == {"during", *(f"young-{i}" for i in range(4))}

    run("sqlite", tmp_path, scenario)


def test_the_sweep_finishes_a_purge_that_was_cut_short(tmp_path: Path) -> None:
    """The purge time is committed before its deletes: after a crash half-way, the
    retention sweep deletes what was sent before the purge's second, and no more."""
    async def scenario(store: SqliteStore) -> None:
        queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
        purge_s = now_ms() // 1000 - 10
        await _fill(store, queue, 3, purge_s * 1000 - 2000, prefix="before")
        await _fill(store, queue, 2, purge_s * 1000 + 1, prefix="after")
        queue.purged_s = purge_s  # as the purge's first transaction leaves it
        await store.update_queue(queue)
        assert await expire(store, now_ms()) == 3
        assert _bodies(store, queue) == {"after-0", "after-1"}

    run("sqlite", tmp_path, scenario)


def test_the_sweep_deletes_messages_whose_queue_is_gone(tmp_path: Path) -> None:
    """A move into a queue as it is deleted leaves messages naming no queue; the sweep
    deletes them before a new queue can take that id."""
    async def scenario(store: SqliteStore) -> None:
        gone = await store.create_queue("us-east-1", "gone", ATTRIBUTES, {}, 0)
        kept = await store.create_queue("us-east-1", "kept", ATTRIBUTES, {}, 0)
        await _fill(store, gone, DELETE_CHUNK + 1, now_ms(), prefix="orphan")
        await _fill(store, kept, 2, now_ms(), prefix="kept")
        store.db.execute("DELETE FROM queues WHERE id=?", (gone.id,))
        await expire(store, now_ms())
        assert _bodies(store, gone) == set()
        assert _bodies(store, kept) == {"kept-0", "kept-1"}

    run("sqlite", tmp_path, scenario)


def test_counts_leave_out_expired_messages_in_every_state(tmp_path: Path) -> None:
    async def scenario(store: SqliteStore) -> None:
        queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
        now = now_ms()
        old = now - RETENTION_S * 1000 - 1  # expired, not yet swept
        young = now - 1000
        for sent in (old, young):
            await store.send(queue, [message(f"visible-{sent}-{i}", sent) for i in range(3)],
                             sent, 300_000)
            await store.send(queue, [message(f"delayed-{sent}", sent, now + 60_000)],
                             sent, 300_000)
        assert await counts(store, queue, now) == Counts(visible=3, in_flight=0, delayed=1)
        # Two of each age in flight, as a receive leaves them (a receive itself would
        # delete the expired ones it meets).
        store.db.execute("UPDATE messages SET receive_count=1, visible_at=? WHERE body IN"
                         " (?, ?, ?, ?)", (now + 30_000, f"visible-{old}-0",
                                           f"visible-{old}-1", f"visible-{young}-0",
                                           f"visible-{young}-1"))
        assert await counts(store, queue, now) == Counts(visible=1, in_flight=2, delayed=1)

    run("sqlite", tmp_path, scenario)


def test_no_statement_scans_or_sorts_the_messages_table(tmp_path: Path) -> None:
    """Every statement the store runs on messages, for every operation on a standard and
    a FIFO queue, reads through an index in order: none reads the whole table, and none
    sorts a queue's backlog (a FIFO receive or a move step once sorted a million rows)."""
    async def scenario(store: SqliteStore) -> None:
        statements: list[tuple[str, object]] = []

        def trace(cursor: object, sql: str, bindings: object) -> bool:
            statements.append((sql, bindings))
            return True

        store.db.exec_trace = trace
        now = now_ms()
        for name in ("q", "q.fifo"):
            group = "g" if name.endswith(".fifo") else None
            queue = await store.create_queue("us-east-1", name, ATTRIBUTES, {}, 0)
            messages = [message(f"{name}-{i}", now, group_id=group) for i in range(2)]
            await store.send(queue, messages, now, 300_000)
            taken = await receive(store, queue, 10, 30_000, now, Redrive(5, queue.id, "arn"))
            await change_visibility(store, queue, [Handle(taken[0].seq, taken[0].receipt or "",
                                                         now + 1000)], now)
            await store.delete(queue, [Handle(m.seq, m.receipt or "") for m in taken], now)
            await counts(store, queue, now)
            await store.next_visible_ms(queue, now)
            moves = [(m.seq, queue.id) for m in await movable(store, queue, 10, now)]
            await store.move(queue, moves, now)
            await store.purge(queue, now)
            await expire(store, now)
            await store.delete_queue(queue, now // 1000)
        store.db.exec_trace = None

        on_messages = [(sql, b) for sql, b in statements if "messages" in sql]
        assert len(on_messages) > 20
        for sql, bindings in on_messages:
            plan = [row[3] for row in store.db.execute("EXPLAIN QUERY PLAN " + sql, bindings)]
            assert not [step for step in plan if "SCAN messages" in step
                        or "TEMP B-TREE" in step], (sql, plan)

    run("sqlite", tmp_path, scenario)
