"""Two server nodes on a primary and its standby (PostgreSQL instances of the test's own,
one multi-host DSN), failed over back and forth under load while boto3 clients record
every operation; the history checker (history.py) then judges what they saw.

With synchronous replication nothing acknowledged is lost and no acknowledged delete is
undone, over FAILOVERS failovers (LONG_FAILOVERS with CONVEYOR_LONG_TESTS=1); calls meet
only ServiceUnavailable (503, retryable) or no answer in time, never another error; and
both nodes serve again after each failover without a restart, each long poll woken by a
send on the other node. With asynchronous replication the loss window is measured, not
promised away: what was lost was acknowledged just before a primary died.

CONVEYOR_FAILOVER_REPORT=path writes the figures (bench/failover_bench.py reads them).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.history import History, Verdict, check
from tests.cluster.load import Load, client, queued, recovery_s, write_report
from tests.cluster.nemesis import Nemesis
from tests.pg_instance import multi_host_url, own_pair
from tests.support import LongPoll, ServerProcess

FAILOVERS = 5
LONG_FAILOVERS = 20
ASYNC_FAILOVERS = 3
VISIBILITY_S = 5  # short: a message whose delete failed comes back during the drain
LOAD_BETWEEN_S = 1.0  # load on the settled pair before each failover
DRAIN_S = 60.0
# The answers a client may meet during a failover: SQS's retryable 503, or none in time.
PASSING = {"ServiceUnavailable", "ReadTimeoutError"}


def _failovers() -> int:
    return LONG_FAILOVERS if os.environ.get("CONVEYOR_LONG_TESTS") == "1" else FAILOVERS


@pytest.fixture(params=[True, False], ids=["sync", "async"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path
            ) -> Iterator[tuple[Nemesis, list[ServerProcess]]]:
    with own_pair() as (primary, standby):
        nemesis = Nemesis(primary, standby, sync=request.param)
        nemesis.setup()
        url = multi_host_url(primary, standby, target_session_attrs="read-write")
        nodes: list[ServerProcess] = []
        try:
            for name in ("a", "b"):
                nodes.append(ServerProcess(tmp_path / name, "--store", url, "--mode",
                                           "relaxed").start())
            yield nemesis, nodes
        finally:
            for node in nodes:
                node.stop()


def _run(nemesis: Nemesis, nodes: list[ServerProcess], failovers: int
         ) -> tuple[History, Verdict]:
    url = client(nodes[0]).create_queue(QueueName="work")["QueueUrl"]
    history = History(VISIBILITY_S)
    load = Load(history, nodes, url).start()
    try:
        for _ in range(failovers):
            time.sleep(LOAD_BETWEEN_S)
            nemesis.fail_over()
        time.sleep(LOAD_BETWEEN_S)
    finally:
        load.finish(DRAIN_S)
    return history, check(history, queued(nodes[0], url))


def _report(nemesis: Nemesis, history: History, verdict: Verdict, nodes: int) -> dict:
    # From a crash: the whole outage. From any promotion: how soon the nodes follow it.
    recovery = sorted(recovery_s(history, f.died, n) for f in nemesis.failovers
                      for n in range(nodes) if f.kind == "crash")
    following = sorted(recovery_s(history, f.promoted, n) for f in nemesis.failovers
                       for n in range(nodes))
    # Acknowledged from the stall before a death until the standby was rebuilt.
    acked_during = sum(len(op.ids) for op in history.of("send") if any(
        f.died - nemesis.stall_s - 0.1 <= op.end <= f.rebuilt for f in nemesis.failovers))
    # How long before its primary's death each lost message was acknowledged (the next
    # promotion's death: an answer already on its way as the primary was killed comes after).
    windows = sorted(next(f.died for f in nemesis.failovers if f.promoted >= at) - at
                     for at in verdict.lost.values())
    return {
        "replication": "sync" if nemesis.sync else "async",
        "failovers": len(nemesis.failovers),
        "demotions": sum(f.kind == "demote" for f in nemesis.failovers),
        "acknowledged": verdict.acknowledged,
        "acknowledged_around_failovers": acked_during,
        "lost": len(verdict.lost),
        # The loss window: the longest a lost message's acknowledgement preceded the death.
        "lost_window_ms_max": round(max(windows, default=0) * 1000, 1),
        "deletes_undone": len(verdict.undone),
        "recovery_s_p50": round(statistics.median(recovery), 3),
        "recovery_s_max": round(max(recovery), 3),
        "after_promotion_s_p50": round(statistics.median(following), 3),
        "after_promotion_s_max": round(max(following), 3),
        "standby_lag_bytes_max": max(f.lag_bytes for f in nemesis.failovers),
        "errors": sorted({code for _, code in history.errors}),
    }


def test_failovers_under_load_lose_nothing_acknowledged(
        cluster: tuple[Nemesis, list[ServerProcess]]) -> None:
    nemesis, nodes = cluster
    failovers = _failovers() if nemesis.sync else ASYNC_FAILOVERS
    history, verdict = _run(nemesis, nodes, failovers)
    report = _report(nemesis, history, verdict, len(nodes))
    write_report("CONVEYOR_FAILOVER_REPORT", report)

    assert not history.failures, history.failures
    assert set(code for _, code in history.errors) <= PASSING, history.errors
    assert verdict.acknowledged > 100 * failovers  # the load went on throughout
    for failover in nemesis.failovers:  # each node served again after each failover
        for n in range(len(nodes)):
            assert any(op.node == n and op.start >= failover.promoted
                       for op in history.of("send"))
    # The wake-ups followed the primary: a send on one node wakes a long poll on the other.
    wake = client(nodes[0]).create_queue(QueueName="wake")["QueueUrl"]
    for receiver, sender in ((nodes[1], nodes[0]), (nodes[0], nodes[1])):
        poll = LongPoll(receiver.url, wake)
        client(sender).send_message(QueueUrl=wake, MessageBody=f"to {receiver.port}")
        assert poll.bodies() == [f"to {receiver.port}"]
    if nemesis.sync:
        assert not verdict.lost, f"lost {len(verdict.lost)} acknowledged: {report}"
        assert not verdict.undone, verdict.undone
    else:  # the window: what the held link kept from the standby, acknowledged, is lost
        assert verdict.lost, "the checker saw no loss where asynchronous replication loses"
        # ...on a primary, before a standby was promoted in its place.
        assert all(any(at <= f.promoted for f in nemesis.failovers)
                   for at in verdict.lost.values())
    for node in nodes:
        assert "Traceback" not in node.log(), node.log()
        assert "failed in the store" not in node.log(), node.log()  # no 500s
