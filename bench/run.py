"""Measure Conveyor's queue server beside its peers, in one bounded run.

    .venv/bin/python bench/run.py                      # every server, default settings
    .venv/bin/python bench/run.py --duration 2 --samples 30 --servers moto fauxqs

Starts each server as a child process on a free loopback port (Conveyor on a fresh
temporary --data-dir, so its durable SQLite store), runs every scenario against
every server in turn (scenario by scenario, so background load on the machine hits
all servers alike), stops each server by its PID, prints the tables and writes
bench/results/<stamp>.json and .md (plus latest.json and latest.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import peers
import procstat
import report
from profile_server import profile_server
from sqs_load import LoadSettings, add_load_arguments, run_scenario, settings_from

RESULTS_DIR = peers.BENCH_DIR / "results"
DEFAULT_SERVERS = list(peers.LAUNCHERS)


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def _node_version() -> str | None:
    """The Node.js the npm peers run on: the bundled one, else the system's."""
    node = str(peers.BUNDLED_NODE) if peers.BUNDLED_NODE.exists() else shutil.which("node")
    if node is None:
        return None
    return subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()


def machine_info() -> dict[str, Any]:
    mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kib / 2**20),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "node": _node_version(),
        "loadavg_before": _loadavg(),
    }


def start_servers(names: list[str], log_dir: Path,
                  conveyor_args: list[str]) -> tuple[dict[str, peers.RunningServer], dict]:
    """Start what can be started; the rest is reported as unavailable."""
    running: dict[str, peers.RunningServer] = {}
    unavailable: dict[str, str] = {}
    for name in names:
        extra = conveyor_args if name == "conveyor" else []
        try:
            running[name] = peers.start(name, log_dir, extra)
        except (peers.PeerUnavailable, OSError, subprocess.CalledProcessError) as exc:
            unavailable[name] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            print(f"[bench] {name}: not measured: {exc}", file=sys.stderr)
    return running, unavailable


def warm_up(running: dict[str, peers.RunningServer], settings: LoadSettings,
            warmup_s: float) -> None:
    """Unrecorded batched then unbatched load per server, so JIT runtimes start warm."""
    if warmup_s <= 0:
        return
    warm = replace(settings, duration_s=warmup_s / 2)
    for name, server in running.items():
        print(f"[bench] warm-up   {name} ...", file=sys.stderr, flush=True)
        try:
            for scenario in ("batched", "unbatched"):
                run_scenario(scenario, server.endpoint, warm, server.cpu_s)
        except Exception as exc:  # noqa: BLE001 - the measured scenarios will report it
            print(f"[bench]   warm-up failed: {exc}", file=sys.stderr)


def _run_one(scenario: str, server: peers.RunningServer,
             settings: LoadSettings) -> dict[str, Any]:
    print(f"[bench] {scenario:9} {server.name} ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    user_before, system_before = procstat.tree_times(server.pid)
    try:
        result = run_scenario(scenario, server.endpoint, settings, server.cpu_s)
    except Exception as exc:  # noqa: BLE001 - one failing server must not stop the run
        result = {"error": f"{type(exc).__name__}: {exc}"[:200]}
    result["wall_s"] = round(time.monotonic() - started, 1)
    # The kernel's share of the server's CPU (system calls, the loopback's TCP), which
    # instruction counts of the process do not see.
    user_after, system_after = procstat.tree_times(server.pid)
    user, system = user_after - user_before, system_after - system_before
    if user + system > 0:
        result["server_system_share"] = round(system / (user + system), 3)
    print(f"[bench]   {json.dumps(result)}", file=sys.stderr, flush=True)
    if server.proc.poll() is not None:
        print(f"[bench] {server.name} exited ({server.proc.returncode}); see {server.log_path}",
              file=sys.stderr)
    return result


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Median of each figure over the rounds that succeeded; every round kept as well."""
    ok = [r for r in rounds if "error" not in r]
    if not ok:
        return rounds[-1]
    combined: dict[str, Any] = {}
    for key, value in ok[0].items():
        values = [r[key] for r in ok if r.get(key) is not None]
        numeric = isinstance(value, int | float) and len(values) == len(ok)
        if numeric:
            median = statistics.median(values)
            combined[key] = int(median) if all(isinstance(v, int) for v in values) else median
        else:
            combined[key] = value
    if len(rounds) > 1:
        combined["rounds"] = rounds
    return combined


def measure(running: dict[str, peers.RunningServer], settings: LoadSettings,
            scenarios: list[str], rounds: int) -> dict[str, dict[str, Any]]:
    """Scenario by scenario, round by round, server by server."""
    by_server: dict[str, dict[str, Any]] = {name: {} for name in running}
    for scenario in scenarios:
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in running}
        for _ in range(rounds):
            for name, server in running.items():
                results[name].append(_run_one(scenario, server, settings))
        for name in running:
            by_server[name][scenario] = combine(results[name])
    return by_server


def write_results(results: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    text = report.markdown(results)
    for base in (stamp, "latest"):
        (out_dir / f"{base}.json").write_text(json.dumps(results, indent=2) + "\n")
        (out_dir / f"{base}.md").write_text(text)
    return out_dir / f"{stamp}.md"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", nargs="+", choices=DEFAULT_SERVERS, default=DEFAULT_SERVERS)
    parser.add_argument("--conveyor-arg", action="append", default=[], metavar="ARG",
                        help="extra argument for `conveyor server` (repeatable), "
                             "e.g. --conveyor-arg=--mode --conveyor-arg=relaxed")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="where results go")
    parser.add_argument("--profile", type=float, default=0.0, metavar="SECONDS",
                        help="afterwards, profile a Python server under extra load: py-spy "
                             "and perf on it for SECONDS, then yappi (CPU clock) on a fresh "
                             "instrumented instance for SECONDS (default off)")
    parser.add_argument("--profile-server", choices=["conveyor", "moto"], default="conveyor")
    parser.add_argument("--profile-scenario", choices=["batched", "unbatched"],
                        default="batched")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every scenario this many times (interleaved across servers) "
                             "and report the median (default %(default)s)")
    parser.add_argument("--warmup", type=float, default=5.0,
                        help="seconds of unrecorded load per server first "
                             "(default %(default)s)")
    add_load_arguments(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = settings_from(args)
    command = shlex.join(["python", "bench/run.py", *(sys.argv[1:] if argv is None else argv)])
    machine = machine_info()
    run_dir = args.out / "logs" / time.strftime("%Y%m%d-%H%M%S")
    running, unavailable = start_servers(args.servers, run_dir, args.conveyor_arg)
    try:
        warm_up(running, settings, args.warmup)
        measured = measure(running, settings, args.scenarios, args.rounds)
        target = running.get(args.profile_server)
        profiled = (profile_server(target, settings, args.profile_scenario, args.profile,
                                   run_dir, args.conveyor_arg)
                    if args.profile > 0 and target else None)
    finally:
        for server in running.values():
            server.stop()
    machine["loadavg_after"] = _loadavg()
    results = {
        "command": command,
        "machine": machine,
        "params": {**asdict(settings), "warmup_s": args.warmup, "rounds": args.rounds},
        "scenarios": args.scenarios,
        "unavailable": unavailable,
        "profile": profiled,
        "servers": {
            name: {"version": server.version, "storage": peers.STORAGE[name],
                   "scenarios": measured[name]}
            for name, server in running.items()
        },
    }
    path = write_results(results, args.out)
    print(report.markdown(results))
    print(f"[bench] results: {path} (and .json); server logs: {run_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
