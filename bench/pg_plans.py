"""How PostgreSQL plans and stores a message's life on the PostgreSQL store.

    PYTHONPATH=. .venv/bin/python bench/pg_plans.py --own-postgres   # about 20 s
    PYTHONPATH=../other-tree .venv/bin/python bench/pg_plans.py --own-postgres   # another tree

Opens the store on a fresh schema (pool of one connection), runs `--cycles` rounds of a
send of 10 messages, a claim of them and a delete, one at a time, then prints, for every
prepared statement run more than 5 times on the store's connections, how many of its
executions used a generic plan (planned once) and how many a custom plan (planned on
each execution), and the message table's updates against its HOT updates (an update
that writes no index entry) and its dead rows. Drops the schema at the end.

With `--own-postgres` (a private instance, cluster_bench.py's) it also reads, through
pg_walinspect, the write-ahead log the cycles wrote: per message, the records of each
kind (a heap insert, update, HOT update or delete; an index entry, `Btree/INSERT_LEAF`;
a commit) and the bytes. Unlike CPU time these do not move with the machine's load: they
count what a message costs the database in rows, index entries and log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os

import asyncpg
import cluster_bench
from pg_floor import _messages

from conveyor.service import rules
from conveyor.store.base import Handle
from conveyor.store.postgres import PostgresStore

STATS_WAIT_S = 12.0  # backends report table statistics at most about once per 10 s idle


async def _main(cycles: int, wal: bool) -> None:
    pg_url = cluster_bench.PG_URL
    schema = "plans_" + os.urandom(4).hex()
    store = await PostgresStore(f"{pg_url}?schema={schema}", pool_size=1).open()
    inspector = await asyncpg.connect(pg_url) if wal else None
    try:
        queue = await store.create_queue("us-east-1", "q", {}, {}, 0)
        if inspector is not None:
            await inspector.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            start_lsn = await inspector.fetchval("SELECT pg_current_wal_insert_lsn()")
        for _ in range(cycles):
            now_ms = store.clock.now_ms()
            await store.send(queue, _messages(10, now_ms), now_ms, 0)
            async with store.claim(queue, 10, now_ms, 0, now_ms + 30_000,
                                   rules.picking()) as claim:
                handles = [Handle(m.seq, m.receipt or "") for m in claim.messages]
            await store.delete(queue, handles)
        if inspector is not None:
            await _wal_report(inspector, start_lsn, cycles * 10)
        print("| generic plans | custom plans | statement |\n|---|---|---|")
        pools = [p for p in vars(store).values() if isinstance(p, asyncpg.Pool)]
        for pool in pools:
            async with pool.acquire() as db:
                for generic, custom, text in await db.fetch(
                        "SELECT generic_plans, custom_plans, statement FROM"
                        " pg_prepared_statements WHERE generic_plans + custom_plans > 5"):
                    print(f"| {generic} | {custom} | `{' '.join(text.split())[:70]}...` |")
    finally:
        await store.close()
        if inspector is not None:
            await inspector.close()
    await asyncio.sleep(STATS_WAIT_S)
    conn = await asyncpg.connect(pg_url)
    try:
        row = await conn.fetchrow(
            "SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, n_dead_tup FROM"
            " pg_stat_user_tables WHERE schemaname=$1 AND relname='conveyor_messages'", schema)
        print(f"\nconveyor_messages: {dict(row)}")
        await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    finally:
        await conn.close()


async def _wal_report(db: asyncpg.Connection, start_lsn: str, messages: int) -> None:
    """What the log holds since start_lsn, per message, by record kind."""
    end_lsn = await db.fetchval("SELECT pg_current_wal_insert_lsn()")
    rows = await db.fetch(
        'SELECT "resource_manager/record_type" AS kind, count, combined_size, fpi_size'
        " FROM pg_get_wal_stats($1, $2, true) WHERE count > 0 ORDER BY count DESC",
        start_lsn, end_lsn)
    print(f"| WAL records per message ({messages} messages) | records | bytes |"
          " of which full-page images |")
    print("|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row['kind']} | {row['count'] / messages:.2f} |"
              f" {row['combined_size'] / messages:,.0f} | {row['fpi_size'] / messages:,.0f} |")
    records = sum(r["count"] for r in rows) / messages
    size = sum(r["combined_size"] for r in rows) / messages
    print(f"| **all** | **{records:.2f}** | **{size:,.0f}** | |\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=30, help="send, claim, delete rounds")
    parser.add_argument("--own-postgres", action="store_true",
                        help="a PostgreSQL of its own, and the log's records per message")
    args = parser.parse_args()
    with cluster_bench.own_postgres() if args.own_postgres else contextlib.nullcontext():
        asyncio.run(_main(args.cycles, args.own_postgres))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
