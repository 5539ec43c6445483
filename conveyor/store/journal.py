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

FIFO queues keep using SQLite directly: their order, groups and deduplication are SQL. So
do standard-queue messages sent with a MessageGroupId (a fair queue's): a fair receive
deals them by group through SQLite's group index, and their group is kept there.
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
    OK,
    STALE,
    Annotated,
    Handle,
    NewMessage,
    Picking,
    QueueEnding,
    QueueRecord,
    SentMessage,
    StoredMessage,
    StoreError,
    Tally,
)
from conveyor.store.sqlite import SqliteStore, _translated, _translating

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


# init=False and __init__ written out: compiled, it is a quarter of the cost (setup.py)
@dataclass(slots=True, init=False)
class _Pending:
    """A message held in memory, with what SQLite keeps beside the StoredMessage."""

    queue_id: int
    visible_at: int
    message: StoredMessage

    def __init__(self, queue_id: int, visible_at: int, message: StoredMessage) -> None:
        self.queue_id, self.visible_at, self.message = queue_id, visible_at, message


@_translating
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
            # [, system attributes JSON with why it died]
            held = self._pending[record[1]].pop(record[2])
            held.queue_id = record[3]
            held.visible_at = record[4]
            message = held.message
            message.receive_count -= 1  # the count goes along (base.Claim.dead_letter)
            message.receipt, message.dlq_source_arn = None, record[5]
            if len(record) > 6:
                message.system = record[6]
            self._pending.setdefault(record[3], {})[message.seq] = held
        elif kind == "q":  # queue deleted: queue id
            self._held -= len(self._pending.pop(record[1], {}))
        elif kind == "a":  # system attributes amended: [queue id, seq, system JSON] triples
            for queue_id, seq, system in record[1]:
                self._pending[queue_id][seq].message.system = system

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
        if any(m.group_id is not None for m in messages):
            return await self._send_grouped(queue, messages, now_ms, dedup_ms)
        seqs = [self._next_seq() for _ in messages]
        self._record([["s", queue.id, [
            (seq, m.message_id, m.body, m.md5_body, m.attributes, m.md5_attributes, m.system,
             m.sent_ms, m.sender_id, m.visible_at_ms)
            for seq, m in zip(seqs, messages, strict=True)]]])
        if self._held > PENDING_LIMIT or self._journal_bytes > JOURNAL_LIMIT:
            self._checkpoint_soon()
        return [SentMessage(m.message_id, seq) for seq, m in zip(seqs, messages, strict=True)]

    async def _send_grouped(self, queue: QueueRecord, messages: list[NewMessage], now_ms: int,
                            dedup_ms: int) -> list[SentMessage]:
        """Messages with a MessageGroupId (a fair queue's) go to SQLite, group and all: a
        fair receive deals them by group through SQLite's group index. The rest of the
        batch stays on the fast path."""
        grouped = [m for m in messages if m.group_id is not None]
        plain = [m for m in messages if m.group_id is None]
        stored = iter(await SqliteStore.send(self, queue, grouped, now_ms, dedup_ms))
        self._sqlite_idle_until.pop(queue.id, None)
        held = iter(await self.send(queue, plain, now_ms, dedup_ms) if plain else [])
        return [next(stored) if m.group_id is not None else next(held) for m in messages]

    def claim(self, queue: QueueRecord, max_messages: int, now_ms: int, cutoff_ms: int,
              visible_at_ms: int, picking: Picking) -> Any:
        """SQLite's messages first (they are older), then a scan of memory; no await
        between the scan and its journal record."""
        if queue.fifo:
            return super().claim(queue, max_messages, now_ms, cutoff_ms, visible_at_ms,
                                 picking)
        return _JournalClaim(self, queue, max_messages, now_ms, cutoff_ms, visible_at_ms,
                             picking)

    def _sqlite_next_visible(self, queue_id: int) -> int:
        """When SQLite's first message of the queue becomes visible (read at once, with no
        await between the read and its use)."""
        row = self.db.execute("SELECT MIN(visible_at) FROM messages WHERE queue_id=?",
                              (queue_id,)).fetchone()
        assert row is not None  # an aggregate always gives a row
        return _NOTHING_VISIBLE if row[0] is None else row[0]

    def _claim_held(self, queue: QueueRecord, wanted: int, now_ms: int, cutoff_ms: int,
                    visible_at_ms: int) -> list[StoredMessage]:
        """Receive up to `wanted` visible, live messages held in memory."""
        held = self._pending.get(queue.id)
        if not held:
            return []
        chosen: list[int] = []
        for seq, pending in held.items():
            if pending.visible_at <= now_ms and pending.message.sent_ms > cutoff_ms:
                chosen.append(seq)
                if len(chosen) == wanted:
                    break
        if not chosen:
            return []
        receipt = f"{self._tokens.getrandbits(64):016x}"
        self._record([["r", queue.id, receipt, visible_at_ms, now_ms, chosen]])
        return [_copy(held[seq].message) for seq in chosen]

    def _dead_letter_held(self, queue_id: int, seqs: list[int], dead_letter_queue_id: int,
                          source_arn: str, now_ms: int,
                          systems: list[str | None] | None) -> None:
        with _translated():
            if self.db.execute("SELECT 1 FROM queues WHERE id=?",
                               (dead_letter_queue_id,)).fetchone() is None:
                return  # a dead-letter queue deleted meanwhile takes none: they stay
        self._record([["m", queue_id, seq, dead_letter_queue_id, now_ms, source_arn]
                      + ([systems[i]] if systems is not None else [])
                      for i, seq in enumerate(seqs)])

    async def delete(self, queue: QueueRecord, handles: list[Handle],
                     in_flight_after_ms: int | None = None, *,
                     any_receipt: bool = False) -> list[str]:
        held = self._pending.get(queue.id)
        if not held:
            return await super().delete(queue, handles, in_flight_after_ms,
                                        any_receipt=any_receipt)
        floor = -1 if in_flight_after_ms is None else in_flight_after_ms
        outcomes: list[str] = []
        deleted: list[int] = []
        elsewhere: list[int] = []  # indexes of handles whose message is not in memory
        for index, handle in enumerate(handles):
            pending = held.get(handle.seq)
            if pending is None:
                outcomes.append(OK)  # gone; or in SQLite, which decides below
                elsewhere.append(index)
            elif pending.visible_at > floor and (
                    pending.message.receipt == handle.token
                    or (any_receipt and pending.message.receipt is not None)):
                outcomes.append(OK)
                if handle.seq not in deleted:
                    deleted.append(handle.seq)
            else:
                outcomes.append(STALE)
        if deleted:
            self._record([["d", queue.id, deleted]])
        if elsewhere:
            answers = await super().delete(queue, [handles[i] for i in elsewhere],
                                           in_flight_after_ms, any_receipt=any_receipt)
            for index, answer in zip(elsewhere, answers, strict=True):
                outcomes[index] = answer
        return outcomes

    def hold(self, queue: QueueRecord, seqs: list[int]) -> Any:
        return _JournalHold(self, queue, seqs)

    def amend(self, queue: QueueRecord, seqs: list[int]) -> Any:
        return _JournalAmend(self, queue, seqs)

    def _held_anywhere(self, seq: int) -> _Pending | None:
        """The message of this seq if memory holds it, in whatever queue (a dead letter
        moved from memory stays there, under its dead-letter queue)."""
        for messages in self._pending.values():
            if seq in messages:
                return messages[seq]
        return None

    async def tally(self, queue: QueueRecord, now_ms: int, cutoff_ms: int) -> Tally:
        tally = await super().tally(queue, now_ms, cutoff_ms)
        for pending in self._pending.get(queue.id, {}).values():
            if pending.message.sent_ms > cutoff_ms:
                key = (pending.visible_at <= now_ms, pending.message.receive_count > 0)
                tally[key] = tally.get(key, 0) + 1
        return tally

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
        self._sqlite_idle_until.pop(queue.id, None)
        return queue

    async def delete_queue(self, queue: QueueRecord, now_s: int,
                           ending: QueueEnding | None = None) -> None:
        await self._checkpoint()
        await super().delete_queue(queue, now_s, ending)
        if queue.id in self._pending:  # sent while the backlog was being deleted
            self._record([["q", queue.id]])
        self._sqlite_idle_until.pop(queue.id, None)

    async def purge(self, queue: QueueRecord, now_ms: int) -> None:
        await self._checkpoint()
        await super().purge(queue, now_ms)

    async def expire(self, cutoffs: dict[int, int], now_ms: int) -> int:
        await self._checkpoint()
        return await super().expire(cutoffs, now_ms)

    async def peek(self, queue: QueueRecord, limit: int, cutoff_ms: int,
                   after: tuple[int, int] | None = None) -> list[tuple[StoredMessage, int]]:
        await self._checkpoint()
        return await super().peek(queue, limit, cutoff_ms, after)

    async def find_message(self, queue: QueueRecord, message_id: str,
                           scan_limit: int) -> StoredMessage | None:
        await self._checkpoint()  # rare (an operator's look): the oldest are then in SQLite
        return await super().find_message(queue, message_id, scan_limit)

    async def drop(self, queue: QueueRecord, seqs: list[int]) -> list[int]:
        await self._checkpoint()  # rare (an operator's click): SQLite then holds them all
        return await super().drop(queue, seqs)

    async def movable(self, queue: QueueRecord, limit: int, now_ms: int,
                      cutoff_ms: int) -> list[StoredMessage]:
        await self._checkpoint()
        return await super().movable(queue, limit, now_ms, cutoff_ms)

    async def dead_letter_origins(self, queue: QueueRecord) -> list[str]:
        await self._checkpoint()  # rare (a move task's start): SQLite then holds them all
        return await super().dead_letter_origins(queue)

    async def move(self, queue: QueueRecord, moves: list[tuple[int, int]], now_ms: int) -> int:
        await self._checkpoint()
        moved = await super().move(queue, moves, now_ms)
        for _, destination in moves:
            self._sqlite_idle_until.pop(destination, None)
        return moved


