"""The SQLite store's group commit: the changes of one event-loop turn share a COMMIT,
and a failing change takes its whole group down with it, never half of it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from conveyor.store.base import QueueRecord, StoreError
from conveyor.store.sqlite import SqliteStore
from tests.store.helpers import ATTRIBUTES, message, now_ms


async def _send(store: SqliteStore, queue: QueueRecord, body: str) -> None:
    now = now_ms()
    await store.send(queue, [message(body, now)], now, 300_000)


async def _broken_change(store: SqliteStore) -> None:
    async with store._write() as db:
        db.execute("INSERT INTO no_such_table VALUES (1)")


def _stored_bodies(store: SqliteStore) -> set[str]:
    """What is committed: read between transactions (the store holds the file alone)."""
    assert not store.db.in_transaction
    return {row[0] for row in store.db.execute("SELECT body FROM messages")}


def test_one_turn_commits_together_and_fails_together(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SqliteStore(tmp_path)
        try:
            queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
            # Three sends in one turn: one group, all committed.
            await asyncio.gather(*(_send(store, queue, f"ok-{i}") for i in range(3)))
            assert _stored_bodies(store) == {"ok-0", "ok-1", "ok-2"}

            # A send and a broken change in one turn: neither is committed, both fail.
            results = await asyncio.gather(_send(store, queue, "neighbour"),
                                           _broken_change(store), return_exceptions=True)
            assert all(isinstance(r, StoreError) for r in results), results
            assert _stored_bodies(store) == {"ok-0", "ok-1", "ok-2"}

            # The next turn starts a fresh group.
            await _send(store, queue, "after")
            assert _stored_bodies(store) == {"ok-0", "ok-1", "ok-2", "after"}
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_change_that_fails_alone_leaves_nothing_behind(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SqliteStore(tmp_path)
        try:
            with pytest.raises(StoreError):
                await _broken_change(store)
            queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
            await _send(store, queue, "works")
            assert _stored_bodies(store) == {"works"}
        finally:
            await store.close()

    asyncio.run(scenario())


def test_the_log_is_checkpointed_as_it_grows(tmp_path: Path) -> None:
    """25 MB of messages through the store: the log is moved into the database as it
    goes and reused, so it stays near its 1,000-page bound instead of growing with the
    load."""
    async def scenario() -> None:
        store = SqliteStore(tmp_path)
        try:
            queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
            body = "x" * 64 * 1024
            for i in range(400):
                await _send(store, queue, f"{i}-{body}")
            assert len(_stored_bodies(store)) == 400
            assert (tmp_path / "conveyor.db-wal").stat().st_size < 8 * 1024 * 1024
        finally:
            await store.close()

    asyncio.run(scenario())
