"""Network partitions between server nodes and their database, made of network namespaces:
a primary and its synchronous standby run inside a namespace of the test's own, each node
reaches them over a veth link of its own, and the nemesis cuts a node's link (iptables
DROP inside the namespace: packets vanish, connections hang) under load, on a standard and
a FIFO queue, failing the primary over while a link is cut every other round. The history
checker (history.py) then asserts what SQS promises: nothing acknowledged lost, no
acknowledged delete undone, FIFO order per group, FIFO deduplication of retried sends.

A cut node answers ServiceUnavailable (or, caught on the cut link, nothing in time) and
serves again once healed, on whichever server is the primary then; the other node serves
on throughout. ROUNDS rounds (LONG_ROUNDS with CONVEYOR_LONG_TESTS=1).
CONVEYOR_PARTITION_REPORT=path writes the figures (bench/ha_bench.py reads them).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster.history import History, check
from tests.cluster.load import Load, client, queued, write_report
from tests.cluster.nemesis import Nemesis
from tests.netns import Link, Namespace, require_netns
from tests.pg_instance import multi_host_url, own_pair
from tests.support import ServerProcess

ROUNDS = 2
LONG_ROUNDS = 8
# Longer than the node's probe of its database (every 2 s, answered within 3 s): the node
# notices the cut, rather than its requests merely waiting through it.
CUT_S = 8.0
LOAD_BETWEEN_S = 1.0
VISIBILITY_S = 5  # short: a message whose delete was cut off comes back during the drain
DRAIN_S = 60.0
SERVED_WITHIN_S = 60.0  # a bound on a hang, not a figure: above the 20 s statement bound
# What a client may meet: SQS's retryable 503, no answer in time (a request caught on the
# cut link), or a FIFO delete entry whose receipt expired while the link was cut ("the
# receipt handle has expired": SQS refuses such a delete on a FIFO queue).
PASSING = {"ServiceUnavailable", "ReadTimeoutError",
           "InvalidParameterValue: The receipt handle has expired."}


@dataclass
class Cut:
    node: int
    cut: float
    healed: float
    failed_over: bool


def _rounds() -> int:
    return LONG_ROUNDS if os.environ.get("CONVEYOR_LONG_TESTS") == "1" else ROUNDS


@pytest.fixture
def partitioned(tmp_path: Path
                ) -> Iterator[tuple[Namespace, list[Link], Nemesis, list[ServerProcess]]]:
    require_netns()
    netns = Namespace()
    try:
        with own_pair(netns=netns) as (primary, standby):
            nemesis = Nemesis(primary, standby, sync=True)
            nemesis.setup()
            links = [netns.link(), netns.link()]
            nodes: list[ServerProcess] = []
            try:
                for name, link in zip("ab", links, strict=True):
                    url = multi_host_url(primary, standby, via=link.ns_ip,
                                         target_session_attrs="read-write")
                    nodes.append(ServerProcess(tmp_path / name, "--store", url, "--mode",
                                               "relaxed").start())
                yield netns, links, nemesis, nodes
            finally:
                for node in nodes:
                    node.stop()
    finally:
        netns.destroy()


def _until_served(history: History, node: int, since: float) -> None:
    """Wait (SERVED_WITHIN_S at most) for `node` to acknowledge a send begun after `since`:
    a healed node reconnects with back-off, and requests caught on the cut link end only
    with the statement bound."""
    deadline = time.monotonic() + SERVED_WITHIN_S
    while not _acked_sends(history, node, since, float("inf")) and time.monotonic() < deadline:
        time.sleep(0.1)


def _acked_sends(history: History, node: int, start: float, end: float) -> int:
    return sum(1 for op in history.of("send")
               if op.node == node and start <= op.start and op.end <= end)


def test_partitions_between_nodes_and_the_database_lose_nothing_acknowledged(
        partitioned: tuple[Namespace, list[Link], Nemesis, list[ServerProcess]]) -> None:
    netns, links, nemesis, nodes = partitioned
    url = client(nodes[0]).create_queue(QueueName="work")["QueueUrl"]
    fifo = client(nodes[0]).create_queue(QueueName="work.fifo", Attributes={
        "FifoQueue": "true"})["QueueUrl"]
    history = History(VISIBILITY_S)
    load = Load(history, nodes, url, fifo).start()
    cuts: list[Cut] = []
    try:
        for n in range(_rounds()):
            time.sleep(LOAD_BETWEEN_S)
            node, failing_over = n % 2, n % 2 == 1
            netns.cut(links[node])
            cut = time.monotonic()
            try:
                if failing_over:  # the cut node cannot see the primary die, nor the new one
                    nemesis.fail_over()
                time.sleep(max(0.0, cut + CUT_S - time.monotonic()))
            finally:
                netns.heal(links[node])
            cuts.append(Cut(node, cut, time.monotonic(), failing_over))
            _until_served(history, node, cuts[-1].healed)
        time.sleep(LOAD_BETWEEN_S)
    finally:
        load.finish(DRAIN_S)
    verdict = check(history, queued(nodes[0], url) | queued(nodes[0], fifo))
    write_report("CONVEYOR_PARTITION_REPORT", {
        "cuts": len(cuts), "failovers_while_cut": sum(c.failed_over for c in cuts),
        "acknowledged": verdict.acknowledged, "lost": len(verdict.lost),
        "deletes_undone": len(verdict.undone), "fifo_out_of_order": len(verdict.out_of_order),
        "fifo_duplicated": len(verdict.duplicated),
        # Sends the other node acknowledged while one was cut off: it served on.
        "acknowledged_by_the_other_while_cut": sum(
            len(op.ids) for c in cuts for op in history.of("send")
            if op.node != c.node and c.cut <= op.start and op.end <= c.healed),
        "errors": sorted({code for _, code in history.errors})})

    assert not history.failures, history.failures
    assert {code for _, code in history.errors} <= PASSING, set(history.errors)
    assert verdict.acknowledged > 100 * len(cuts)  # the load went on throughout
    assert not verdict.lost, f"lost {len(verdict.lost)} acknowledged"
    assert not verdict.undone, verdict.undone
    assert not verdict.out_of_order, verdict.out_of_order
    assert not verdict.duplicated, verdict.duplicated
    # The cut node was cut off indeed: its errors fall within its cuts... and the other
    # served on through each cut; the cut one served again after it healed.
    assert any(node == cut.node for cut in cuts for node, _ in history.errors)
    for cut in cuts:
        other = 1 - cut.node
        assert _acked_sends(history, other, cut.cut, cut.healed) > 0, cut
        assert _acked_sends(history, cut.node, cut.healed, float("inf")) > 0, cut
    for node in nodes:
        assert "Traceback" not in node.log(), node.log()
        assert "failed in the store" not in node.log(), node.log()  # no 500s