class _JournalClaim:
    """A claim on SQLite's messages of the queue (when it may have any to give), topped up
    from memory; each part applied where its messages live."""

    __slots__ = ("store", "queue", "args", "inner", "in_memory", "messages", "retry_ms")

    def __init__(self, store: JournaledStore, queue: QueueRecord, max_messages: int,
                 now_ms: int, cutoff_ms: int, visible_at_ms: int, picking: Picking) -> None:
        self.store, self.queue = store, queue
        self.args = (max_messages, now_ms, cutoff_ms, visible_at_ms, picking)
        self.inner: Any = None
        self.retry_ms: int | None = None

    async def __aenter__(self) -> _JournalClaim:
        store, queue = self.store, self.queue
        max_messages, now_ms, cutoff_ms, visible_at_ms, _ = self.args
        self.messages = []
        if store._sqlite_idle_until.get(queue.id, 0) <= now_ms:
            self.inner = SqliteStore.claim(store, queue, *self.args)
            await self.inner.__aenter__()
            self.messages, self.retry_ms = self.inner.messages, self.inner.retry_ms
            if len(self.messages) < max_messages:
                store._sqlite_idle_until[queue.id] = store._sqlite_next_visible(queue.id)
        try:
            taken = store._claim_held(queue, max_messages - len(self.messages), now_ms,
                                      cutoff_ms, visible_at_ms) \
                if len(self.messages) < max_messages else []
        except BaseException as exc:  # the journal write failed: SQLite's part rolls back
            if self.inner is not None:
                await self.inner.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        self.in_memory = {m.seq for m in taken}
        self.messages += taken
        return self

    async def dead_letter(self, seqs: list[int], dead_letter_queue_id: int, source_arn: str,
                          now_ms: int, systems: list[str | None] | None = None) -> None:
        system_of = dict(zip(seqs, systems, strict=True)) if systems is not None else None
        held = [seq for seq in seqs if seq in self.in_memory]
        if held:
            self.store._dead_letter_held(
                self.queue.id, held, dead_letter_queue_id, source_arn, now_ms,
                [system_of[seq] for seq in held] if system_of is not None else None)
        stored = [seq for seq in seqs if seq not in self.in_memory]
        if stored:
            await self.inner.dead_letter(
                stored, dead_letter_queue_id, source_arn, now_ms,
                [system_of[seq] for seq in stored] if system_of is not None else None)
            self.store._sqlite_idle_until.pop(dead_letter_queue_id, None)

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: object) -> None:
        if self.inner is not None:
            await self.inner.__aexit__(kind, error, tb)


