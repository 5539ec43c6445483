"""Three server nodes on one PostgreSQL database, many producers and consumers.

Each run moves MESSAGES messages through a standard and a FIFO queue with producer and
consumer threads spread over the nodes, then checks from the clients' own records:
nothing acknowledged is lost, no message was handed out twice within one visibility
timeout, and every FIFO group was processed in order. The second run SIGKILLs one node
mid-way; its clients fail over to the others.

Nothing is timed. The visibility timeout is SQS's longest (12 hours) and the nodes run on
a clock the test moves (--dev-clock): a message stranded by the killed node (or by a
lost answer) comes back only when the test, seeing no progress, moves the clock past it.
So two deliveries of one message between two such moves are two claims within one
visibility timeout: a fault, however slow the machine.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import BotoCoreError, ClientError

from tests.server.helpers import advance_clock
from tests.support import POSTGRES_URL, ServerProcess, isolated, require_postgres, sqs_client

MESSAGES = int(os.environ.get("CONVEYOR_CLUSTER_MESSAGES", "50000"))
PRODUCERS = CONSUMERS = 20
GROUPS_PER_PRODUCER = 5
VISIBILITY_S = 12 * 3600  # SQS's longest: nothing comes back unless the test moves the clock
RETENTION_S = 14 * 86400  # SQS's longest: outlives every move of the clock
MAX_CLOCK_MOVES = 10
DEADLINE_S = 600


@dataclass
class Receipt:
    message_id: str
    body: str
    receive_count: int  # ApproximateReceiveCount: which claim of the message this was
    asked_at: float  # before the request left (monotonic; orders events, times nothing)
    got_at: float  # after its response arrived


@dataclass
class Ledger:
    """What the clients saw. Appends from many threads; list.append is atomic in CPython."""

    sent: dict[str, str] = field(default_factory=dict)  # message id -> body, acknowledged
    receipts: list[Receipt] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    drained: bool = False  # all acknowledged messages received and both queues empty
    clock_moves: list[tuple[float, float]] = field(default_factory=list)  # (began, ended)

    def epoch(self, receipt: Receipt) -> int | None:
        """How many clock moves had ended before the receipt's claim; None when a move was
        under way while it was asked for (its claim may have seen either clock)."""
        for began, ended in self.clock_moves:
            if began < receipt.got_at and ended > receipt.asked_at:
                return None
        return sum(ended <= receipt.asked_at for _, ended in self.clock_moves)


class Failover:
    """A boto3 client per node; on a connection error the caller moves to the next node."""

    def __init__(self, nodes: list[ServerProcess], start: int) -> None:
        self.clients = [sqs_client(n.url, connect_timeout=2, read_timeout=30) for n in nodes]
        self.index = start % len(nodes)

    @property
    def client(self) -> Any:
        return self.clients[self.index]

    def next(self) -> None:
        self.index = (self.index + 1) % len(self.clients)


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[ServerProcess]]:
    require_postgres()
    store = isolated(["--store", POSTGRES_URL])  # one schema shared by the three nodes
    started = [ServerProcess(tmp_path / f"node{i}", *store, "--mode", "relaxed",
                             "--dev-clock").start() for i in range(3)]
    yield started
    for node in started:
        node.stop()


def _produce(pid: int, urls: dict[str, str], count: int, nodes: list[ServerProcess],
             ledger: Ledger) -> None:
    link = Failover(nodes, pid)
    counters = itertools.count()
    sent = 0
    while sent < count:
        n = min(10, count - sent)
        fifo = sent % 20 < 10  # alternate batches between the two queues
        entries = []
        for _ in range(n):
            c = next(counters)
            group = f"p{pid}g{c % GROUPS_PER_PRODUCER}"
            body = f"{'F' if fifo else 'S'}:{group}:{c}"
            entry: dict[str, Any] = {"Id": str(len(entries)), "MessageBody": body}
            if fifo:
                entry |= {"MessageGroupId": group, "MessageDeduplicationId": f"{pid}-{c}"}
            entries.append(entry)
        try:
            result = link.client.send_message_batch(
                QueueUrl=urls["fifo" if fifo else "std"], Entries=entries)
        except (BotoCoreError, ClientError):
            link.next()  # not acknowledged: it may or may not be there; either is fine
            continue
        bodies = {e["Id"]: e["MessageBody"] for e in entries}
        for ok in result.get("Successful", []):
            ledger.sent[ok["MessageId"]] = bodies[ok["Id"]]
        if result.get("Failed"):
            ledger.errors.append(f"send failed: {result['Failed']}")
        sent += n


def _consume(cid: int, url: str, nodes: list[ServerProcess], ledger: Ledger,
             done: threading.Event) -> None:
    link = Failover(nodes, cid)
    while not done.is_set():
        asked = time.monotonic()
        try:
            messages = link.client.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                VisibilityTimeout=VISIBILITY_S,
                MessageSystemAttributeNames=["ApproximateReceiveCount"]).get("Messages", [])
        except (BotoCoreError, ClientError):
            link.next()
            continue
        got = time.monotonic()
        for m in messages:
            ledger.receipts.append(Receipt(m["MessageId"], m["Body"],
                                           int(m["Attributes"]["ApproximateReceiveCount"]),
                                           asked, got))
        if not messages:
            continue
        entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                   for i, m in enumerate(messages)]
        try:
            result = link.client.delete_message_batch(QueueUrl=url, Entries=entries)
        except (BotoCoreError, ClientError):
            link.next()  # not deleted: they come back after the visibility timeout
            continue
        for ok in result.get("Successful", []):
            ledger.deleted.add(messages[int(ok["Id"])]["MessageId"])


def _run(nodes: list[ServerProcess], kill_one: bool) -> Ledger:
    admin = sqs_client(nodes[0].url)
    suffix = os.urandom(3).hex()
    retention = {"MessageRetentionPeriod": str(RETENTION_S)}
    urls = {"std": admin.create_queue(QueueName=f"std-{suffix}",
                                      Attributes=retention)["QueueUrl"],
            "fifo": admin.create_queue(QueueName=f"fifo-{suffix}.fifo",
                                       Attributes={"FifoQueue": "true", **retention})["QueueUrl"]}
    ledger, done = Ledger(), threading.Event()
    per_producer = MESSAGES // PRODUCERS
    producers = [threading.Thread(target=_produce, args=(i, urls, per_producer, nodes, ledger))
                 for i in range(PRODUCERS)]
    consumers = [threading.Thread(target=_consume, args=(i, urls["fifo" if i % 2 else "std"],
                                                         nodes, ledger, done))
                 for i in range(CONSUMERS)]
    for thread in producers + consumers:
        thread.start()
    if kill_one:
        while len(ledger.deleted) < MESSAGES // 3:
            time.sleep(0.2)
        nodes[2].kill()
    for thread in producers:
        thread.join(DEADLINE_S)
    live = nodes[0]  # never killed
    deadline = time.monotonic() + DEADLINE_S
    seen, still = len(ledger.receipts), 0
    while not _finished(ledger, live, urls.values()) and time.monotonic() < deadline:
        time.sleep(0.5)
        seen, before = len(ledger.receipts), seen
        still = still + 1 if seen == before else 0
        if still == 6 and len(ledger.clock_moves) < MAX_CLOCK_MOVES:
            # No progress: what is left is stranded (claimed through the killed node, or
            # its answer lost). Moving every live node's clock past its visibility frees it.
            began = time.monotonic()
            for node in nodes[:2] if kill_one else nodes:
                advance_clock(node.url, VISIBILITY_S + 1)
            ledger.clock_moves.append((began, time.monotonic()))
            still = 0
    ledger.drained = _finished(ledger, live, urls.values())
    done.set()
    for thread in consumers:
        thread.join(60)
    return ledger


def _finished(ledger: Ledger, live: ServerProcess, urls: Any) -> bool:
    """Every acknowledged message received, and nothing left in either queue. (A delete
    whose answer was lost with the killed node is done but never confirmed, so the
    clients' own list of deletions cannot tell the end.)"""
    received = {r.message_id for r in ledger.receipts}
    if not set(ledger.sent) <= received:
        return False
    names = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
             "ApproximateNumberOfMessagesDelayed")
    client = sqs_client(live.url)
    for url in urls:
        found = client.get_queue_attributes(QueueUrl=url, AttributeNames=list(names))
        if any(found["Attributes"][n] != "0" for n in names):
            return False
    return True


