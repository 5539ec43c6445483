"""The journal in front of SQLite: what memory held before a crash is what SQLite holds
after the restart's replay, whatever changes the messages went through."""

from __future__ import annotations

import asyncio
import errno
import os
import random
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conveyor.service.messages import Redrive
from conveyor.store import journal
from conveyor.store.base import OK, STALE, Handle, QueueRecord, StoreError
from conveyor.store.journal import JournaledStore
from tests.store.helpers import (
    ATTRIBUTES,
    change_visibility,
    expire,
    message,
    now_ms,
    receive,
)

ARN = "arn:aws:sqs:us-east-1:000000000000:q"


def crash(store: JournaledStore) -> None:
    """What kill -9 leaves: the journal and SQLite's file as they are, nothing flushed."""
    os.close(store._journal)
    store.db.close()
    store._lock.close()


def held(store: JournaledStore) -> set[tuple]:
    """Every message in memory with its state."""
    return {(p.queue_id, p.visible_at, *_fields(p.message))
            for messages in store._pending.values() for p in messages.values()}


def in_sqlite(store: JournaledStore) -> set[tuple]:
    rows = store.db.execute(
        "SELECT queue_id, visible_at, seq, message_id, body, sent_ms, receive_count,"
        " first_receive_ms, receipt, dlq_source_arn FROM messages").fetchall()
    return set(rows)


async def _one_queue(tmp_path: Path, *bodies: str) -> tuple[JournaledStore, QueueRecord, int]:
    """A fresh store with queue "q" and these messages sent to it: (store, queue, now)."""
    store = JournaledStore(tmp_path)
    queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
    now = now_ms()
    await store.send(queue, [message(body, now) for body in bodies], now, 0)
    return store, queue, now


@contextmanager
def restarted(tmp_path: Path) -> Iterator[JournaledStore]:
    """The store opened again on what a crash left (replaying it), closed afterwards."""
    store = JournaledStore(tmp_path)
    try:
        yield store
    finally:
        asyncio.run(store.close())


def _fields(m) -> tuple:
    return (m.seq, m.message_id, m.body, m.sent_ms, m.receive_count, m.first_receive_ms,
            m.receipt, m.dlq_source_arn)


def test_a_restart_after_a_crash_replays_every_kind_of_change(tmp_path: Path) -> None:
    async def before() -> set[tuple]:
        store = JournaledStore(tmp_path)
        queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
        dlq = await store.create_queue("us-east-1", "dlq", ATTRIBUTES, {}, 0)
        gone = await store.create_queue("us-east-1", "gone", ATTRIBUTES, {}, 0)
        now = now_ms()
        await store.send(queue, [message(f"m-{i}", now) for i in range(6)], now, 0)
        await store.send(queue, [message("later", now, now + 60_000)], now, 0)
        await store.send(gone, [message("lost with its queue", now)], now, 0)
        taken = await receive(store, queue, 4, 30_000, now, None)
        deleted, extended, back, dead = taken
        assert await store.delete(queue, [Handle(deleted.seq, deleted.receipt or "")]) == [OK]
        assert await change_visibility(store, queue, [
            Handle(extended.seq, extended.receipt or "", now + 90_000),
            Handle(back.seq, back.receipt or "", now)], now) == [OK, OK]
        redrive = Redrive(1, dlq.id, ARN)
        await receive(store, queue, 2, 30_000, now + 1, redrive)  # `back` dead-lettered
        assert redrive.moved == [back.message_id]
        store._record([["q", gone.id]])  # what delete_queue journals for late sends
        state = held(store)
        crash(store)
        return state

    state = asyncio.run(before())
    assert len(state) == 6 and any(row[-1] == ARN for row in state)
    with restarted(tmp_path) as store:
        assert in_sqlite(store) == state
        assert not store._pending and list(tmp_path.glob("journal-*")) == [
            tmp_path / "journal-000000000002"]


def test_a_torn_last_record_is_skipped(tmp_path: Path) -> None:
    async def before() -> None:
        store, _, _ = await _one_queue(tmp_path, "kept")
        with open(tmp_path / "journal-000000000001", "ab") as journal:
            journal.write(b'["s",1,[[9,"torn","to')  # a write cut short: never acknowledged
        crash(store)

    asyncio.run(before())
    with restarted(tmp_path) as store:
        assert [row[4] for row in in_sqlite(store)] == ["kept"]


