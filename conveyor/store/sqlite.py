"""The embedded store: one SQLite file in WAL mode.

Calls run on the event loop's thread: with WAL and synchronous=NORMAL a commit is a
write() into the log, no fsync, so it is cheaper to do inline than to hand off to a
thread. A committed transaction survives `kill -9` of the server (the log is in the
OS page cache); only an OS crash or power loss can roll back the last commits.

The connection holds the file in exclusive locking mode: one process owns a data
directory anyway, and without it every transaction paid about six fcntl() lock calls
and shared-memory bookkeeping for readers that never exist (about a tenth of the
server's CPU per message). SQLite's own autocheckpoint then moves the log into the
database every 1,000 pages, on the event loop: a pause of a few milliseconds, with
two fsyncs, under sustained load, and a log that never grows past about 4 MB.

The bindings are apsw, not the standard library's sqlite3: they bring a current SQLite
of their own and cost less per call (sqlite3 releases the GIL around every column it
reads and adapts every None it binds through a failed attribute lookup); with the
settings below, a batched message costs about 10 % fewer instructions in all.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import inspect
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any, Self, TypeVar

import apsw
import orjson

from conveyor.store._limits import GroupLimits
from conveyor.store.base import (
    OK,
    STALE,
    ActivityRow,
    ActivityTuple,
    Annotated,
    Bucket,
    Handle,
    LeaseRecord,
    MoveTaskRecord,
    NewMessage,
    Picking,
    QueueEnding,
    QueueRecord,
    SentMessage,
    StoredMessage,
    StoreError,
    Tally,
)

T = TypeVar("T")

# Version 1's tables, made idempotently at every start (with the indexes added since, which
# need no version); MIGRATIONS below take every database, new or old, on from there.
SCHEMA = """
-- One row per queue. `attributes` and `tags` are JSON objects of strings. Its `id` is
-- AUTOINCREMENT since migration 2: never handed out again (see MIGRATIONS).
CREATE TABLE IF NOT EXISTS queues (
    id          INTEGER PRIMARY KEY,
    region      TEXT NOT NULL,
    name        TEXT NOT NULL,
    attributes  TEXT NOT NULL,
    tags        TEXT NOT NULL,
    created_s   INTEGER NOT NULL,
    modified_s  INTEGER NOT NULL,
    purged_s    INTEGER NOT NULL DEFAULT 0,  -- last PurgeQueue, for PurgeQueueInProgress
    UNIQUE (region, name)
);

-- Names deleted recently, for QueueDeletedRecently.
CREATE TABLE IF NOT EXISTS deleted_queues (
    region     TEXT NOT NULL,
    name       TEXT NOT NULL,
    deleted_s  INTEGER NOT NULL,
    PRIMARY KEY (region, name)
) WITHOUT ROWID;

-- One row per message. `seq` orders messages (FIFO SequenceNumber); `visible_at` serves
-- both delay and visibility (pgmq's `vt`): a row is receivable when visible_at <= now.
-- In flight = received at least once and not yet visible again.
CREATE TABLE IF NOT EXISTS messages (
    seq              INTEGER PRIMARY KEY,  -- from _next_seq: increasing, never reused
    queue_id         INTEGER NOT NULL,
    message_id       TEXT NOT NULL,
    body             TEXT NOT NULL,
    md5_body         TEXT NOT NULL,
    attributes       TEXT,            -- JSON message attributes
    md5_attributes   TEXT,
    system           TEXT,            -- JSON message system attributes (AWSTraceHeader)
    sent_ms          INTEGER NOT NULL, -- SentTimestamp; retention counts from here
    sender_id        TEXT NOT NULL,
    visible_at       INTEGER NOT NULL,
    receive_count    INTEGER NOT NULL DEFAULT 0,
    first_receive_ms INTEGER,
    receipt          TEXT,            -- token of the latest receive; older handles are stale
    group_id         TEXT,            -- FIFO MessageGroupId
    dedup_key        TEXT,            -- FIFO deduplication key (scope-qualified)
    dlq_source_arn   TEXT             -- set when dead-lettered: the queue it came from
);
CREATE INDEX IF NOT EXISTS messages_ready ON messages (queue_id, visible_at);
-- Retention sweeps and purges find a queue's old messages without reading its backlog.
CREATE INDEX IF NOT EXISTS messages_sent ON messages (queue_id, sent_ms);
-- Messages with a group (every FIFO message; a fair queue's grouped ones), read only
-- through these two: a group's messages in order (a FIFO group's head and run), and a
-- group's messages by visibility (a fair receive's oldest visible ones of each group).
DROP INDEX IF EXISTS messages_fifo;
CREATE INDEX IF NOT EXISTS messages_group_seq
    ON messages (queue_id, group_id, seq, visible_at, sent_ms) WHERE group_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS messages_group_due
    ON messages (queue_id, group_id, visible_at, sent_ms) WHERE group_id IS NOT NULL;

-- FIFO deduplication: a key seen within the interval maps to the message first sent.
CREATE TABLE IF NOT EXISTS dedup (
    queue_id    INTEGER NOT NULL,
    dedup_key   TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL,
    PRIMARY KEY (queue_id, dedup_key)
) WITHOUT ROWID;

-- StartMessageMoveTask state, so ListMessageMoveTasks survives restarts.
CREATE TABLE IF NOT EXISTS move_tasks (
    handle          TEXT PRIMARY KEY,
    source_queue_id INTEGER NOT NULL,
    record          TEXT NOT NULL      -- JSON of MoveTaskRecord
);

-- Leases for leader election: conditional writes decide who holds one.
CREATE TABLE IF NOT EXISTS leases (
    region      TEXT NOT NULL,
    name        TEXT NOT NULL,
    holder      TEXT NOT NULL,
    version     INTEGER NOT NULL,   -- bumped by every successful write
    expires_ms  INTEGER NOT NULL,
    data        TEXT NOT NULL,      -- opaque (periodic tasks: last enqueued times)
    PRIMARY KEY (region, name)
) WITHOUT ROWID;

-- Workers' announcements: who is working, until expires_ms.
CREATE TABLE IF NOT EXISTS workers (
    worker_id      TEXT PRIMARY KEY,
    first_seen_ms  INTEGER NOT NULL,
    expires_ms     INTEGER NOT NULL,
    record         TEXT NOT NULL      -- JSON: kind, region, queue, status, last seen
) WITHOUT ROWID;

