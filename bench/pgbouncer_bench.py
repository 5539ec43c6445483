"""One server node straight on PostgreSQL against one behind PgBouncer in transaction
pooling mode (--store-listen: no session state, asyncpg's statement cache off).

    .venv/bin/python bench/pgbouncer_bench.py              # about 2 minutes on 2 cores
    .venv/bin/python bench/pgbouncer_bench.py --rounds 1 --duration 3

Round by round, configuration by configuration (so other load on the machine hits both
alike): a node on a fresh schema of the shared PostgreSQL (127.0.0.1:5432), directly or
through a PgBouncer of the run's own (Debian's pgbouncer, tests/pgbouncer.py: its own
ini, a free port, 10 server connections, the schema as its search_path), and its
wake-ups over a direct connection; unrecorded warm-up, then the batched pipeline
(bench/pipeline.py: producers send batches of 10, consumers receive and delete them).
Figures: messages per second and the node's CPU per message (PgBouncer's own CPU apart),
each the median over the rounds, and their ratio to the direct node.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import peers
import procstat
from cluster_bench import PG_URL, _sql
from pipeline import PipelineConfig, run_pipeline

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.pgbouncer import PgBouncer  # noqa: E402 - the test suite's, on the path just above

CONFIGS = ("direct", "pgbouncer")


def measure(config: str, duration_s: float, warmup_s: float, log_dir: Path) -> dict[str, Any]:
    schema = f"bench_{secrets.token_hex(6)}"
    pooler = PgBouncer(PG_URL, schema=schema, pool_size=10).start() \
        if config == "pgbouncer" else None
    store = [f"{PG_URL}?schema={schema}"] if pooler is None else [
        f"{pooler.url}?schema={schema}", "--store-listen", PG_URL]
    node = None
    try:
        node = peers.start("conveyor", log_dir, ["--store", *store], label=config)
        cfg = PipelineConfig(endpoint=node.endpoint, batched=True, clients=2,
                             duration_s=duration_s)
        run_pipeline(replace(cfg, duration_s=warmup_s), lambda: 0.0)
        pid = pooler.pid if pooler else None
        pooler_cpu0 = procstat.tree_cpu_s(pid) if pid else 0.0
        result = run_pipeline(cfg, node.cpu_s).as_dict()
        pooler_cpu = (procstat.tree_cpu_s(pid) - pooler_cpu0) if pid else 0.0
    finally:
        if node is not None:
            node.stop()
        if pooler is not None:
            pooler.stop()
        asyncio.run(_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    msgs = result["messages_received"] or 1
    return {"msgs_per_s": result["messages_per_s"],
            "node_cpu_us_per_msg": result["server_cpu_s"] / msgs * 1e6,
            "pgbouncer_cpu_us_per_msg": pooler_cpu / msgs * 1e6,
            "errors": result["errors"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[str, Any]]] = {config: [] for config in CONFIGS}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for config in CONFIGS:
                runs[config].append(measure(config, args.duration, args.warmup, Path(tmp)))
                print(f"[pgbouncer] {config}: {runs[config][-1]}", file=sys.stderr, flush=True)
    median = {config: {key: statistics.median(run[key] for run in rows) for key in rows[0]}
              for config, rows in runs.items()}
    base = median["direct"]
    print("| node | msgs/s | ÷ direct | node CPU µs/msg | ÷ direct | PgBouncer CPU µs/msg |"
          " errors |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for config, m in median.items():
        print(f"| {config} | {m['msgs_per_s']:,.0f} | {m['msgs_per_s'] / base['msgs_per_s']:.2f}"
              f" | {m['node_cpu_us_per_msg']:.0f} |"
              f" {m['node_cpu_us_per_msg'] / base['node_cpu_us_per_msg']:.2f} |"
              f" {m['pgbouncer_cpu_us_per_msg']:.0f} | {m['errors']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