def test_a_failed_journal_write_changes_nothing(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk: the call fails, memory and the journal stay as they were (a half-written
    record is cut off again), and the store carries on once writes succeed."""
    async def scenario() -> None:
        store, queue, now = await _one_queue(tmp_path, "kept")
        path, memory = store._journal_path(store._generation), held(store)
        size = path.stat().st_size
        real_write, writes = os.write, []

        def disk_full(fd: int, data: bytes) -> int:
            if fd != store._journal:
                return real_write(fd, data)
            writes.append(data)
            if len(writes) == 1:  # half of the first record fits, then the disk is full
                return real_write(fd, data[:len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

        with monkeypatch.context() as patched:
            patched.setattr(journal.os, "write", disk_full)
            with pytest.raises(StoreError, match="No space left"):
                await store.send(queue, [message("refused", now)], now, 0)
            with pytest.raises(StoreError, match="No space left"):
                await receive(store, queue, 10, 30_000, now, None)
        assert len(writes) == 3
        assert held(store) == memory and path.stat().st_size == size
        await store.send(queue, [message("after", now)], now, 0)
        crash(store)

    asyncio.run(scenario())
    with restarted(tmp_path) as store:
        assert sorted((row[4], row[6]) for row in in_sqlite(store)) == [("after", 0),
                                                                        ("kept", 0)]


def test_a_journal_already_checkpointed_is_not_replayed(tmp_path: Path) -> None:
    """A crash between the checkpoint's commit and the old journal's removal."""
    async def before() -> None:
        store, queue, now = await _one_queue(tmp_path, "done")
        shutil.copy(tmp_path / "journal-000000000001", tmp_path / "copy")
        await expire(store, now)  # checkpoints: the message moves into SQLite
        [m] = await receive(store, queue, 1, 30_000, now, None)
        assert await store.delete(queue, [Handle(m.seq, m.receipt or "")]) == [OK]
        os.rename(tmp_path / "copy", tmp_path / "journal-000000000001")
        crash(store)

    asyncio.run(before())
    with restarted(tmp_path) as store:
        assert in_sqlite(store) == set()
        assert not (tmp_path / "journal-000000000001").exists()


def test_a_failed_checkpoint_keeps_memory_and_journal(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        store, queue, now = await _one_queue(tmp_path, "a")

        def broken(*args: object) -> None:
            raise StoreError("SQLite: disk I/O error")

        with monkeypatch.context() as patched:
            patched.setattr(store, "_commit_pending", broken)
            with pytest.raises(StoreError):
                await store.purge(queue, now)
        [m] = await receive(store, queue, 10, 30_000, now, None)  # still held
        assert m.body == "a"
        assert await store.delete(queue, [Handle(m.seq, "other")]) == [STALE]
        await expire(store, now)  # the next checkpoint moves it into SQLite
        assert not store._pending and len(in_sqlite(store)) == 1
        await store.close()

    asyncio.run(scenario())


def test_random_changes_and_crashes_lose_nothing(tmp_path: Path) -> None:
    """Sends, receives, deletes, visibility changes, dead letters and checkpoints in a
    random order, with a crash after each round: the restart finds exactly what memory
    and SQLite held together."""
    rng = random.Random(7)

    async def round_then_crash(number: int) -> set[tuple]:
        store = JournaledStore(tmp_path)
        queue = await store.get_queue("us-east-1", "q") or await store.create_queue(
            "us-east-1", "q", ATTRIBUTES, {}, 0)
        dlq = await store.get_queue("us-east-1", "dlq") or await store.create_queue(
            "us-east-1", "dlq", ATTRIBUTES, {}, 0)
        redrive = Redrive(3, dlq.id, ARN)
        now = now_ms() + number * 100_000  # each round later: visibility runs out
        taken = []
        for step in range(40):
            action = rng.random()
            if action < 0.35:
                batch = [message(f"{number}-{step}-{i}", now) for i in range(rng.randint(1, 10))]
                await store.send(queue, batch, now, 0)
            elif action < 0.6:
                taken += await receive(store, queue, rng.randint(1, 10), rng.choice([0, 30_000]),
                                             now, redrive)
            elif action < 0.8 and taken:
                chosen = rng.sample(taken, rng.randint(1, min(10, len(taken))))
                await store.delete(queue, [Handle(m.seq, m.receipt or "") for m in chosen])
            elif action < 0.9 and taken:
                m = rng.choice(taken)
                await change_visibility(store,
                    queue, [Handle(m.seq, m.receipt or "", now + rng.randint(0, 60_000))], now)
            elif action < 0.95:
                await expire(store, now)  # a checkpoint
            now += rng.randint(0, 2_000)
        state = held(store) | in_sqlite(store)
        assert len(list(tmp_path.glob("journal-*"))) == 1  # checkpointed ones are removed
        crash(store)
        return state

    for number in range(8):
        state = asyncio.run(round_then_crash(number))
        store = JournaledStore(tmp_path)
        try:
            assert in_sqlite(store) == state
        finally:
            crash(store)


def test_past_the_limit_a_checkpoint_runs_by_itself(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal, "PENDING_LIMIT", 5)

    async def scenario() -> None:
        store, queue, now = await _one_queue(tmp_path, *(f"m-{i}" for i in range(4)))
        assert store._held == 4 and not in_sqlite(store)
        await store.send(queue, [message(f"n-{i}", now) for i in range(4)], now, 0)
        assert store._checkpoint_task is not None
        await store._checkpoint_task
        assert store._held == 0 and len(in_sqlite(store)) == 8
        assert len(await receive(store, queue, 10, 30_000, now, None)) == 8
        await store.close()

    asyncio.run(scenario())
