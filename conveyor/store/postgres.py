"""The shared store: PostgreSQL, for several stateless server nodes behind one address.

Receives claim rows with `FOR UPDATE SKIP LOCKED`, so receivers on different nodes never
wait on each other. FIFO queues take a transaction-scoped advisory lock on the queue for
sends and receives: a group's order is the commit order, and a group stays held while one
of its messages is in flight, across nodes. A send NOTIFYs `conveyor_ready`; every node
LISTENs and wakes its own parked long polls. Time comes from the database's clock: each
node measures its offset to it (`clock_skew_ms`) and the service adds it to its clock.

When the database goes away (a restart, a failover), requests fail with StoreUnavailable
and the node carries on by itself: one task watches the LISTEN connection, re-establishes
it with back-off, logs the outage once when it starts and once when it ends, and then
wakes every parked long poll (notifications sent meanwhile were missed). The pool replaces
its broken connections as requests ask for them.

Failover: the DSN may name several hosts (`postgresql://h1:5432,h2:5432/db`, libpq's
multi-host form); every connection goes to the one that takes writes
(`target_session_attrs=read-write`, the default here), each host given its own connect
timeout (_primary.py). A server that is not, or no longer, the primary (a standby, one
being promoted, an old primary fenced read-only) is an outage like a stopped one:
StoreUnavailable, never a user's error. The LISTEN connection's server is probed every
PROBE_EVERY_S, so that one that died silently (its machine, a partition) is noticed too.
Once the LISTEN connection is back on the primary the pool is replaced, its connections
closed: none stays on the old server, and none waits there for an answer never coming.
A statement whose answer never came (its server died, or it waited past
`statement_timeout_s`, as a commit does for a synchronous standby that is not there) is
a failure to every caller of it: it may have been applied, but it was not acknowledged.

Behind PgBouncer in transaction pooling mode (`listen` given: a direct URL, or POLL), two
statements of a connection may run on different server sessions, so nothing is kept in a
session: asyncpg's statement cache is off (its statements are parsed afresh each time,
within one round trip), no setting is sent at connect (a schema is the pooler's
`search_path`), advisory locks are transaction-scoped as everywhere here. LISTEN needs a
session of its own: it goes to `listen`, straight to PostgreSQL, which is also the server
probed; with POLL there is none, and every parked long poll looks at its queue each
POLL_EVERY_S instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import orjson

from conveyor.clock import Clock
from conveyor.store._coalesce import Coalescer
from conveyor.store._limits import GroupLimits
from conveyor.store._primary import Primary
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
    QueueElsewhere,
    QueueEnding,
    QueueRecord,
    SentMessage,
    StoredMessage,
    StoreError,
    StoreUnavailable,
    Tally,
)

log = logging.getLogger(__name__)

NOTIFY_CHANNEL = "conveyor_ready"
_DRAIN = "drain"  # a notification's second field: a drain request, not a queue id
SKEW_REFRESH_S = 30.0
# Re-establishing the LISTEN connection: first try at once, then wait 0.1 s, doubling to
# 5 s, so that a restart of a second or two costs little and a long outage few attempts.
RECONNECT_FIRST_S = 0.1
RECONNECT_MAX_S = 5.0
PROBE_TIMEOUT_S = 3.0  # a database that does not answer the probe by then counts as gone
# The LISTEN connection's server is probed this often even when no request failed: a
# server that died without a word (no RST: its machine, a partition) leaves connections
# that wait forever. One tiny statement per node this often.
PROBE_EVERY_S = 2.0
# With several hosts, each gets this long to connect (libpq's connect_timeout), so that one
# that drops packets delays the next one's try only so much.
HOST_CONNECT_TIMEOUT_S = 4.0
# A statement unanswered this long is answered StoreUnavailable (asyncpg cancels it). A
# bound on a hang, far above any request's work: chiefly a commit that waits for a
# synchronous standby none of which is connected (a primary just promoted whose
# synchronous_standby_names still names one), which PostgreSQL would let wait forever,
# taking every pooled connection with it. Below botocore's 60 s read timeout, so that the
# client hears a retryable 503 rather than nothing.
STATEMENT_TIMEOUT_S = 20.0
# The probe of the LISTEN connection's server: is it up, and still the primary?
_PROBE = "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::bool"
# After a statement went unanswered: do commits wait for a synchronous standby that is
# not there? (synchronous_standby_names when commits wait for one and none is connected;
# else NULL. The waits themselves ended when asyncpg cancelled them.)
_SYNC_STALL = (
    "SELECT current_setting('synchronous_standby_names') WHERE"
    " current_setting('synchronous_standby_names') <> '' AND"
    " current_setting('synchronous_commit') IN ('on', 'remote_write', 'remote_apply')"
    " AND NOT EXISTS (SELECT 1 FROM pg_stat_replication WHERE sync_state IN ('sync',"
    " 'quorum'))")
STALL_LOG_EVERY_S = 60.0  # a stall that lasts is logged again this often, not per request
# asyncpg waits 60 s by default: longer than a client waits for its answer.
CONNECT_TIMEOUT_S = 10.0
POLL = "poll"  # `listen`: no LISTEN at all (a pooler and no direct URL)
# Without LISTEN, parked long polls look at their queues this often: a message sent on
# another node is received within about this long, at one claim per parked poll each time.
POLL_EVERY_S = 1.0

# Everything the driver raises. Of those, the errors below mean the database cannot be
# reached now, not that a statement is wrong: refused or reset connections, a server
# shutting down or starting up, all its connection slots taken.
_DRIVER_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError,
                  asyncpg.InternalClientError)
_UNREACHABLE = (OSError, asyncpg.PostgresConnectionError, asyncpg.AdminShutdownError,
                asyncpg.CrashShutdownError, asyncpg.CannotConnectNowError,
                asyncpg.TooManyConnectionsError)
# The server reached is not the primary: no host of the DSN takes writes now (during a
# failover, before the promotion), or a connection made earlier is on a server that has
# become read-only (a standby, an old primary fenced off). An outage too, and a sign that
# connections must be made afresh.
_NOT_PRIMARY = (asyncpg.exceptions.TargetServerAttributeNotMatched,
                asyncpg.ReadOnlySQLTransactionError)

# Versioned migrations: (version, statements). Append only; never edit a released one.
MIGRATIONS: list[tuple[int, str]] = [(1, """
-- One row per queue. `attributes` and `tags` are JSON objects of strings.
CREATE TABLE conveyor_queues (
    id          BIGSERIAL PRIMARY KEY,
    region      TEXT NOT NULL,
    name        TEXT NOT NULL,
    attributes  JSONB NOT NULL,
    tags        JSONB NOT NULL,
    created_s   BIGINT NOT NULL,
    modified_s  BIGINT NOT NULL,
    purged_s    BIGINT NOT NULL DEFAULT 0,   -- last PurgeQueue, for PurgeQueueInProgress
    UNIQUE (region, name)
);

-- Names deleted recently, for QueueDeletedRecently.
CREATE TABLE conveyor_deleted_queues (
    region     TEXT NOT NULL,
    name       TEXT NOT NULL,
    deleted_s  BIGINT NOT NULL,
    PRIMARY KEY (region, name)
);

-- One row per message; `visible_at` (ms, database clock) serves delay and visibility.
-- In flight = received at least once and not yet visible again.
CREATE TABLE conveyor_messages (
    seq              BIGSERIAL PRIMARY KEY,   -- order; FIFO SequenceNumber
    queue_id         BIGINT NOT NULL,
    message_id       TEXT NOT NULL,
    body             TEXT NOT NULL,
    md5_body         TEXT NOT NULL,
    attributes       TEXT,                    -- JSON message attributes
    md5_attributes   TEXT,
    system           TEXT,                    -- JSON message system attributes
    sent_ms          BIGINT NOT NULL,         -- SentTimestamp; retention counts from here
    sender_id        TEXT NOT NULL,
    visible_at       BIGINT NOT NULL,
    receive_count    INTEGER NOT NULL DEFAULT 0,
    first_receive_ms BIGINT,
    receipt          TEXT,                    -- token of the latest receive
    group_id         TEXT,                    -- FIFO MessageGroupId
    dedup_key        TEXT,                    -- FIFO deduplication key (scope-qualified)
    dlq_source_arn   TEXT                     -- set when dead-lettered
);
CREATE INDEX conveyor_messages_ready ON conveyor_messages (queue_id, visible_at);
CREATE INDEX conveyor_messages_group ON conveyor_messages (queue_id, group_id, visible_at)
    WHERE group_id IS NOT NULL;

-- FIFO deduplication: a key seen within the interval maps to the first message.
CREATE TABLE conveyor_dedup (
    queue_id    BIGINT NOT NULL,
    dedup_key   TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    expires_ms  BIGINT NOT NULL,
    PRIMARY KEY (queue_id, dedup_key)
);

-- StartMessageMoveTask state.
CREATE TABLE conveyor_move_tasks (
    handle          TEXT PRIMARY KEY,
    source_queue_id BIGINT NOT NULL,
    record          JSONB NOT NULL
);
"""), (2, """
-- Leases for leader election: conditional writes decide who holds one.
CREATE TABLE conveyor_leases (
    region      TEXT NOT NULL,
    name        TEXT NOT NULL,
    holder      TEXT NOT NULL,
    version     BIGINT NOT NULL,   -- bumped by every successful write
    expires_ms  BIGINT NOT NULL,
    data        TEXT NOT NULL,     -- opaque (periodic tasks: last enqueued times)
    PRIMARY KEY (region, name)
);
"""), (3, """
-- A FIFO receive scans the queue's head in order (the first FIFO_SCAN messages).
CREATE INDEX conveyor_messages_fifo ON conveyor_messages (queue_id, seq)
    WHERE group_id IS NOT NULL;
"""), (4, """
-- Workers' announcements: who is working, until expires_ms, seen by every node.
CREATE TABLE conveyor_workers (
    worker_id      TEXT PRIMARY KEY,
    first_seen_ms  BIGINT NOT NULL,
    expires_ms     BIGINT NOT NULL,
    record         TEXT NOT NULL      -- JSON: kind, region, queue, status, last seen
);
"""), (5, """
-- Retention sweeps find a queue's old messages, and move tasks its oldest, without
-- reading its backlog.
CREATE INDEX conveyor_messages_sent ON conveyor_messages (queue_id, sent_ms);
"""), (6, """
-- A FIFO group's head and run: a group's messages in order. The walk that finds available
-- groups reads the visible ones in (visible_at, seq) order.
CREATE INDEX conveyor_messages_group_seq ON conveyor_messages (queue_id, group_id, seq)
    INCLUDE (visible_at, sent_ms) WHERE group_id IS NOT NULL;
CREATE INDEX conveyor_messages_ready_seq ON conveyor_messages (queue_id, visible_at, seq)
    WHERE group_id IS NOT NULL;
