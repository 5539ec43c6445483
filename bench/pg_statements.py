"""Statements per message of one Conveyor node on PostgreSQL, under the batched pipeline.

    .venv/bin/python bench/pg_statements.py                 # about 20 s
    .venv/bin/python bench/pg_statements.py --src ../conveyor-old   # another source tree

Starts one node on a fresh schema with bench/statements_boot on its PYTHONPATH (every
asyncpg statement counted by its text), runs unrecorded warm-up load, reads the counts,
runs the batched pipeline of cluster_bench.py (6 producer and 6 consumer processes),
reads them again, and prints each statement's count per message received, most frequent
first. Together with the CPU figures of cluster_bench.py it says where a message's
database work goes.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

import peers
from cluster_bench import PG_URL, stop_nodes
from pipeline import PipelineConfig, run_pipeline
from run import RESULTS_DIR

BOOT = Path(__file__).resolve().parent / "statements_boot"
DUMP_TIMEOUT_S = 10.0


def _counts(pid: int, path: Path) -> dict[str, int]:
    """Ask the node for its counts so far (SIGUSR1) and read them."""
    path.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + DUMP_TIMEOUT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the node wrote no counts to {path}")
        time.sleep(0.05)
    return json.loads(path.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=6.0,
                        help="seconds of load counted (default %(default)s)")
    parser.add_argument("--clients", type=int, default=6,
                        help="producer processes, and as many consumers (default %(default)s)")
    parser.add_argument("--src", type=Path, default=None,
                        help="run Conveyor from this source tree (an older commit, say)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="where logs go")
    args = parser.parse_args(argv)
    schema = f"bench_{secrets.token_hex(6)}"
    dump = args.out / f"statements-{schema}.json"
    args.out.mkdir(parents=True, exist_ok=True)
    node = peers.start("conveyor", args.out / "logs", ["--store", f"{PG_URL}?schema={schema}"],
                       env={"PYTHONPATH": str(BOOT), "BENCH_STATEMENTS_OUT": str(dump)},
                       label="conveyor-pg-statements", src=args.src)
    try:
        cfg = PipelineConfig(endpoint=node.endpoint, batched=True, clients=args.clients,
                             duration_s=2.0, backlog=50)
        run_pipeline(cfg, lambda: 0.0)  # warm-up, not counted
        before = _counts(node.pid, dump)
        result = run_pipeline(replace(cfg, duration_s=args.duration), node.cpu_s).as_dict()
        after = _counts(node.pid, dump)
    finally:
        stop_nodes([node], schema)
    messages = result["messages_received"]
    deltas = {q: n - before.get(q, 0) for q, n in after.items() if n > before.get(q, 0)}
    print(f"{messages:,} messages received ({result['messages_per_s']:,.0f}/s); "
          f"{sum(deltas.values()) / messages:.3f} statements per message")
    print("| per message | count | statement |\n|---|---|---|")
    for query, n in sorted(deltas.items(), key=lambda kv: -kv[1]):
        text = " ".join(query.split())
        print(f"| {n / messages:.3f} | {n:,} | `{text[:90]}{'...' if len(text) > 90 else ''}` |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