-- The console's failed sign-ins (service/signins.py), per subject: "key:<access key id>"
-- or "address:<client address>". Forgotten a while after the last failure.
CREATE TABLE IF NOT EXISTS sign_in_failures (
    subject   TEXT PRIMARY KEY,
    failures  INTEGER NOT NULL,   -- counted since the subject was last forgotten or cleared
    last_ms   INTEGER NOT NULL    -- the latest failure
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sign_in_failures_last ON sign_in_failures (last_ms);

-- Receive-rate token buckets (service/rules.py, Rate): a queue's own (group_id '') and
-- each of its groups'. `tat` (ms) is when the bucket is full again; a row past it says
-- no more than no row, and the retention sweep forgets it.
CREATE TABLE IF NOT EXISTS rates (
    queue_id  INTEGER NOT NULL,
    group_id  TEXT NOT NULL,
    tat       REAL NOT NULL,
    PRIMARY KEY (queue_id, group_id)
) WITHOUT ROWID;
-- A group's messages in flight (received, not yet visible again), counted against the
-- queue's ConveyorGroupConcurrency without reading the group's delayed or visible ones.
CREATE INDEX IF NOT EXISTS messages_group_flight ON messages (queue_id, group_id, visible_at)
    WHERE group_id IS NOT NULL AND receive_count > 0;

CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

# Versioned changes every database goes through at start-up, each in the start-up's one
# transaction: (version, statements). Append only; never edit a released one.
MIGRATIONS: list[tuple[int, str]] = [(2, """
-- A queue's id is never handed out again (DESIGN.md, invariant 6): without AUTOINCREMENT
-- SQLite gave a new queue the largest id + 1, so the id of the queue deleted last, and
-- what still named that id (a running move task) lived on in the new queue. The table is
-- rebuilt with the same rows; the next id is past every id any record names.
CREATE TABLE queues_v2 (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    region      TEXT NOT NULL,
    name        TEXT NOT NULL,
    attributes  TEXT NOT NULL,
    tags        TEXT NOT NULL,
    created_s   INTEGER NOT NULL,
    modified_s  INTEGER NOT NULL,
    purged_s    INTEGER NOT NULL DEFAULT 0,
    UNIQUE (region, name)
);
INSERT INTO queues_v2 (id, region, name, attributes, tags, created_s, modified_s, purged_s)
    SELECT id, region, name, attributes, tags, created_s, modified_s, purged_s FROM queues;
DROP TABLE queues;
ALTER TABLE queues_v2 RENAME TO queues;
DELETE FROM sqlite_sequence WHERE name='queues';
INSERT INTO sqlite_sequence (name, seq) SELECT 'queues', COALESCE(max(id), 0) FROM (
    SELECT max(id) AS id FROM queues
    UNION ALL SELECT max(queue_id) FROM messages
    UNION ALL SELECT max(queue_id) FROM dedup
    UNION ALL SELECT max(source_queue_id) FROM move_tasks
    UNION ALL SELECT max(json_extract(record, '$.destination_queue_id')) FROM move_tasks);
-- Move tasks of queues deleted before this version: nothing can list or end them.
DELETE FROM move_tasks WHERE source_queue_id NOT IN (SELECT id FROM queues);
"""), (3, """
-- The console's charts (service/activity.py): what each queue did, a row per bucket of
-- each chart range (minutes for the last hour, 10 minutes for the last day, hours for the
-- last 7 days), added to every few seconds; buckets older than their range are pruned,
-- so a queue keeps at most a few hundred rows.
CREATE TABLE activity (
    queue_id       INTEGER NOT NULL,
    span_min       INTEGER NOT NULL,            -- the minutes a bucket covers: 1, 10, 60
    minute         INTEGER NOT NULL,            -- its first minute (epoch ms // 60,000)
    sent           INTEGER NOT NULL DEFAULT 0,
    received       INTEGER NOT NULL DEFAULT 0,
    deleted        INTEGER NOT NULL DEFAULT 0,
    dead_lettered  INTEGER NOT NULL DEFAULT 0,  -- dead letters that arrived here
    failed         INTEGER NOT NULL DEFAULT 0,  -- failed attempts workers recorded
    oldest_s       INTEGER,  -- the oldest waiting message's age, the most sampled; NULL: none
    PRIMARY KEY (queue_id, span_min, minute)
) WITHOUT ROWID;
-- The once-a-minute prune finds a span's old buckets without reading every queue's.
CREATE INDEX activity_age ON activity (span_min, minute);
""")]
SCHEMA_VERSION = MIGRATIONS[-1][0]

# What each table holds, by the record kinds of service/identity.py, which says how a
# queue's deletion ends each (tests/store/test_identity.py compares this with the schema).
TABLE_KINDS = {"queues": "queue", "deleted_queues": "deleted_queues", "messages": "messages",
               "dedup": "dedup", "move_tasks": "move_tasks", "leases": "leases",
               "workers": "workers", "meta": "meta", "sign_in_failures": "sign_ins",
               "activity": "activity", "rates": "rates"}

_INSERT = (
    "INSERT INTO messages (seq, queue_id, message_id, body, md5_body, attributes,"
    " md5_attributes, system, sent_ms, sender_id, visible_at, group_id, dedup_key)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
)


def _configure_sqlite() -> None:
    """Before any connection: no mutex around each call into a connection (each is used by
    one thread at a time: the event loop's) and no allocation statistics, whose global
    mutex SQLite takes on every malloc. Together about 3 % of a message's instructions."""
    try:
        apsw.shutdown()
        apsw.config(apsw.SQLITE_CONFIG_MULTITHREAD)
        apsw.config(apsw.SQLITE_CONFIG_MEMSTATUS, 0)
    except apsw.MisuseError:  # a connection was opened first: SQLite's defaults stay
        pass


_configure_sqlite()

# Bulk deletes (purge, queue deletion, retention) go this many messages per transaction,
# so that a million of them never hold the event loop, and every other request, for
# seconds: a chunk takes a few milliseconds.
DELETE_CHUNK = 1_000

# A FIFO receive's walk (service/rules.py, FIFO groups): the queue's visible, live grouped
# messages in (visible_at, seq) order. Run as a co-routine: the rules stop it once they
# have their groups. Each group's head (its first live message) is looked up once per walk.
_FIFO_WALK = """
SELECT seq, group_id, visible_at FROM messages INDEXED BY messages_ready
WHERE queue_id=:q AND visible_at<=:now AND group_id IS NOT NULL AND sent_ms>:cutoff
ORDER BY visible_at, seq LIMIT :scan
"""
_FIFO_HEAD = (
    "SELECT seq, visible_at FROM messages INDEXED BY messages_group_seq WHERE queue_id=?"
    " AND group_id=? AND sent_ms>? ORDER BY seq LIMIT 1"
)
# A queue with at most this many groups has them counted before its walk, which then stops
# once each is known to be held or found: an empty receive on a FIFO queue whose few
# groups are all held reads a row or two instead of the whole visible backlog.
_FEW_GROUPS = 16
# One FIFO group's live messages from its head on, in order.
_FIFO_RUN = (
    "SELECT seq, visible_at FROM messages INDEXED BY messages_group_seq WHERE queue_id=?"
    " AND group_id=? AND seq>=? AND sent_ms>? ORDER BY seq LIMIT ?"
)
# The queue's next group after the one given (group ids in order, one index probe each:
# a FIFO walk's early stop, a fair receive's round); and a group's oldest visible, live
# messages.
_NEXT_GROUP = (
    "SELECT group_id FROM messages INDEXED BY messages_group_due WHERE queue_id=?"
    " AND group_id>? ORDER BY group_id LIMIT 1"
)
_GROUP_DUE = (
    "SELECT seq FROM messages INDEXED BY messages_group_due WHERE queue_id=? AND group_id=?"
    " AND visible_at<=? AND sent_ms>? ORDER BY visible_at LIMIT ?"
)
_HAS_GROUPS = (
    "SELECT 1 FROM messages INDEXED BY messages_group_due WHERE queue_id=?"
    " AND group_id IS NOT NULL LIMIT 1"
)
# A group's messages in flight, counted up to the cap (no further: the cap is all it asks).
_GROUP_IN_FLIGHT = (
    "SELECT count(*) FROM (SELECT 1 FROM messages INDEXED BY messages_group_flight"
    " WHERE queue_id=? AND group_id=? AND receive_count>0 AND visible_at>? AND sent_ms>?"
    " LIMIT ?)"
)
_RATE = "SELECT tat FROM rates WHERE queue_id=? AND group_id=?"
_SET_RATE = "INSERT OR REPLACE INTO rates (queue_id, group_id, tat) VALUES (?, ?, ?)"
# Messages without a group: a group-limited queue's fill (rules.py, tenant limits).
_UNGROUPED_DUE = (
    "SELECT seq FROM messages WHERE queue_id=? AND visible_at<=? AND sent_ms>?"
    " AND group_id IS NULL ORDER BY visible_at LIMIT ?"
)

_MESSAGE_COLUMNS = (
    "seq, message_id, body, md5_body, attributes, md5_attributes, system, sent_ms, sender_id,"
    " receive_count, first_receive_ms, receipt, group_id, dedup_key, dlq_source_arn"
)


# The hot path's changes translate inside _Change (and the journal's in _append): no
# wrapper call per message batch for them.
_TRANSLATED_INSIDE = frozenset({"send", "delete"})


def _translating(cls: type[T]) -> type[T]:
    """Translate SQLite's errors where they enter, once for the whole store: every public
    coroutine of `cls` raises StoreError for an apsw error (changes already did, within
    _Change; reads did not: a locked or corrupt file leaked the driver's exception)."""
    for name, method in list(vars(cls).items()):
        if name in _TRANSLATED_INSIDE or name.startswith("_"):
            continue
        if inspect.iscoroutinefunction(method):
            setattr(cls, name, _translated_call(method))
    return cls


def _translated_call(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except apsw.Error as exc:
            raise StoreError(f"SQLite: {exc}") from exc
    return call


@_translating
class SqliteStore:
    """The default store. One process owns a data directory (enforced with a lock file)."""

    shared = False  # one process owns the file: caches never go stale
    clock_skew_ms = 0
    on_remote_ready: Callable[[int, int], None] = staticmethod(lambda queue_id, count: None)
    on_remote_missed: Callable[[], None] = staticmethod(lambda: None)
    on_remote_drain: Callable[[str], None] = staticmethod(lambda worker_id: None)

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.path = Path(data_dir)
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = _lock_directory(self.path)
        self.db = apsw.Connection(str(self.path / "conveyor.db"))
        # One plan per statement whatever its bound values: otherwise SQLite (built with
        # STAT4) recompiles the receive's SELECT every time it is bound anew.
        self.db.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)
        # Exclusive locking before the first access to the log, so no -shm file is used.
        for pragma in ("locking_mode=EXCLUSIVE", "journal_mode=WAL", "synchronous=NORMAL",
                       "cache_size=-65536", "temp_store=MEMORY", "foreign_keys=OFF"):
            self.db.execute(f"PRAGMA {pragma}")
        self.db.execute(SCHEMA)  # idempotent
        with self._write_now():
            self._migrate()
        self._last_seq = self.db.execute("SELECT COALESCE(MAX(seq), 0) FROM messages").fetchone()[0]
        # Receipt tokens: unguessable enough to tell receives apart, without a syscall each.
        self._tokens = random.Random(os.urandom(32))
        self._group: _Group | None = None  # the open group commit
        self._tx = self.db.cursor()  # BEGIN and COMMIT: no new cursor each time
        self._named_locks: dict[str, asyncio.Lock] = {}
        # Queue id -> the message group a fair receive visited last (service/rules.py).
        self._fair_cursor: dict[int, str] = {}
        # The last claim's word of when a group its rate held back has a token again.
        self._claim_retry_ms: int | None = None

    def _next_seq(self) -> int:
        """Message order: microseconds since the epoch, bumped past the last one handed out.
        Increasing across restarts without a counter row to rewrite on every insert."""
        self._last_seq = max(self._last_seq + 1, time.time_ns() // 1000)
        return self._last_seq

    def _migrate(self) -> None:
        """Take the database from its schema version (1 when new: SCHEMA's) to ours."""
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = 1 if row is None else int(row[0])
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.path} holds schema version {version}; this Conveyor "
                             f"understands up to {SCHEMA_VERSION}. Upgrade Conveyor.")
        for number, statements in MIGRATIONS:
            if number > version:
                self.db.execute(statements)
                version = number
        self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                        (str(version),))

    async def announce(self, queue_id: int, count: int) -> None:
        """Nothing to tell: no other node shares this store."""

    async def announce_drain(self, worker_id: str) -> None:
        """Nothing to tell: no other node shares this store."""

    @asynccontextmanager
    async def exclusive(self, name: str) -> AsyncIterator[bool]:
        lock = self._named_locks.setdefault(name, asyncio.Lock())
        if lock.locked():
            yield False
            return
        async with lock:
            yield True

    async def close(self) -> None:
        self.db.close()
        self._lock.close()

    def outage(self) -> str | None:
        return None  # a file of this process's own: once open, it serves

    def gauges(self) -> dict[str, tuple[str, float]]:
        return {}

    def counters(self) -> dict[str, tuple[str, float]]:
        return {}

    def _write(self) -> _Change:
        """One atomic change, durable when the block exits: `async with self._write() as db`."""
        return _Change(self)

    @contextmanager
    def _write_now(self) -> Iterator[apsw.Connection]:
        """A transaction of its own, outside the event loop (start-up)."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")
        except apsw.Error as exc:
            raise StoreError(f"SQLite: {exc}") from exc

    # --- queues ----------------------------------------------------------------------

    async def create_queue(self, region: str, name: str, attributes: dict[str, str],
                           tags: dict[str, str], now_s: int) -> QueueRecord:
        async with self._write() as db:
            db.execute(
                "INSERT OR IGNORE INTO queues (region, name, attributes, tags, created_s,"
                " modified_s) VALUES (?, ?, ?, ?, ?, ?)",
                (region, name, _json(attributes), _json(tags), now_s, now_s))
            db.execute("DELETE FROM deleted_queues WHERE region=? AND name=?", (region, name))
        queue = await self.get_queue(region, name)
        assert queue is not None
        return queue

    async def get_queue(self, region: str, name: str) -> QueueRecord | None:
        row = self.db.execute("SELECT * FROM queues WHERE region=? AND name=?",
                              (region, name)).fetchone()
        return _queue(row) if row else None

    async def get_queue_by_id(self, queue_id: int) -> QueueRecord | None:
        row = self.db.execute("SELECT * FROM queues WHERE id=?", (queue_id,)).fetchone()
        return _queue(row) if row else None

    async def list_queues(self, region: str | None, prefix: str) -> list[QueueRecord]:
        # A plain, case-sensitive comparison: LIKE would need escaping, ignores case and
        # refuses patterns over 50,000 bytes.
        rows = self.db.execute(
            "SELECT * FROM queues WHERE (?1 IS NULL OR region=?1)"
            " AND substr(name, 1, length(?2))=?2 ORDER BY name", (region, prefix)).fetchall()
        return [_queue(r) for r in rows]

    async def update_queue(self, queue: QueueRecord) -> None:
        async with self._write() as db:
            db.execute("UPDATE queues SET attributes=?, tags=?, modified_s=?, purged_s=?"
                       " WHERE id=?", (_json(queue.attributes), _json(queue.tags),
                                       queue.modified_s, queue.purged_s, queue.id))

    async def delete_queue(self, queue: QueueRecord, now_s: int,
                           ending: QueueEnding | None = None) -> None:
        # The backlog first, a chunk at a time, while the queue still exists (SQS takes
        # up to 60 s too); then the queue and all else it ends, at once.
        await self._delete_messages("queue_id=?", (queue.id,))
        ending = ending or QueueEnding()
        async with self._write() as db:
            db.execute("DELETE FROM queues WHERE id=?", (queue.id,))
            db.execute("DELETE FROM messages WHERE queue_id=?", (queue.id,))
            db.execute("DELETE FROM dedup WHERE queue_id=?", (queue.id,))
            db.execute("DELETE FROM rates WHERE queue_id=?", (queue.id,))
            db.execute("DELETE FROM move_tasks WHERE source_queue_id=?", (queue.id,))
            db.execute("DELETE FROM activity WHERE queue_id=?", (queue.id,))
            db.executemany("UPDATE move_tasks SET record=? WHERE handle=?",
                           [(_json(asdict(t)), t.handle) for t in ending.failed_tasks])
            db.executemany("DELETE FROM leases WHERE region=? AND name=?",
                           [(queue.region, name) for name in ending.lease_names])
            db.executemany("DELETE FROM leases WHERE region=? AND substr(name, 1, ?)=?",
                           [(queue.region, len(p), p) for p in ending.lease_prefixes])
            db.executemany("DELETE FROM workers WHERE worker_id=?",
                           [(w,) for w in ending.worker_ids])
            db.execute("INSERT OR REPLACE INTO deleted_queues VALUES (?, ?, ?)",
                       (queue.region, queue.name, now_s))
        self._fair_cursor.pop(queue.id, None)

    async def deleted_at(self, region: str, name: str) -> int | None:
        row = self.db.execute("SELECT deleted_s FROM deleted_queues WHERE region=? AND name=?",
                              (region, name)).fetchone()
        return row[0] if row else None

    # --- messages --------------------------------------------------------------------

    async def send(self, queue: QueueRecord, messages: list[NewMessage], now_ms: int,
                   dedup_ms: int) -> list[SentMessage]:
        if all(m.dedup_key is None for m in messages):
            return await self._send_many(queue, messages)
        sent: list[SentMessage] = []
        async with self._write() as db:
            for m in messages:
                if m.dedup_key is not None:
                    dup = db.execute(
                        "SELECT message_id, seq FROM dedup WHERE queue_id=? AND dedup_key=?"
                        " AND expires_ms>?", (queue.id, m.dedup_key, now_ms)).fetchone()
                    if dup:
                        sent.append(SentMessage(dup[0], dup[1], duplicate=True))
                        continue
                seq = self._next_seq()
                db.execute(_INSERT, _insert_row(seq, queue, m))
                if m.dedup_key is not None:
                    db.execute("INSERT OR REPLACE INTO dedup VALUES (?, ?, ?, ?, ?)",
                               (queue.id, m.dedup_key, m.message_id, seq, now_ms + dedup_ms))
                sent.append(SentMessage(m.message_id, seq))
        return sent

    async def _send_many(self, queue: QueueRecord,
                         messages: list[NewMessage]) -> list[SentMessage]:
        """No deduplication to check: one executemany."""
        seqs = [self._next_seq() for _ in messages]
        rows = [_insert_row(seq, queue, m) for seq, m in zip(seqs, messages, strict=True)]
        async with self._write() as db:
            db.executemany(_INSERT, rows)
        return [SentMessage(m.message_id, seq) for seq, m in zip(seqs, messages, strict=True)]

    def claim(self, queue: QueueRecord, max_messages: int, now_ms: int, cutoff_ms: int,
              visible_at_ms: int, picking: Picking) -> _Claim:
        """Inside the current write group: the candidates are selected and marked received
        with no await between, so no other change comes in between."""
        return _Claim(self, queue, max_messages, now_ms, cutoff_ms, visible_at_ms, picking)

    def _claim_now(self, db: apsw.Connection, queue: QueueRecord, max_messages: int,
                   now_ms: int, cutoff_ms: int, visible_at_ms: int,
                   picking: Picking) -> list[StoredMessage]:
        """Select and receive the candidates, in the caller's transaction."""
        self._claim_retry_ms = None
        if queue.fifo:
            rows = self._rows(db, self._fifo_candidates(db, queue.id, max_messages, now_ms,
                                                        cutoff_ms, picking))
        elif db.execute(_HAS_GROUPS, (queue.id,)).fetchone():
            rows = self._rows(db, self._fair_candidates(db, queue.id, max_messages, now_ms,
                                                        cutoff_ms, picking))
        else:
            rows = db.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE queue_id=? AND visible_at<=?"
                " AND sent_ms>? ORDER BY visible_at LIMIT ?",
                (queue.id, now_ms, cutoff_ms, max_messages)).fetchall()
        if not rows:
            return []
        # One token for the whole receive: a handle also names its message, so handles
        # stay distinct, and one UPDATE binds five values instead of five per message.
        receipt = f"{self._tokens.getrandbits(64):016x}"
        taken = [StoredMessage(*row) for row in rows]
        for message in taken:
            message.receive_count += 1
            message.first_receive_ms = message.first_receive_ms or now_ms
            message.receipt = receipt
        db.execute(
            "UPDATE messages SET visible_at=?, receive_count=receive_count+1,"
            " first_receive_ms=coalesce(first_receive_ms, ?), receipt=? WHERE seq IN"
            f" ({','.join('?' * len(taken))})",
            (visible_at_ms, now_ms, receipt, *[m.seq for m in taken]))
        return taken

    def _dead_letter_now(self, db: apsw.Connection, seqs: list[int], dead_letter_queue_id: int,
                         source_arn: str, now_ms: int,
                         systems: list[str | None] | None = None) -> None:
        # The count (less this claim) and first receive go along (base.Claim.dead_letter).
        db.executemany(
            "UPDATE messages SET queue_id=?, visible_at=?, receive_count=receive_count-1,"
            " receipt=NULL, dlq_source_arn=?,"
            " system=CASE WHEN ?5 THEN ?6 ELSE system END WHERE seq=?4"
            # A dead-letter queue deleted meanwhile takes nothing: they stay, in flight.
            " AND EXISTS (SELECT 1 FROM queues WHERE id=?1)",
            [(dead_letter_queue_id, now_ms, source_arn, seq, systems is not None,
              systems[i] if systems is not None else None) for i, seq in enumerate(seqs)])

    def _fifo_candidates(self, db: apsw.Connection, queue_id: int, limit: int, now_ms: int,
                         cutoff_ms: int, picking: Picking) -> list[int]:
        """The seqs a FIFO receive takes, in order (picking.fifo_groups, .fifo_run)."""
        walk = db.execute(_FIFO_WALK, {"q": queue_id, "now": now_ms, "cutoff": cutoff_ms,
                                       "scan": picking.fifo_scan})
        heads: dict[str, int | None] = {}

        def look_up_head(group_id: str) -> tuple[int, int] | None:
            """The group's head (seq, visible_at), its seq noted in `heads`."""
            row = db.execute(_FIFO_HEAD, (queue_id, group_id, cutoff_ms)).fetchone()
            heads[group_id] = row[0] if row else None
            return row

        undecided = -1  # how many available groups the walk has yet to meet, when known
        few = self._few_groups(db, queue_id)
        if few is not None:
            undecided = 0
            for group_id in few:
                row = look_up_head(group_id)
                undecided += row is not None and row[1] <= now_ms
            if not undecided:
                walk.close()
                return []

        def with_heads() -> Iterator[tuple[int, str, int, int | None]]:
            nonlocal undecided
            for seq, group_id, visible_at in walk:
                if group_id not in heads:
                    look_up_head(group_id)
                head = heads[group_id]
                yield seq, group_id, visible_at, head
                if seq == head:
                    undecided -= 1
                    if undecided == 0:  # every available group met: nothing more to find
                        return

        try:
            groups = picking.fifo_groups(with_heads(), limit)
        finally:
            walk.close()  # stop the walk where the rules did
        seqs: list[int] = []
        for group_id, head_seq in groups:
            run = db.execute(_FIFO_RUN, (queue_id, group_id, head_seq, cutoff_ms,
                                         limit - len(seqs))).fetchall()
            seqs += picking.fifo_run(run, now_ms)
            if len(seqs) == limit:
                break
        return seqs

    @staticmethod
    def _few_groups(db: apsw.Connection, queue_id: int) -> list[str] | None:
        """The queue's groups when there are at most _FEW_GROUPS, else None."""
        found: list[str] = []
        group = ""
        while row := db.execute(_NEXT_GROUP, (queue_id, group)).fetchone():
            group = row[0]
            found.append(group)
            if len(found) > _FEW_GROUPS:
                return None
        return found

    def _fair_candidates(self, db: apsw.Connection, queue_id: int, limit: int, now_ms: int,
                         cutoff_ms: int, picking: Picking) -> list[int]:
        """The seqs a receive on a standard queue with message groups takes: dealt
        round-robin from the groups after the last one visited (picking.fair_deal), then
        the queue's oldest visible messages. Under group limits (picking.group_limited)
        each group gives no more than its room, its bucket is spent by what it gave, and
        the fill takes messages without a group only."""
        last = self._fair_cursor.get(queue_id, "")
        runs: list[list[int]] = []
        limits = GroupLimits(picking) if picking.group_limited else None
        group, wrapped = last, False
        for _ in range(picking.fair_groups):
            row = db.execute(_NEXT_GROUP, (queue_id, group)).fetchone()
            if row is None:
                if wrapped or not last:
                    break
                group, wrapped = "", True  # round again from the first group
                continue
            group = row[0]
            if wrapped and group > last:
                break  # every group visited once
            room = self._group_room(db, queue_id, group, now_ms, cutoff_ms, limit, picking,
                                    limits) if limits else limit
            run = [r[0] for r in db.execute(_GROUP_DUE, (queue_id, group, now_ms, cutoff_ms,
                                                         room))] if room else []
            if run:
                runs.append(run)
                if limits:
                    limits.dealt(group, run)
                self._fair_cursor[queue_id] = group
                if len(runs) == limit:
                    break
        seqs = picking.fair_deal(runs, limit)
        if limits:
            self._claim_retry_ms = limits.retry_ms
            db.executemany(_SET_RATE, [(queue_id, group, tat)
                                       for group, tat in limits.spent(seqs, now_ms)])
            if len(seqs) < limit:
                seqs += [r[0] for r in db.execute(_UNGROUPED_DUE, (
                    queue_id, now_ms, cutoff_ms, limit - len(seqs)))]
            return seqs
        if len(seqs) < limit:
            taken = set(seqs)
            seqs += [r[0] for r in db.execute(
                "SELECT seq FROM messages WHERE queue_id=? AND visible_at<=? AND sent_ms>?"
                " ORDER BY visible_at LIMIT ?", (queue_id, now_ms, cutoff_ms, limit + len(seqs)))
                     if r[0] not in taken][:limit - len(seqs)]
        return seqs

    @staticmethod
    def _group_room(db: apsw.Connection, queue_id: int, group: str, now_ms: int,
                    cutoff_ms: int, limit: int, picking: Picking,
                    limits: GroupLimits) -> int:
        """How many the group may give this receive (picking.group_room), noted in
        `limits` with its bucket."""
        in_flight = db.execute(_GROUP_IN_FLIGHT, (queue_id, group, now_ms, cutoff_ms,
                                                  picking.group_cap)).fetchone()[0] \
            if picking.group_cap else 0
        tat = None
        if picking.group_rate is not None:
            row = db.execute(_RATE, (queue_id, group)).fetchone()
            tat = row[0] if row else None
        return limits.note(group, in_flight, tat, now_ms, limit)

    def _rows(self, db: apsw.Connection, seqs: list[int]) -> list[tuple]:
        """The claimed messages' rows, in the order chosen."""
        if not seqs:
            return []
        rows = {row[0]: row for row in db.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE seq IN"
            f" ({','.join('?' * len(seqs))})", seqs)}
        return [rows[seq] for seq in seqs]

    async def delete(self, queue: QueueRecord, handles: list[Handle],
                     in_flight_after_ms: int | None = None, *,
                     any_receipt: bool = False) -> list[str]:
        sql = ("DELETE FROM messages WHERE seq=? AND queue_id=?"
               " AND (receipt=? OR (? AND receipt IS NOT NULL)) AND visible_at>?")
        floor = -1 if in_flight_after_ms is None else in_flight_after_ms
        rows = [(h.seq, queue.id, h.token, any_receipt, floor) for h in handles]
        async with self._write() as db:
            before = db.total_changes()
            db.executemany(sql, rows)
            if db.total_changes() - before == len(handles):
                return [OK] * len(handles)
            # Slow path: tell stale handles (message still there) from gone messages.
            outcomes = []
            for row in rows:
                deleted = _changed(db, sql, row)
                exists = not deleted and db.execute(
                    "SELECT 1 FROM messages WHERE seq=? AND queue_id=?", row[:2]).fetchone()
                outcomes.append(STALE if exists else OK)
            return outcomes

    async def drop(self, queue: QueueRecord, seqs: list[int]) -> list[int]:
        async with self._write() as db:
            return [seq for seq in dict.fromkeys(seqs) if _changed(
                db, "DELETE FROM messages WHERE seq=? AND queue_id=? AND receipt IS NULL",
                (seq, queue.id))]

    def hold(self, queue: QueueRecord, seqs: list[int]) -> _Hold:
        return _Hold(self, queue, seqs)

    def _held_now(self, db: apsw.Connection, queue: QueueRecord,
                  seqs: list[int]) -> dict[int, tuple[str | None, int]]:
        found = {}
        for seq in seqs:
            row = db.execute("SELECT receipt, visible_at FROM messages WHERE seq=? AND"
                             " queue_id=?", (seq, queue.id)).fetchone()
            if row is not None:
                found[seq] = (row[0], row[1])
        return found

    def amend(self, queue: QueueRecord, seqs: list[int]) -> _Amend:
        return _Amend(self, seqs)

    def _amendable_now(self, db: apsw.Connection, seqs: list[int]) -> dict[int, Annotated]:
        if not seqs:
            return {}
        rows = db.execute("SELECT seq, queue_id, receipt, dlq_source_arn, system FROM messages"
                          f" WHERE seq IN ({','.join('?' * len(seqs))})", seqs)
        return {row[0]: Annotated(*row[1:]) for row in rows}

    async def find_message(self, queue: QueueRecord, message_id: str,
                           scan_limit: int) -> StoredMessage | None:
        # The seqs off the sent index, then their rows: message_id is read before the body,
        # so a large body's overflow pages are read for the match only.
        row = self.db.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE seq IN (SELECT seq FROM messages"
            " WHERE queue_id=? ORDER BY sent_ms LIMIT ?) AND message_id=?",
            (queue.id, scan_limit, message_id)).fetchone()
        return StoredMessage(*row) if row is not None else None

    async def purge(self, queue: QueueRecord, now_ms: int) -> None:
        # The purge time is committed first: should the server stop half-way, the
        # retention sweep deletes the rest (see `expire`).
        async with self._write() as db:
            db.execute("UPDATE queues SET purged_s=? WHERE id=?", (now_ms // 1000, queue.id))
            db.execute("DELETE FROM dedup WHERE queue_id=?", (queue.id,))
        await self._delete_messages("queue_id=? AND sent_ms<=?", (queue.id, now_ms))

    async def peek(self, queue: QueueRecord, limit: int, cutoff_ms: int,
                   after: tuple[int, int] | None = None) -> list[tuple[StoredMessage, int]]:
        # messages_ready (queue_id, visible_at) holds the rowid (seq) too: the cursor and the
        # order are both read off it.
        visible_at, seq = after if after is not None else (-1, -1)
        rows = self.db.execute(
            f"SELECT {_MESSAGE_COLUMNS}, visible_at FROM messages WHERE queue_id=? AND sent_ms>?"
            " AND (visible_at, seq) > (?, ?) ORDER BY visible_at, seq LIMIT ?",
            (queue.id, cutoff_ms, visible_at, seq, limit))
        return [(StoredMessage(*row[:-1]), row[-1]) for row in rows]

    async def tally(self, queue: QueueRecord, now_ms: int, cutoff_ms: int) -> Tally:
        # All messages by (due, received), read off the ready index (rows are read only
        # for those not due), less the expired ones the sweep has not deleted yet.
        everything = self.db.execute(
            "SELECT (SELECT count(*) FROM messages WHERE queue_id=:q AND visible_at<=:now),"
            " (SELECT count(*) FROM messages WHERE queue_id=:q AND visible_at>:now"
            "  AND receive_count>0),"
            " (SELECT count(*) FROM messages WHERE queue_id=:q AND visible_at>:now"
            "  AND receive_count=0)", {"q": queue.id, "now": now_ms}).fetchone()
        expired = self.db.execute(
            "SELECT COALESCE(SUM(visible_at<=:now),0),"
            " COALESCE(SUM(visible_at>:now AND receive_count>0),0),"
            " COALESCE(SUM(visible_at>:now AND receive_count=0),0)"
            " FROM messages WHERE queue_id=:q AND sent_ms<=:cutoff",
            {"now": now_ms, "q": queue.id, "cutoff": cutoff_ms}).fetchone()
        due, received, delayed = (n - gone for n, gone in zip(everything, expired, strict=True))
        # Due messages are one figure whether received or not: the states need no more.
        return {(True, False): due, (False, True): received, (False, False): delayed}

    async def next_visible_ms(self, queue: QueueRecord, now_ms: int) -> int | None:
        row = self.db.execute("SELECT MIN(visible_at) FROM messages WHERE queue_id=?"
                              " AND visible_at>?", (queue.id, now_ms)).fetchone()
        return row[0]

    async def take_tokens(self, queue: QueueRecord, wanted: int, now_ms: int,
                          rate: Bucket) -> tuple[int, int]:
        async with self._write() as db:
            row = db.execute(_RATE, (queue.id, "")).fetchone()
            tat = row[0] if row else None
            taken = wanted if wanted < 0 else min(wanted, rate.room(tat, now_ms))
            if taken:
                tat = rate.spend(tat, now_ms, taken)
                db.execute(_SET_RATE, (queue.id, "", tat))
            return taken, rate.ready_ms(tat, now_ms, wanted)

    async def expire(self, cutoffs: dict[int, int], now_ms: int) -> int:
        removed = 0
        for queue_id, cutoff_ms in cutoffs.items():
            removed += await self._delete_messages("queue_id=? AND sent_ms<=?",
                                                   (queue_id, cutoff_ms))
        # Messages of a queue that is gone (held in the journal's memory as it was
        # deleted): each chunk checks again that the queue is still gone.
        live = {row[0] for row in self.db.execute("SELECT id FROM queues")}
        for queue_id in self._message_queue_ids() - live:
            await self._delete_messages("queue_id=? AND queue_id NOT IN (SELECT id FROM"
                                        " queues)", (queue_id,))
        async with self._write() as db:
            db.execute("DELETE FROM dedup WHERE expires_ms<=?", (now_ms,))
            db.execute("DELETE FROM rates WHERE tat<=?", (now_ms,))  # full again
        return removed

    def _message_queue_ids(self) -> set[int]:
        """The queue ids that messages name, one index probe per id."""
        ids: set[int] = set()
        last = -1
        sql = "SELECT queue_id FROM messages WHERE queue_id>? ORDER BY queue_id LIMIT 1"
        while row := self.db.execute(sql, (last,)).fetchone():
            last = row[0]
            ids.add(last)
        return ids

    async def _delete_messages(self, where: str, params: tuple) -> int:
        """Delete the messages `where` matches, DELETE_CHUNK per transaction; how many."""
        sql = (f"DELETE FROM messages WHERE seq IN (SELECT seq FROM messages WHERE {where}"
               f" LIMIT {DELETE_CHUNK})")
        removed = 0
        while True:
            async with self._write() as db:
                chunk = _changed(db, sql, params)
            removed += chunk
            if chunk < DELETE_CHUNK:
                return removed

    # --- move tasks ------------------------------------------------------------------

    async def movable(self, queue: QueueRecord, limit: int, now_ms: int,
                      cutoff_ms: int) -> list[StoredMessage]:
        # Oldest first in the sent index's order, which stops at `limit`.
        rows = self.db.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE queue_id=? AND visible_at<=?"
            " AND sent_ms>? ORDER BY sent_ms, seq LIMIT ?",
            (queue.id, now_ms, cutoff_ms, limit)).fetchall()
        return [StoredMessage(*r) for r in rows]

    async def dead_letter_origins(self, queue: QueueRecord) -> list[str]:
        rows = self.db.execute("SELECT DISTINCT dlq_source_arn FROM messages WHERE queue_id=?"
                               " AND dlq_source_arn IS NOT NULL", (queue.id,)).fetchall()
        return [r[0] for r in rows]

    async def move(self, queue: QueueRecord, moves: list[tuple[int, int]], now_ms: int) -> int:
        """Move messages (seq → destination queue id) as fresh, visible messages."""
        async with self._write() as db:
            live = {dest for dest, in db.execute(
                f"SELECT id FROM queues WHERE id IN ({','.join('?' * len(moves))})",
                [dest for _, dest in moves])} if moves else set()
            moves = [(seq, dest) for seq, dest in moves if dest in live]
            return sum(_changed(
                db, "UPDATE messages SET queue_id=?, visible_at=?, receive_count=0,"
                " first_receive_ms=NULL, receipt=NULL, dlq_source_arn=NULL"
                " WHERE seq=? AND queue_id=? AND visible_at<=?",
                (dest, now_ms, seq, queue.id, now_ms))
                for seq, dest in moves)

    async def save_move_task(self, task: MoveTaskRecord) -> None:
        async with self._write() as db:
            db.execute("INSERT OR REPLACE INTO move_tasks SELECT ?1, ?2, ?3"
                       " WHERE EXISTS (SELECT 1 FROM queues WHERE id=?2)",
                       (task.handle, task.source_queue_id, _json(asdict(task))))

    async def lease_acquire(self, region: str, name: str, holder: str, ttl_ms: int,
                            now_ms: int) -> LeaseRecord | None:
        async with self._write() as db:
            row = db.execute(
                "INSERT INTO leases VALUES (?, ?, ?, 1, ?, '') ON CONFLICT (region, name)"
                " DO UPDATE SET holder=excluded.holder, version=version+1,"
                " expires_ms=excluded.expires_ms WHERE leases.holder=excluded.holder"
                f" OR leases.expires_ms<=? RETURNING {_LEASE_COLUMNS}",
                (region, name, holder, now_ms + ttl_ms, now_ms)).fetchone()
        return LeaseRecord(*row) if row else None

    async def lease_update(self, region: str, name: str, holder: str, version: int,
                           data: str, ttl_ms: int, now_ms: int) -> LeaseRecord | None:
        async with self._write() as db:
            row = db.execute(
                "UPDATE leases SET version=version+1, expires_ms=?, data=? WHERE region=?"
                " AND name=? AND holder=? AND version=? AND expires_ms>?"
                f" RETURNING {_LEASE_COLUMNS}",
                (now_ms + ttl_ms, data, region, name, holder, version, now_ms)).fetchone()
        return LeaseRecord(*row) if row else None

    async def lease_release(self, region: str, name: str, holder: str) -> None:
        async with self._write() as db:
            db.execute("UPDATE leases SET expires_ms=0, version=version+1 WHERE region=?"
                       " AND name=? AND holder=?", (region, name, holder))

    async def lease_get(self, region: str, name: str) -> LeaseRecord | None:
        row = self.db.execute(f"SELECT {_LEASE_COLUMNS} FROM leases WHERE region=? AND name=?",
                              (region, name)).fetchone()
        return LeaseRecord(*row) if row else None

    async def save_worker(self, worker_id: str, record: str, now_ms: int, expires_ms: int,
                          max_workers: int) -> bool:
        async with self._write() as db:
            known = db.execute("SELECT 1 FROM workers WHERE worker_id=? AND expires_ms>?",
                               (worker_id, now_ms)).fetchone()
            if not known and db.execute("SELECT count(*) FROM workers WHERE expires_ms>?",
                                        (now_ms,)).fetchone()[0] >= max_workers:
                return False
            db.execute(_SAVE_WORKER, (worker_id, now_ms, expires_ms, record))
        return True

    async def workers(self, now_ms: int) -> list[tuple[str, int, str]]:
        async with self._write() as db:
            db.execute("DELETE FROM workers WHERE expires_ms<=?", (now_ms,))
            return db.execute("SELECT worker_id, first_seen_ms, record FROM workers"
                              " ORDER BY first_seen_ms, worker_id").fetchall()

    async def move_tasks(self, source_queue_id: int | None) -> list[MoveTaskRecord]:
        """The tasks of one source queue, or of all queues (None)."""
        rows = self.db.execute("SELECT record FROM move_tasks WHERE ? IS NULL OR"
                               " source_queue_id=?", (source_queue_id, source_queue_id)).fetchall()
        return [MoveTaskRecord(**orjson.loads(r[0])) for r in rows]

    async def sign_in_failures(self, subjects: list[str]) -> dict[str, tuple[int, int]]:
        marks = ",".join("?" * len(subjects))
        rows = self.db.execute(f"SELECT subject, failures, last_ms FROM sign_in_failures"
                               f" WHERE subject IN ({marks})", tuple(subjects)).fetchall()
        return {subject: (failures, last_ms) for subject, failures, last_ms in rows}

    async def count_sign_in_failure(self, subjects: list[str], now_ms: int,
                                    forget_before_ms: int) -> dict[str, tuple[int, int]]:
        async with self._write() as db:
            db.execute("DELETE FROM sign_in_failures WHERE last_ms<?", (forget_before_ms,))
            found = {}
            for subject in subjects:
                found[subject] = db.execute(_COUNT_FAILURE, (subject, now_ms)).fetchone()
        return {subject: (row[0], row[1]) for subject, row in found.items()}

    async def clear_sign_in_failures(self, subjects: list[str]) -> None:
        async with self._write() as db:
            db.executemany("DELETE FROM sign_in_failures WHERE subject=?",
                           [(s,) for s in subjects])

    async def add_activity(self, rows: list[ActivityRow],
                           prune_before: list[tuple[int, int]]) -> None:
        async with self._write() as db:
            db.executemany(_ADD_ACTIVITY, rows)
            db.executemany("DELETE FROM activity WHERE span_min=? AND minute<?", prune_before)

    async def activity(self, queue_ids: list[int], span_min: int, from_minute: int
                       ) -> list[ActivityTuple]:
        found: list[ActivityTuple] = []
        for queue_id in queue_ids:  # one index range each
            found += self.db.execute(
                "SELECT * FROM activity WHERE queue_id=? AND span_min=? AND minute>=?",
                (queue_id, span_min, from_minute)).fetchall()
        return found


_LEASE_COLUMNS = "name, holder, version, expires_ms, data"

_ADD_ACTIVITY = (
    "INSERT INTO activity VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (queue_id, span_min, minute)"
    " DO UPDATE SET sent=sent+excluded.sent, received=received+excluded.received,"
    " deleted=deleted+excluded.deleted, dead_lettered=dead_lettered+excluded.dead_lettered,"
    " failed=failed+excluded.failed, oldest_s=max(coalesce(oldest_s, excluded.oldest_s),"
    " coalesce(excluded.oldest_s, oldest_s))"
)

_COUNT_FAILURE = (
    "INSERT INTO sign_in_failures VALUES (?1, 1, ?2) ON CONFLICT (subject) DO UPDATE SET"
    " failures=sign_in_failures.failures+1, last_ms=max(sign_in_failures.last_ms, ?2)"
    " RETURNING failures, last_ms"
)

# A worker seen again keeps its first-seen time, unless its last announcement ran out.
_SAVE_WORKER = (
    "INSERT INTO workers VALUES (?1, ?2, ?3, ?4) ON CONFLICT (worker_id) DO UPDATE SET"
    " first_seen_ms=CASE WHEN workers.expires_ms<=?2 THEN ?2 ELSE workers.first_seen_ms END,"
    " expires_ms=excluded.expires_ms, record=excluded.record"
)


def _insert_row(seq: int, queue: QueueRecord, m: NewMessage) -> tuple:
    return (seq, queue.id, m.message_id, m.body, m.md5_body, m.attributes, m.md5_attributes,
            m.system, m.sent_ms, m.sender_id, m.visible_at_ms, m.group_id, m.dedup_key)


def _queue(row: tuple) -> QueueRecord:
    return QueueRecord(id=row[0], region=row[1], name=row[2], attributes=orjson.loads(row[3]),
                       tags=orjson.loads(row[4]), created_s=row[5], modified_s=row[6],
                       purged_s=row[7])


def _changed(db: apsw.Connection, sql: str, params: tuple) -> int:
    """Run one change; how many rows it touched (apsw's cursors have no rowcount)."""
    db.execute(sql, params)
    return db.changes()


def _json(value: object) -> str:
    return orjson.dumps(value).decode()


class _Group:
    """The changes of one event-loop turn: one transaction, one COMMIT at the turn's end.

    Each change's caller resumes only after that COMMIT, so nothing is acknowledged
    before it is in the log; several changes in a commit write their pages once, most of
    a commit's cost. A change that fails rolls the whole group back and fails every
    caller in it: none of them was acknowledged yet, and no savepoint per change is paid
    for an error that only a broken disk or a bug produces."""

    def __init__(self, tx: apsw.Cursor) -> None:
        self.tx = tx  # the store's cursor for BEGIN and COMMIT
        self.db = tx.connection
        self.waiters: list[asyncio.Future[None]] = []
        self.open = True
        try:
            tx.execute("BEGIN IMMEDIATE")
        except apsw.Error as exc:
            raise StoreError(f"SQLite: {exc}") from exc
        # Kept for the changes that join: get_running_loop() makes a getpid() system call.
        self.loop = asyncio.get_running_loop()
        self.loop.call_soon(self.commit)

    def commit(self) -> None:
        if not self.open:
            return
        try:
            self.tx.execute("COMMIT")
        except apsw.Error as exc:
            self.abort(StoreError(f"SQLite commit failed: {exc}"))
            return
        self.open = False
        for waiter in self.waiters:
            if not waiter.done():  # its caller may have been cancelled meanwhile
                waiter.set_result(None)

    def abort(self, error: StoreError) -> None:
        self.open = False
        with contextlib.suppress(apsw.Error):
            self.db.execute("ROLLBACK")
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_exception(error)


class _Change:
    """`async with store._write() as db`: joins (or opens) this turn's group, and on exit
    waits for its COMMIT. A plain class: cheaper than an async generator per change."""

    __slots__ = ("store", "group")

    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    async def __aenter__(self) -> apsw.Connection:
        group = self.store._group
        if group is None or not group.open:
            group = self.store._group = _Group(self.store._tx)
        self.group = group
        return group.db

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: object) -> None:
        group = self.group
        if error is not None:
            failure = StoreError(f"SQLite: {error}") if isinstance(error, apsw.Error) else \
                StoreError(f"change failed: {error!r}")
            if group.open:
                group.abort(failure)
            if isinstance(error, apsw.Error):
                raise failure from error
            return  # let the original exception propagate
        if not group.open:  # rolled back by a neighbour's failure before we got here
            raise StoreError("SQLite: the group commit was rolled back")
        waiter = group.loop.create_future()
        group.waiters.append(waiter)
        await waiter


