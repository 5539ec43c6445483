"""Conveyor on PostgreSQL with 1, 2 and 3 server nodes beside one node on SQLite, in one run.

    .venv/bin/python bench/cluster_bench.py                  # about 2 minutes on 2 cores
    .venv/bin/python bench/cluster_bench.py --rounds 1 --duration 3

Round by round, configuration by configuration (so other load on the machine hits all
alike): start the configuration's nodes on free loopback ports (a fresh --data-dir each;
the PostgreSQL nodes of one configuration share a fresh random schema), run unrecorded
warm-up load, then the batched pipeline with the clients spread over the nodes: pair i
sends through node i % n and receives through node (i + 1) % n, so with several nodes
every message crosses nodes, as behind a load balancer. Then every node is stopped by
its PID and the schema dropped. With --rounds N each figure is the median of N rounds.

Server CPU is the nodes' own (from /proc, summed). PostgreSQL's share is read from /proc
too: the backends serving the nodes' connections (matched by the client port their
process title shows) and, apart, the server's background processes (WAL writer,
checkpointer, ...), which also serve anyone else using that PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import shlex
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import asyncpg
import peers
import procstat
from pipeline import PipelineConfig, run_pipeline
from run import RESULTS_DIR, combine, machine_info
from sqs_load import LoadSettings

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"  # the shared one; --own-postgres: ours
PG_PORT = 5432
# A private instance's settings: those of the shared one, and what the PostgreSQL
# instruments read (pg_stat_statements; pg_walinspect needs no preloading).
OWN_SETTINGS = {"fsync": "on", "synchronous_commit": "on", "shared_buffers": "128MB",
                "max_connections": "200", "shared_preload_libraries": "pg_stat_statements"}
CONFIGS = [("sqlite", 1), ("postgresql", 1), ("postgresql", 2), ("postgresql", 3)]
CLIENT_BACKEND = re.compile(r"\(\d+\)")  # "postgres: ... 127.0.0.1(56134) idle"


# --- PostgreSQL's CPU, from /proc ------------------------------------------------------

def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        fds = list((procstat.PROC / str(pid) / "fd").iterdir())
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def local_ports_to(pids: list[int], remote_port: int) -> set[int]:
    """Local TCP ports of the pids' sockets connected to remote_port."""
    inodes = set().union(*(_socket_inodes(pid) for pid in pids))
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in (procstat.PROC / "net" / table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == remote_port:
                ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def _postgres_processes() -> dict[int, str]:
    """PID -> command line (process title) of every PostgreSQL process."""
    found = {}
    for entry in procstat.PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "postgres":
                continue
            found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
    return found


def _own_cpu(pids: list[int]) -> dict[int, float]:
    stats = {pid: procstat.read_stat(pid) for pid in pids}
    return {pid: stat.own_cpu_s for pid, stat in stats.items() if stat is not None}


def postgres_cpu(node_pids: list[int]) -> tuple[dict[int, float], dict[int, float]]:
    """CPU so far of (the backends serving these nodes, PostgreSQL's background processes)."""
    ports = local_ports_to([p for pid in node_pids for p in (pid, *procstat.descendants(pid))],
                           PG_PORT)
    backends, background = [], []
    for pid, title in _postgres_processes().items():
        client = CLIENT_BACKEND.search(title)
        if client is None:
            background.append(pid)
        elif int(client.group()[1:-1]) in ports:
            backends.append(pid)
    return _own_cpu(backends), _own_cpu(background)


def cpu_delta(before: dict[int, float], after: dict[int, float], new_ones: bool) -> float:
    """CPU used between two readings; processes born in between count whole if new_ones."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items()
               if new_ones or pid in before)


@dataclass
class ClusterMeter:
    """The server-CPU callable for run_pipeline: sums the nodes, notes PostgreSQL's CPU too.

    run_pipeline reads it at the start and the end of its measurement; the PostgreSQL
    readings taken at the same moments are kept for postgres_figures().
    """

    nodes: list[peers.RunningServer]
    readings: list[tuple[dict[int, float], dict[int, float]]] = field(default_factory=list)

    def __call__(self) -> float:
        if any(node.name == "conveyor-pg" for node in self.nodes):
            self.readings.append(postgres_cpu([node.pid for node in self.nodes]))
        return sum(node.cpu_s() for node in self.nodes)

    def postgres_figures(self) -> dict[str, float | None]:
        if len(self.readings) < 2:
            return {"pg_backend_cpu_s": None, "pg_background_cpu_s": None, "pg_backends": None}
        (back0, bg0), (back1, bg1) = self.readings[0], self.readings[-1]
        return {"pg_backend_cpu_s": round(cpu_delta(back0, back1, new_ones=True), 3),
                "pg_background_cpu_s": round(cpu_delta(bg0, bg1, new_ones=False), 3),
                "pg_backends": len(back1)}


@contextlib.contextmanager
def own_postgres() -> Iterator[str]:
    """A PostgreSQL of the benchmark's own (initdb in a temporary directory, a free port,
    the shared one's durability settings), so that no one else's load lands in its
    figures; PG_URL and PG_PORT point at it meanwhile. Removed afterwards."""
    global PG_URL, PG_PORT
    sys.path.insert(0, str(peers.REPO_DIR))
    from tests.pg_instance import PostgresInstance, _unavailable

    reason = _unavailable()
    if reason is not None:
        raise SystemExit(f"cannot start a PostgreSQL instance: {reason}")
    instance = PostgresInstance(OWN_SETTINGS).create()
    shared = PG_URL, PG_PORT
    PG_URL, PG_PORT = instance.url, instance.port
    try:
        yield instance.url
    finally:
        PG_URL, PG_PORT = shared
        instance.destroy()


# --- nodes and schemas -----------------------------------------------------------------

async def _sql(statement: str) -> None:
    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def start_nodes(store: str, count: int, log_dir: Path, label: str,
                extra_args: list[str]) -> tuple[list[peers.RunningServer], str | None]:
    """Start `count` nodes; PostgreSQL ones on a fresh schema (returned, to drop later)."""
    schema = f"bench_{secrets.token_hex(6)}" if store == "postgresql" else None
    args = ["--store", f"{PG_URL}?schema={schema}"] if schema else []
    nodes: list[peers.RunningServer] = []
    try:
        for i in range(count):
            node = peers.start("conveyor", log_dir, [*args, *extra_args], label=f"{label}-{i}")
            node.name = "conveyor-pg" if schema else "conveyor"
            nodes.append(node)
    except BaseException:
        stop_nodes(nodes, schema)
        raise
    return nodes, schema


def stop_nodes(nodes: list[peers.RunningServer], schema: str | None) -> None:
    for node in nodes:
        node.stop()
    if schema:
        asyncio.run(_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))


# --- one configuration -----------------------------------------------------------------

def measure(store: str, count: int, settings: LoadSettings, warmup_s: float, log_dir: Path,
            extra_args: list[str]) -> dict[str, Any]:
    label = f"{store}-{count}"
    print(f"[cluster] {label} ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    nodes: list[peers.RunningServer] = []
    schema = None
    try:
        nodes, schema = start_nodes(store, count, log_dir, label, extra_args)
        endpoints = tuple(node.endpoint for node in nodes)
        cfg = PipelineConfig(endpoint=endpoints[0], batched=True, clients=settings.clients,
                             duration_s=settings.duration_s, backlog=settings.backlog_batched,
                             endpoints=endpoints, consumer_shift=1 if count > 1 else 0)
        if warmup_s > 0:
            run_pipeline(replace(cfg, duration_s=warmup_s), lambda: 0.0)
        meter = ClusterMeter(nodes)
        result: dict[str, Any] = run_pipeline(cfg, meter).as_dict()
        result |= meter.postgres_figures()
        # The harness counts PostgreSQL as "other" CPU: here it is ours, so take it out.
        pg_cpu = (result["pg_backend_cpu_s"] or 0.0) + (result["pg_background_cpu_s"] or 0.0)
        result["other_cpu_s"] = round(max(0.0, result["other_cpu_s"] - pg_cpu), 3)
    except Exception as exc:  # noqa: BLE001 - one failing configuration must not stop the run
        result = {"error": f"{type(exc).__name__}: {exc}"[:200]}
    finally:
        stop_nodes(nodes, schema)
    result |= derived(result)
    result["wall_s"] = round(time.monotonic() - started, 1)
    print(f"[cluster]   {json.dumps(result)}", file=sys.stderr, flush=True)
    return result


def derived(result: dict[str, Any]) -> dict[str, Any]:
    """CPU microseconds per message: the nodes', and the nodes' plus their PG backends'."""
    msgs = result.get("messages_received")
    if not msgs:
        return {}
    nodes = result["server_cpu_s"]
    backends = result.get("pg_backend_cpu_s") or 0.0
    return {"node_cpu_us_per_msg": round(nodes / msgs * 1e6, 1),
            "total_cpu_us_per_msg": round((nodes + backends) / msgs * 1e6, 1)}


# --- report ----------------------------------------------------------------------------

COLUMNS = [
    ("msgs/s", "messages_per_s"),
    ("p50 ms", "latency_p50_ms"),
    ("p99 ms", "latency_p99_ms"),
    ("node CPU s", "server_cpu_s"),
    ("node CPU µs/msg", "node_cpu_us_per_msg"),
    ("PG backend CPU s", "pg_backend_cpu_s"),
    ("node + PG backend µs/msg", "total_cpu_us_per_msg"),
    ("PG background CPU s", "pg_background_cpu_s"),
    ("PG backends", "pg_backends"),
    ("client CPU s", "client_cpu_s"),
    ("other CPU s", "other_cpu_s"),
    ("msgs", "messages_received"),
    ("errors", "errors"),
]
RATIOS = [  # a configuration's figure ÷ the SQLite node's
    ("msgs/s", "messages_per_s"),
    ("node CPU per msg", "node_cpu_us_per_msg"),
    ("node + PG backend CPU per msg", "total_cpu_us_per_msg"),
]


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def markdown(results: dict[str, Any]) -> str:
    configs = results["configs"]
    header = ["configuration", *[title for title, _ in COLUMNS]]
    lines = [f"Command: `{results['command']}`", "", _row(header),
             "|" + "|".join("---" for _ in header) + "|"]
    for name, result in configs.items():
        cells = ([result["error"]] if "error" in result
                 else [_fmt(result.get(key)) for _, key in COLUMNS])
        lines.append(_row([name, *cells]))
    base = configs.get("SQLite, 1 node", {})
    header = ["figure ÷ SQLite node's", *[title for title, _ in RATIOS]]
    lines += ["", _row(header), "|" + "|".join("---" for _ in header) + "|"]
    for name, result in configs.items():
        cells = []
        for _, key in RATIOS:
            mine, theirs = result.get(key), base.get(key)
            cells.append(f"{mine / theirs:.2f}x" if mine and theirs else "n/a")
        lines.append(_row([name, *cells]))
    return "\n".join(lines) + "\n"


def config_name(store: str, count: int) -> str:
    return f"{'SQLite' if store == 'sqlite' else 'PostgreSQL'}, {count} node{'s' * (count > 1)}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=6,
                        help="producer processes, and as many consumers; 6 spreads evenly "
                             "over 1, 2 and 3 nodes (default %(default)s)")
    parser.add_argument("--duration", type=float, default=5.0,
                        help="seconds of sending per measurement (default %(default)s)")
    parser.add_argument("--warmup", type=float, default=2.0,
                        help="seconds of unrecorded load after each start (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="measure every configuration this many times, interleaved, and "
                             "report the median (default %(default)s)")
    parser.add_argument("--conveyor-arg", action="append", default=[], metavar="ARG",
                        help="extra argument for every `conveyor server` (repeatable)")
    parser.add_argument("--configs", type=_configs, default=CONFIGS, metavar="STORE:NODES,...",
                        help="configurations to measure, e.g. sqlite:1,postgresql:1 "
                             "(default: all four)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="where results go")
    parser.add_argument("--own-postgres", action="store_true",
                        help="run on a PostgreSQL of its own (initdb, a free port) instead of "
                             "the shared one on :5432, away from other users' load")
    return parser.parse_args(argv)


def _configs(text: str) -> list[tuple[str, int]]:
    configs = []
    for item in text.split(","):
        store, _, count = item.partition(":")
        if store not in ("sqlite", "postgresql") or not count.isdigit() or int(count) < 1:
            raise argparse.ArgumentTypeError(f"{item!r}: expected sqlite:N or postgresql:N")
        configs.append((store, int(count)))
    return configs


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = LoadSettings(clients=args.clients, duration_s=args.duration)
    command = shlex.join(["python", "bench/cluster_bench.py",
                          *(sys.argv[1:] if argv is None else argv)])
    machine = machine_info()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_dir = args.out / "logs" / f"cluster-{stamp}"
    rounds: dict[str, list[dict[str, Any]]] = {config_name(*c): [] for c in args.configs}
    with own_postgres() if args.own_postgres else contextlib.nullcontext():
        for _ in range(args.rounds):
            for store, count in args.configs:
                rounds[config_name(store, count)].append(
                    measure(store, count, settings, args.warmup, log_dir, args.conveyor_arg))
    machine["loadavg_after"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    results = {"command": command, "machine": machine,
               "params": {"clients": args.clients, "duration_s": args.duration,
                          "warmup_s": args.warmup, "rounds": args.rounds,
                          "backlog": settings.backlog_batched},
               "configs": {name: combine(runs) for name, runs in rounds.items()}}
    args.out.mkdir(parents=True, exist_ok=True)
    text = markdown(results)
    for base in (f"cluster-{stamp}", "cluster-latest"):
        (args.out / f"{base}.json").write_text(json.dumps(results, indent=2) + "\n")
        (args.out / f"{base}.md").write_text(text)
    print(text)
    print(f"[cluster] results: {args.out}/cluster-{stamp}.md (and .json); logs: {log_dir}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