class _JournalHold:
    """Messages for a visibility change: those in memory, and SQLite's for the rest."""

    __slots__ = ("store", "queue", "seqs", "inner", "found")

    def __init__(self, store: JournaledStore, queue: QueueRecord, seqs: list[int]) -> None:
        self.store, self.queue, self.seqs = store, queue, seqs
        self.inner: Any = None

    async def __aenter__(self) -> _JournalHold:
        held = self.store._pending.get(self.queue.id, {})
        self.found = {seq: (held[seq].message.receipt, held[seq].visible_at)
                      for seq in self.seqs if seq in held}
        elsewhere = [seq for seq in self.seqs if seq not in held]
        if elsewhere:
            self.inner = SqliteStore.hold(self.store, self.queue, elsewhere)
            await self.inner.__aenter__()
            self.found.update(self.inner.found)
        return self

    async def set_visible_at(self, changes: list[tuple[int, int]]) -> None:
        held = self.store._pending.get(self.queue.id, {})
        mine = [[seq, visible_at] for seq, visible_at in changes if seq in held]
        if mine:
            self.store._record([["v", self.queue.id, mine]])
        stored = [(seq, visible_at) for seq, visible_at in changes if seq not in held]
        if stored:
            await self.inner.set_visible_at(stored)
            self.store._sqlite_idle_until.pop(self.queue.id, None)  # visible sooner, maybe

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: object) -> None:
        if self.inner is not None:
            await self.inner.__aexit__(kind, error, tb)


