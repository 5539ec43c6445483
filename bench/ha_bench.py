"""Database faults under real HA machinery: Patroni failovers and network partitions, how
soon a node serves again and what is lost.

    .venv/bin/python bench/ha_bench.py      # about 5 minutes on 2 cores

First tests/cluster/test_patroni.py's long form (CONVEYOR_LONG_TESTS=1): etcd and three
Patroni members from deploy/patroni/patroni.yml (synchronous_mode, ttl 20 s), one server
node given all three in a multi-host URL, a boto3 producer and consumer on it, and 3
failovers: the leader's Patroni and postmaster SIGKILLed (its machine's death), the dead
member restarted to rejoin as a standby before the next. The recovery figures run from
the postmaster's death to the node's first acknowledged send begun after it, and from
Patroni showing the new leader (its REST API, polled every 0.2 s) to the same.

Then tests/cluster/test_partitions.py's long form: a primary and its synchronous standby
in a network namespace, two nodes each on its own veth link, each link cut in turn for
8 s (iptables DROP) under load on a standard and a FIFO queue, the primary failed over
during every other cut. Both judged by the history checker (tests/cluster/history.py).
"""

from __future__ import annotations

import statistics
import sys

from reporting_tests import run_reporting_test


def main() -> int:
    code, rows = run_reporting_test("tests/cluster/test_patroni.py", "CONVEYOR_PATRONI_REPORT")
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
    partitions_code, rows = run_reporting_test("tests/cluster/test_partitions.py",
                                               "CONVEYOR_PARTITION_REPORT")
    print()
    print("| cuts (failovers while cut) | sends acknowledged | by the other node while one"
          " was cut | lost | deletes undone | FIFO out of order | FIFO duplicates |"
          " errors met |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['cuts']} ({r['failovers_while_cut']}) | {r['acknowledged']:,} |"
              f" {r['acknowledged_by_the_other_while_cut']:,} | {r['lost']} |"
              f" {r['deletes_undone']} | {r['fifo_out_of_order']} | {r['fifo_duplicated']} |"
              f" {'; '.join(r['errors'])} |")
    return code or partitions_code


if __name__ == "__main__":
    sys.exit(main())
