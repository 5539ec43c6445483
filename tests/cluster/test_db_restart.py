"""Two server nodes on a PostgreSQL instance of the test's own, which is stopped and
started again while producers and consumers work through both nodes.

The nodes must come back by themselves: nothing acknowledged is lost, a send on one node
wakes a long poll on the other again (their LISTEN connections are re-established),
requests during the outage get ServiceUnavailable (HTTP 503, retryable) and no other 5xx,
and each node logs the outage once when it starts and once when it ends, no traceback.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.pg_instance import PostgresInstance, own_postgres
from tests.support import LongPoll, ServerProcess, sqs_client

VISIBILITY_S = 2  # messages whose delete failed during the outage come back soon
LOAD_BEFORE_S = 1.5  # load on both nodes before the database stops
OUTAGE_S = 1.0  # the database stays down this long, the load going on
LOAD_AFTER_S = 2.0
DRAIN_S = 30.0


@dataclass
class Record:
    """What the clients saw; appended to from several threads."""

    sent: dict[str, str] = field(default_factory=dict)  # acknowledged: message id -> body
    received: set[str] = field(default_factory=set)
    errors: list[tuple[str, int]] = field(default_factory=list)  # (code, HTTP status)
    failures: list[str] = field(default_factory=list)  # anything but an error answer


@pytest.fixture
def database() -> Iterator[PostgresInstance]:
    with own_postgres() as instance:
        yield instance


@pytest.fixture
def nodes(database: PostgresInstance, tmp_path: Path) -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    try:
        for name in ("a", "b"):
            started.append(ServerProcess(tmp_path / name, "--store", database.url,
                                         "--mode", "relaxed").start())
        yield started
    finally:
        for node in started:
            node.stop()


def _error(exc: ClientError) -> tuple[str, int]:
    return exc.response["Error"]["Code"], exc.response["ResponseMetadata"]["HTTPStatusCode"]


def _guarded(record: Record, work: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            work()
        except Exception as exc:  # a thread's failure must reach the test
            record.failures.append(repr(exc))
    return run


def _produce(node: ServerProcess, url: str, stop: threading.Event, record: Record) -> None:
    client = sqs_client(node.url)
    count = 0
    while not stop.is_set():
        entries = [{"Id": str(i), "MessageBody": f"{node.port}-{count + i}"} for i in range(10)]
        count += 10
        try:
            result = client.send_message_batch(QueueUrl=url, Entries=entries)
        except ClientError as exc:  # not acknowledged: it may be there or not; either is fine
            record.errors.append(_error(exc))
            time.sleep(0.05)
            continue
        bodies = {e["Id"]: e["MessageBody"] for e in entries}
        for ok in result.get("Successful", []):
            record.sent[ok["MessageId"]] = bodies[ok["Id"]]
        if result.get("Failed"):
            record.failures.append(f"send entries failed: {result['Failed']}")


def _consume(nodes: list[ServerProcess], url: str, stop: threading.Event,
             record: Record) -> None:
    clients = [sqs_client(n.url) for n in nodes]
    turn = 0
    while not stop.is_set():
        client = clients[turn % len(clients)]
        turn += 1
        try:
            messages = client.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                VisibilityTimeout=VISIBILITY_S).get("Messages", [])
            record.received.update(m["MessageId"] for m in messages)
            if messages:  # a delete lost in the outage: the message comes back, received again
                client.delete_message_batch(QueueUrl=url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(messages)])
        except ClientError as exc:
            record.errors.append(_error(exc))
            time.sleep(0.05)


def _answers_during_outage(node: ServerProcess, url: str) -> list[tuple[str, int]]:
    client = sqs_client(node.url)
    calls: list[Callable[[], Any]] = [
        lambda: client.send_message(QueueUrl=url, MessageBody="during"),
        lambda: client.receive_message(QueueUrl=url, WaitTimeSeconds=0),
        lambda: client.list_queues(),
    ]
    answers = []
    for call in calls:
        try:
            call()
            answers.append(("ok", 200))
        except ClientError as exc:
            answers.append(_error(exc))
    return answers


def _wait_for_log(node: ServerProcess, text: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in node.log():
        assert time.monotonic() < deadline, f"no {text!r} in node {node.port}'s log"
        time.sleep(0.1)


def _long_poll_woken(receiver: ServerProcess, sender: ServerProcess, url: str,
                     body: str) -> list[str]:
    """What a long poll parked on `receiver` answers when `body` is sent on `sender` (a
    poll the send did not wake fails; see LongPoll)."""
    poll = LongPoll(receiver.url, url, VisibilityTimeout=43_200)  # out of later polls' way
    sqs_client(sender.url).send_message(QueueUrl=url, MessageBody=body)
    return poll.bodies()


def test_nodes_recover_by_themselves_from_a_database_restart_under_load(
        database: PostgresInstance, nodes: list[ServerProcess]) -> None:
    a, b = nodes
    admin = sqs_client(a.url)
    url = admin.create_queue(QueueName="work")["QueueUrl"]
    wake_url = admin.create_queue(QueueName="wake")["QueueUrl"]
    assert _long_poll_woken(b, a, wake_url, "before") == ["before"]  # as it should be

    record = Record()
    stop_producing, stop_consuming = threading.Event(), threading.Event()
    producers = [threading.Thread(target=_guarded(record, lambda n=n: _produce(
                     n, url, stop_producing, record))) for n in nodes]
    consumers = [threading.Thread(target=_guarded(record, lambda: _consume(
                     nodes, url, stop_consuming, record))) for _ in range(2)]
    for thread in producers + consumers:
        thread.start()
    try:
        time.sleep(LOAD_BEFORE_S)
        database.stop()
        during = {node.port: _answers_during_outage(node, url) for node in nodes}
        time.sleep(OUTAGE_S)
        database.start()
        time.sleep(LOAD_AFTER_S)
    finally:
        stop_producing.set()
        for thread in producers:
            thread.join(30)
        deadline = time.monotonic() + DRAIN_S
        while not set(record.sent) <= record.received and time.monotonic() < deadline:
            time.sleep(0.2)
        stop_consuming.set()
        for thread in consumers:
            thread.join(30)

    assert not record.failures
    for port, answers in during.items():  # the database was down for these
        assert answers == [("ServiceUnavailable", 503)] * 3, (port, answers)
    assert record.errors, "the load never met the outage"
    assert set(record.errors) == {("ServiceUnavailable", 503)}
    lost = set(record.sent) - record.received
    assert not lost, f"{len(lost)} of {len(record.sent)} acknowledged messages never received"
    assert len(record.sent) > 100  # the load went on before and after the outage

    for node in nodes:  # each knows the database is back, and listens again
        _wait_for_log(node, "is reachable again", 15)
    assert _long_poll_woken(b, a, wake_url, "after, on b") == ["after, on b"]
    assert _long_poll_woken(a, b, wake_url, "after, on a") == ["after, on a"]

    for node in nodes:
        log = node.log()
        outage = [line for line in log.splitlines() if "PostgreSQL" in line]
        assert len(outage) == 2, log
        assert "is unreachable" in outage[0] and "is reachable again" in outage[1], log
        assert "Traceback" not in log, log
        assert "failed in the store" not in log, log  # no InternalFailure (500) either
