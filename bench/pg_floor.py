"""The floor of PostgreSQL's cost per message: the store's three statements, no HTTP.

    .venv/bin/python bench/pg_floor.py                 # about 20 s
    .venv/bin/python bench/pg_floor.py --duration 5 --batch 10 --tasks 6

A message's life on the PostgreSQL store is a send, a receive (claim) and a delete, each
one statement for a batch of standard-queue messages. This measures that directly, three
ways, one after the other: `embedded` drives the embedded store (JournaledStore in a
temporary directory: the like-for-like figure), `store` drives PostgresStore on a fresh
schema (send, claim, delete: the node's store code, pool and driver, without HTTP or the
service), and `driver` sends the same three statements on plain asyncpg connections (the
least a client can do). `--tasks` loops run at once, each on a queue of its own, each
sending a batch, claiming it and deleting it; with several, the PostgreSQL store shares
statements between them (group commit). CPU per message is this process's (from /proc)
and that of the PostgreSQL backends serving it (matched by client port, as in
cluster_bench.py); the difference to cluster_bench's figures is what HTTP, the service
and long polling add.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import time
import uuid

import asyncpg
import procstat
from cluster_bench import PG_URL, cpu_delta, postgres_cpu

from conveyor.clock import Clock
from conveyor.service import rules
from conveyor.store import postgres
from conveyor.store.base import Handle, NewMessage, QueueRecord, Store
from conveyor.store.journal import JournaledStore
from conveyor.store.postgres import PostgresStore

BODY = "x" * 256  # the pipeline benchmark's body size


def _messages(count: int, now_ms: int) -> list[NewMessage]:
    return [NewMessage(message_id=str(uuid.uuid4()), body=BODY, md5_body="0" * 32,
                       attributes=None, md5_attributes=None, system=None, sent_ms=now_ms,
                       sender_id="000000000000", visible_at_ms=now_ms)
            for _ in range(count)]


async def _store_loop(store: Store, queue: QueueRecord, batch: int, deadline: float) -> int:
    clock = Clock()
    done = 0
    while time.monotonic() < deadline:
        now_ms = clock.now_ms()
        await store.send(queue, _messages(batch, now_ms), now_ms, 0)
        async with store.claim(queue, batch, now_ms, 0, now_ms + 30_000,
                               rules.picking()) as claim:
            handles = [Handle(m.seq, m.receipt or "") for m in claim.messages]
        await store.delete(queue, handles)
        done += len(handles)
    return done


async def _driver_loop(conn: asyncpg.Connection, queue_id: int, batch: int,
                       deadline: float) -> int:
    done = 0
    while time.monotonic() < deadline:
        now_ms = int(time.time() * 1000)
        rows = [(queue_id, str(uuid.uuid4()), BODY, "0" * 32, None, None, None, now_ms,
                 "000000000000", now_ms, None, None) for _ in range(batch)]
        await conn.fetch(postgres._INSERT_MANY, *[list(c) for c in zip(*rows, strict=True)])
        receipt = secrets.token_hex(8)
        claimed = await conn.fetch(postgres._CLAIM, [queue_id], [now_ms], [0], [batch],
                                   [now_ms + 30_000], [receipt])
        await conn.fetch(postgres._DELETE, [r["seq"] for r in claimed],
                         [receipt] * len(claimed), [queue_id] * len(claimed),
                         [-1] * len(claimed), [False] * len(claimed))
        done += len(claimed)
    return done


async def _measure(mode: str, dsn: str, tasks: int, batch: int, duration_s: float,
                   warmup_s: float) -> dict[str, float]:
    embedded_dir = tempfile.TemporaryDirectory(prefix="pg-floor-") if mode == "embedded" else None
    store: Store = (JournaledStore(embedded_dir.name) if embedded_dir
                    else await PostgresStore(dsn, pool_size=tasks).open())
    conns: list[asyncpg.Connection] = []
    try:
        queues = [await store.create_queue("us-east-1", f"floor-{mode}-{i}",
                                           {"VisibilityTimeout": "30"}, {}, 0)
                  for i in range(tasks)]
        if isinstance(store, PostgresStore) and mode == "driver":
            conns = [await asyncpg.connect(store.dsn, server_settings=store._settings)
                     for _ in range(tasks)]

        async def run(seconds: float) -> int:
            deadline = time.monotonic() + seconds
            if mode in ("store", "embedded"):
                loops = [_store_loop(store, q, batch, deadline) for q in queues]
            else:
                loops = [_driver_loop(c, q.id, batch, deadline)
                         for c, q in zip(conns, queues, strict=True)]
            return sum(await asyncio.gather(*loops))

        await run(warmup_s)
        me = os.getpid()
        cpu0, (back0, _) = procstat.read_stat(me).own_cpu_s, postgres_cpu([me])
        start = time.monotonic()
        messages = await run(duration_s)
        elapsed = time.monotonic() - start
        cpu1, (back1, _) = procstat.read_stat(me).own_cpu_s, postgres_cpu([me])
    finally:
        for conn in conns:
            await conn.close()
        await store.close()
        if embedded_dir:
            embedded_dir.cleanup()
    node_us = (cpu1 - cpu0) / messages * 1e6
    backend_us = cpu_delta(back0, back1, new_ones=True) / messages * 1e6
    return {"messages": messages, "msgs_per_s": messages / elapsed, "client_us": node_us,
            "backend_us": backend_us, "total_us": node_us + backend_us}


async def _main(args: argparse.Namespace) -> None:
    schema = f"bench_{secrets.token_hex(6)}"
    dsn = f"{PG_URL}?schema={schema}"
    print(f"{args.tasks} loops, batches of {args.batch}, {args.duration} s each; "
          f"µs of CPU per message", flush=True)
    print("| mode | msgs/s | client µs/msg | PG backend µs/msg | total µs/msg |")
    print("|---|---|---|---|---|")
    try:
        for mode in ("embedded", "store", "driver"):
            r = await _measure(mode, dsn, args.tasks, args.batch, args.duration, args.warmup)
            print(f"| {mode} | {r['msgs_per_s']:,.0f} | {r['client_us']:.1f} | "
                  f"{r['backend_us']:.1f} | {r['total_us']:.1f} |", flush=True)
    finally:
        conn = await asyncpg.connect(PG_URL)
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=6, help="loops at once (default %(default)s)")
    parser.add_argument("--batch", type=int, default=10,
                        help="messages per send / claim / delete (default %(default)s)")
    parser.add_argument("--duration", type=float, default=5.0,
                        help="seconds measured per mode (default %(default)s)")
    parser.add_argument("--warmup", type=float, default=2.0,
                        help="seconds unmeasured before each (default %(default)s)")
    asyncio.run(_main(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
