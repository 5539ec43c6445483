"""Server nodes behind PgBouncer in transaction pooling mode (Debian's pgbouncer, a process
of the test's own): each statement outside a transaction may run on another server
session, so a node must keep nothing in a session. Wake-ups across nodes go over a direct
connection (--store-listen URL) or, with none, by polling (--store-listen poll).

The pooler has fewer server connections than the nodes have clients, so that sessions are
shared between them all the time: a prepared statement, a setting or a session lock left
on one would be found missing, or found by another client, at once."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.exceptions import BotoCoreError, ClientError

from tests.pg_instance import own_postgres
from tests.pgbouncer import PgBouncer, require_pgbouncer
from tests.support import (
    CREATED_SCHEMAS,
    POSTGRES_URL,
    LongPoll,
    ServerProcess,
    require_postgres,
    sqs_client,
    start_fails,
)

SERVED_WITHIN_S = 60.0
CLIENTS = 6  # concurrent producers, and as many consumers, against 2 server sessions
PER_CLIENT = 60


@pytest.fixture
def bouncer() -> Iterator[tuple[PgBouncer, str]]:
    """A PgBouncer on the shared database whose sessions use a schema of the test's own;
    the URL through it, with that schema named (Conveyor checks it is the pooler's)."""
    require_postgres()
    require_pgbouncer()
    schema = "t_" + os.urandom(6).hex()
    CREATED_SCHEMAS.append(schema)
    pooler = PgBouncer(POSTGRES_URL, schema=schema, pool_size=2).start()
    try:
        yield pooler, f"{pooler.url}?schema={schema}"
    finally:
        pooler.stop()


@contextlib.contextmanager
def _nodes(tmp_path: Path, pooler: PgBouncer, store: str, listen: str
           ) -> Iterator[list[ServerProcess]]:
    """Two nodes behind `pooler` for the block; then stopped, and their logs (and the
    pooler's) free of tracebacks, 500s and prepared statements gone astray."""
    nodes: list[ServerProcess] = []
    try:
        for n in range(2):
            nodes.append(ServerProcess(tmp_path / str(n), "--store", store, "--store-listen",
                                       listen, "--pool-size", "8", "--mode", "relaxed").start())
        yield nodes
    finally:
        for node in nodes:
            node.stop()
    for node in nodes:
        log = node.log()
        assert "Traceback" not in log, log
        assert "failed in the store" not in log, log  # no 500s
        assert "prepared statement" not in log, log
    assert "prepared statement" not in pooler.log()


@pytest.mark.parametrize("listen", ["direct", "poll"])
def test_two_nodes_behind_one_pgbouncer_serve_and_wake_each_others_long_polls(
        bouncer: tuple[PgBouncer, str], tmp_path: Path, listen: str) -> None:
    pooler, store = bouncer
    with _nodes(tmp_path, pooler, store, POSTGRES_URL if listen == "direct" else "poll"
                ) as nodes:
        a, b = (sqs_client(node.url) for node in nodes)
        url = a.create_queue(QueueName="jobs")["QueueUrl"]
        # A long poll on one node, woken by a send on the other: by the notification over
        # the direct connection, or by the poll's look at its queue within a second or so
        # (either well before its 20 s wait ends).
        for receiver, sender in ((nodes[1], a), (nodes[0], b)):
            poll = LongPoll(receiver.url, url)
            sender.send_message(QueueUrl=url, MessageBody=f"to {receiver.port}")
            assert poll.bodies() == [f"to {receiver.port}"]
        # A long poll on the sending node itself: woken inside the node.
        poll = LongPoll(nodes[0].url, url)
        a.send_message(QueueUrl=url, MessageBody="same node")
        assert poll.bodies() == ["same node"]
        # FIFO: order and a group held while in flight, across the nodes (the queue's
        # advisory lock is taken inside each transaction, which runs on one session).
        fifo = a.create_queue(QueueName="jobs.fifo", Attributes={
            "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
        for i in range(5):
            (a if i % 2 else b).send_message(QueueUrl=fifo, MessageBody=str(i),
                                             MessageGroupId="g")
        a.send_message(QueueUrl=fifo, MessageBody="0", MessageGroupId="g")  # a duplicate
        got = b.receive_message(QueueUrl=fifo, MaxNumberOfMessages=2)["Messages"]
        assert [m["Body"] for m in got] == ["0", "1"]
        assert "Messages" not in a.receive_message(QueueUrl=fifo)  # the group is held
        b.delete_message_batch(QueueUrl=fifo, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
        rest = a.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10)["Messages"]
        assert [m["Body"] for m in rest] == ["2", "3", "4"]


def test_concurrent_clients_through_a_small_pool_lose_nothing(
        bouncer: tuple[PgBouncer, str], tmp_path: Path) -> None:
    """Many clients on two nodes over two server sessions: every acknowledged send is
    received once deleted, none twice; no statement meets another's session state."""
    pooler, store = bouncer
    sent: list[str] = []
    received: list[str] = []
    failures: list[str] = []
    with _nodes(tmp_path, pooler, store, POSTGRES_URL) as nodes:
        url = sqs_client(nodes[0].url).create_queue(QueueName="load")["QueueUrl"]

        def produce(n: int) -> None:
            client = sqs_client(nodes[n % 2].url)
            for i in range(0, PER_CLIENT, 10):
                answer = client.send_message_batch(QueueUrl=url, Entries=[
                    {"Id": str(j), "MessageBody": f"{n}-{i + j}"} for j in range(10)])
                sent.extend(e["MessageId"] for e in answer["Successful"])
                failures.extend(str(e) for e in answer.get("Failed", []))

        def consume(n: int) -> None:
            client = sqs_client(nodes[n % 2].url)
            empty = 0
            while empty < 3:
                got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                             WaitTimeSeconds=1).get("Messages", [])
                empty = 0 if got else empty + 1
                if got:
                    answer = client.delete_message_batch(QueueUrl=url, Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(got)])
                    failures.extend(str(e) for e in answer.get("Failed", []))
                    received.extend(m["MessageId"] for m in got)

        def guarded(work, n: int) -> threading.Thread:
            def run() -> None:
                try:
                    work(n)
                except Exception as exc:  # a thread's failure must reach the test
                    failures.append(repr(exc))
            return threading.Thread(target=run)

        threads = [guarded(produce, n) for n in range(CLIENTS)]
        threads += [guarded(consume, n) for n in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not failures, failures
        assert len(sent) == CLIENTS * PER_CLIENT
        assert sorted(received) == sorted(sent)  # each once: deleted after its receive


def test_a_schema_the_pooler_does_not_set_stops_the_node_with_the_fix(
        bouncer: tuple[PgBouncer, str], tmp_path: Path) -> None:
    """PgBouncer cannot take a search_path per connection: the schema named in the URL must
    be the pooler's own, or the tables would land elsewhere."""
    pooler, _ = bouncer
    error = start_fails("--data-dir", str(tmp_path), "--store", f"{pooler.url}?schema=other",
                        "--store-listen", "poll")
    assert "connect_query='SET search_path=other'" in error, error


def test_store_listen_needs_a_postgresql_store_and_a_url_or_poll(tmp_path: Path) -> None:
    assert "only with a PostgreSQL store" in start_fails(
        "--data-dir", str(tmp_path), "--store-listen", "poll")
    assert "expected a postgresql:// URL or poll" in start_fails(
        "--data-dir", str(tmp_path), "--store", POSTGRES_URL, "--store-listen", "mysql://x")


def test_a_database_restart_behind_pgbouncer_is_an_outage_not_an_error(tmp_path: Path) -> None:
    """PgBouncer stays up while the database behind it restarts: what the node meets
    meanwhile (PgBouncer's own errors are SQLSTATE 08P01) is the database's absence,
    answered ServiceUnavailable; then the node serves again by itself, its wake-ups back
    on the direct connection."""
    require_pgbouncer()
    with own_postgres() as db:
        # Queries wait 2 s for a server connection, not 120: the outage is answered soon.
        pooler = PgBouncer(db.url, query_wait_timeout="2", server_login_retry="1").start()
        try:
            with _nodes(tmp_path, pooler, pooler.url, db.url) as nodes:
                a, b = (sqs_client(node.url, read_timeout=30) for node in nodes)
                url = a.create_queue(QueueName="restart")["QueueUrl"]
                db.stop()
                met = set()
                for _ in range(3):
                    try:
                        a.send_message(QueueUrl=url, MessageBody="during")
                    except ClientError as exc:
                        met.add(exc.response["Error"]["Code"])
                    except BotoCoreError as exc:  # no answer in time
                        met.add(type(exc).__name__)
                db.start()
                assert met and met <= {"ServiceUnavailable", "ReadTimeoutError"}, met
                deadline = time.monotonic() + SERVED_WITHIN_S
                while True:  # serves again: a bound on a hang, not a timing
                    try:
                        a.send_message(QueueUrl=url, MessageBody="after")
                        break
                    except ClientError as exc:
                        assert exc.response["Error"]["Code"] == "ServiceUnavailable"
                        assert time.monotonic() < deadline, "never served again"
                        time.sleep(0.2)
                got = b.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                        WaitTimeSeconds=5)["Messages"]
                assert "after" in [m["Body"] for m in got]
                poll = LongPoll(nodes[1].url, url)  # woken across nodes again
                a.send_message(QueueUrl=url, MessageBody="wake")
                assert poll.bodies() == ["wake"]
        finally:
            pooler.stop()
