"""Does one operation on a queue with a big backlog hold up every other request?

    .venv/bin/python bench/backlog.py [--messages 1000000] [--ops purge ...] [--src TREE]
        [--store postgresql://127.0.0.1:5432/test]

For each operation: a fresh Conveyor server whose queue holds --messages messages
(written into its SQLite file while it is stopped, or with --store into a schema of its
own in that PostgreSQL database, dropped afterwards: sending a million through the API
would take minutes), then the operation, while a probe asks GET /health every 10 ms.
It reports how long the operation took and the slowest /health answer meanwhile, i.e.
how long any other client had to wait.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import asyncpg
import peers
from sqs_client import make_client
from sqs_load import require_loopback

OPS = ("purge", "delete", "attributes", "sweep", "idle", "fifo-receive", "redrive")
IDLE_S = 12.0  # the retention sweep runs every 5 s
REDRIVE_S = 5.0  # of a move task at SQS's top rate, 500 messages a second


def _fill(db_path: Path, count: int, sent_ms: int, fifo: bool) -> None:
    """Copy the one message the API sent `count` times, as fast as SQLite takes them."""
    db = apsw.Connection(str(db_path))
    cursor = db.execute("SELECT * FROM messages")
    seed = list(cursor.fetchone())
    column = {name: i for i, (name, _) in enumerate(cursor.getdescription())}

    def rows() -> Any:
        for i in range(1, count + 1):
            seed[column["seq"]] += 1
            seed[column["message_id"]] = f"backlog-{i}"
            seed[column["sent_ms"]] = seed[column["visible_at"]] = sent_ms
            if fifo:
                seed[column["group_id"]] = f"group-{i % 100}"
                seed[column["dedup_key"]] = f"backlog-{i}"
            yield tuple(seed)

    with db:
        db.executemany(f"INSERT INTO messages VALUES ({','.join('?' * len(seed))})", rows())
    db.close()


def _redrive(sqs: Any, url: str, destination: str) -> None:
    """Move the backlog (a dead-letter queue) to another queue for REDRIVE_S; stop."""
    arns = [sqs.get_queue_attributes(QueueUrl=u, AttributeNames=["QueueArn"])["Attributes"]
            ["QueueArn"] for u in (url, destination)]
    handle = sqs.start_message_move_task(SourceArn=arns[0], DestinationArn=arns[1])
    time.sleep(REDRIVE_S)
    sqs.cancel_message_move_task(TaskHandle=handle["TaskHandle"])


async def _fill_postgres(dsn: str, schema: str, count: int, sent_ms: int,
                         fifo: bool) -> None:
    """The same on PostgreSQL, in one statement."""
    db = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        await db.execute(
            "INSERT INTO conveyor_messages (queue_id, message_id, body, md5_body, attributes,"
            " md5_attributes, system, sent_ms, sender_id, visible_at, group_id, dedup_key)"
            " SELECT seed.queue_id, 'backlog-' || i, seed.body, seed.md5_body,"
            " seed.attributes, seed.md5_attributes, seed.system, $1, seed.sender_id, $1,"
            " CASE WHEN $2 THEN 'group-' || (i % 100) END, CASE WHEN $2 THEN 'backlog-' || i"
            " END FROM (SELECT * FROM conveyor_messages LIMIT 1) AS seed,"
            " generate_series(1, $3) AS i", sent_ms, fifo, count)
        await db.execute("ANALYZE conveyor_messages")
    finally:
        await db.close()


async def _drop_schema(dsn: str, schema: str) -> None:
    db = await asyncpg.connect(dsn)
    try:
        await db.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await db.close()


def _probe(endpoint: str, stop: threading.Event, waits: list[float]) -> None:
    host, port = endpoint.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    while not stop.is_set():
        started = time.perf_counter()
        connection.request("GET", "/health")
        connection.getresponse().read()
        waits.append(time.perf_counter() - started)
        time.sleep(0.01)


def measure(op: str, count: int, work: Path, src: Path | None,
            store: str | None) -> dict[str, Any]:
    if not store:
        return _measure(op, count, work, src, ["--data-dir", str(work / op)], None)
    schema = f"backlog_{op.replace('-', '_')}_{time.time_ns()}"
    try:
        return _measure(op, count, work, src, [
            "--store", f"{store}{'&' if '?' in store else '?'}schema={schema}"], (store, schema))
    finally:
        asyncio.run(_drop_schema(store, schema))


def _measure(op: str, count: int, work: Path, src: Path | None, args: list[str],
             postgres: tuple[str, str] | None) -> dict[str, Any]:
    """`args` choose the store (--data-dir comes after peers' own: the last one counts);
    `postgres` is (dsn, schema) for the PostgreSQL store."""
    fifo = op == "fifo-receive"
    name = "backlog.fifo" if fifo else "backlog"
    server = peers.start("conveyor", work / "logs", args, label=op, src=src)
    destination = ""
    try:  # the queue and one message through the API, as a template for the rest
        sqs = make_client(server.endpoint)
        attributes = {"MessageRetentionPeriod": "60"}
        extra = {}
        if fifo:
            attributes |= {"FifoQueue": "true", "MessageRetentionPeriod": "3600"}
            extra = {"MessageGroupId": "group-0", "MessageDeduplicationId": "seed"}
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        if op == "redrive":  # the backlog is this queue's dead letters
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
            redrive = {"deadLetterTargetArn": arn["Attributes"]["QueueArn"],
                       "maxReceiveCount": "3"}
            destination = sqs.create_queue(QueueName="destination", Attributes={
                "RedrivePolicy": json.dumps(redrive)})["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="x" * 256, **extra)
    finally:
        server.stop()
    sent_ms = int(time.time() * 1000) - (120_000 if op == "sweep" else 0)
    if postgres:
        asyncio.run(_fill_postgres(*postgres, count, sent_ms, fifo))
    else:
        _fill(work / op / "conveyor.db", count, sent_ms, fifo)

    server = peers.start("conveyor", work / "logs", args, label=op, src=src)
    sqs = make_client(server.endpoint)
    actions: dict[str, Callable[[], object]] = {
        "purge": lambda: sqs.purge_queue(QueueUrl=url),
        "delete": lambda: sqs.delete_queue(QueueUrl=url),
        "attributes": lambda: [sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
                               for _ in range(10)],
        "sweep": lambda: time.sleep(IDLE_S),
        "idle": lambda: time.sleep(IDLE_S),
        "fifo-receive": lambda: [sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
                                 for _ in range(20)],  # after 10, every group is in flight
        "redrive": lambda: _redrive(sqs, url, destination),
    }
    waits: list[float] = []
    stop = threading.Event()
    probe = threading.Thread(target=_probe, args=(server.endpoint, stop, waits))
    try:
        probe.start()
        time.sleep(0.3)
        started = time.perf_counter()
        actions[op]()
        took = time.perf_counter() - started
        time.sleep(0.3)
    finally:
        stop.set()
        probe.join()
        server.stop()
    return {"op": op, "messages": count, "op_s": took, "health_max_ms": max(waits) * 1000,
            "health_p50_ms": statistics.median(waits) * 1000, "probes": len(waits)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--ops", nargs="+", choices=OPS, default=list(OPS))
    parser.add_argument("--src", type=Path, help="run Conveyor from this source tree instead"
                        " (a git worktree of another commit, say)")
    parser.add_argument("--store", metavar="postgresql://...",
                        help="the PostgreSQL store in this (loopback) database, not SQLite")
    args = parser.parse_args()
    if args.store:
        require_loopback(args.store)
    work = Path(tempfile.mkdtemp(prefix="conveyor-backlog-"))
    print("| operation | messages | took s | slowest /health ms | /health p50 ms |")
    print("|---|---|---|---|---|")
    try:
        for op in args.ops:
            r = measure(op, args.messages, work, args.src and args.src.resolve(), args.store)
            print(f"| {r['op']} | {r['messages']:,} | {r['op_s']:.2f} | "
                  f"{r['health_max_ms']:,.0f} | {r['health_p50_ms']:.1f} |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