class _JournalAmend:
    """Messages for a change of system attributes: those in memory, and SQLite's."""

    __slots__ = ("store", "queue", "seqs", "inner", "found", "_held")

    def __init__(self, store: JournaledStore, queue: QueueRecord, seqs: list[int]) -> None:
        self.store, self.queue, self.seqs = store, queue, seqs
        self.inner: Any = None

    async def __aenter__(self) -> _JournalAmend:
        self._held = {seq: held for seq in self.seqs
                      if (held := self.store._held_anywhere(seq)) is not None}
        self.found = {seq: Annotated(held.queue_id, held.message.receipt,
                                     held.message.dlq_source_arn, held.message.system)
                      for seq, held in self._held.items()}
        elsewhere = [seq for seq in self.seqs if seq not in self._held]
        if elsewhere:
            self.inner = SqliteStore.amend(self.store, self.queue, elsewhere)
            await self.inner.__aenter__()
            self.found.update(self.inner.found)
        return self

    async def set_system(self, changes: list[tuple[int, str]]) -> None:
        # Read and written with no await between (one event loop), so still where found.
        mine = [[self._held[seq].queue_id, seq, system] for seq, system in changes
                if seq in self._held]
        if mine:
            self.store._record([["a", mine]])
        stored = [(seq, system) for seq, system in changes if seq not in self._held]
        if stored:
            await self.inner.set_system(stored)

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: object) -> None:
        if self.inner is not None:
            await self.inner.__aexit__(kind, error, tb)


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
