"""PostgreSQL failover under load: how soon nodes serve again, and what is lost.

    .venv/bin/python bench/failover_bench.py      # about 6 minutes on 2 cores

Runs tests/cluster/test_db_failover.py's long form (CONVEYOR_LONG_TESTS=1): two server
nodes on a primary and its streaming standby of their own (initdb, pg_basebackup, free
ports), boto3 producers and consumers on both, 20 failovers with synchronous replication
(every other one a crash, `-m immediate` after the standby's link was held 0.3 s; the
others a demotion: the primary fenced read-only, then the standby promoted), then 3 with
asynchronous replication. The test's history checker counts what was acknowledged and
lost; the recovery figures run from a crashed primary's death (SIGQUIT) to each node's
first acknowledged send begun after it, and from each promotion to the same. The standby
is promoted at once: an HA manager's detection time comes on top.
"""

from __future__ import annotations

import sys

from reporting_tests import run_reporting_test


def main() -> int:
    code, rows = run_reporting_test("tests/cluster/test_db_failover.py",
                                    "CONVEYOR_FAILOVER_REPORT")
    print()
    print("| replication | failovers (crashes + demotions) | acknowledged | lost |"
          " deletes undone | loss window | first send after a crash, p50 / max |"
          " after any promotion, p50 / max |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        crashes = r["failovers"] - r["demotions"]
        window = f"{r['lost_window_ms_max']:.0f} ms" if r["lost"] else "–"
        promoted = f"{r['after_promotion_s_p50']:.2f} / {r['after_promotion_s_max']:.2f} s"
        print(f"| {r['replication']} | {r['failovers']} ({crashes} + {r['demotions']}) |"
              f" {r['acknowledged']:,} ({r['acknowledged_around_failovers']:,} around"
              f" failovers) | {r['lost']:,} | {r['deletes_undone']:,} | {window} |"
              f" {r['recovery_s_p50']:.2f} / {r['recovery_s_max']:.2f} s | {promoted} |")
    return code


if __name__ == "__main__":
    sys.exit(main())
