"""The embedded store's fast path: standard-queue messages in memory, changes in a journal.

Most messages of a busy standard queue are sent, received and deleted within
milliseconds. Writing each one into SQLite's tables and then deleting it again is most
of what the SQLite store costs per message; here such a message never reaches SQLite.
Each send, receive, delete and visibility change of a standard-queue message held in
memory is applied there and appended to a journal file with one `write()` before the
call returns, so, as with SQLite's log, what was acknowledged survives `kill -9` of the
server (it is in the OS page cache; only an OS crash or power loss can lose the last
writes).

A checkpoint writes what memory still holds into SQLite, in one transaction that also
records the journal's generation as applied, and then starts the next journal file. It
runs with the retention sweep, before any call that reads or changes many messages at
once (purge, queue deletion, peek, move tasks), when memory grows past PENDING_LIMIT
messages, and at close. At start-up every journal newer than the applied generation is
replayed and checkpointed. So SQLite holds every message older than the last checkpoint,
memory the rest, and nothing is in both.

FIFO queues keep using SQLite directly: their order, groups and deduplication are SQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from conveyor.store.base import (
    NOT_IN_FLIGHT,
    OK,
    STALE,
    Counts,
    Handle,
    NewMessage,
    QueueRecord,
    Redrive,
    SentMessage,
    StoredMessage,
    StoreError,
)
from conveyor.store.sqlite import SqliteStore

log = logging.getLogger("conveyor.store")

# Past this many messages in memory, or this many bytes of journal, a checkpoint runs
# soon: a receive scans its queue's messages in memory, and a restart replays the journal.
PENDING_LIMIT = 2_000
JOURNAL_LIMIT = 64 << 20

_NOTHING_VISIBLE = 1 << 62  # SQLite holds nothing that will become visible

_INSERT_FULL = (
    "INSERT OR REPLACE INTO messages (seq, queue_id, message_id, body, md5_body, attributes,"
    " md5_attributes, system, sent_ms, sender_id, visible_at, receive_count,"
    " first_receive_ms, receipt, group_id, dedup_key, dlq_source_arn)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)


@dataclass(slots=True)
class _Pending:
    """A message held in memory, with what SQLite keeps beside the StoredMessage."""

    queue_id: int
    visible_at: int
    message: StoredMessage


class JournaledStore(SqliteStore):
    """SqliteStore with standard-queue messages in memory between checkpoints."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        super().__init__(data_dir)
        self._pending: dict[int, dict[int, _Pending]] = {}  # queue id -> seq -> message
        self._held = 0  # messages in memory
        # Queue id -> a time before which SQLite has no message of it to receive; a queue
        # not here is looked up. Whatever gives SQLite a message to receive drops its entry.
        self._sqlite_idle_until: dict[int, int] = {}
        self._checkpoint_task: asyncio.Task[None] | None = None
        self._generation = self._recover()
        self._journal = self._open_journal(self._generation)
        self._journal_bytes = 0  # written since the last checkpoint
        self._checkpoints = self._checkpoint_failures = 0
        self._checkpoint_s = 0.0  # the event loop waits this long, in all, for checkpoints

    # --- journal -------------------------------------------------------------------------

    def _journal_path(self, generation: int) -> Path:
        return self.path / f"journal-{generation:012d}"

    def _open_journal(self, generation: int) -> int:
        return os.open(self._journal_path(generation), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                       0o600)

    def _append(self, records: list[list[Any]]) -> None:
        """Write records (one line each) with one write(); on failure nothing was written."""
        data = b"".join(orjson.dumps(r) + b"\n" for r in records)
        try:
            written = os.write(self._journal, data)
            while written < len(data):
                written += os.write(self._journal, data[written:])
        except OSError as exc:
            with contextlib.suppress(OSError):  # no torn record left behind
                os.ftruncate(self._journal, self._journal_bytes)
            raise StoreError(f"journal write failed: {exc}") from exc
        self._journal_bytes += len(data)

    def _apply(self, record: list[Any]) -> None:
        """Change memory as `record` says: the one path for live calls and replay."""
        kind = record[0]
        if kind == "s":  # send: queue id, then per message its columns
            queue_id = record[1]
            messages = self._pending.setdefault(queue_id, {})
            for (seq, message_id, body, md5_body, attributes, md5_attributes, system, sent_ms,
                 sender_id, visible_at) in record[2]:
                messages[seq] = _Pending(queue_id, visible_at, StoredMessage(
                    seq, message_id, body, md5_body, attributes, md5_attributes, system,
                    sent_ms, sender_id, 0, None, None, None, None, None))
            self._held += len(record[2])
        elif kind == "r":  # receive: queue id, receipt, visible at, now, seqs
            messages = self._pending[record[1]]
            for seq in record[5]:
                held = messages[seq]
                held.visible_at = record[3]
                message = held.message
                message.receive_count += 1
                message.first_receive_ms = message.first_receive_ms or record[4]
                message.receipt = record[2]
        elif kind == "d":  # delete: queue id, seqs
            messages = self._pending[record[1]]
            for seq in record[2]:
                del messages[seq]
            self._held -= len(record[2])
        elif kind == "v":  # change visibility: queue id, [seq, visible at] pairs
            messages = self._pending[record[1]]
            for seq, visible_at in record[2]:
                messages[seq].visible_at = visible_at
        elif kind == "m":  # dead-lettered: queue id, seq, dead-letter queue id, now, source
            held = self._pending[record[1]].pop(record[2])
            held.queue_id = record[3]
            held.visible_at = record[4]
            message = held.message
            message.receive_count, message.first_receive_ms = 0, None
            message.receipt, message.dlq_source_arn = None, record[5]
            self._pending.setdefault(record[3], {})[message.seq] = held
        elif kind == "q":  # queue deleted: queue id
            self._held -= len(self._pending.pop(record[1], {}))

    def _record(self, records: list[list[Any]]) -> None:
        """Journal the records, then apply them."""
        self._append(records)
        for record in records:
            self._apply(record)

    # --- checkpoints and recovery --------------------------------------------------------

    def _recover(self) -> int:
        """Replay the journals newer than the applied generation into SQLite; the next
        generation's number."""
        row = self.db.execute("SELECT value FROM meta WHERE key='journal_applied'").fetchone()
        applied = int(row[0]) if row else 0
        found = sorted(int(p.name.removeprefix("journal-")) for p in self.path.glob("journal-*")
                       if p.name.removeprefix("journal-").isdigit())
        newer = [g for g in found if g > applied]
        for generation in newer:
            self._replay(self._journal_path(generation))
        last = max([applied, *newer])
        if self._pending:
            log.info("journal: recovered %d messages from %d journal file(s)", self._held,
                     len(newer))
            self._last_seq = max([self._last_seq, *(max(m) for m in self._pending.values() if m)])
        self._commit_pending(last)
        for generation in found:
            self._journal_path(generation).unlink(missing_ok=True)
        return last + 1

    def _replay(self, path: Path) -> None:
        """Apply a journal's records. An unreadable one can only be a write that failed, and
        so was never acknowledged: it is skipped, and the records after it still count."""
        lines = path.read_bytes().split(b"\n")
        for number, line in enumerate(lines, 1):
            if not line:
                continue
            try:
                self._apply(orjson.loads(line))
            except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, ValueError) as exc:
                log.warning("journal %s: record %d skipped (%s)", path.name, number, exc)

    def _commit_pending(self, generation: int) -> None:
        """Write every message in memory into SQLite and mark `generation` applied, in one
        transaction; then memory is empty."""
        rows = [_row(held) for messages in self._pending.values() for held in messages.values()]
        with self._write_now() as db:
            db.executemany(_INSERT_FULL, rows)
            db.execute("INSERT OR REPLACE INTO meta VALUES ('journal_applied', ?)",
                       (str(generation),))
        for queue_id in self._pending:
            self._sqlite_idle_until.pop(queue_id, None)
        self._pending.clear()
        self._held = 0

    async def _checkpoint(self) -> None:
        """Move memory into SQLite and start the next journal, once no group commit is
        open (the checkpoint is a transaction of its own, run without yielding)."""
        while self._group is not None and self._group.open:
            await asyncio.sleep(0)
        if not self._journal_bytes:
            return
        # The next journal is opened first: once memory is in SQLite, a record must never
        # go into a journal that a restart would skip as applied.
        fresh = self._open_journal(self._generation + 1)
        started = time.perf_counter()
        try:
            self._commit_pending(self._generation)
        except StoreError:
            os.close(fresh)
            self._checkpoint_failures += 1
            raise
        finally:
            self._checkpoint_s += time.perf_counter() - started
        self._checkpoints += 1
        os.close(self._journal)
        self._journal_path(self._generation).unlink(missing_ok=True)
        self._generation += 1
        self._journal, self._journal_bytes = fresh, 0

    def _checkpoint_soon(self) -> None:
        if self._checkpoint_task is None:
            self._checkpoint_task = asyncio.get_running_loop().create_task(self._checkpoint())
            self._checkpoint_task.add_done_callback(self._checkpoint_done)

    def _checkpoint_done(self, task: asyncio.Task[None]) -> None:
        self._checkpoint_task = None
        if not task.cancelled() and task.exception() is not None:
            log.error("journal checkpoint failed (retried with the next): %s", task.exception())

    async def close(self) -> None:
        try:
            await self._checkpoint()
        except StoreError as exc:  # the journal is kept: the next start replays it
            log.error("journal checkpoint at close failed: %s", exc)
        os.close(self._journal)
        await super().close()

    def gauges(self) -> dict[str, tuple[str, float]]:
        return {
            "conveyor_journal_held_messages": (
                "Standard-queue messages held in memory until the next checkpoint.", self._held),
            "conveyor_journal_bytes": (
                "Bytes written to the journal since the last checkpoint.", self._journal_bytes),
        }

    def counters(self) -> dict[str, tuple[str, float]]:
        return {
            "conveyor_journal_checkpoints": (
                "Checkpoints that moved the journal's messages into SQLite.", self._checkpoints),
            "conveyor_journal_checkpoint_failures": (
                "Checkpoints that failed (memory and journal kept; retried).",
                self._checkpoint_failures),
            "conveyor_journal_checkpoint_seconds": (
                "Time spent in checkpoints, during which requests wait.", self._checkpoint_s),
        }

    # --- messages ------------------------------------------------------------------------

    async def send(self, queue: QueueRecord, messages: list[NewMessage], now_ms: int,
                   dedup_ms: int) -> list[SentMessage]:
        if queue.fifo:
            return await super().send(queue, messages, now_ms, dedup_ms)
        seqs = [self._next_seq() for _ in messages]
        self._record([["s", queue.id, [
            (seq, m.message_id, m.body, m.md5_body, m.attributes, m.md5_attributes, m.system,
             m.sent_ms, m.sender_id, m.visible_at_ms)
            for seq, m in zip(seqs, messages, strict=True)]]])
        if self._held > PENDING_LIMIT or self._journal_bytes > JOURNAL_LIMIT:
            self._checkpoint_soon()
        return [SentMessage(m.message_id, seq) for seq, m in zip(seqs, messages, strict=True)]

    async def receive(self, queue: QueueRecord, max_messages: int, visibility_ms: int,
                      now_ms: int, redrive: Redrive | None) -> list[StoredMessage]:
        if queue.fifo:
            return await super().receive(queue, max_messages, visibility_ms, now_ms, redrive)
        taken: list[StoredMessage] = []
        # What SQLite holds is older than what memory holds: it goes first.
        if self._sqlite_idle_until.get(queue.id, 0) <= now_ms:
            taken = await super().receive(queue, max_messages, visibility_ms, now_ms, redrive)
            if redrive and redrive.moved:
                self._sqlite_idle_until.pop(redrive.dead_letter_queue_id, None)
            if len(taken) < max_messages:
                self._sqlite_idle_until[queue.id] = self._sqlite_next_visible(queue.id)
        held = self._pending.get(queue.id)
        if held and len(taken) < max_messages:
            taken += self._receive_held(queue, held, max_messages - len(taken), visibility_ms,
                                        now_ms, redrive)
        return taken

    def _sqlite_next_visible(self, queue_id: int) -> int:
        """When SQLite's first message of the queue becomes visible (read at once, with no
        await between the read and its use)."""
        row = self.db.execute("SELECT MIN(visible_at) FROM messages WHERE queue_id=?",
                              (queue_id,)).fetchone()
        return _NOTHING_VISIBLE if row[0] is None else row[0]

    def _receive_held(self, queue: QueueRecord, held: dict[int, _Pending], wanted: int,
                      visibility_ms: int, now_ms: int,
                      redrive: Redrive | None) -> list[StoredMessage]:
        cutoff = now_ms - queue.retention_ms
        expired: list[int] = []
        dead: list[_Pending] = []
        chosen: list[int] = []
        # As SQLite's receive does, the first `wanted` visible messages are looked at,
        # whatever becomes of them: a big backlog is never read for one receive.
        looked = 0
        for seq, pending in held.items():
            if pending.visible_at > now_ms:
                continue
            message = pending.message
            if message.sent_ms <= cutoff:
                expired.append(seq)
            elif redrive and message.receive_count >= redrive.max_receive_count:
                dead.append(pending)
            else:
                chosen.append(seq)
            looked += 1
            if looked == wanted:
                break
        records: list[list[Any]] = [["d", queue.id, expired]] if expired else []
        if redrive:
            records += [["m", queue.id, pending.message.seq, redrive.dead_letter_queue_id,
                         now_ms, redrive.source_arn] for pending in dead]
        if chosen:
            receipt = f"{self._tokens.getrandbits(64):016x}"
            records.append(["r", queue.id, receipt, now_ms + visibility_ms, now_ms, chosen])
        if records:
            self._record(records)
        if redrive:
            redrive.moved += [pending.message.message_id for pending in dead]
        return [_copy(held[seq].message) for seq in chosen]

    async def delete(self, queue: QueueRecord, handles: list[Handle],
                     in_flight_at_ms: int | None = None) -> list[str]:
        held = self._pending.get(queue.id)
        if not held:
            return await super().delete(queue, handles, in_flight_at_ms)
        floor = -1 if in_flight_at_ms is None else in_flight_at_ms
        outcomes: list[str] = []
        deleted: list[int] = []
        elsewhere: list[int] = []  # indexes of handles whose message is not in memory
        for index, handle in enumerate(handles):
            pending = held.get(handle.seq)
            if pending is None:
                outcomes.append(OK)  # gone; or in SQLite, which decides below
                elsewhere.append(index)
            elif pending.message.receipt == handle.token and pending.visible_at > floor:
                outcomes.append(OK)
                if handle.seq not in deleted:
                    deleted.append(handle.seq)
            else:
                outcomes.append(STALE)
        if deleted:
            self._record([["d", queue.id, deleted]])
        if elsewhere:
            answers = await super().delete(queue, [handles[i] for i in elsewhere],
                                           in_flight_at_ms)
            for index, answer in zip(elsewhere, answers, strict=True):
                outcomes[index] = answer
        return outcomes

    async def change_visibility(self, queue: QueueRecord, handles: list[Handle],
                                now_ms: int) -> list[str]:
        held = self._pending.get(queue.id, {})
        outcomes: list[str] = []
        changes: list[list[int]] = []
        elsewhere: list[int] = []
        for index, handle in enumerate(handles):
            pending = held.get(handle.seq)
            if pending is None:
                outcomes.append(STALE)
                elsewhere.append(index)
            elif pending.message.receipt != handle.token:
                outcomes.append(STALE)
            elif pending.visible_at <= now_ms:
                outcomes.append(NOT_IN_FLIGHT)
            else:
                outcomes.append(OK)
                changes.append([handle.seq, handle.visible_at_ms])
        if changes:
            self._record([["v", queue.id, changes]])
        if elsewhere:
            answers = await super().change_visibility(
                queue, [handles[i] for i in elsewhere], now_ms)
            self._sqlite_idle_until.pop(queue.id, None)  # a message may be visible sooner
            for index, answer in zip(elsewhere, answers, strict=True):
                outcomes[index] = answer
        return outcomes

    async def counts(self, queue: QueueRecord, now_ms: int) -> Counts:
        counts = await super().counts(queue, now_ms)
        cutoff = now_ms - queue.retention_ms
        for pending in self._pending.get(queue.id, {}).values():
            if pending.message.sent_ms <= cutoff:
                continue
            if pending.visible_at <= now_ms:
                counts.visible += 1
            elif pending.message.receive_count:
                counts.in_flight += 1
            else:
                counts.delayed += 1
        return counts

    async def next_visible_ms(self, queue: QueueRecord, now_ms: int) -> int | None:
        found = await super().next_visible_ms(queue, now_ms)
        for pending in self._pending.get(queue.id, {}).values():
            if now_ms < pending.visible_at and (found is None or pending.visible_at < found):
                found = pending.visible_at
        return found

    # --- what reads or changes many messages: SQLite's, after a checkpoint ---------------

    async def create_queue(self, region: str, name: str, attributes: dict[str, str],
                           tags: dict[str, str], now_s: int) -> QueueRecord:
        queue = await super().create_queue(region, name, attributes, tags, now_s)
        self._sqlite_idle_until.pop(queue.id, None)  # SQLite may reuse a deleted queue's id
        return queue

    async def delete_queue(self, queue: QueueRecord, now_s: int) -> None:
        await self._checkpoint()
        await super().delete_queue(queue, now_s)
        if queue.id in self._pending:  # sent while the backlog was being deleted
            self._record([["q", queue.id]])
        self._sqlite_idle_until.pop(queue.id, None)

    async def purge(self, queue: QueueRecord, now_ms: int) -> None:
        await self._checkpoint()
        await super().purge(queue, now_ms)

    async def expire(self, now_ms: int) -> int:
        await self._checkpoint()
        return await super().expire(now_ms)

    async def peek(self, queue: QueueRecord, limit: int,
                   now_ms: int) -> list[tuple[StoredMessage, int]]:
        await self._checkpoint()
        return await super().peek(queue, limit, now_ms)

    async def movable(self, queue: QueueRecord, limit: int, now_ms: int) -> list[StoredMessage]:
        await self._checkpoint()
        return await super().movable(queue, limit, now_ms)

    async def move(self, moves: list[tuple[int, int]], now_ms: int) -> int:
        await self._checkpoint()
        moved = await super().move(moves, now_ms)
        for _, destination in moves:
            self._sqlite_idle_until.pop(destination, None)
        return moved


def _row(held: _Pending) -> tuple:
    m = held.message
    return (m.seq, held.queue_id, m.message_id, m.body, m.md5_body, m.attributes,
            m.md5_attributes, m.system, m.sent_ms, m.sender_id, held.visible_at,
            m.receive_count, m.first_receive_ms, m.receipt, None, None, m.dlq_source_arn)


def _copy(m: StoredMessage) -> StoredMessage:
    """A snapshot for the caller: the held message changes with later receives."""
    return StoredMessage(m.seq, m.message_id, m.body, m.md5_body, m.attributes,
                         m.md5_attributes, m.system, m.sent_ms, m.sender_id, m.receive_count,
                         m.first_receive_ms, m.receipt, m.group_id, m.dedup_key,
                         m.dlq_source_arn)
