"""How PostgreSQL plans and stores a message's life on the PostgreSQL store.

    PYTHONPATH=. .venv/bin/python bench/pg_plans.py          # a few seconds
    PYTHONPATH=../other-tree .venv/bin/python bench/pg_plans.py   # another source tree

Opens the store on a fresh schema (pool of one connection), runs `--cycles` rounds of a
send of 10 messages, a claim of them and a delete, one at a time, then prints, for every
prepared statement run more than 5 times on the store's connections, how many of its
executions used a generic plan (planned once) and how many a custom plan (planned on
each execution), and the message table's updates against its HOT updates (an update
that writes no index entry) and its dead rows. Drops the schema at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os

import asyncpg
from cluster_bench import PG_URL
from pg_floor import _messages

from conveyor.service import rules
from conveyor.store.base import Handle
from conveyor.store.postgres import PostgresStore

STATS_WAIT_S = 12.0  # backends report table statistics at most about once per 10 s idle


async def _main(cycles: int) -> None:
    schema = "plans_" + os.urandom(4).hex()
    store = await PostgresStore(f"{PG_URL}?schema={schema}", pool_size=1).open()
    try:
        queue = await store.create_queue("us-east-1", "q", {}, {}, 0)
        for _ in range(cycles):
            now_ms = store.clock.now_ms()
            await store.send(queue, _messages(10, now_ms), now_ms, 0)
            async with store.claim(queue, 10, now_ms, 0, now_ms + 30_000,
                                   rules.picking()) as claim:
                handles = [Handle(m.seq, m.receipt or "") for m in claim.messages]
            await store.delete(queue, handles)
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
    await asyncio.sleep(STATS_WAIT_S)
    conn = await asyncpg.connect(PG_URL)
    try:
        row = await conn.fetchrow(
            "SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, n_dead_tup FROM"
            " pg_stat_user_tables WHERE schemaname=$1 AND relname='conveyor_messages'", schema)
        print(f"\nconveyor_messages: {dict(row)}")
        await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    finally:
        await conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=30, help="send, claim, delete rounds")
    asyncio.run(_main(parser.parse_args().cycles))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
