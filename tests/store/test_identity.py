"""A queue's identity is its own (DESIGN.md, invariant 6): ids are never reused, and deleting
a queue ends every task and record keyed by it (conveyor/service/identity.py).

Three guards. Every table of both stores, read from the database's own catalogue, is one
of the record kinds identity.py accounts for, and one keyed by a queue is one DeleteQueue
ends: a table added without a delete path fails here. Every kind of lease name is made in
conveyor/lease_names.py and classified there. And on every store, a queue holding a record
of every kind is deleted and its name created again: nothing of the old queue is left in
any table, and the new queue has a new id. The same through a real server and boto3:
tests/server/test_queue_identity.py.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
from pathlib import Path
from typing import Any

import apsw
import asyncpg
import pytest

from conveyor import lease_names
from conveyor.clock import ManualClock
from conveyor.cron.ledger import ledger_name
from conveyor.cron.service import lease_name_for
from conveyor.service import identity, rules
from conveyor.sqs.errors import QueueDeletedRecently
from conveyor.store import postgres, sqlite
from conveyor.store.base import MoveTaskRecord
from tests.store.conformance import CTX, Sqs, open_store, run
from tests.store.helpers import ATTRIBUTES, KINDS, message
from tests.support import CREATED_SCHEMAS, POSTGRES_URL, require_postgres

ROOT = Path(__file__).resolve().parents[2]
# A table is keyed by a queue when a column names one, or when it is keyed by (region, name).
QUEUE_COLUMN = re.compile(r"queue")
# Kept after a queue's deletion though keyed by its name: the deletion itself.
KEPT_THOUGH_KEYED = {"deleted_queues"}
NOW = 1_800_000_000_000
PICK = rules.Picking(fifo_scan=100, fair_groups=rules.FAIR_GROUPS)


async def tables(store: Any) -> dict[str, list[str]]:
    """Each table of the store's schema with its columns, from the database's catalogue."""
    if isinstance(store, sqlite.SqliteStore):
        names = [r[0] for r in store.db.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")]
        return {t: [c[1] for c in store.db.execute(f"PRAGMA table_info({t})")] for t in names}
    async with store._conn() as db:
        rows = await db.fetch("SELECT table_name, column_name FROM information_schema.columns"
                              " WHERE table_schema=$1 ORDER BY ordinal_position", store.schema)
    found: dict[str, list[str]] = {}
    for table, column in rows:
        found.setdefault(table, []).append(column)
    return found


async def rows(store: Any, table: str) -> list[dict[str, Any]]:
    """Every row of a table, as column -> value."""
    if isinstance(store, sqlite.SqliteStore):
        names = [c[1] for c in store.db.execute(f"PRAGMA table_info({table})")]
        return [dict(zip(names, r, strict=True))
                for r in store.db.execute(f"SELECT * FROM {table}")]
    async with store._conn() as db:
        return [dict(r) for r in await db.fetch(f'SELECT * FROM "{table}"')]


def table_kinds(store: Any) -> dict[str, str]:
    return (sqlite if isinstance(store, sqlite.SqliteStore) else postgres).TABLE_KINDS


def unaccounted(schema: dict[str, list[str]], kinds: dict[str, str]) -> list[str]:
    """The tables of `schema` (table -> columns) that break the rule: named by no
    TABLE_KINDS, of a kind identity.py does not know, or keyed by a queue (a column names
    one, or it is keyed by region and name) yet of a kind DeleteQueue does not end."""
    wrong = [t for t in schema if kinds.get(t) not in identity.RECORDS]
    for table, columns in schema.items():
        keyed = any(QUEUE_COLUMN.search(c) for c in columns) or {"region", "name"} <= set(
            columns)
        kind = kinds.get(table)
        if keyed and kind not in identity.ENDED and kind not in KEPT_THOUGH_KEYED:
            wrong.append(table)
    return sorted(set(wrong) | (set(kinds) - set(schema)))


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_every_table_is_a_record_kind_and_each_keyed_by_a_queue_ends_with_it(
        kind: str, tmp_path: Path) -> None:
    """The schema as the database has it (sqlite_master, information_schema.columns), not
    as the code declares it: a migration that adds a table must say what it holds (the
    store's TABLE_KINDS), and a table keyed by a queue must be a kind DeleteQueue ends
    (conveyor/service/identity.py)."""
    if kind == "postgresql":
        require_postgres()

    async def main() -> None:
        store = await open_store(kind, tmp_path, ManualClock())
        try:
            schema = await tables(store)
            assert unaccounted(schema, table_kinds(store)) == []
            # The check catches what it is for: a table keyed by a queue that no delete
            # path knows (as per-message attempt histories kept apart would be), and one
            # that is named but of a kind that does not end with the queue.
            extra = {**schema, "attempts": ["queue_id", "seq", "attempt"]}
            assert unaccounted(extra, table_kinds(store)) == ["attempts"]
            assert unaccounted(extra, {**table_kinds(store), "attempts": "meta"}) == [
                "attempts"]
        finally:
            await store.close()

    asyncio.run(main())


def test_every_lease_name_is_made_in_one_place_and_classified() -> None:
    """Lease records are named by their writers; Conveyor's own are named in
    conveyor/lease_names.py, each kind classified by what keys it, and a queue's deletion
    finds every queue-keyed one (lease_names.of_queue). The store's lease primitives are
    called from the lease API (names its clients choose) and service/workers.py only; a new
    caller must name its records in lease_names.py."""
    makers = {f for f, _ in lease_names.KINDS.values() if f is not None}
    public = {f for name, f in inspect.getmembers(lease_names, inspect.isfunction)
              if f.__module__ == lease_names.__name__ and not name.startswith("_")}
    assert public - {lease_names.of_queue} == makers
    exact, prefixes = lease_names.of_queue("orders")
    leader = lease_names.cron_leader("orders")
    made = {"cron leader": leader, "cron runs": lease_names.cron_runs(leader, "nightly"),
            "scaling decisions": lease_names.scaling_decisions("orders")}
    for kind, (_, key) in lease_names.KINDS.items():
        if key == "queue":
            name = made[kind]
            assert name in exact or any(name.startswith(p) for p in prefixes), kind
    other_exact, other_prefixes = lease_names.of_queue("orders-2")
    assert not set(made.values()) & set(other_exact)
    assert not any(n.startswith(p) for n in made.values() for p in other_prefixes)
    # The periodic tasks (a client) name theirs through the same module.
    assert lease_name_for("orders") == leader
    assert ledger_name(leader, "nightly") == made["cron runs"]
    callers = set()
    literals = re.compile("|".join(re.escape(p + "{") for p in (  # an f-string's name
        lease_names.CRON_PREFIX, lease_names.RUNS_INFIX, lease_names.DRAIN_PREFIX,
        lease_names.DECISIONS_PREFIX)))
    for path in (ROOT / "conveyor").rglob("*.py"):
        text, relative = path.read_text(), str(path.relative_to(ROOT))
        if re.search(r"\.lease_(acquire|update|get|release)\(", text) and \
                not relative.startswith("conveyor/store/"):
            callers.add(relative)
        if relative != "conveyor/lease_names.py":
            assert not literals.search(text), f"{relative} makes a lease name itself"
    assert callers == {"conveyor/service/leases.py", "conveyor/service/workers.py"}


def _redrive(dlq_arn: str) -> dict[str, str]:
    return {"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn,
                                         "maxReceiveCount": 1})}


@pytest.mark.parametrize("kind", KINDS)
def test_a_deleted_queue_leaves_nothing_and_its_id_is_never_reused(
        kind: str, tmp_path: Path) -> None:
    """A queue with a record of every kind DeleteQueue ends (the test fails if a kind is
    added to identity.ENDED that it does not make), deleted: no row of any table names its
    id or its name, but the note of its deletion and another queue's move task into it,
    FAILED with AWS's reason (LocalStack's recording of AWS,
    test_move_task_delete_destination_queue_while_running). The name waits out AWS's
    minute (QueueDeletedRecently, strict limits); the new queue has a new id and is empty
    in every respect, and a queue created after it too gets an id never seen before."""
    async def scenario(sqs: Sqs) -> None:
        store, made = sqs.service.store, set()
        name = "gone.fifo"
        fifo = {"FifoQueue": "true"}
        url = await sqs.create(name, **fifo)
        old = await store.get_queue("us-east-1", name)
        arn = await sqs.arn(url)
        await sqs.call("TagQueue", QueueUrl=url, Tags={"team": "old"})
        await sqs.call("AddPermission", QueueUrl=url, Label="grant",
                       AWSAccountIds=["111122223333"], Actions=["SendMessage"])
        made.add("queue")
        await sqs.send(url, "m", MessageGroupId="g", MessageDeduplicationId="d")
        made |= {"messages", "dedup"}
        await sqs.create("src.fifo", **fifo, **_redrive(arn))
        other_dlq = await sqs.create("other-dlq.fifo", **fifo)
        other_arn = await sqs.arn(other_dlq)
        await sqs.create("src-2.fifo", **fifo, **_redrive(other_arn))
        await sqs.send(other_dlq, "o", MessageGroupId="g", MessageDeduplicationId="o")
        dest_arn = await sqs.arn(await sqs.create("dest.fifo", **fifo))
        await sqs.call("StartMessageMoveTask", SourceArn=arn, DestinationArn=dest_arn)
        await sqs.call("StartMessageMoveTask", SourceArn=other_arn, DestinationArn=arn)
        made.add("move_tasks")
        await sqs.call("SetConveyorAttributes", QueueUrl=url,
                       Attributes={"ConveyorReceiveRate": "1"})
        await sqs.receive(url)  # the queue's rate bucket, spent or given back
        made.add("rates")
        await sqs.service.save_activity()  # the charts' rows, on every store
        made.add("activity")
        for action, request in (
                ("AnnounceWorker", {"WorkerId": "w1", "Queue": name, "TtlSeconds": 300}),
                ("AnnounceWorker", {"WorkerId": "s1", "Queue": name, "TtlSeconds": 300,
                                    "Kind": "scaler"}),
                ("AnnounceWorker", {"WorkerId": "w2", "Queue": "other-dlq.fifo",
                                    "TtlSeconds": 300}),
                ("DrainWorker", {"WorkerId": "w1"}),
                ("RecordScalingDecision", {"Queue": name, "Decision": {"desired": 2}}),
                ("AcquireLease", {"Name": lease_names.cron_leader(name), "Holder": "h",
                                  "TtlSeconds": 300}),
                ("AcquireLease", {"Name": lease_names.cron_runs(
                    lease_names.cron_leader(name), "nightly"), "Holder": "h",
                    "TtlSeconds": 300})):
            await sqs.call(action, **request)
        made |= {"workers", "leases"}
        assert made == set(identity.ENDED), "make a record of every kind DeleteQueue ends"

        await sqs.call("DeleteQueue", QueueUrl=url)
        kinds = table_kinds(store)
        texts = [name, lease_names.drain("w1"), lease_names.drain("s1")]
        for table in await tables(store):
            left = [r for r in await rows(store, table) if _names(r, old.id, texts)]
            if kinds[table] == "deleted_queues":
                assert [r["name"] for r in left] == [name]
            elif kinds[table] == "move_tasks":
                [task] = [json.loads(r["record"]) if isinstance(r["record"], str)
                          else r["record"] for r in left]
                assert (task["extra"]["SourceArn"], task["status"], task["failure"]) == (
                    other_arn, "FAILED", "AWS.SimpleQueueService.NonExistentQueue")
            else:
                assert left == [], table
        assert not sqs.service.activity.tracks(old.id)

        sqs.advance(59)
        with pytest.raises(QueueDeletedRecently):
            await sqs.create(name, **fifo)
        sqs.advance(2)
        assert await sqs.create(name, **fifo) == url
        new = await store.get_queue("us-east-1", name)
        assert new.id > old.id and new.tags == {} and "Policy" not in new.attributes
        assert await sqs.counts(url) == (0, 0, 0)
        assert (await sqs.call("ListMessageMoveTasks", SourceArn=arn))["Results"] == []
        workers = (await sqs.call("ListWorkers"))["Workers"]
        assert [w["WorkerId"] for w in workers] == ["w2"]
        assert (await sqs.call("ListScalingDecisions", Queue=name))["Decisions"] == []
        for lease in (lease_names.cron_leader(name),
                      lease_names.cron_runs(lease_names.cron_leader(name), "nightly")):
            assert await sqs.call("GetLease", Name=lease) == {}
        assert await sqs.call("AnnounceWorker", WorkerId="w1", Queue=name,
                              TtlSeconds=300) == {}  # no drain waits for it
        await sqs.send(url, "new", MessageGroupId="g", MessageDeduplicationId="d")
        assert await sqs.bodies(url) == ["new"]  # "d" is no duplicate of the old "m"
        await sqs.call("DeleteQueue", QueueUrl=url)  # the largest id, deleted
        later = await store.get_queue_by_id(new.id)
        assert later is None
        await sqs.create("later")
        assert (await store.get_queue("us-east-1", "later")).id > new.id

    run(kind, tmp_path, scenario)


def _names(row: dict[str, Any], queue_id: int, texts: list[str]) -> bool:
    """Whether a row names the queue: its id in a queue column or a JSON record's queue
    field, one of `texts` (its name, its workers' drain requests) in any text. Another
    queue's row is its own (a RedrivePolicy may name a deleted queue, as on AWS)."""
    if "attributes" in row and "tags" in row:  # a queue's own row
        return row["id"] == queue_id or row["name"] in texts
    for column, value in row.items():
        if QUEUE_COLUMN.search(column) and value == queue_id:
            return True
        if isinstance(value, str) and value.startswith("{"):
            record = json.loads(value)
            if queue_id in (record.get("source_queue_id"), record.get("destination_queue_id")):
                return True
        if isinstance(value, str) and any(text in value for text in texts):
            return True
    return False


def test_postgresql_queue_ids_come_from_a_sequence_that_never_cycles(tmp_path: Path) -> None:
    """PostgreSQL's BIGSERIAL: a sequence hands out each value once (nextval is never rolled
    back) unless it is made to CYCLE; ours is not."""
    require_postgres()

    async def main() -> None:
        store = await open_store("postgresql", tmp_path, ManualClock())
        try:
            async with store._conn() as db:
                cycles = await db.fetchval(
                    "SELECT cycle FROM pg_sequences WHERE schemaname=$1 AND"
                    " sequencename='conveyor_queues_id_seq'", store.schema)
            assert cycles is False
        finally:
            await store.close()

    asyncio.run(main())


def test_the_embedded_store_takes_an_old_database_on_without_reusing_ids(
        tmp_path: Path) -> None:
    """A database made by schema version 1 (queue ids INTEGER PRIMARY KEY, so reusable): its
    queues keep their ids and its messages stay; the next id is past every id any record
    names, the deleted queue's too; a deleted queue's stray move task is gone; and a second
    start changes nothing."""
    db = apsw.Connection(str(tmp_path / "conveyor.db"))
    db.execute(sqlite.SCHEMA)  # version 1's tables
    db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    for queue_id, name in ((1, "a"), (2, "b"), (3, "c")):
        db.execute("INSERT INTO queues (id, region, name, attributes, tags, created_s,"
                   " modified_s) VALUES (?, 'us-east-1', ?, ?, '{}', 0, 0)",
                   (queue_id, name, json.dumps({"MessageRetentionPeriod": "345600",
                                                "VisibilityTimeout": "30",
                                                "DelaySeconds": "0"})))
    for seq in range(1, 6):
        db.execute("INSERT INTO messages (seq, queue_id, message_id, body, md5_body, sent_ms,"
                   " sender_id, visible_at) VALUES (?, 2, ?, ?, '', ?, 's', 0)",
                   (seq, f"id-{seq}", f"body-{seq}", 4_000_000_000_000 + seq))
    db.execute("DELETE FROM queues WHERE id=3")  # deleted last: its id was the next one
    db.execute("INSERT INTO move_tasks VALUES ('h', 3, ?)", (json.dumps({
        "handle": "h", "source_queue_id": 3, "destination_queue_id": 2,
        "max_per_second": None, "status": "RUNNING", "started_ms": 0}),))
    db.close()

    async def main() -> None:
        for _ in range(2):
            store = sqlite.SqliteStore(tmp_path)
            try:
                version = store.db.execute(
                    "SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
                assert version == str(sqlite.SCHEMA_VERSION)
                assert [(q.id, q.name) for q in await store.list_queues(None, "")] == [
                    (1, "a"), (2, "b")]
                b = await store.get_queue("us-east-1", "b")
                assert sorted(m.body for m, _ in await store.peek(b, 10, 0)) == [
                    f"body-{i}" for i in range(1, 6)]
                assert await store.move_tasks(None) == []
            finally:
                await store.close()
        store = sqlite.SqliteStore(tmp_path)
        try:
            created = await store.create_queue("us-east-1", "d", {}, {}, 0)
            assert created.id == 4
        finally:
            await store.close()

    asyncio.run(main())


def test_a_running_move_task_of_a_deleted_queue_moves_nothing_of_the_next(
        tmp_path: Path) -> None:
    """Issue 30's reproduction at the service, step by step on the embedded store: the
    deleted queue's task neither shows in, nor blocks, nor empties the next queue."""
    async def scenario(sqs: Sqs) -> None:
        dest = await sqs.create("dest")
        src = await sqs.create("src")
        old = await sqs.create("old")
        old_arn = await sqs.arn(old)
        await sqs.call("SetQueueAttributes", QueueUrl=src, Attributes=_redrive(old_arn))
        await sqs.send(old, *[f"old-{i}" for i in range(5)])
        await sqs.call("StartMessageMoveTask", SourceArn=old_arn,
                       DestinationArn=await sqs.arn(dest), MaxNumberOfMessagesPerSecond=1)
        await sqs.call("DeleteQueue", QueueUrl=old)
        new = await sqs.create("new")
        new_arn = await sqs.arn(new)
        await sqs.call("SetQueueAttributes", QueueUrl=src, Attributes=_redrive(new_arn))
        await sqs.send(new, *[f"new-{i}" for i in range(3)])
        for _ in range(5):
            sqs.advance(1)
            await sqs.service.run_move_tasks(CTX)
        assert (await sqs.call("ListMessageMoveTasks", SourceArn=new_arn))["Results"] == []
        assert await sqs.counts(new) == (3, 0, 0)
        assert await sqs.counts(dest) == (0, 0, 0)
        await sqs.call("StartMessageMoveTask", SourceArn=new_arn,
                       DestinationArn=await sqs.arn(dest))

    run("sqlite", tmp_path, scenario)


@pytest.mark.parametrize("kind", KINDS)
def test_nothing_moves_into_a_deleted_queue_and_no_task_outlives_its_source(
        kind: str, tmp_path: Path) -> None:
    """What races a deletion finds the queue gone, whenever it read it: a dead letter for
    a dead-letter queue deleted meanwhile stays in its queue, in flight (nothing is lost,
    nothing lands under a dead id); a move into a deleted queue moves nothing; a move task
    saved as its source is deleted is not kept."""
    clock = ManualClock(NOW)

    async def main() -> None:
        store = await open_store(kind, tmp_path, clock)
        try:
            queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
            gone = await store.create_queue("us-east-1", "gone", ATTRIBUTES, {}, 0)
            await store.send(queue, [message(b, NOW - 1) for b in ("a", "b")], NOW, 0)
            await store.delete_queue(gone, 0)
            async with store.claim(queue, 1, NOW, 0, NOW + 30_000, PICK) as claim:
                [taken] = claim.messages
                await claim.dead_letter([taken.seq], gone.id, "arn:q", NOW)
            tally = await store.tally(queue, NOW, 0)
            assert (tally.get((True, False), 0), tally.get((False, True), 0)) == (1, 1)
            [left] = await store.movable(queue, 10, NOW, 0)
            assert await store.move(queue, [(left.seq, gone.id)], NOW) == 0
            assert [m.body for m in await store.movable(queue, 10, NOW, 0)] == [left.body]
            await store.save_move_task(MoveTaskRecord("h", gone.id, queue.id, None,
                                                      "RUNNING", NOW))
            assert await store.move_tasks(None) == []
        finally:
            await store.close()

    if kind == "postgresql":
        require_postgres()
    asyncio.run(main())


def test_postgresql_migration_clears_what_deleted_queues_left(tmp_path: Path) -> None:
    """A schema from before the migration that ends deleted queues' leftovers (8 when
    written), where DeleteQueue left a queue's move tasks and charted minutes behind:
    opening it applies the migration, which removes those and keeps the live queue's."""
    require_postgres()
    schema = "t_" + os.urandom(6).hex()
    CREATED_SCHEMAS.append(schema)
    ours = next(n for n, sql in postgres.MIGRATIONS
                if "conveyor_move_tasks WHERE source_queue_id NOT IN" in sql)

    async def main() -> None:
        db = await asyncpg.connect(POSTGRES_URL)
        try:
            await db.execute(f'CREATE SCHEMA "{schema}"; SET search_path TO "{schema}"')
            await db.execute("CREATE TABLE conveyor_schema (version INTEGER NOT NULL)")
            for number, statements in postgres.MIGRATIONS:
                if number < ours:
                    await db.execute(statements)
                    await db.execute("INSERT INTO conveyor_schema VALUES ($1)", number)
            live = await db.fetchval(
                "INSERT INTO conveyor_queues (region, name, attributes, tags, created_s,"
                " modified_s) VALUES ('us-east-1', 'live', '{}', '{}', 0, 0) RETURNING id")
            for handle, source in (("kept", live), ("stray", live + 1)):
                await db.execute("INSERT INTO conveyor_move_tasks VALUES ($1, $2, '{}')",
                                 handle, source)
                await db.execute("INSERT INTO conveyor_activity (queue_id, minute, sent)"
                                 " VALUES ($1, 1, 1)", source)
        finally:
            await db.close()
        store = await postgres.PostgresStore(f"{POSTGRES_URL}?schema={schema}").open()
        try:
            async with store._conn() as conn:
                assert await conn.fetchval("SELECT max(version) FROM conveyor_schema") >= ours
                assert [r[0] for r in await conn.fetch(
                    "SELECT handle FROM conveyor_move_tasks")] == ["kept"]
                assert [r[0] for r in await conn.fetch(
                    "SELECT queue_id FROM conveyor_activity")] == [live]
        finally:
            await store.close()

    asyncio.run(main())