"""), (7, """
-- The console's charts: every node adds what it counted to the minute's row, so every node
-- draws the same last hour. About an hour of rows per active queue; older ones pruned.
CREATE TABLE conveyor_activity (
    queue_id  BIGINT NOT NULL,
    minute    BIGINT NOT NULL,           -- ms since the epoch // 60,000
    sent      BIGINT NOT NULL DEFAULT 0,
    received  BIGINT NOT NULL DEFAULT 0,
    deleted   BIGINT NOT NULL DEFAULT 0,
    oldest_s  BIGINT,                    -- the oldest waiting message's age; NULL: unsampled
    PRIMARY KEY (queue_id, minute)
);
"""), (8, """
-- The console's failed sign-ins (service/signins.py), per subject: "key:<access key id>"
-- or "address:<client address>", counted by every node alike. Forgotten a while after the
-- last failure.
CREATE TABLE conveyor_sign_in_failures (
    subject   TEXT PRIMARY KEY,
    failures  INTEGER NOT NULL,   -- counted since the subject was last forgotten or cleared
    last_ms   BIGINT NOT NULL     -- the latest failure (the database's time)
);
CREATE INDEX conveyor_sign_in_failures_last ON conveyor_sign_in_failures (last_ms);
"""), (9, """
-- DeleteQueue ends every record keyed by the queue (DESIGN.md, invariant 6); before, its
-- move tasks and charted minutes stayed behind, where nothing could list or end them.
-- (Queue ids were never reused here: a sequence hands each value out once.)
DELETE FROM conveyor_move_tasks WHERE source_queue_id NOT IN (SELECT id FROM conveyor_queues);
DELETE FROM conveyor_activity WHERE queue_id NOT IN (SELECT id FROM conveyor_queues);
"""), (10, """
-- The console's charts over 1 h, 24 h and 7 d (service/activity.py): a row per bucket of
-- each range, minutes (span_min 1, the rows kept so far), 10 minutes and hours; buckets
-- older than their range are pruned. Dead letters that arrived and failed attempts that
-- workers recorded are charted too; oldest_s keeps the most sampled in a bucket.
ALTER TABLE conveyor_activity
    ADD COLUMN span_min       BIGINT NOT NULL DEFAULT 1,  -- the minutes a bucket covers
    ADD COLUMN dead_lettered  BIGINT NOT NULL DEFAULT 0,  -- dead letters that arrived here
    ADD COLUMN failed         BIGINT NOT NULL DEFAULT 0;  -- failed attempts recorded
ALTER TABLE conveyor_activity DROP CONSTRAINT conveyor_activity_pkey,
    ADD PRIMARY KEY (queue_id, span_min, minute);
-- The once-a-minute prune finds a span's old buckets without reading every queue's.
CREATE INDEX conveyor_activity_age ON conveyor_activity (span_min, minute);
"""), (11, """
-- Receive-rate token buckets (service/rules.py, Rate): a queue's own (group_id '') and
-- each of its groups'. `tat` (ms, the database's clock) is when the bucket is full
-- again; a row past it says no more than no row, and the retention sweep forgets it.
CREATE TABLE conveyor_rates (
    queue_id  BIGINT NOT NULL,
    group_id  TEXT NOT NULL,
    tat       DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (queue_id, group_id)
);
-- A group's messages in flight (received, not yet visible again), counted against the
-- queue's ConveyorGroupConcurrency without reading the group's delayed or visible ones.
CREATE INDEX conveyor_messages_group_flight ON conveyor_messages (queue_id, group_id,
    visible_at) WHERE group_id IS NOT NULL AND receive_count > 0;
