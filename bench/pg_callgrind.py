"""Instructions per message of the PostgreSQL store, the node's and its backends', by callgrind.

    .venv/bin/python bench/pg_callgrind.py [--messages 600] [--tasks 6]   # about 3 minutes

CPU time of PostgreSQL's backends on these shared machines moves by a third between runs,
which hides any change to a statement or the schema. This counts instructions instead, on
a PostgreSQL of its own run whole under valgrind's callgrind (initdb in a temporary
directory, a free port, fsync and synchronous_commit on), with the store driven the way
`pg_floor.py` drives it: `--tasks` loops at once, each on a queue of its own, each sending
a batch of 10, claiming it and deleting it, so that the store shares statements between
the loops as it does under load. The driving process runs under callgrind too. After a
warm-up the process's counts are dumped at a `getppid()` marker (`--dump-before=getppid`),
`--messages` go through, and they are dumped again; the backends' are what they ran over
their lives, in a run with the messages less one without them (the same warm-up). Per
message, for

- the embedded store (JournaledStore on a temporary directory): the like-for-like figure;
- the PostgreSQL store's client side: the node's store code, pool and driver;
- the PostgreSQL backends serving it (every client backend of the instance: the pool's
  and the LISTEN connection's).

No HTTP, no service: add what those cost (the same on both stores: `callgrind.py`'s whole
server figure less its store's share) to compare with cluster_bench's node + backends.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import orjson
import peers
from callgrind import totals, valgrind
from pg_floor import _messages

BATCH = 10
START_TIMEOUT_S = 300.0  # initdb's server under valgrind


def _postgres_bin() -> Path:
    sys.path.insert(0, str(peers.REPO_DIR))
    from tests.pg_instance import _unavailable, postgres_bin_dir

    reason = _unavailable()
    bin_dir = postgres_bin_dir()
    if reason is not None or bin_dir is None:
        raise SystemExit(f"cannot start a PostgreSQL instance: {reason}")
    return bin_dir


def _as_postgres(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


async def _loop(store: object, queue: object, cycles: int) -> None:
    from conveyor.clock import Clock
    from conveyor.service import rules
    from conveyor.store.base import Handle

    clock = Clock()
    for _ in range(cycles):
        now_ms = clock.now_ms()
        await store.send(queue, _messages(BATCH, now_ms), now_ms, 0)  # type: ignore[attr-defined]
        async with store.claim(queue, BATCH, now_ms, 0, now_ms + 30_000,  # type: ignore[attr-defined]
                               rules.picking()) as claim:
            handles = [Handle(m.seq, m.receipt or "") for m in claim.messages]
        if len(handles) != BATCH:
            raise RuntimeError(f"claimed {len(handles)} of {BATCH}")
        await store.delete(queue, handles)  # type: ignore[attr-defined]


async def _backends(dsn: str) -> list[int]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT pid FROM pg_stat_activity WHERE backend_type ="
                                " 'client backend' AND pid <> pg_backend_pid()")
    finally:
        await conn.close()
    return [r["pid"] for r in rows]


async def _child(mode: str, dsn: str, tasks: int, messages: int, warmup: int,
                 report: Path) -> None:
    """Under callgrind: warm up, dump, drive `messages`, dump."""
    from conveyor.store.journal import JournaledStore
    from conveyor.store.postgres import PostgresStore

    directory = tempfile.mkdtemp(prefix="conveyor-pg-callgrind-")
    schema = f"cg_{messages}"
    store = (JournaledStore(directory) if mode == "embedded"
             else await PostgresStore(f"{dsn}?schema={schema}", pool_size=tasks).open())
    try:
        queues = [await store.create_queue("us-east-1", f"q{i}", {"VisibilityTimeout": "30"},
                                           {}, 0) for i in range(tasks)]
        per_task = max(1, warmup // (BATCH * tasks))
        await asyncio.gather(*(_loop(store, q, per_task) for q in queues))
        pids = await _backends(dsn) if mode == "postgresql" else []
        os.getppid()  # the marker: callgrind dumps this process's counts so far
        per_task = messages // (BATCH * tasks)
        await asyncio.gather(*(_loop(store, q, per_task) for q in queues))
        os.getppid()
    finally:
        await store.close()
        shutil.rmtree(directory, ignore_errors=True)
    report.write_bytes(orjson.dumps({"pids": pids, "messages": per_task * BATCH * tasks}))


def _run_child(mode: str, dsn: str, args: argparse.Namespace, work: Path,
               messages: int) -> tuple[float, list[int]]:
    """The driving process's instructions per message (between its markers), and the
    pids of the backends that served it."""
    out = work / f"{mode}-{messages}.cg"
    report = work / f"{mode}-{messages}.json"
    subprocess.run([*valgrind(out, "--dump-before=getppid"), sys.executable, __file__,
                    "--_child", mode, "--_dsn", dsn, "--_report", str(report),
                    "--tasks", str(args.tasks), "--messages", str(messages),
                    "--warmup", str(args.warmup)],
                   check=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    done = orjson.loads(report.read_bytes())
    client = totals(Path(f"{out}.2")) / done["messages"] if done["messages"] else 0.0
    return client, done["pids"]


def _backend_totals(work: Path, pids: list[int]) -> int:
    """What the backends ran over their lives (callgrind writes it as each one exits)."""
    deadline = time.monotonic() + 120
    while not all((work / f"pg.{pid}").exists() and (work / f"pg.{pid}").stat().st_size
                  for pid in pids):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the backends' counts did not appear in {work}")
        time.sleep(1)
    time.sleep(2)  # the last one may still be writing
    return sum(totals(work / f"pg.{pid}") for pid in pids)


def _start_postgres(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    bin_dir = _postgres_bin()
    data = work / "data"
    if os.geteuid() == 0:
        shutil.chown(work, "postgres", "postgres")
    subprocess.run(_as_postgres([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                                 "-A", "trust", "--no-sync", "-E", "UTF8"]),
                   check=True, capture_output=True)
    port = peers.free_port()
    settings = {"listen_addresses": "127.0.0.1", "fsync": "on", "synchronous_commit": "on",
                "shared_buffers": "128MB", "autovacuum": "off"}
    argv = [*valgrind(work / "pg.%p"), str(bin_dir / "postgres"), "-D", str(data),
            "-p", str(port), "-k", str(work), *(f"-c{k}={v}" for k, v in settings.items())]
    log = open(work / "postgres.log", "wb")  # noqa: SIM115 - kept open for the server
    server = subprocess.Popen(_as_postgres(argv), stdout=log, stderr=subprocess.STDOUT)
    dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            asyncio.run(_backends(dsn))
            return server, dsn
        except (OSError, asyncpg.PostgresError):
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise SystemExit(f"PostgreSQL under valgrind did not start: {work}/postgres.log"
                                 ) from None
            time.sleep(1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=600,
                        help="messages measured per store (a multiple of 10 x --tasks)")
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--tasks", type=int, default=6, help="loops at once (default 6)")
    parser.add_argument("--_child", choices=["embedded", "postgresql"], help=argparse.SUPPRESS)
    parser.add_argument("--_dsn", help=argparse.SUPPRESS)
    parser.add_argument("--_report", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._child:
        asyncio.run(_child(args._child, args._dsn, args.tasks, args.messages, args.warmup,
                           Path(args._report)))
        return 0
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    work = Path(tempfile.mkdtemp(prefix="conveyor-pg-callgrind-"))
    embedded, _ = _run_child("embedded", "", args, work, args.messages)
    server, dsn = _start_postgres(work)
    try:
        # Backends live as long as their connections: the same warm-up with and without the
        # measured messages, the difference per message.
        _, pids = _run_child("postgresql", dsn, args, work, 0)
        base = _backend_totals(work, pids)
        client, pids = _run_child("postgresql", dsn, args, work, args.messages)
        backends = (_backend_totals(work, pids) - base) / args.messages
    finally:
        subprocess.run(_as_postgres([str(_postgres_bin() / "pg_ctl"), "-D", str(work / "data"),
                                     "-m", "fast", "-t", "300", "stop"]), capture_output=True)
        server.wait(300)
        shutil.rmtree(work / "data", ignore_errors=True)  # the counts stay, the database goes
    total = client + backends
    print(f"Instructions per message, {args.tasks} loops of send {BATCH} / claim / delete, "
          f"{args.messages} messages after {args.warmup}:\n")
    print("| store | client (node) | PostgreSQL backends | total | ÷ embedded |")
    print("|---|---:|---:|---:|---:|")
    print(f"| embedded (journal + SQLite) | {embedded:,.0f} | - | {embedded:,.0f} | 1.00x |")
    print(f"| PostgreSQL | {client:,.0f} | {backends:,.0f} | {total:,.0f} | "
          f"{total / embedded:.2f}x |")
    print(f"\ncallgrind's files are in {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
