"""Failover under Patroni: how soon a node serves again after the leader dies, and what is
lost.

    .venv/bin/python bench/patroni_bench.py      # about 3 minutes on 2 cores

Runs tests/cluster/test_patroni.py's long form (CONVEYOR_LONG_TESTS=1): etcd and three
Patroni members from deploy/patroni/patroni.yml (synchronous_mode, ttl 20 s), one server
node given all three in a multi-host URL, a boto3 producer and consumer on it, and 3
failovers: the leader's Patroni and postmaster SIGKILLed (its machine's death), the dead
member restarted to rejoin as a standby before the next. The test's history checker
counts what was acknowledged and lost; the recovery figures run from the postmaster's
death to the node's first acknowledged send begun after it, and from Patroni showing the
new leader (its REST API, polled every 0.2 s) to the same.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "patroni.jsonl"
        env = {**os.environ, "CONVEYOR_LONG_TESTS": "1",
               "CONVEYOR_PATRONI_REPORT": str(report),
               "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "tests/cluster/test_patroni.py"], cwd=ROOT, env=env,
                              check=False)
        rows = [json.loads(line) for line in report.read_text().splitlines()] \
            if report.exists() else []
    print()
    print("| failovers | sends acknowledged | lost | deletes undone |"
          " first send after the leader's death, p50 / max |"
          " after Patroni's promotion, p50 / max | errors met |")
    print("|---|---:|---:|---:|---|---|---|")
    for r in rows:
        death, promoted = r["recovery_s"], r["after_promotion_s"]
        print(f"| {r['failovers']} | {r['acknowledged']:,} | {r['lost']} |"
              f" {r['deletes_undone']} | {statistics.median(death):.2f} / {max(death):.2f} s |"
              f" {statistics.median(promoted):.2f} / {max(promoted):.2f} s |"
              f" {', '.join(r['errors'])} |")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