""")]
SCHEMA_VERSION = MIGRATIONS[-1][0]

# What each table holds, by the record kinds of service/identity.py, which says how a
# queue's deletion ends each (tests/store/test_identity.py compares this with the schema).
TABLE_KINDS = {"conveyor_queues": "queue", "conveyor_deleted_queues": "deleted_queues",
               "conveyor_messages": "messages", "conveyor_dedup": "dedup",
               "conveyor_move_tasks": "move_tasks", "conveyor_leases": "leases",
               "conveyor_workers": "workers", "conveyor_activity": "activity",
               "conveyor_schema": "meta", "conveyor_sign_in_failures": "sign_ins",
               "conveyor_rates": "rates"}
_MIGRATION_LOCK = 0x636F6E76  # advisory lock key: one node migrates at a time

_COLUMNS = ("seq, message_id, body, md5_body, attributes, md5_attributes, system, sent_ms,"
            " sender_id, receive_count, first_receive_ms, receipt, group_id, dedup_key,"
            " dlq_source_arn")
_INSERT = (
    "INSERT INTO conveyor_messages (queue_id, message_id, body, md5_body, attributes,"
    " md5_attributes, system, sent_ms, sender_id, visible_at, group_id, dedup_key)"
    " VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12) RETURNING seq"
)
_INSERT_MANY = (
    "INSERT INTO conveyor_messages (queue_id, message_id, body, md5_body, attributes,"
    " md5_attributes, system, sent_ms, sender_id, visible_at, group_id, dedup_key)"
    " SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[],"
    " $6::text[], $7::text[], $8::bigint[], $9::text[], $10::bigint[], $11::text[],"
    " $12::text[]) RETURNING seq, message_id"
)
# Standard queues' sends, any number of queues': the rows, and word of the receivable ones
# to other nodes' long polls (one payload per queue in $14) in the same statement, so at
# its commit; the uncorrelated subquery is an InitPlan, evaluated once.
_SEND = (
    f"WITH sent AS ({_INSERT_MANY}) SELECT seq, message_id,"
    " (SELECT count(pg_notify($13, p)) FROM unnest($14::text[]) p) FROM sent"
)
# The same, for a shard (shards.py): only into queues whose row is here, each locked
# against its deletion meanwhile, so that a send from a node that has not yet heard of
# its queue's move to another shard is refused, never stored where no one looks.
_SEND_FENCED = (
    "WITH live AS (SELECT id FROM conveyor_queues WHERE id = ANY($1::bigint[]) FOR KEY SHARE),"
    " sent AS (INSERT INTO conveyor_messages (queue_id, message_id, body, md5_body,"
    " attributes, md5_attributes, system, sent_ms, sender_id, visible_at, group_id, dedup_key)"
    " SELECT u.* FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[],"
    " $6::text[], $7::text[], $8::bigint[], $9::text[], $10::bigint[], $11::text[],"
    " $12::text[]) AS u(queue_id, message_id, body, md5_body, attributes, md5_attributes,"
    " system, sent_ms, sender_id, visible_at, group_id, dedup_key)"
    " WHERE u.queue_id IN (SELECT id FROM live) RETURNING seq, message_id)"
    " SELECT seq, message_id, (SELECT count(pg_notify($13, p)) FROM unnest($14::text[]) p)"
    " FROM sent"
)
_NOTIFY = "SELECT pg_notify($1, $2)"
_RECEIVED = ("visible_at=$1, receive_count=m.receive_count+1,"
             " first_receive_ms=COALESCE(m.first_receive_ms, $2), receipt=$3")
# Standard queues' claims, one per queue, any number of queues in one statement (its own
# transaction): each queue's due, live messages, skipping those other claims hold,
# received at once (pgmq's read); none of a queue that has grouped messages (a fair
# queue's: dealt by group instead). The rows are updated through `seq = ANY(ARRAY(...))`,
# an index condition on the primary key: joined on seq alone, the planner may hash-join
# the claimed few against a scan of the whole table.
_CLAIM = (
    "WITH c AS MATERIALIZED (SELECT r.n, r.now_ms, r.until_ms, r.receipt, x.seq, x.visible_at"
    " FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::int[], $5::bigint[],"
    " $6::text[]) WITH ORDINALITY AS r(queue_id, now_ms, cutoff_ms, lim, until_ms, receipt, n)"
    " CROSS JOIN LATERAL (SELECT seq, visible_at FROM conveyor_messages"
    "  WHERE queue_id=r.queue_id AND visible_at<=r.now_ms AND sent_ms>r.cutoff_ms"
    "  AND NOT EXISTS (SELECT 1 FROM conveyor_messages g WHERE g.queue_id=r.queue_id"
    "   AND g.group_id IS NOT NULL)"
    "  ORDER BY visible_at LIMIT r.lim FOR UPDATE SKIP LOCKED) x)"
    " UPDATE conveyor_messages m SET visible_at=c.until_ms,"
    " receive_count=m.receive_count+1, first_receive_ms=COALESCE(m.first_receive_ms,"
    " c.now_ms), receipt=c.receipt FROM c"
    " WHERE m.seq = ANY(ARRAY(SELECT seq FROM c)) AND m.seq=c.seq"
    f" RETURNING c.n, c.visible_at, {', '.join('m.' + c for c in _COLUMNS.split(', '))}"
)
_CLAIM_SEQS = (
    f"UPDATE conveyor_messages m SET {_RECEIVED} WHERE m.seq = ANY($4::bigint[])"
    f" RETURNING {_COLUMNS}"
)
# A FIFO receive's walk (service/rules.py, FIFO groups), a page at a time after the
# (visible_at, seq) given: visible, live grouped messages, each with its group's head.
_FIFO_WALK = (
    "SELECT m.seq, m.group_id, m.visible_at, (SELECT h.seq FROM conveyor_messages h"
    " WHERE h.queue_id=$1 AND h.group_id=m.group_id AND h.sent_ms>$3 ORDER BY h.seq LIMIT 1)"
    " FROM conveyor_messages m WHERE m.queue_id=$1 AND m.visible_at<=$2 AND m.sent_ms>$3"
    " AND m.group_id IS NOT NULL AND (m.visible_at, m.seq)>($4, $5)"
    " ORDER BY m.visible_at, m.seq LIMIT $6"
)
# The chosen FIFO groups' live messages from their heads on, in order, `$5` at most each.
_FIFO_RUNS = (
    "SELECT g.n, r.seq, r.visible_at FROM unnest($2::text[], $3::bigint[]) WITH ORDINALITY"
    " AS g(group_id, head, n) CROSS JOIN LATERAL (SELECT seq, visible_at FROM"
    " conveyor_messages WHERE queue_id=$1 AND group_id=g.group_id AND seq>=g.head"
    " AND sent_ms>$4 ORDER BY seq LIMIT $5) r ORDER BY g.n, r.seq"
)
_FIFO_WALK_PAGE = 100  # walk rows per round trip


def _groups_in_order(first: str, more: str) -> str:
    """A loose index scan of a queue's ($1) groups in order, one probe each: the CTE g
    (group_id, n) from the first group with `first`, while `more` (of g.n) holds."""
    return (
        "WITH RECURSIVE g(group_id, n) AS ("
        f" (SELECT group_id, 1 FROM conveyor_messages WHERE queue_id=$1 AND {first}"
        "  ORDER BY group_id LIMIT 1)"
        " UNION ALL SELECT (SELECT m.group_id FROM conveyor_messages m WHERE m.queue_id=$1"
        "  AND m.group_id>g.group_id ORDER BY m.group_id LIMIT 1), g.n+1 FROM g"
        f"  WHERE g.group_id IS NOT NULL AND {more})"
    )


# The queue's first $3 + 1 groups with their heads' visible_at: a queue with few groups
# knows before its walk how many are available, and none means an empty receive without a
# walk through the held groups' visible backlog.
_FEW_GROUPS = 16
_FIFO_GROUP_HEADS = _groups_in_order("group_id IS NOT NULL", "g.n<=$3") + (
    " SELECT g.group_id, h.visible_at FROM g LEFT JOIN LATERAL (SELECT visible_at FROM"
    " conveyor_messages WHERE queue_id=$1 AND group_id=g.group_id AND sent_ms>$2"
    " ORDER BY seq LIMIT 1) h ON true WHERE g.group_id IS NOT NULL"
)
_HAS_GROUPS = (
    "SELECT 1 FROM conveyor_messages WHERE queue_id=$1 AND group_id IS NOT NULL LIMIT 1"
)
# A fair receive's groups after $2 in order, at most $6, each with up to $5 of its oldest
# visible, live messages not held elsewhere.
_FAIR_GROUPS = _groups_in_order("group_id>$2", "g.n<$6") + (
    " SELECT g.n, g.group_id, r.seq FROM g CROSS JOIN LATERAL (SELECT seq, visible_at"
    " FROM conveyor_messages WHERE queue_id=$1 AND group_id=g.group_id AND visible_at<=$3"
    " AND sent_ms>$4 ORDER BY visible_at LIMIT $5 FOR UPDATE SKIP LOCKED) r"
    " WHERE g.group_id IS NOT NULL ORDER BY g.n, r.visible_at"
)
_OLDEST = (
    "SELECT seq FROM conveyor_messages WHERE queue_id=$1 AND visible_at<=$2 AND sent_ms>$3"
    " AND NOT seq = ANY($5::bigint[]) ORDER BY visible_at LIMIT $4 FOR UPDATE SKIP LOCKED"
)
_UNGROUPED = (
    "SELECT seq FROM conveyor_messages WHERE queue_id=$1 AND visible_at<=$2 AND sent_ms>$3"
    " AND group_id IS NULL ORDER BY visible_at LIMIT $4 FOR UPDATE SKIP LOCKED"
)
# A group-limited fair receive's groups, each under a transaction-scoped advisory lock
# keyed by (queue, group) in one bigint (queue id << 32, past the FIFO queues' own keys
# and `exclusive`'s int4 hashes), so that one receive at a time, on any node, counts and
# spends a group's room; a group another receive holds is passed over, as SKIP LOCKED
# passes its rows. Only groups won: a later statement's snapshot sees the claims that
# committed before each lock was won.
_LOCK_GROUPS = (
    "SELECT g FROM unnest($2::text[]) g WHERE pg_try_advisory_xact_lock("
    "($1::bigint << 32) + (hashtext(g)::bigint & 4294967295))"
)
# Each locked group's messages in flight (up to the cap $5) and bucket.
_GROUP_ROOMS = (
    "SELECT g, (SELECT count(*) FROM (SELECT 1 FROM conveyor_messages WHERE queue_id=$1"
    " AND group_id=g AND receive_count>0 AND visible_at>$3 AND sent_ms>$4 LIMIT $5) f),"
    " (SELECT tat FROM conveyor_rates WHERE queue_id=$1 AND group_id=g)"
    " FROM unnest($2::text[]) g"
)
_SET_RATES = (
    "INSERT INTO conveyor_rates (queue_id, group_id, tat) SELECT $1, g, t FROM"
    " unnest($2::text[], $3::float8[]) AS r(g, t)"
    " ON CONFLICT (queue_id, group_id) DO UPDATE SET tat=excluded.tat"
)
# The queue's own bucket, locked (made full if it was not kept) for its read and change.
_QUEUE_RATE = (
    "INSERT INTO conveyor_rates (queue_id, group_id, tat) VALUES ($1, '', $2)"
    " ON CONFLICT (queue_id, group_id) DO UPDATE SET tat=conveyor_rates.tat RETURNING tat"
)
# Delete batches, any number of queues': each handle's message if still under its receipt
# (or any receipt, for a call that says so) and in flight after the handle's floor.
_DELETE = (
    "DELETE FROM conveyor_messages m USING unnest($1::bigint[], $2::text[], $3::bigint[],"
    " $4::bigint[], $5::bool[]) AS h(seq, receipt, queue_id, floor, any_receipt)"
    " WHERE m.seq=h.seq AND m.queue_id=h.queue_id AND m.visible_at>h.floor"
    " AND (m.receipt=h.receipt OR (h.any_receipt AND m.receipt IS NOT NULL))"
    " RETURNING m.seq"
)
# Calls that go together in one statement at most (_coalesce.py): bounds its size.
_COALESCE_MAX = 100
_DEAD_LETTER = (
    "UPDATE conveyor_messages m SET queue_id=$1, visible_at=$2,"
    " receive_count=m.receive_count-1, receipt=NULL, dlq_source_arn=$3,"
    " system=CASE WHEN $6 THEN d.system ELSE m.system END"
    " FROM unnest($4::bigint[], $7::text[]) AS d(seq, system)"
    " WHERE m.seq=d.seq AND m.receipt=$5"
    # A dead-letter queue deleted meanwhile takes nothing: they stay, in flight.
    " AND EXISTS (SELECT 1 FROM conveyor_queues WHERE id=$1 FOR KEY SHARE)"
)

_DB_NOW_MS = "SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint"


class PostgresStore:
    """A store on PostgreSQL. `dsn` may carry `?schema=name` to keep its tables apart.
    `listen`: where LISTEN goes when `dsn` is a transaction-pooling PgBouncer (a URL
    straight to PostgreSQL), or POLL for nowhere; None when `dsn` is direct itself."""

    shared = True  # several nodes share this store: caches must expire, sends announce
    # Set by a sharded store (shards.py): sends refuse a queue whose row is not here
    # (QueueElsewhere), at the cost of a row lock on each queue sent to.
    fenced = False

    def __init__(self, dsn: str, pool_size: int = 10, clock: Clock | None = None,
                 statement_timeout_s: float = STATEMENT_TIMEOUT_S,
                 listen: str | None = None) -> None:
        self.dsn, self.schema = _split_schema(dsn)
        self.statement_timeout_s = statement_timeout_s
        self._primary = _primary(self.dsn)
        self.pooled = listen is not None  # no session state on the pool's connections
        self.polling = listen == POLL
        # The LISTEN connection's servers (the pooler itself when polling: probed only).
        self._direct = (self._primary if listen in (None, POLL)
                        else _primary(_split_schema(listen)[0]))
        # NOTIFY channels are database-wide: one per schema, so that nodes of other
        # Conveyor installations in the same database do not wake our long polls.
        self.channel = f"{NOTIFY_CHANNEL}.{self.schema}"[:63] if self.schema else NOTIFY_CHANNEL
        self.pool_size = pool_size
        self.clock = clock or Clock()  # the node's, whose distance to the database's we keep
        self.node_id = os.urandom(4).hex()
        # Receipt tokens: unguessable enough to tell receives apart, without a syscall each.
        self._tokens = random.Random(os.urandom(32))
        # Queue id -> the message group this node's last fair receive visited last.
        self._fair_cursor: dict[int, str] = {}
        self.clock_skew_ms = 0
        self.on_remote_ready: Callable[[int, int], None] = lambda queue_id, count: None
        self.on_remote_missed: Callable[[], None] = lambda: None
        self.on_remote_drain: Callable[[str], None] = lambda worker_id: None
        self._pool: asyncpg.Pool | None = None
        self._listener: asyncpg.Connection | None = None
        self._tasks: list[asyncio.Task[None]] = []
        # PgBouncer refuses settings it does not know at connect, and would not keep them.
        settings = {"search_path": self.schema} if self.schema and not self.pooled else {}
        # How each connection through `dsn` is made: statements cached per session unless
        # pooled (asyncpg parses uncached ones afresh with each execution, in one round trip).
        self._session: dict[str, Any] = {"server_settings": settings,
                                         "statement_cache_size": 0 if self.pooled else 100}
        self._suspect = asyncio.Event()  # a request lost its connection: is the database gone?
        # Set by close(): Python 3.11's wait_for can swallow a cancellation that lands as
        # the awaited event is set, so the watch loop also checks this.
        self._closing = False
        self._gone_since: float | None = None  # monotonic time the outage was noticed
        self._timed_out = False  # a statement went unanswered: _watch looks into why
        self._stall_logged_s: float | None = None
        self._retiring: set[asyncio.Task[None]] = set()  # replaced pools, being closed
        # Standard queues' sends and claims, and delete batches, from concurrent requests,
        # grouped. Claims one per queue: two in one statement would find the same rows.
        # Each flush is then one statement, so one transaction, rolled back whole if the
        # database refuses it: its calls can run again alone (_coalesce.py).
        self._sends = Coalescer(self._send_standard, _COALESCE_MAX, _refused)
        self._deletes = Coalescer(self._delete_many, _COALESCE_MAX, _refused)
        self._claims = Coalescer(self._claim_standard, _COALESCE_MAX, _refused,
                                 key=lambda call: call[0])

    # --- life cycle --------------------------------------------------------------------

    async def open(self) -> PostgresStore:
        try:
            if self.schema:
                conn = await self._primary.connect(**self._session)
                await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {_ident(self.schema)}")
                await conn.close()
            self._pool = await self._new_pool()
            await self._check_pooled_schema()
            await self._migrate()
            await self._measure_skew()
            self._listener = await self._listen()
        except (OSError, asyncpg.PostgresError, *_NOT_PRIMARY) as exc:
            raise StoreError(f"PostgreSQL at {_redact(self.dsn)}: {exc}") from exc
        self._tasks += [asyncio.create_task(self._refresh_skew()),
                        asyncio.create_task(self._watch())]
        if self.polling:
            self._tasks.append(asyncio.create_task(self._poll()))
        return self

    async def _check_pooled_schema(self) -> None:
        """Behind a pooler the schema cannot be given per connection: the pooler's must be
        it, or the tables would go to (and be looked for in) another one."""
        if not (self.pooled and self.schema):
            return
        async with self._conn() as db:
            current = await db.fetchval("SELECT current_schema()")
        if current != self.schema:
            raise StoreError(
                f"PostgreSQL at {_redact(self.dsn)}: the schema is {current!r}, not"
                f" {self.schema!r}: behind PgBouncer, set it in the pooler's database entry"
                f" (connect_query='SET search_path={self.schema}')")

    async def _new_pool(self) -> asyncpg.Pool:
        # min_size=0: asyncpg keeps a floor of connections by reconnecting in the
        # background, and logs a traceback for each failed try while the database is
        # down. Connections are made as requests need them instead; _watch follows
        # the database's health.
        return await asyncpg.create_pool(
            self.dsn, connect=self._primary.connect, min_size=0, max_size=self.pool_size,
            command_timeout=self.statement_timeout_s, reset=_keep_session,
            init=None if self.pooled else _plan_once, **self._session)

    async def close(self) -> None:
        self._closing = True
        self._suspect.set()  # wakes the watch loop, to find _closing
        for task in [*self._tasks, *self._retiring]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._retiring, return_exceptions=True)
        if self._listener is not None:
            with contextlib.suppress(Exception):
                await self._listener.close()
        if self._pool is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._pool.close(), 5)

    def outage(self) -> str | None:
        if self._gone_since is None:
            return None
        return (f"PostgreSQL unreachable for {self.clock.monotonic_s() - self._gone_since:.0f} s;"
                " reconnecting")

    def gauges(self) -> dict[str, tuple[str, float]]:
        return {}

    def counters(self) -> dict[str, tuple[str, float]]:
        return {}

    async def _migrate(self) -> None:
        # A connection of its own: building an index on a large table may take longer
        # than the pool's statement bound.
        db = await self._primary.connect(**self._session)
        try:
            await self._migrate_on(db)
        finally:
            await db.close()

    async def _migrate_on(self, db: asyncpg.Connection) -> None:
        async with db.transaction():
            await db.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
            await db.execute("CREATE TABLE IF NOT EXISTS conveyor_schema"
                             " (version INTEGER NOT NULL)")
            version = await db.fetchval("SELECT max(version) FROM conveyor_schema") or 0
            if version > SCHEMA_VERSION:
                raise StoreError(f"the database holds Conveyor schema version {version}; this "
                                 f"Conveyor understands up to {SCHEMA_VERSION}. Upgrade Conveyor.")
            for number, statements in MIGRATIONS:
                if number > version:
                    await db.execute(statements)
                    await db.execute("INSERT INTO conveyor_schema VALUES ($1)", number)
                    log.info("applied schema migration %d", number)

    async def _measure_skew(self) -> None:
        """Offset of the database clock from ours, so every node keeps the database's time."""
        async with self._conn() as db:
            before = self.clock.local_ms()
            db_now = await db.fetchval(_DB_NOW_MS)
            after = self.clock.local_ms()
        self.clock_skew_ms = db_now - (before + after) // 2

    async def _refresh_skew(self) -> None:
        while True:
            await asyncio.sleep(SKEW_REFRESH_S)
            with contextlib.suppress(Exception):
                await self._measure_skew()

    # --- the LISTEN connection, and the database's comings and goings ------------------

    async def _listen(self) -> asyncpg.Connection:
        """A connection subscribed to this store's channel (unless polling: then only
        probed); its loss sets `_suspect`."""
        conn = await self._direct.connect(**(self._session if self.polling else {}))
        try:
            conn.add_termination_listener(lambda _conn: self._suspect.set())
            if not self.polling:
                await conn.add_listener(self.channel, self._on_notify)
        except BaseException:
            conn.terminate()
            raise
        return conn

    async def _watch(self) -> None:
        """Keep the LISTEN connection up, whatever happens to the database.

        A lost connection is re-established at once, then with back-off; once it is back,
        every parked long poll is woken, since notifications sent meanwhile were missed.
        Requests that lose their connection set `_suspect`, so an outage is noticed even
        before the LISTEN connection's own loss is.
        """
        delay_s = RECONNECT_FIRST_S
        while not self._closing:
            try:
                if self._listener is None or self._listener.is_closed():
                    self._listener = await self._listen()
                    self._suspect.clear()
                    await self._follow_primary()
                    self._back()
                    self.on_remote_missed()
                delay_s = RECONNECT_FIRST_S
                await self._until_lost(self._listener)
            except _DRIVER_ERRORS as exc:
                self._gone(exc)
                await asyncio.sleep(delay_s)
                delay_s = min(delay_s * 2, RECONNECT_MAX_S)
            except Exception:  # a supervisor loop: log and carry on
                log.exception("watching PostgreSQL at %s failed", _redact(self.dsn))
                await asyncio.sleep(RECONNECT_MAX_S)

    async def _poll(self) -> None:
        """Without LISTEN: every parked long poll looks at its queue now and then."""
        while True:
            await asyncio.sleep(POLL_EVERY_S)
            if self._gone_since is None:  # after an outage, _watch wakes them itself
                self.on_remote_missed()

    async def _until_lost(self, listener: asyncpg.Connection) -> None:
        """Return when `listener` closes; raise if the database stops answering on it."""
        while not listener.is_closed():
            with contextlib.suppress(TimeoutError):  # else probe all the same, now and then
                await asyncio.wait_for(self._suspect.wait(), PROBE_EVERY_S)
            self._suspect.clear()
            if listener.is_closed() or self._closing:
                return
            try:  # a request lost its connection: is the primary still there, and this one?
                if await _answer_within(listener, listener.fetchval(_PROBE), PROBE_TIMEOUT_S):
                    raise asyncpg.ReadOnlySQLTransactionError(
                        "the server is no longer the primary")
                if self._timed_out:
                    self._timed_out = False
                    self._explain_stall(await _answer_within(
                        listener, listener.fetchval(_SYNC_STALL), PROBE_TIMEOUT_S))
            except Exception:
                listener.terminate()
                raise

    async def _retire(self, pool: asyncpg.Pool) -> None:
        """Close a replaced pool once its requests are done (each within the statement
        bound); what is left then (connections to a server gone silent) is terminated."""
        try:
            await asyncio.wait_for(pool.close(), self.statement_timeout_s + PROBE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - whatever it was, the pool is dropped
            pool.terminate()

    def _explain_stall(self, standby_names: str | None) -> None:
        """Say why statements go unanswered on a primary that answers the probe, when it is
        the usual reason; at most every STALL_LOG_EVERY_S."""
        now_s = self.clock.monotonic_s()
        if standby_names is None or (self._stall_logged_s is not None
                                     and now_s - self._stall_logged_s < STALL_LOG_EVERY_S):
            return
        self._stall_logged_s = now_s
        log.error("PostgreSQL at %s cannot commit: its commits wait for a synchronous standby"
                  " (synchronous_standby_names = '%s') and none is connected; writes are"
                  " answered ServiceUnavailable after %.0f s until one is, or the setting is"
                  " relaxed", _redact(self.dsn), standby_names, self.statement_timeout_s)

    async def _follow_primary(self) -> None:
        """After an outage, with the LISTEN connection on the primary again: replace the
        pool (a connection left on a server that survived a failover as a standby or a
        fenced old primary would fail its writes; one on a server gone silent would wait
        for its answer until the statement bound), and measure the clock afresh (the new
        primary may be another machine). The old pool is closed once the requests on it
        are done: asyncpg fails a query whose connection is terminated under it with
        AttributeErrors, not with its own errors."""
        old, self._pool = self._pool, await self._new_pool()
        if old is not None:
            self._retiring.add(task := asyncio.create_task(self._retire(old)))
            task.add_done_callback(self._retiring.discard)
        with contextlib.suppress(Exception):  # measured again in SKEW_REFRESH_S anyway
            await self._measure_skew()

    def _gone(self, exc: BaseException) -> None:
        if self._gone_since is None:
            self._gone_since = self.clock.monotonic_s()
            log.error("PostgreSQL at %s is unreachable (%s); reconnecting", _redact(self.dsn),
                      exc)

    def _back(self) -> None:
        if self._gone_since is not None:
            log.warning("PostgreSQL at %s is reachable again after %.1f s", _redact(self.dsn),
                        self.clock.monotonic_s() - self._gone_since)
            self._gone_since = None

    def _on_notify(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        """`node:queue_id:count` (announce) or `node:drain:worker_id` (announce_drain;
        a worker id may hold colons itself)."""
        node, what, rest = payload.split(":", 2)
        if node == self.node_id:
            return
        if what == _DRAIN:
            self.on_remote_drain(rest)
        else:
            self.on_remote_ready(int(what), int(rest))

    async def announce(self, queue_id: int, count: int) -> None:
        """Tell long polls on other nodes that `count` messages became receivable."""
        async with self._conn() as db:
            await db.execute(_NOTIFY, self.channel, self._payload(queue_id, count))

    def _payload(self, queue_id: int, count: int) -> str:
        """A notification's payload: read back by _on_notify."""
        return f"{self.node_id}:{queue_id}:{count}"

    async def announce_drain(self, worker_id: str) -> None:
        """Tell other nodes that a drain was asked of the worker (it may poll there)."""
        async with self._conn() as db:
            await db.execute(_NOTIFY, self.channel, f"{self.node_id}:{_DRAIN}:{worker_id}")

    @contextlib.asynccontextmanager
    async def exclusive(self, name: str) -> AsyncIterator[bool]:
        """A transaction-scoped advisory lock on `name`, held for the block if won.
        Advisory locks are database-wide: the name is qualified with the schema, or the
        nodes of another installation in the same database would take our turns."""
        async with self._tx() as db:
            yield await db.fetchval("SELECT pg_try_advisory_xact_lock(hashtext($1))",
                                    f"{self.schema or ''}:{name}")

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection; the driver's errors come out as StoreError, and as
        StoreUnavailable when there is no connection to be had or it broke under us."""
        pool = self._pool  # the one to give it back to, should _follow_primary replace it
        assert pool is not None, "open() the store first"
        try:
            conn = await pool.acquire()
        except _DRIVER_ERRORS as exc:
            if pool is self._pool or self._closing:
                raise self._translate(exc, None, pool) from exc
            # Replaced while this call waited for a connection (an outage's end): nothing
            # was done on the old one, so the call goes on with the new pool.
            pool = self._pool
            try:
                conn = await pool.acquire()
            except _DRIVER_ERRORS as again:
                raise self._translate(again, None, pool) from again
        try:
            yield conn
        except _DRIVER_ERRORS as exc:
            # InternalClientError: the driver lost track of the connection, as when the
            # server's goodbye ("terminating connection") came while it sat idle in the pool.
            if isinstance(exc, asyncpg.InternalClientError):
                conn.terminate()
            raise self._translate(exc, conn, pool) from exc
        finally:
            try:
                await pool.release(conn)
            except _DRIVER_ERRORS:  # resetting it failed: the pool drops it, and our work
                self._suspect.set()  # (if the block succeeded) is done all the same

    def _translate(self, exc: Exception, conn: asyncpg.Connection | None,
                   pool: asyncpg.Pool | None = None) -> StoreError:
        if self._closing or (pool is not None and pool is not self._pool):
            # the node is stopping, or the pool was replaced under it (an outage's end)
            return StoreUnavailable(f"PostgreSQL unavailable: {exc}")
        if isinstance(exc, _NOT_PRIMARY) and conn is not None:
            conn.terminate()  # its replacement goes to whichever server is the primary now
        if isinstance(exc, TimeoutError):  # the statement bound: asyncpg cancelled it
            self._timed_out = True
        if isinstance(exc, _UNREACHABLE + _NOT_PRIMARY) or (conn is not None and _closed(conn)):
            self._suspect.set()  # _watch finds out whether the database itself is gone
            return StoreUnavailable(f"PostgreSQL unavailable: {exc}")
        return StoreError(f"PostgreSQL: {exc}")

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[asyncpg.Connection]:
        async with self._conn() as conn, conn.transaction():
            yield conn

    # --- queues --------------------------------------------------------------------------

    async def create_queue(self, region: str, name: str, attributes: dict[str, str],
                           tags: dict[str, str], now_s: int,
                           queue_id: int | None = None) -> QueueRecord:
        """As the Store's; a sharded store gives the id, handed out by its catalog."""
        async with self._tx() as db:
            await db.execute(
                "INSERT INTO conveyor_queues (id, region, name, attributes, tags, created_s,"
                " modified_s) VALUES (COALESCE($6, nextval(pg_get_serial_sequence("
                "'conveyor_queues', 'id'))), $1, $2, $3::jsonb, $4::jsonb, $5, $5)"
                " ON CONFLICT (region, name) DO NOTHING",
                region, name, _json(attributes), _json(tags), now_s, queue_id)
            await db.execute("DELETE FROM conveyor_deleted_queues WHERE region=$1 AND name=$2",
                             region, name)
            row = await db.fetchrow("SELECT * FROM conveyor_queues WHERE region=$1 AND name=$2",
                                    region, name)
        return _queue(row)

    async def get_queue(self, region: str, name: str) -> QueueRecord | None:
        async with self._conn() as db:
            row = await db.fetchrow("SELECT * FROM conveyor_queues WHERE region=$1 AND name=$2",
                                    region, name)
        return _queue(row) if row else None

    async def get_queue_by_id(self, queue_id: int) -> QueueRecord | None:
        async with self._conn() as db:
            row = await db.fetchrow("SELECT * FROM conveyor_queues WHERE id=$1", queue_id)
        return _queue(row) if row else None

    async def list_queues(self, region: str | None, prefix: str) -> list[QueueRecord]:
        async with self._conn() as db:
            rows = await db.fetch(
                "SELECT * FROM conveyor_queues WHERE ($1::text IS NULL OR region=$1)"
                " AND starts_with(name, $2) ORDER BY name", region, prefix)
        return [_queue(r) for r in rows]

    async def update_queue(self, queue: QueueRecord) -> None:
        async with self._tx() as db:
            await db.execute(
                "UPDATE conveyor_queues SET attributes=$1::jsonb, tags=$2::jsonb, modified_s=$3,"
                " purged_s=$4 WHERE id=$5", _json(queue.attributes), _json(queue.tags),
                queue.modified_s, queue.purged_s, queue.id)

    async def delete_queue(self, queue: QueueRecord, now_s: int,
                           ending: QueueEnding | None = None, *,
                           note_deleted: bool = True) -> None:
        """As the Store's; without `note_deleted` (a queue moved to another shard) the
        name is not noted as deleted."""
        ending = ending or QueueEnding()
        async with self._tx() as db:
            # The queue's row first: saves of its move tasks and moves into it, which lock
            # it FOR KEY SHARE, then wait for this transaction and find it gone.
            await db.execute("DELETE FROM conveyor_queues WHERE id=$1", queue.id)
            for table, column in (("conveyor_messages", "queue_id"),
                                  ("conveyor_dedup", "queue_id"),
                                  ("conveyor_rates", "queue_id"),
                                  ("conveyor_move_tasks", "source_queue_id"),
                                  ("conveyor_activity", "queue_id")):
                await db.execute(f"DELETE FROM {table} WHERE {column}=$1", queue.id)
            if ending.failed_tasks:
                await db.executemany(
                    "UPDATE conveyor_move_tasks SET record=$2::jsonb WHERE handle=$1",
                    [(t.handle, _json(asdict(t))) for t in ending.failed_tasks])
            await db.execute(
                "DELETE FROM conveyor_leases WHERE region=$1 AND (name = ANY($2::text[])"
                " OR EXISTS (SELECT 1 FROM unnest($3::text[]) p WHERE starts_with(name, p)))",
                queue.region, ending.lease_names, ending.lease_prefixes)
            await db.execute("DELETE FROM conveyor_workers WHERE worker_id = ANY($1::text[])",
                             ending.worker_ids)
            if not note_deleted:
                return
            await db.execute(
                "INSERT INTO conveyor_deleted_queues VALUES ($1, $2, $3) ON CONFLICT (region,"
                " name) DO UPDATE SET deleted_s=EXCLUDED.deleted_s", queue.region, queue.name,
                now_s)

    async def deleted_at(self, region: str, name: str) -> int | None:
        async with self._conn() as db:
            return await db.fetchval("SELECT deleted_s FROM conveyor_deleted_queues WHERE"
                                     " region=$1 AND name=$2", region, name)

    # --- messages --------------------------------------------------------------------------

    async def send(self, queue: QueueRecord, messages: list[NewMessage], now_ms: int,
                   dedup_ms: int) -> list[SentMessage]:
        if not messages:  # every entry of a batch failed its checks
            return []
        if not queue.fifo:  # one statement with other requests' sends (_coalesce.py)
            sent = await self._sends.submit((queue, messages, now_ms))
            if sent is None:
                raise QueueElsewhere(f"queue {queue.id} is not in this store")
            return sent
        sent: list[SentMessage] = []
        ready = 0
        async with self._tx() as db:
            await db.execute("SELECT pg_advisory_xact_lock($1)", queue.id)  # commit order
            if self.fenced and not await db.fetchval(
                    "SELECT 1 FROM conveyor_queues WHERE id=$1 FOR KEY SHARE", queue.id):
                raise QueueElsewhere(f"queue {queue.id} is not in this store")
            for m in messages:
                if m.dedup_key is not None:
                    dup = await db.fetchrow(
                        "SELECT message_id, seq FROM conveyor_dedup WHERE queue_id=$1 AND"
                        " dedup_key=$2 AND expires_ms>$3", queue.id, m.dedup_key, now_ms)
                    if dup:
                        sent.append(SentMessage(dup["message_id"], dup["seq"], duplicate=True))
                        continue
                seq = await db.fetchval(_INSERT, *_insert_row(queue, m))
                if m.dedup_key is not None:
                    await db.execute(
                        "INSERT INTO conveyor_dedup VALUES ($1, $2, $3, $4, $5) ON CONFLICT"
                        " (queue_id, dedup_key) DO UPDATE SET message_id=EXCLUDED.message_id,"
                        " seq=EXCLUDED.seq, expires_ms=EXCLUDED.expires_ms",
                        queue.id, m.dedup_key, m.message_id, seq, now_ms + dedup_ms)
                sent.append(SentMessage(m.message_id, seq))
                ready += m.visible_at_ms <= now_ms
            if ready:  # delivered at commit, with the messages
                await db.execute(_NOTIFY, self.channel, self._payload(queue.id, ready))
        return sent

    async def _send_standard(self, calls: list[tuple[QueueRecord, list[NewMessage], int]]
                             ) -> list[list[SentMessage] | None]:
        """Sends to standard queues, one statement; to each call its messages' seqs (None:
        fenced, and its queue is not here)."""
        rows = [_insert_row(queue, m) for queue, messages, _ in calls for m in messages]
        ready: dict[int, int] = {}
        for queue, messages, now_ms in calls:
            ready[queue.id] = ready.get(queue.id, 0) + sum(m.visible_at_ms <= now_ms
                                                           for m in messages)
        payloads = [self._payload(queue_id, n) for queue_id, n in ready.items() if n]
        async with self._conn() as db:
            seqs = await db.fetch(_SEND_FENCED if self.fenced else _SEND,
                                  *[list(column) for column in zip(*rows, strict=True)],
                                  self.channel, payloads)
        by_id = {r[1]: r[0] for r in seqs}
        return [[SentMessage(m.message_id, by_id[m.message_id]) for m in messages]
                if messages[0].message_id in by_id else None for _, messages, _ in calls]

    @contextlib.asynccontextmanager
    async def claim(self, queue: QueueRecord, max_messages: int, now_ms: int, cutoff_ms: int,
                    visible_at_ms: int, picking: Picking) -> AsyncIterator[_Claim]:
        """A standard queue: one statement, one round trip (what follows it, rarely, is
        guarded by the claim's receipt); when it found nothing because the queue has
        grouped messages, a transaction that deals them fairly. A FIFO queue: a
        transaction under the queue's advisory lock, so that groups are handed out in
        commit order across nodes."""
        receipt = f"{self._tokens.getrandbits(64):016x}"
        limits = GroupLimits(picking)
        if not queue.fifo:  # one statement with other requests' claims (_coalesce.py)
            taken = await self._claims.submit((queue.id, now_ms, cutoff_ms, max_messages,
                                               visible_at_ms, receipt))
            if taken:
                yield _SharedClaim(self, receipt, taken)
                return
        async with self._conn() as db:
            if not queue.fifo and not await db.fetchval(_HAS_GROUPS, queue.id):
                yield _Claim(db, receipt, [])
                return
            async with db.transaction():
                if queue.fifo:
                    await db.execute("SELECT pg_advisory_xact_lock($1)", queue.id)
                    seqs = await self._fifo_candidates(db, queue.id, max_messages, now_ms,
                                                       cutoff_ms, picking)
                else:  # the group walk's generic plan filters the ready index by group
                    await db.execute("SET LOCAL plan_cache_mode TO force_custom_plan")
                    seqs = await self._fair_candidates(db, queue.id, max_messages, now_ms,
                                                       cutoff_ms, picking, limits)
                rows = await db.fetch(_CLAIM_SEQS, visible_at_ms, now_ms, receipt,
                                      seqs) if seqs else []
                order = {seq: i for i, seq in enumerate(seqs)}
                claim = _Claim(db, receipt, sorted((StoredMessage(*r) for r in rows),
                                                   key=lambda m: order[m.seq]))
                claim.retry_ms = limits.retry_ms
                yield claim

    async def _claim_standard(self, calls: list[tuple[int, int, int, int, int, str]]
                              ) -> list[list[StoredMessage]]:
        """Claims on standard queues, one per queue, (queue id, now, cutoff, limit, until,
        receipt) each, in one statement. To each call its messages, the longest due first."""
        taken: list[list[StoredMessage]] = [[] for _ in calls]
        async with self._conn() as db:
            rows = await db.fetch(_CLAIM, *[list(c) for c in zip(*calls, strict=True)])
        for row in sorted(rows, key=lambda r: (r[0], r[1], r[2])):
            taken[row[0] - 1].append(StoredMessage(*row[2:]))
        return taken

    async def _fifo_candidates(self, db: asyncpg.Connection, queue_id: int, limit: int,
                               now_ms: int, cutoff_ms: int, picking: Picking) -> list[int]:
        """The seqs a FIFO receive takes, in order (picking.fifo_groups, .fifo_run): the
        walk a page at a time until the rules have their groups, then their runs at once."""
        groups: list[tuple[str, int]] = []
        wanted = limit  # groups: each gives at least one message
        heads = await db.fetch(_FIFO_GROUP_HEADS, queue_id, cutoff_ms, _FEW_GROUPS)
        if len(heads) <= _FEW_GROUPS:  # every group known: stop once each available one is
            wanted = min(limit, sum(1 for h in heads if h[1] is not None and h[1] <= now_ms))
            if not wanted:
                return []
        after, walked = (-1, -1), 0
        while len(groups) < wanted and walked < picking.fifo_scan:
            page = min(_FIFO_WALK_PAGE, picking.fifo_scan - walked)
            rows = await db.fetch(_FIFO_WALK, queue_id, now_ms, cutoff_ms, *after, page)
            known = {group for group, _ in groups}
            groups += [g for g in picking.fifo_groups([tuple(r) for r in rows], limit)
                       if g[0] not in known][:wanted - len(groups)]
            if len(rows) < page:
                break
            after, walked = (rows[-1][2], rows[-1][0]), walked + len(rows)
        if not groups:
            return []
        runs: dict[int, list[tuple[int, int]]] = {}
        for n, seq, visible_at in await db.fetch(_FIFO_RUNS, queue_id, [g for g, _ in groups],
                                                 [h for _, h in groups], cutoff_ms, limit):
            runs.setdefault(n, []).append((seq, visible_at))
        seqs: list[int] = []
        for n in range(1, len(groups) + 1):
            seqs += picking.fifo_run(runs.get(n, []), now_ms)[:limit - len(seqs)]
            if len(seqs) == limit:
                break
        return seqs

    async def _fair_candidates(self, db: asyncpg.Connection, queue_id: int, limit: int,
                               now_ms: int, cutoff_ms: int, picking: Picking,
                               limits: GroupLimits) -> list[int]:
        """The seqs a receive on a standard queue with message groups takes, locked:
        dealt round-robin from the groups after the last one this node visited, then the
        queue's oldest visible messages (picking.fair_deal)."""
        last = self._fair_cursor.get(queue_id, "")
        runs: dict[str, list[int]] = {}
        for start in (last, "") if last else ("",):
            for _, group, seq in await db.fetch(_FAIR_GROUPS, queue_id, start, now_ms,
                                                cutoff_ms, limit, picking.fair_groups):
                if start == "" and last and group > last:
                    break  # round again, as far as where this walk began
                runs.setdefault(group, []).append(seq)
            if len(runs) >= limit:
                break
        chosen = list(runs)[:limit]
        if chosen:
            self._fair_cursor[queue_id] = chosen[-1]
        if picking.group_limited:
            return await self._limited_deal(db, queue_id, [(g, runs[g]) for g in chosen],
                                            limit, now_ms, cutoff_ms, picking, limits)
        seqs = picking.fair_deal([runs[g] for g in chosen], limit)
        if len(seqs) < limit:
            seqs += [r[0] for r in await db.fetch(_OLDEST, queue_id, now_ms, cutoff_ms,
                                                  limit - len(seqs), seqs)]
        return seqs

    @staticmethod
    async def _limited_deal(db: asyncpg.Connection, queue_id: int,
                            runs: list[tuple[str, list[int]]], limit: int, now_ms: int,
                            cutoff_ms: int, picking: Picking, limits: GroupLimits
                            ) -> list[int]:
        """The fair deal under group limits: each group this receive locks gives at most
        its room and has its bucket spent by what it gave; the fill is ungrouped."""
        locked = await db.fetch(_LOCK_GROUPS, queue_id, [g for g, _ in runs])
        won = {r[0] for r in locked}
        rooms = {g: limits.note(g, in_flight, tat, now_ms, limit) for g, in_flight, tat in
                 await db.fetch(_GROUP_ROOMS, queue_id, list(won), now_ms, cutoff_ms,
                                max(picking.group_cap, 1))}
        dealt = []
        for group, run in runs:
            if rooms.get(group):
                dealt.append(run[:rooms[group]])
                limits.dealt(group, dealt[-1])
        seqs = picking.fair_deal(dealt, limit)
        spent = limits.spent(seqs, now_ms)
        if spent:
            await db.execute(_SET_RATES, queue_id, [g for g, _ in spent],
                             [t for _, t in spent])
        if len(seqs) < limit:
            seqs += [r[0] for r in await db.fetch(_UNGROUPED, queue_id, now_ms, cutoff_ms,
                                                  limit - len(seqs))]
        return seqs

    async def take_tokens(self, queue: QueueRecord, wanted: int, now_ms: int,
                          rate: Bucket) -> tuple[int, int]:
        async with self._tx() as db:
            tat = await db.fetchval(_QUEUE_RATE, queue.id, float(now_ms))
            taken = wanted if wanted < 0 else min(wanted, rate.room(tat, now_ms))
            if taken:
                tat = rate.spend(tat, now_ms, taken)
                await db.execute("UPDATE conveyor_rates SET tat=$2 WHERE queue_id=$1"
                                 " AND group_id=''", queue.id, tat)
            return taken, rate.ready_ms(tat, now_ms, wanted)

    async def delete(self, queue: QueueRecord, handles: list[Handle],
                     in_flight_after_ms: int | None = None, *,
                     any_receipt: bool = False) -> list[str]:
        """One statement with other requests' delete batches (_coalesce.py); a second
        only when some handle deleted nothing."""
        if not handles:
            return []
        floor = -1 if in_flight_after_ms is None else in_flight_after_ms
        deleted = await self._deletes.submit((queue.id, handles, floor, any_receipt))
        missing = [h.seq for h in handles if h.seq not in deleted]
        if not missing:
            return [OK] * len(handles)
        async with self._conn() as db:
            present = {r[0] for r in await db.fetch(
                "SELECT seq FROM conveyor_messages WHERE seq = ANY($1::bigint[]) AND"
                " queue_id=$2", missing, queue.id)}
        return [STALE if h.seq in present else OK for h in handles]

    async def _delete_many(self, calls: list[tuple[int, list[Handle], int, bool]]
                           ) -> list[set[int]]:
        """Delete batches, one statement; to each call the seqs it deleted."""
        entries = [(h.seq, h.token, queue_id, floor, any_receipt)
                   for queue_id, handles, floor, any_receipt in calls for h in handles]
        async with self._conn() as db:
            deleted = {r[0] for r in await db.fetch(
                _DELETE, *[list(column) for column in zip(*entries, strict=True)])}
        return [{h.seq for h in handles if h.seq in deleted} for _, handles, _, _ in calls]

    async def drop(self, queue: QueueRecord, seqs: list[int]) -> list[int]:
        async with self._conn() as db:
            return [r[0] for r in await db.fetch(
                "DELETE FROM conveyor_messages WHERE seq = ANY($1::bigint[]) AND queue_id=$2"
                " AND receipt IS NULL RETURNING seq", seqs, queue.id)]

    @contextlib.asynccontextmanager
    async def hold(self, queue: QueueRecord, seqs: list[int]) -> AsyncIterator[_Held]:
        async with self._tx() as db:
            rows = await db.fetch("SELECT seq, receipt, visible_at FROM conveyor_messages"
                                  " WHERE seq = ANY($1::bigint[]) AND queue_id=$2 FOR UPDATE",
                                  seqs, queue.id)
            yield _Held(db, {r[0]: (r[1], r[2]) for r in rows})

    @contextlib.asynccontextmanager
    async def amend(self, queue: QueueRecord, seqs: list[int]) -> AsyncIterator[_Amend]:
        async with self._tx() as db:
            rows = await db.fetch("SELECT seq, queue_id, receipt, dlq_source_arn, system FROM"
                                  " conveyor_messages WHERE seq = ANY($1::bigint[]) ORDER BY seq"
                                  " FOR UPDATE", seqs)  # in one order: no deadlock
            yield _Amend(db, {r[0]: Annotated(r[1], r[2], r[3], r[4]) for r in rows})

    async def find_message(self, queue: QueueRecord, message_id: str,
                           scan_limit: int) -> StoredMessage | None:
        async with self._conn() as db:
            row = await db.fetchrow(
                f"SELECT {_COLUMNS} FROM conveyor_messages WHERE seq = (SELECT seq FROM"
                " (SELECT seq, message_id FROM conveyor_messages WHERE queue_id=$1"
                " ORDER BY sent_ms LIMIT $2) s WHERE s.message_id=$3 LIMIT 1)",
                queue.id, scan_limit, message_id)
        return StoredMessage(*row) if row is not None else None

    async def purge(self, queue: QueueRecord, now_ms: int) -> None:
        async with self._tx() as db:
            await db.execute("DELETE FROM conveyor_messages WHERE queue_id=$1 AND sent_ms<=$2",
                             queue.id, now_ms)
            await db.execute("UPDATE conveyor_queues SET purged_s=$1 WHERE id=$2",
                             now_ms // 1000, queue.id)
            await db.execute("DELETE FROM conveyor_dedup WHERE queue_id=$1", queue.id)

    async def tally(self, queue: QueueRecord, now_ms: int, cutoff_ms: int) -> Tally:
        async with self._conn() as db:
            rows = await db.fetch(
                "SELECT visible_at<=$1, receive_count>0, count(*) FROM conveyor_messages"
                " WHERE queue_id=$2 AND sent_ms>$3 GROUP BY 1, 2", now_ms, queue.id, cutoff_ms)
        return {(r[0], r[1]): r[2] for r in rows}

    async def peek(self, queue: QueueRecord, limit: int, cutoff_ms: int,
                   after: tuple[int, int] | None = None) -> list[tuple[StoredMessage, int]]:
        # Off conveyor_messages_ready (queue_id, visible_at); ties of visible_at are put in
        # seq order by an incremental sort, a few rows at a time.
        visible_at, seq = after if after is not None else (-1, -1)
        async with self._conn() as db:
            rows = await db.fetch(
                f"SELECT {_COLUMNS}, visible_at FROM conveyor_messages WHERE queue_id=$1"
                " AND sent_ms>$2 AND visible_at>=$3 AND (visible_at, seq) > ($3, $4)"
                " ORDER BY visible_at, seq LIMIT $5", queue.id, cutoff_ms, visible_at, seq,
                limit)
        return [(StoredMessage(*row[:-1]), row[-1]) for row in rows]

    async def next_visible_ms(self, queue: QueueRecord, now_ms: int) -> int | None:
        async with self._conn() as db:
            return await db.fetchval("SELECT min(visible_at) FROM conveyor_messages WHERE"
                                     " queue_id=$1 AND visible_at>$2", queue.id, now_ms)

    async def expire(self, cutoffs: dict[int, int], now_ms: int) -> int:
        async with self._tx() as db:
            status = await db.execute(
                "DELETE FROM conveyor_messages m USING unnest($1::bigint[], $2::bigint[])"
                " AS c(queue_id, cutoff) WHERE m.queue_id=c.queue_id AND m.sent_ms<=c.cutoff",
                list(cutoffs), list(cutoffs.values()))
            await db.execute("DELETE FROM conveyor_dedup WHERE expires_ms<=$1", now_ms)
            await db.execute("DELETE FROM conveyor_rates WHERE tat<=$1", now_ms)  # full
        return int(status.split()[-1])

    # --- move tasks --------------------------------------------------------------------------

    async def movable(self, queue: QueueRecord, limit: int, now_ms: int,
                      cutoff_ms: int) -> list[StoredMessage]:
        async with self._conn() as db:
            rows = await db.fetch(
                f"SELECT {_COLUMNS} FROM conveyor_messages WHERE queue_id=$1 AND visible_at<=$2"
                " AND sent_ms>$3 ORDER BY sent_ms, seq LIMIT $4", queue.id, now_ms, cutoff_ms,
                limit)
        return [StoredMessage(*r) for r in rows]

    async def dead_letter_origins(self, queue: QueueRecord) -> list[str]:
        async with self._conn() as db:
            rows = await db.fetch("SELECT DISTINCT dlq_source_arn FROM conveyor_messages WHERE"
                                  " queue_id=$1 AND dlq_source_arn IS NOT NULL", queue.id)
        return [r[0] for r in rows]

    async def move(self, queue: QueueRecord, moves: list[tuple[int, int]], now_ms: int) -> int:
        async with self._conn() as db:
            # Only into queues that exist, locked against their deletion meanwhile.
            rows = await db.fetch(
                "WITH live AS (SELECT id FROM conveyor_queues WHERE id = ANY($2::bigint[])"
                " FOR KEY SHARE) UPDATE conveyor_messages m SET queue_id=mv.dest, visible_at=$3,"
                " receive_count=0, first_receive_ms=NULL, receipt=NULL, dlq_source_arn=NULL"
                " FROM unnest($1::bigint[], $2::bigint[]) AS mv(seq, dest)"
                " WHERE m.seq=mv.seq AND m.queue_id=$4 AND m.visible_at<=$3"
                " AND mv.dest IN (SELECT id FROM live) RETURNING m.seq",
                [s for s, _ in moves], [d for _, d in moves], now_ms, queue.id)
        return len(rows)

    async def save_move_task(self, task: MoveTaskRecord) -> None:
        async with self._tx() as db:
            # Only while its source exists, locked against its deletion meanwhile.
            await db.execute(
                "INSERT INTO conveyor_move_tasks SELECT $1, $2, $3::jsonb WHERE EXISTS"
                " (SELECT 1 FROM conveyor_queues WHERE id=$2 FOR KEY SHARE) ON CONFLICT (handle)"
                " DO UPDATE SET record=EXCLUDED.record", task.handle, task.source_queue_id,
                _json(asdict(task)))

    async def lease_acquire(self, region: str, name: str, holder: str, ttl_ms: int,
                            now_ms: int) -> LeaseRecord | None:
        async with self._conn() as db:
            row = await db.fetchrow(
                "INSERT INTO conveyor_leases AS l VALUES ($1, $2, $3, 1, $4, '')"
                " ON CONFLICT (region, name) DO UPDATE SET holder=EXCLUDED.holder,"
                " version=l.version+1, expires_ms=EXCLUDED.expires_ms"
                " WHERE l.holder=EXCLUDED.holder OR l.expires_ms<=$5"
                f" RETURNING {_LEASE_COLUMNS}", region, name, holder, now_ms + ttl_ms, now_ms)
        return LeaseRecord(*row) if row else None

    async def lease_update(self, region: str, name: str, holder: str, version: int,
                           data: str, ttl_ms: int, now_ms: int) -> LeaseRecord | None:
        async with self._conn() as db:
            row = await db.fetchrow(
                "UPDATE conveyor_leases SET version=version+1, expires_ms=$1, data=$2"
                " WHERE region=$3 AND name=$4 AND holder=$5 AND version=$6 AND expires_ms>$7"
                f" RETURNING {_LEASE_COLUMNS}", now_ms + ttl_ms, data, region, name, holder,
                version, now_ms)
        return LeaseRecord(*row) if row else None

    async def lease_release(self, region: str, name: str, holder: str) -> None:
        async with self._conn() as db:
            await db.execute("UPDATE conveyor_leases SET expires_ms=0, version=version+1"
                             " WHERE region=$1 AND name=$2 AND holder=$3", region, name, holder)

    async def lease_get(self, region: str, name: str) -> LeaseRecord | None:
        async with self._conn() as db:
            row = await db.fetchrow(f"SELECT {_LEASE_COLUMNS} FROM conveyor_leases"
                                    " WHERE region=$1 AND name=$2", region, name)
        return LeaseRecord(*row) if row else None

    async def save_worker(self, worker_id: str, record: str, now_ms: int, expires_ms: int,
                          max_workers: int) -> bool:
        async with self._tx() as db:
            known = await db.fetchval("SELECT 1 FROM conveyor_workers WHERE worker_id=$1"
                                      " AND expires_ms>$2", worker_id, now_ms)
            if not known and await db.fetchval(
                    "SELECT count(*) FROM conveyor_workers WHERE expires_ms>$1",
                    now_ms) >= max_workers:
                return False
            await db.execute(
                "INSERT INTO conveyor_workers AS w VALUES ($1, $2, $3, $4)"
                " ON CONFLICT (worker_id) DO UPDATE SET first_seen_ms=CASE WHEN"
                " w.expires_ms<=$2 THEN $2 ELSE w.first_seen_ms END,"
                " expires_ms=EXCLUDED.expires_ms, record=EXCLUDED.record",
                worker_id, now_ms, expires_ms, record)
        return True

    async def sign_in_failures(self, subjects: list[str]) -> dict[str, tuple[int, int]]:
        async with self._conn() as db:
            rows = await db.fetch("SELECT subject, failures, last_ms FROM"
                                  " conveyor_sign_in_failures WHERE subject = ANY($1)", subjects)
        return {row[0]: (row[1], row[2]) for row in rows}

    async def count_sign_in_failure(self, subjects: list[str], now_ms: int,
                                    forget_before_ms: int) -> dict[str, tuple[int, int]]:
        # One statement per subject in one transaction: the upsert's row lock makes two
        # nodes' failures count twice, never once.
        async with self._tx() as db:
            await db.execute("DELETE FROM conveyor_sign_in_failures WHERE last_ms<$1",
                             forget_before_ms)
            found = {subject: await db.fetchrow(_COUNT_FAILURE, subject, now_ms)
                     for subject in sorted(subjects)}  # one lock order on every node
        return {subject: (row[0], row[1]) for subject, row in found.items()}

    async def clear_sign_in_failures(self, subjects: list[str]) -> None:
        async with self._conn() as db:
            await db.execute("DELETE FROM conveyor_sign_in_failures WHERE subject = ANY($1)",
                             subjects)

    async def add_activity(self, rows: list[ActivityRow],
                           prune_before: list[tuple[int, int]]) -> None:
        async with self._tx() as db:
            if rows:
                await db.execute(_ADD_ACTIVITY, *(list(c) for c in zip(*rows, strict=True)))
            for span_min, minute in prune_before:
                await db.execute("DELETE FROM conveyor_activity WHERE span_min=$1 AND"
                                 " minute<$2", span_min, minute)

    async def activity(self, queue_ids: list[int], span_min: int, from_minute: int
                       ) -> list[ActivityTuple]:
        async with self._conn() as db:
            rows = await db.fetch(f"SELECT {_ACTIVITY_COLUMNS} FROM conveyor_activity WHERE"
                                  " queue_id=ANY($1::bigint[]) AND span_min=$2 AND minute>=$3",
                                  queue_ids, span_min, from_minute)
        return [tuple(r) for r in rows]  # type: ignore[misc]

    async def workers(self, now_ms: int) -> list[tuple[str, int, str]]:
        async with self._conn() as db:
            await db.execute("DELETE FROM conveyor_workers WHERE expires_ms<=$1", now_ms)
            rows = await db.fetch("SELECT worker_id, first_seen_ms, record FROM"
                                  " conveyor_workers ORDER BY first_seen_ms, worker_id")
        return [tuple(r) for r in rows]

    async def move_tasks(self, source_queue_id: int | None) -> list[MoveTaskRecord]:
        async with self._conn() as db:
            rows = await db.fetch("SELECT record FROM conveyor_move_tasks WHERE $1::bigint IS"
                                  " NULL OR source_queue_id=$1", source_queue_id)
        return [MoveTaskRecord(**orjson.loads(r["record"])) for r in rows]

    # --- between shards (shards.py): messages copied in, then taken out ------------------

    def transaction(self) -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]:
        """A pooled connection in a transaction, the driver's errors translated: for a
        sharded store's own records (its catalog)."""
        return self._tx()

    async def next_queue_id(self) -> int:
        """A queue id this database never handed out: a sharded store's catalog shard
        hands out every shard's ids, so that each id names one queue wherever it lives."""
        async with self._conn() as db:
            return await db.fetchval(
                "SELECT nextval(pg_get_serial_sequence('conveyor_queues', 'id'))")

    async def put(self, queue_id: int, rows: list[tuple[StoredMessage, int]]) -> bool:
        """Store these messages (each with its visible-at time) in the queue as they are
        but for their seqs, new ones in the order given, if the queue's row is here
        (locked against its deletion meanwhile); False, storing nothing, if it is not."""
        async with self._tx() as db:
            if not await db.fetchval("SELECT 1 FROM conveyor_queues WHERE id=$1 FOR KEY SHARE",
                                     queue_id):
                return False
            if rows:
                await db.execute(_PUT, queue_id, *[list(c) for c in zip(
                    *[(*_copied(m), at) for m, at in rows], strict=True)])
        return True

    @contextlib.asynccontextmanager
    async def take(self, queue: QueueRecord, limit: int, visible_by_ms: int | None = None,
                   seqs: list[int] | None = None) -> AsyncIterator[_Taken]:
        """Lock up to `limit` of the queue's messages in seq order (with `visible_by_ms`,
        only those visible by then; with `seqs`, only those), skipping those others hold,
        for the block: they are copied elsewhere, then `remove()`d, committed as the block
        ends."""
        async with self._tx() as db:
            rows = await db.fetch(
                f"SELECT {_COLUMNS}, visible_at FROM conveyor_messages WHERE queue_id=$1 AND"
                " ($2::bigint IS NULL OR visible_at<=$2) AND ($4::bigint[] IS NULL OR"
                " seq = ANY($4::bigint[])) ORDER BY seq LIMIT $3 FOR UPDATE SKIP LOCKED",
                queue.id, visible_by_ms, limit, seqs)
            yield _Taken(db, [(StoredMessage(*r[:-1]), r[-1]) for r in rows])

    async def fence(self, queue_id: int) -> None:
        """Delete the queue's row alone, waiting for the sends under way into it: sends
        after it are refused (`fenced`), its messages stay to be taken away."""
        async with self._conn() as db:
            await db.execute("DELETE FROM conveyor_queues WHERE id=$1", queue_id)


class _Claim:
    """Messages a claim took, on the claim's connection (in its transaction, if any)."""

    __slots__ = ("db", "receipt", "messages", "retry_ms")

    def __init__(self, db: asyncpg.Connection | None, receipt: str,
                 messages: list[StoredMessage]) -> None:
        self.db, self.receipt, self.messages = db, receipt, messages
        self.retry_ms: int | None = None

    async def dead_letter(self, seqs: list[int], dead_letter_queue_id: int, source_arn: str,
                          now_ms: int, systems: list[str | None] | None = None) -> None:
        await self.db.execute(_DEAD_LETTER, dead_letter_queue_id, now_ms, source_arn, seqs,
                              self.receipt, systems is not None, systems or [None] * len(seqs))


    async def drop(self, seqs: list[int]) -> None:
        """Delete these claimed messages (copied to another shard's dead-letter queue)."""
        await self.db.execute("DELETE FROM conveyor_messages WHERE seq = ANY($1::bigint[])"
                              " AND receipt=$2", seqs, self.receipt)


class _SharedClaim(_Claim):
    """Messages a claim took in a statement shared with other receives: its connection is
    back in the pool, so what follows (rarely) takes one."""

    __slots__ = ("store",)

    def __init__(self, store: PostgresStore, receipt: str,
                 messages: list[StoredMessage]) -> None:
        super().__init__(None, receipt, messages)
        self.store = store

    async def dead_letter(self, seqs: list[int], dead_letter_queue_id: int, source_arn: str,
                          now_ms: int, systems: list[str | None] | None = None) -> None:
        async with self.store._conn() as db:
            self.db = db
            await super().dead_letter(seqs, dead_letter_queue_id, source_arn, now_ms, systems)

    async def drop(self, seqs: list[int]) -> None:
        async with self.store._conn() as db:
            self.db = db
            await super().drop(seqs)


class _Taken:
    """Messages locked by `take`, with their visible-at times, in its transaction."""

    __slots__ = ("db", "messages")

    def __init__(self, db: asyncpg.Connection, messages: list[tuple[StoredMessage, int]]
                 ) -> None:
        self.db, self.messages = db, messages

    async def remove(self, seqs: list[int] | None = None) -> None:
        """Delete these of the messages taken (all, by default)."""
        await self.db.execute("DELETE FROM conveyor_messages WHERE seq = ANY($1::bigint[])",
                              [m.seq for m, _ in self.messages] if seqs is None else seqs)


class _Held:
    __slots__ = ("db", "found")

    def __init__(self, db: asyncpg.Connection, found: dict[int, tuple[str | None, int]]) -> None:
        self.db, self.found = db, found

    async def set_visible_at(self, changes: list[tuple[int, int]]) -> None:
        await self.db.execute(
            "UPDATE conveyor_messages m SET visible_at=c.visible_at FROM unnest($1::bigint[],"
            " $2::bigint[]) AS c(seq, visible_at) WHERE m.seq=c.seq",
            [seq for seq, _ in changes], [at for _, at in changes])


class _Amend:
    __slots__ = ("db", "found")

    def __init__(self, db: asyncpg.Connection, found: dict[int, Annotated]) -> None:
        self.db, self.found = db, found

    async def set_system(self, changes: list[tuple[int, str]]) -> None:
        await self.db.execute(
            "UPDATE conveyor_messages m SET system=c.system FROM unnest($1::bigint[],"
            " $2::text[]) AS c(seq, system) WHERE m.seq=c.seq",
            [seq for seq, _ in changes], [system for _, system in changes])


_LEASE_COLUMNS = "name, holder, version, expires_ms, data"

# A message copied in from another shard: every column but its seq, as it was.
_PUT_COLUMNS = ("message_id, body, md5_body, attributes, md5_attributes, system, sent_ms,"
                " sender_id, receive_count, first_receive_ms, receipt, group_id, dedup_key,"
                " dlq_source_arn, visible_at")
_PUT = (
    f"INSERT INTO conveyor_messages (queue_id, {_PUT_COLUMNS}) SELECT $1, {_PUT_COLUMNS}"
    " FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],"
    " $8::bigint[], $9::text[], $10::int[], $11::bigint[], $12::text[], $13::text[],"
    f" $14::text[], $15::text[], $16::bigint[]) WITH ORDINALITY AS u({_PUT_COLUMNS}, n)"
    " ORDER BY n"
)

_COUNT_FAILURE = (
    "INSERT INTO conveyor_sign_in_failures AS f VALUES ($1, 1, $2) ON CONFLICT (subject)"
    " DO UPDATE SET failures=f.failures+1, last_ms=GREATEST(f.last_ms, $2)"
    " RETURNING failures, last_ms"
)
# Many nodes' counts meet here: each adds its own; the larger sampled age is kept.
_ACTIVITY_COLUMNS = ("queue_id, span_min, minute, sent, received, deleted, dead_lettered,"
                     " failed, oldest_s")
_ADD_ACTIVITY = (
    f"INSERT INTO conveyor_activity AS a ({_ACTIVITY_COLUMNS}) SELECT * FROM unnest("
    "$1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],"
    " $7::bigint[], $8::bigint[], $9::bigint[]) ON CONFLICT (queue_id, span_min, minute)"
    " DO UPDATE SET sent=a.sent+EXCLUDED.sent, received=a.received+EXCLUDED.received,"
    " deleted=a.deleted+EXCLUDED.deleted, dead_lettered=a.dead_lettered+"
    "EXCLUDED.dead_lettered, failed=a.failed+EXCLUDED.failed,"
    " oldest_s=GREATEST(EXCLUDED.oldest_s, a.oldest_s)")


def _copied(m: StoredMessage) -> tuple:
    """A stored message's columns for _PUT, all but its seq."""
    return (m.message_id, m.body, m.md5_body, m.attributes, m.md5_attributes, m.system,
            m.sent_ms, m.sender_id, m.receive_count, m.first_receive_ms, m.receipt, m.group_id,
            m.dedup_key, m.dlq_source_arn)


def _insert_row(queue: QueueRecord, m: NewMessage) -> tuple:
    return (queue.id, m.message_id, m.body, m.md5_body, m.attributes, m.md5_attributes,
            m.system, m.sent_ms, m.sender_id, m.visible_at_ms, m.group_id, m.dedup_key)


def _refused(exc: Exception) -> bool:
    """Whether the database refused a statement for what it carried (a value, a limit),
    not for want of a connection (StoreUnavailable): in a statement shared by several
    calls, one call's fault (_coalesce.py)."""
    return type(exc) is StoreError and isinstance(exc.__cause__, asyncpg.PostgresError)


def _queue(row: Any) -> QueueRecord:
    return QueueRecord(id=row["id"], region=row["region"], name=row["name"],
                       attributes=orjson.loads(row["attributes"]),
                       tags=orjson.loads(row["tags"]), created_s=row["created_s"],
                       modified_s=row["modified_s"], purged_s=row["purged_s"])


async def _plan_once(conn: asyncpg.Connection) -> None:
    """Every statement on a pooled connection runs on a plan made once for it. Left to
    choose, PostgreSQL planned the standard claim afresh on every execution (its custom
    plan looks cheaper to the planner than its generic one, which is the same index scans),
    and planning it cost the backend more instructions than running it
    (bench/pg_callgrind.py). The one statement whose generic plan is worse, the fair
    receive's group walk, asks for a custom plan in its transaction (claim). Not behind a
    pooler (--store-listen): no session keeps a setting there, and with no statement
    cache each statement is planned as it runs anyway."""
    await conn.execute("SET plan_cache_mode = force_generic_plan")


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Return a connection to the pool as it is. asyncpg's default reset is a round trip
    of four statements (advisory unlock, CLOSE ALL, UNLISTEN, RESET ALL) on every release,
    more than the work of most requests; this store leaves nothing of the kind behind on a
    pooled connection: its advisory locks are transaction-scoped, it LISTENs on a
    connection of its own, it SETs only what every pooled connection has from the start
    (_plan_once), and it never DECLAREs. (An open transaction is still rolled back by the
    pool before this is called.)"""


async def _answer_within(conn: asyncpg.Connection, query: Awaitable[Any],
                         timeout_s: float) -> Any:
    """`query`'s answer, or TimeoutError after `timeout_s` with `conn` terminated. Not
    asyncio.wait_for: cancelling a query makes asyncpg send a cancel request to the server
    and wait for it, which never ends when the server is cut off without a word."""
    task = asyncio.ensure_future(query)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:  # the store closing: the query's end is nobody's news
        task.add_done_callback(_seen)
        raise
    if not done:
        conn.terminate()
        task.add_done_callback(_seen)
        raise TimeoutError(f"no answer from the database in {timeout_s:.0f} s")
    return task.result()


def _seen(task: asyncio.Future[Any]) -> None:
    """Take an abandoned query's outcome, so that asyncio logs no "exception was never
    retrieved" for it."""
    if not task.cancelled():
        task.exception()


def _closed(conn: asyncpg.Connection) -> bool:
    try:
        return conn.is_closed()
    except asyncpg.InterfaceError:  # the pool took a closed connection back from its proxy
        return True


def _json(value: object) -> str:
    return orjson.dumps(value).decode()


def _ident(name: str) -> str:
    """Quote an identifier; schema names come from the operator's DSN."""
    return '"' + name.replace('"', '""') + '"'


def _primary(dsn: str) -> Primary:
    """Connections to `dsn`'s primary; with several hosts, each gets its own timeout."""
    primary = Primary(dsn, CONNECT_TIMEOUT_S)
    if len(primary.hosts) > 1:
        primary.host_timeout_s = HOST_CONNECT_TIMEOUT_S
    return primary


def _split_schema(dsn: str) -> tuple[str, str | None]:
    """Take Conveyor's own `schema` query parameter out of a libpq-style URL, and ask
    for the primary (`target_session_attrs=read-write`) unless the URL or the environment
    (PGTARGETSESSIONATTRS) says otherwise: of several hosts, the one that takes writes."""
    parts = urlsplit(dsn)
    params = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in params if k == "schema"), None)
    params = [(k, v) for k, v in params if k != "schema"]
    if ("target_session_attrs" not in dict(params)
            and "PGTARGETSESSIONATTRS" not in os.environ):
        params.append(("target_session_attrs", "read-write"))
    return urlunsplit(parts._replace(query=urlencode(params))), schema


def _redact(dsn: str) -> str:
    parts = urlsplit(dsn)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return dsn