def _check(ledger: Ledger, killed: bool) -> None:
    assert not ledger.errors, ledger.errors[:5]
    assert len(ledger.sent) >= MESSAGES * 0.99, "most sends must be acknowledged"
    missing = set(ledger.sent) - {r.message_id for r in ledger.receipts}
    assert not missing, f"{len(missing)} acknowledged messages never received"
    assert ledger.drained, "the queues still hold messages at the deadline"
    unconfirmed = set(ledger.sent) - ledger.deleted
    # Only a delete in flight through the killed node can go unconfirmed (a few batches).
    limit = 10 * CONSUMERS if killed else 0
    assert len(unconfirmed) <= limit, f"{len(unconfirmed)} deletes never confirmed"

    by_message: dict[str, list[Receipt]] = defaultdict(list)
    for receipt in ledger.receipts:
        by_message[receipt.message_id].append(receipt)
    for receipts in by_message.values():
        # Every receive claims the message anew and counts it: two deliveries with one
        # count are one claim handed to two consumers (nodes racing for the same row).
        claims = [r.receive_count for r in receipts]
        assert len(set(claims)) == len(claims), (
            f"{receipts[0].message_id} delivered twice on one claim: receive counts {claims}")
        # Between two moves of the clock, less than one visibility timeout passes.
        epochs = [e for e in map(ledger.epoch, receipts) if e is not None]
        assert len(set(epochs)) == len(epochs), (
            f"{receipts[0].message_id} delivered twice within one visibility timeout")

    first_receipt: dict[str, Receipt] = {}
    for receipt in sorted(ledger.receipts, key=lambda r: r.got_at):
        first_receipt.setdefault(receipt.message_id, receipt)
    groups: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for receipt in first_receipt.values():
        kind, group, counter = receipt.body.split(":")
        if kind == "F":
            groups[group].append((receipt.got_at, int(counter)))
    assert groups, "the FIFO queue carried messages"
    for group, events in groups.items():
        counters = [c for _, c in sorted(events)]
        assert counters == sorted(counters), f"FIFO group {group} processed out of order"


@pytest.mark.cluster
def test_three_nodes_lose_nothing_and_keep_fifo_order(nodes: list[ServerProcess]) -> None:
    _check(_run(nodes, kill_one=False), killed=False)


@pytest.mark.cluster
def test_a_node_killed_mid_run_loses_nothing(nodes: list[ServerProcess]) -> None:
    _check(_run(nodes, kill_one=True), killed=True)