class _Claim:
    """`async with store.claim(...) as claim`: the claim is made on entering, in this
    turn's write group, and is durable once the block exits (see _Change)."""

    __slots__ = ("store", "args", "change", "db", "messages", "retry_ms")

    def __init__(self, store: SqliteStore, *args: object) -> None:
        self.store = store
        self.args = args
        self.change = _Change(store)
        self.retry_ms: int | None = None

    async def __aenter__(self) -> _Claim:
        self.db = await self.change.__aenter__()
        try:
            self.messages = self.store._claim_now(self.db, *self.args)  # type: ignore[arg-type]
            self.retry_ms = self.store._claim_retry_ms
        except BaseException as exc:
            await self.change.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def dead_letter(self, seqs: list[int], dead_letter_queue_id: int, source_arn: str,
                          now_ms: int, systems: list[str | None] | None = None) -> None:
        with _translated():
            self.store._dead_letter_now(self.db, seqs, dead_letter_queue_id, source_arn, now_ms,
                                        systems)

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: object) -> None:
        await self.change.__aexit__(kind, error, tb)


class _Rows:
    """A write transaction over some messages, `found` (the rows still there to change)
    read as it opens; _Hold and _Amend say which rows and how they change."""

    __slots__ = ("store", "seqs", "change", "db", "found")

    def __init__(self, store: SqliteStore, seqs: list[int]) -> None:
        self.store, self.seqs = store, seqs
        self.change = _Change(store)

    def _find(self, db: apsw.Connection) -> Any:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        self.db = await self.change.__aenter__()
        try:
            self.found = self._find(self.db)
        except BaseException as exc:
            await self.change.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: object) -> None:
        await self.change.__aexit__(kind, error, tb)


