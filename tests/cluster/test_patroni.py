"""The Patroni recipe (deploy/patroni/patroni.yml) exercised: etcd and three members of the
test's own, a server node given every member in one multi-host URL, under load while the
leader's machine dies (Patroni and its postmaster killed by PID). Patroni promotes the
synchronous standby once the leader key expires (the recipe's ttl); the node follows it
without a restart, and the history checker finds nothing acknowledged lost or undone.

FAILOVERS failovers (LONG_FAILOVERS with CONVEYOR_LONG_TESTS=1: each dead member rejoins
as a standby before the next leader dies). CONVEYOR_PATRONI_REPORT=path writes the figures
(bench/failover_bench.py reads them).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.history import History, check
from tests.cluster.load import Load, client, queued, recovery_s, write_report
from tests.patroni import Cluster, patroni_cluster
from tests.support import LongPoll, ServerProcess

FAILOVERS = 1
LONG_FAILOVERS = 3
VISIBILITY_S = 5  # short: a message whose delete failed comes back during the drain
LOAD_BEFORE_S = 2.0
# Patroni promotes a standby once the dead leader's key expires (ttl 20 s in the recipe):
# a bound on the wait for that, and for the node to serve again.
FOLLOW_WITHIN_S = 90.0
DRAIN_S = 60.0
# What a client may meet while no member takes writes: SQS's retryable 503, or no answer
# in time (a request caught on a connection to the dead server).
PASSING = {"ServiceUnavailable", "ReadTimeoutError"}


def _failovers() -> int:
    return LONG_FAILOVERS if os.environ.get("CONVEYOR_LONG_TESTS") == "1" else FAILOVERS


@pytest.fixture
def patroni(tmp_path: Path) -> Iterator[tuple[Cluster, ServerProcess]]:
    with patroni_cluster() as cluster:
        node = ServerProcess(tmp_path / "node", "--store",
                             cluster.url(target_session_attrs="read-write"),
                             "--mode", "relaxed").start()
        try:
            yield cluster, node
        finally:
            node.stop()


def _fail_over(cluster: Cluster, history: History, rejoin: bool) -> dict[str, float]:
    """Kill the leader; wait for another to be promoted and the node to acknowledge a send
    again; with `rejoin`, restart the dead member and wait for it to stream again."""
    dead = cluster.leader()
    died = dead.kill()
    cluster.wait_until(lambda m: any(x["role"] == "leader" and x["name"] != dead.name
                                     and x["state"] == "running" for x in m),
                       "a standby promoted", FOLLOW_WITHIN_S)
    promoted = time.monotonic()  # seen: Patroni's API is polled every 0.2 s
    deadline = time.monotonic() + FOLLOW_WITHIN_S
    while recovery_s(history, died, 0) == float("inf") and time.monotonic() < deadline:
        time.sleep(0.1)
    if rejoin:
        dead.start()
        cluster.wait_until(lambda m: len([x for x in m if x["state"] in ("running",
                                          "streaming")]) == 3 and any(
            x["role"] == "sync_standby" for x in m), "the dead member back as a standby")
    return {"died": died, "promoted": promoted}


def test_a_node_follows_patroni_failovers_losing_nothing_acknowledged(
        patroni: tuple[Cluster, ServerProcess]) -> None:
    cluster, node = patroni
    url = client(node).create_queue(QueueName="work")["QueueUrl"]
    history = History(VISIBILITY_S)
    load = Load(history, [node], url).start()
    failovers = []
    try:
        for n in range(_failovers()):
            time.sleep(LOAD_BEFORE_S)
            failovers.append(_fail_over(cluster, history, rejoin=n + 1 < _failovers()))
        time.sleep(LOAD_BEFORE_S)
    finally:
        load.finish(DRAIN_S)
    verdict = check(history, queued(node, url))
    recovery = sorted(recovery_s(history, f["died"], 0) for f in failovers)
    report = {
        "stack": "patroni", "failovers": len(failovers),
        "acknowledged": verdict.acknowledged, "lost": len(verdict.lost),
        "deletes_undone": len(verdict.undone),
        # From the leader's death to the node's first acknowledged send after it.
        "recovery_s": [round(r, 2) for r in recovery],
        # From Patroni's promotion (as its API showed it) to that send.
        "after_promotion_s": sorted(round(recovery_s(history, f["promoted"], 0), 2)
                                    for f in failovers),
        "errors": sorted({code for _, code in history.errors}),
    }
    write_report("CONVEYOR_PATRONI_REPORT", report)

    assert not history.failures, history.failures
    assert {code for _, code in history.errors} <= PASSING, history.errors
    assert all(r < float("inf") for r in recovery), "the node never served again"
    assert not verdict.lost, f"lost {len(verdict.lost)} acknowledged: {report}"
    assert not verdict.undone, verdict.undone
    # Its wake-ups were re-subscribed on the new primary... and its own long polls wake.
    poll = LongPoll(node.url, url)
    client(node).send_message(QueueUrl=url, MessageBody="after")
    assert poll.bodies() == ["after"]
    assert "Traceback" not in node.log(), node.log()
    assert "failed in the store" not in node.log(), node.log()  # no 500s
