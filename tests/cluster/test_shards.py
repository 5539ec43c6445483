"""Server nodes on two PostgreSQL primaries of the test's own (shards): each queue on one,
every node serving every queue; dead letters and move tasks across them; one shard killed
while the other serves; the move tool, with messages in flight and killed in mid-move."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from botocore.exceptions import ClientError

from conveyor.store._placement import shard_for
from tests.pg_instance import PostgresInstance, require_own_postgres
from tests.server.helpers import RawClient
from tests.support import ServerProcess, sqs_client

SHARDS = ("a", "b")


@pytest.fixture(scope="module")
def instances() -> Iterator[dict[str, PostgresInstance]]:
    require_own_postgres()
    made = {name: PostgresInstance() for name in SHARDS}
    try:
        for instance in made.values():
            instance.create()
        yield made
    finally:
        for instance in made.values():
            instance.destroy()


class Cluster:
    """Nodes on the shards, each shard's tables in a schema of this test's own."""

    def __init__(self, tmp_path: Path, instances: dict[str, PostgresInstance]) -> None:
        schema = "s_" + os.urandom(5).hex()
        self.urls = {n: f"{i.url}?schema={schema}" for n, i in instances.items()}
        self.instances = instances
        self.args = [a for n, url in self.urls.items() for a in ("--shard", f"{n}={url}")]
        self.tmp_path = tmp_path
        self.nodes: list[ServerProcess] = []

    def node(self) -> ServerProcess:
        node = ServerProcess(self.tmp_path / f"n{len(self.nodes)}", *self.args,
                             "--mode", "relaxed").start()
        self.nodes.append(node)
        return node

    def tool(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "conveyor", "shards", *args,
                                 *self.args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def rows(self, shard: str, sql: str, *params: object) -> list:
        async def fetch() -> list:
            conn = await asyncpg.connect(self.urls[shard].split("?")[0])
            try:
                schema = self.urls[shard].split("schema=")[1]
                await conn.execute(f'SET search_path TO "{schema}"')
                return await conn.fetch(sql, *params)
            finally:
                await conn.close()
        return asyncio.run(fetch())

    def shard_of(self, name: str) -> str:
        [row] = self.rows("a", "SELECT shard FROM conveyor_placements WHERE name=$1", name)
        return row[0]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


@pytest.fixture
def cluster(tmp_path: Path, instances: dict[str, PostgresInstance]) -> Iterator[Cluster]:
    made = Cluster(tmp_path, instances)
    yield made
    made.stop()


def named_on(shard: str, stem: str) -> str:
    """A queue name the placement rule puts on `shard`."""
    return next(f"{stem}{i}" for i in range(1000)
                if shard_for("us-east-1", f"{stem}{i}", list(SHARDS)) == shard)


def test_queues_are_placed_and_every_node_serves_and_lists_them(cluster: Cluster) -> None:
    a, b = cluster.node(), cluster.node()
    on_a, on_b = named_on("a", "alpha"), named_on("b", "beta")
    urls = {n: sqs_client(a.url).create_queue(QueueName=n)["QueueUrl"] for n in (on_a, on_b)}
    partitions = [f"jobs-p{i}" for i in range(4)]
    for name in partitions:
        sqs_client(b.url).create_queue(QueueName=name)
    assert (cluster.shard_of(on_a), cluster.shard_of(on_b)) == ("a", "b")
    # Each queue's row on its shard alone.
    assert [r[0] for r in cluster.rows("b", "SELECT name FROM conveyor_queues WHERE name=$1",
                                       on_a)] == []
    # A partitioned queue's partitions spread over both shards, two each.
    placed = [cluster.shard_of(p) for p in partitions]
    assert sorted(placed) == ["a", "a", "b", "b"]
    listed = sqs_client(b.url).list_queues()["QueueUrls"]
    assert sorted(u.rsplit("/", 1)[1] for u in listed) == sorted([on_a, on_b, *partitions])
    for name, url in urls.items():
        sqs_client(a.url).send_message(QueueUrl=url, MessageBody=f"to {name}")
        [m] = sqs_client(b.url).receive_message(QueueUrl=url)["Messages"]
        assert m["Body"] == f"to {name}"
    metrics = RawClient(b.url).request("GET", "/metrics").body.decode()
    assert f'queue="{on_a}"' in metrics and f'queue="{on_b}"' in metrics
    assert "conveyor_store_shards 2.0" in metrics


def test_dead_letters_and_their_redrive_cross_shards(cluster: Cluster) -> None:
    """A source on shard b, its dead-letter queue on shard a: maxReceiveCount's receive
    moves the message to a; a move task sends it back to b. Nothing lost, each once."""
    node = cluster.node()
    sqs = sqs_client(node.url)
    dlq = sqs.create_queue(QueueName=named_on("a", "dead"))["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    source = sqs.create_queue(QueueName=named_on("b", "work"), Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})})[
        "QueueUrl"]
    bodies = {f"m{i}" for i in range(30)}
    for body in bodies:
        sqs.send_message(QueueUrl=source, MessageBody=body)
    # Each received once, back at once; the receive after finds it past maxReceiveCount
    # and moves it to the other shard, until none is left.
    wait_for(lambda: not sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10,
                                             VisibilityTimeout=0).get("Messages")
             and _count(cluster, "b") == 0)
    dead = drain(sqs, dlq, len(bodies), delete=False)
    assert {m["Body"] for m in dead} == bodies
    # "ApproximateReceiveCount: 2" from the DLQ at maxReceiveCount 1 (base.Claim.dead_letter).
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in dead} == {"2"}
    assert {m["Attributes"]["DeadLetterQueueSourceArn"] for m in dead} == {
        sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"]}
    assert cluster.rows("a", "SELECT count(*) FROM conveyor_messages")[0][0] == len(bodies)
    assert cluster.rows("b", "SELECT count(*) FROM conveyor_messages")[0][0] == 0
    sqs.start_message_move_task(SourceArn=dlq_arn)
    wait_for(lambda: sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"][0]["Status"]
             == "COMPLETED")
    back = drain(sqs, source, len(bodies))
    assert sorted(m["Body"] for m in back) == sorted(bodies)
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in back} == {"1"}  # fresh


def test_a_shard_down_takes_only_its_own_queues(cluster: Cluster) -> None:
    node = cluster.node()
    sqs = sqs_client(node.url)
    up = sqs.create_queue(QueueName=named_on("a", "up"))["QueueUrl"]
    down = sqs.create_queue(QueueName=named_on("b", "down"))["QueueUrl"]
    sqs.send_message(QueueUrl=down, MessageBody="kept")
    kill_postmaster(cluster.instances["b"])
    try:
        time.sleep(1.5)  # past the service's queue cache: the down shard is asked
        with pytest.raises(ClientError) as refused:
            sqs.send_message(QueueUrl=down, MessageBody="refused")
        # Retryable: botocore's standard retry mode retries ServiceUnavailable, HTTP 503.
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
        for i in range(20):
            sqs.send_message(QueueUrl=up, MessageBody=f"u{i}")
        assert len(drain(sqs, up, 20)) == 20
        names = [u.rsplit("/", 1)[1] for u in sqs.list_queues()["QueueUrls"]]
        assert names == [up.rsplit("/", 1)[1]]  # the other's left out while it is down
        assert RawClient(node.url).request("GET", "/ready").status == 200
    finally:
        cluster.instances["b"].start()
    wait_for(lambda: _answers(sqs, down))
    assert [m["Body"] for m in drain(sqs, down, 1)] == ["kept"]


def test_the_move_tool_moves_a_queue_with_messages_in_flight(cluster: Cluster) -> None:
    a, b = cluster.node(), cluster.node()
    name = named_on("a", "busy")
    url = sqs_client(a.url).create_queue(QueueName=name)["QueueUrl"]
    sent = send_many(sqs_client(a.url), url, 2000)
    in_flight = sqs_client(b.url).receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                                  VisibilityTimeout=2)["Messages"]
    tool = cluster.tool("move", name, "--to", "b")
    during = send_many(sqs_client(b.url), url, 300, "during")  # nodes serve it meanwhile
    out, err = tool.communicate(timeout=120)
    assert tool.returncode == 0, err
    assert cluster.shard_of(name) == "b"
    assert cluster.rows("a", "SELECT count(*) FROM conveyor_messages")[0][0] == 0
    # Every message acknowledged is there, the ten in flight too, when their time is up.
    got = {m["MessageId"] for m in drain(sqs_client(a.url), url, len(sent) + len(during))}
    assert got >= {*sent, *during}
    assert {m["MessageId"] for m in in_flight} <= got
    listed = cluster.tool("list")
    assert f"us-east-1\t{name}\tb" in listed.communicate(timeout=60)[0]


def test_a_move_killed_midway_loses_nothing_and_finishes_when_run_again(
        cluster: Cluster) -> None:
    node = cluster.node()
    sqs = sqs_client(node.url)
    name = named_on("b", "big")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sent = send_many(sqs, url, 6000)
    tool = cluster.tool("move", name, "--to", "a")
    wait_for(lambda: _count(cluster, "a") > 0)  # copying has begun
    tool.send_signal(signal.SIGKILL)
    tool.wait(10)
    assert _count(cluster, "a") + _count(cluster, "b") >= len(sent)  # nothing lost meanwhile
    again = cluster.tool("move", name, "--to", "a")
    assert again.wait(120) == 0, again.stderr.read() if again.stderr else ""
    got = {m["MessageId"] for m in drain(sqs, url, len(sent))}
    assert got >= set(sent)


def test_a_node_killed_during_a_cross_shard_move_task_loses_nothing(cluster: Cluster) -> None:
    a, b = cluster.node(), cluster.node()
    sqs = sqs_client(a.url)
    dlq = sqs.create_queue(QueueName=named_on("a", "graveyard"))["QueueUrl"]
    target = sqs.create_queue(QueueName=named_on("b", "retry"))["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"]
    sent = send_many(sqs, dlq, 3000)
    # A dead-letter queue is one that some queue's RedrivePolicy names.
    sqs.create_queue(QueueName=named_on("b", "src"), Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": arn, "maxReceiveCount": 3})})
    target_arn = sqs.get_queue_attributes(QueueUrl=target, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    sqs.start_message_move_task(SourceArn=arn, DestinationArn=target_arn,
                                MaxNumberOfMessagesPerSecond=500)
    wait_for(lambda: _count(cluster, "b") > 0)
    for node in (a, b):  # whichever runs it now
        node.kill()
    survivor = cluster.node()
    wait_for(lambda: _count(cluster, "a") == 0, timeout_s=120)
    got = {m["MessageId"] for m in drain(sqs_client(survivor.url), target, len(sent))}
    assert got >= set(sent)


# --- helpers ------------------------------------------------------------------------------


def send_many(sqs, url: str, n: int, prefix: str = "m") -> list[str]:
    ids = []
    for start in range(0, n, 10):
        answer = sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"{prefix}{start + i}"}
            for i in range(min(10, n - start))])
        assert not answer.get("Failed")
        ids += [e["MessageId"] for e in answer["Successful"]]
    return ids


def drain(sqs, url: str, at_least: int, delete: bool = True) -> list[dict]:
    """Receive until `at_least` distinct messages came (a bound of 120 s on a hang), each
    deleted, or else made visible again once all came; the first receive of each."""
    got: dict[str, dict] = {}
    deadline = time.monotonic() + 120
    while len(got) < at_least:
        assert time.monotonic() < deadline, f"{len(got)} of {at_least} received"
        found = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                    VisibilityTimeout=60,
                                    MessageSystemAttributeNames=["All"]).get("Messages", [])
        for m in found:
            got.setdefault(m["MessageId"], m)
        if found and delete:
            sqs.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(found)])
    if not delete:
        handles = [m["ReceiptHandle"] for m in got.values()]
        for start in range(0, len(handles), 10):
            sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
                for i, h in enumerate(handles[start:start + 10])])
    return list(got.values())


def wait_for(condition, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not reached"
        time.sleep(0.1)


def _count(cluster: Cluster, shard: str) -> int:
    return cluster.rows(shard, "SELECT count(*) FROM conveyor_messages")[0][0]


def _answers(sqs, url: str) -> bool:
    try:
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    except ClientError:
        return False
    return True


def kill_postmaster(instance: PostgresInstance) -> None:
    """SIGKILL the postmaster by its PID, then its children (as a machine's death would
    end them), and clear what it left for the next start."""
    pid = int((instance.data / "postmaster.pid").read_text().split()[0])
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    os.kill(pid, signal.SIGKILL)
    for child in children.stdout.split():
        with contextlib.suppress(ProcessLookupError):  # ended with its parent
            os.kill(int(child), signal.SIGKILL)
    time.sleep(0.5)