class _Hold(_Rows):
    """`async with store.hold(queue, seqs) as held`: like _Claim, for visibility changes."""

    __slots__ = ("queue",)

    def __init__(self, store: SqliteStore, queue: QueueRecord, seqs: list[int]) -> None:
        super().__init__(store, seqs)
        self.queue = queue

    def _find(self, db: apsw.Connection) -> Any:
        return self.store._held_now(db, self.queue, self.seqs)

    async def set_visible_at(self, changes: list[tuple[int, int]]) -> None:
        with _translated():
            self.db.executemany("UPDATE messages SET visible_at=? WHERE seq=?",
                                [(visible_at, seq) for seq, visible_at in changes])


class _Amend(_Rows):
    """`async with store.amend(seqs) as amending`: like _Hold, for system attributes."""

    __slots__ = ()

    def _find(self, db: apsw.Connection) -> Any:
        return self.store._amendable_now(db, self.seqs)

    async def set_system(self, changes: list[tuple[int, str]]) -> None:
        with _translated():
            self.db.executemany("UPDATE messages SET system=? WHERE seq=?",
                                [(system, seq) for seq, system in changes])


@contextmanager
def _translated() -> Iterator[None]:
    """SQLite's errors as StoreError: where a driver call is made outside _Change's block."""
    try:
        yield
    except apsw.Error as exc:
        raise StoreError(f"SQLite: {exc}") from exc


def _lock_directory(path: Path) -> IO[str]:
    handle = open(path / "conveyor.lock", "w")  # noqa: SIM115 - held for the store's life
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise StoreError(f"{path} is in use by another Conveyor server") from None
    return handle
