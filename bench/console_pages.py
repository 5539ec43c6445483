"""How heavy and how fast are the console's pages with many queues and a big queue?

    .venv/bin/python bench/console_pages.py [--queues 10000] [--messages 1000000]
        [--repeat 5] [--src TREE]

One Conveyor server (embedded store, no keys): --queues queues made through the API,
then one more, `big`, whose --messages messages are written into the SQLite file while
the server is stopped (sending a million through the API would take minutes; see
backlog.py), and every queue's charts filled to their bound (a row in every bucket of
every range: the most the activity table holds, ACTIVITY_ROWS a queue). Then each console
page is fetched --repeat times, as a browser does (GET, whole body read), and its size and
the median and slowest time are reported, with the server's CPU time per fetch (from
/proc: what the page costs the server, whatever else the machine runs). Page 10,000 of the
big queue is reached as next → reaches it, by its keyset cursor
(`?page=10000&after=<visible_at>.<seq>`). The figures go into BENCHMARKS.md ("Console
pages").
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import apsw
import peers
from backlog import _fill
from sqs_client import make_client

from conveyor.service.activity import RANGES

PAGE_SIZE = 50  # the console's messages a page (console/messages.py)
DEEP_PAGE = 10_000
ACTIVITY_ROWS = sum(r.points + 1 for r in RANGES.values())

PAGES = (
    ("overview, first page", "/console"),
    ("overview, page 50", "/console?page=50"),
    ("overview, filtered by name", "/console?q=queue-0099"),
    ("overview, charts of 24 h", "/console?range=24h"),
    ("overview, charts of 7 d", "/console?range=7d"),
    ("big queue", "/console/queues/us-east-1/big"),
    ("big queue, charts of 7 d", "/console/queues/us-east-1/big?range=7d"),
    ("big queue, page 200 (messages 9,951-10,000)", "/console/queues/us-east-1/big?page=200"),
    ("big queue, search by message id", "/console/queues/us-east-1/big?search=backlog-9000"),
    ("big queue, search by body text (no match)", "/console/queues/us-east-1/big?search=zz"),
    ("one message", "/console/queues/us-east-1/big/messages/backlog-5000"),
)


def _make_queues(endpoint: str, count: int) -> None:
    clients = [make_client(endpoint) for _ in range(8)]

    def make(i: int) -> None:
        clients[i % len(clients)].create_queue(QueueName=f"queue-{i:05d}")

    with ThreadPoolExecutor(len(clients)) as pool:
        list(pool.map(make, range(count)))


def _deep_page(db_path: Path, messages: int) -> tuple[tuple[str, str], ...]:
    """The big queue's page DEEP_PAGE as next → links to it: the cursor of the last
    message of the page before (its visible_at and seq), if the queue is that deep."""
    before = (DEEP_PAGE - 1) * PAGE_SIZE
    if messages <= before:
        return ()
    db = apsw.Connection(str(db_path))
    visible_at, seq = db.execute(
        "SELECT visible_at, seq FROM messages WHERE queue_id=(SELECT id FROM queues WHERE"
        " name='big') ORDER BY visible_at, seq LIMIT 1 OFFSET ?", (before - 1,)).fetchone()
    db.close()
    first = before + 1
    return ((f"big queue, page {DEEP_PAGE:,} (messages {first:,}-{first + PAGE_SIZE - 1:,}, "
             "by its cursor)",
             f"/console/queues/us-east-1/big?page={DEEP_PAGE}&after={visible_at}.{seq}"),)


def _fill_activity(db_path: Path) -> None:
    """Every queue's charts at their bound: a row in each bucket of each range, up to now."""
    now_minute = int(time.time()) // 60
    db = apsw.Connection(str(db_path))
    if not db.execute("SELECT 1 FROM sqlite_master WHERE name='activity'").fetchall():
        db.close()  # a tree from before the charts were kept in the store (--src)
        return
    ids = [row[0] for row in db.execute("SELECT id FROM queues")]

    def rows() -> Any:
        for queue_id in ids:
            for r in RANGES.values():
                first = r.first_minute(now_minute)
                for i in range(r.points + 1):
                    yield (queue_id, r.span_min, first + i * r.span_min, 5 * r.span_min,
                           5 * r.span_min, 5 * r.span_min, i % 3, i % 7, 30)

    with db:
        db.executemany("INSERT OR REPLACE INTO activity VALUES (?,?,?,?,?,?,?,?,?)", rows())
    db.close()


def _fetch(endpoint: str, path: str) -> tuple[float, int, int]:
    host, port = endpoint.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=120)
    started = time.perf_counter()
    connection.request("GET", path)
    response = connection.getresponse()
    body = response.read()
    took = time.perf_counter() - started
    connection.close()
    return took, len(body), response.status


def measure(queues: int, messages: int, repeat: int, work: Path,
            src: Path | None) -> list[dict[str, Any]]:
    args = ["--data-dir", str(work / "data")]
    server = peers.start("conveyor", work / "logs", args, label="console", src=src)
    try:
        _make_queues(server.endpoint, queues)
        sqs = make_client(server.endpoint)
        url = sqs.create_queue(QueueName="big")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody='{"order": 1, "note": "' + "x" * 230 + '"}')
    finally:
        server.stop()
    _fill(work / "data" / "conveyor.db", messages, int(time.time() * 1000), fifo=False)
    deep = _deep_page(work / "data" / "conveyor.db", messages)
    _fill_activity(work / "data" / "conveyor.db")
    server = peers.start("conveyor", work / "logs", args, label="console", src=src)
    try:
        rows = []
        for label, path in PAGES + deep:
            _fetch(server.endpoint, path)  # the first read warms SQLite's page cache
            cpu_before = server.cpu_s()
            runs = [_fetch(server.endpoint, path) for _ in range(repeat)]
            cpu_s = (server.cpu_s() - cpu_before) / repeat
            statuses = {status for _, _, status in runs}
            times = [t for t, _, _ in runs]
            rows.append({"page": label, "path": path, "status": statuses,
                         "bytes": runs[-1][1], "median_s": statistics.median(times),
                         "max_s": max(times), "cpu_s": cpu_s})
        return rows
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--src", type=Path, help="a worktree of another commit to measure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="console-bench-") as tmp:
        rows = measure(args.queues, args.messages, args.repeat, Path(tmp), args.src)
    print(f"{args.queues:,} queues, one with {args.messages:,} messages, every queue's "
          f"charts full ({ACTIVITY_ROWS} rows each); {args.repeat} fetches each\n")
    print("| page | status | KiB | median ms | slowest ms | server CPU ms |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['page']} | {'/'.join(map(str, sorted(r['status'])))} | "
              f"{r['bytes'] / 1024:,.1f} | {r['median_s'] * 1000:,.0f} | "
              f"{r['max_s'] * 1000:,.0f} | {r['cpu_s'] * 1000:,.0f} |")


if __name__ == "__main__":
    main()
