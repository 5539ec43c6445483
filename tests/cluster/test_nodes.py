"""Two server nodes on one PostgreSQL database: what one node does, the other sees."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.server.helpers import Browser, RawClient, advance_clock
from tests.server.test_workers_api import workers_call
from tests.support import (
    POSTGRES_URL,
    LongPoll,
    ServerProcess,
    isolated,
    require_postgres,
    sqs_client,
)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    require_postgres()
    store = isolated(["--store", POSTGRES_URL])
    a = ServerProcess(tmp_path / "a", *store, "--mode", "relaxed").start()
    b = ServerProcess(tmp_path / "b", *store, "--mode", "relaxed").start()
    yield a, b
    a.stop()
    b.stop()


def _workers(node: ServerProcess, action: str, payload: dict, timeout_s: float = 30) -> dict:
    """A ConveyorWorkers call to `node` that must succeed; its answer."""
    resp = workers_call(RawClient(node.url, timeout_s=timeout_s), action, payload)
    assert resp.status == 200, resp.body
    return resp.json()


def test_a_send_on_one_node_wakes_a_long_poll_on_the_other(pair: tuple[ServerProcess,
                                                                        ServerProcess]) -> None:
    a, b = pair
    url = sqs_client(a.url).create_queue(QueueName="wake")["QueueUrl"]
    poll = LongPoll(b.url, url)
    sqs_client(a.url).send_message(QueueUrl=url, MessageBody="x")
    assert poll.bodies() == ["x"]  # woken by the notification, not at the end of its wait


def test_queues_leases_and_workers_are_shared(pair: tuple[ServerProcess, ServerProcess]) -> None:
    a, b = pair
    url = sqs_client(a.url).create_queue(QueueName="shared")["QueueUrl"]
    assert sqs_client(b.url).get_queue_url(QueueName="shared")["QueueUrl"].endswith("/shared")
    sqs_client(a.url).send_message(QueueUrl=url, MessageBody="once")
    assert sqs_client(b.url).receive_message(QueueUrl=url)["Messages"][0]["Body"] == "once"
    assert "Messages" not in sqs_client(a.url).receive_message(QueueUrl=url)

    def acquire(node: ServerProcess, holder: str) -> int:
        body = json.dumps({"Name": "cron/shared", "Holder": holder, "TtlSeconds": 30}).encode()
        headers = {"Content-Type": "application/x-amz-json-1.0",
                   "X-Amz-Target": "ConveyorLease.AcquireLease"}
        return RawClient(node.url).request("POST", "/", body, headers).status

    assert acquire(a, "leader-a") == 200
    assert acquire(b, "leader-b") == 400  # held through node a

    _workers(a, "AnnounceWorker", {"WorkerId": "w-on-a", "Queue": "shared",
                                   "TtlSeconds": 30})
    listed = _workers(b, "ListWorkers", {})["Workers"]
    assert [w["WorkerId"] for w in listed] == ["w-on-a"]  # announced to a, listed by b


def test_a_message_in_flight_stays_hidden_on_every_node_until_its_visibility_ends(
        tmp_path: Path) -> None:
    """"During the visibility timeout, Amazon SQS prevents all consumers from receiving
    and processing the message" (SQS Developer Guide, visibility timeout), whichever node
    they ask: received through a for 12 hours (the most SQS allows), the message is hidden
    on a and b alike until b's clock passes those 12 hours, and then b hands it out as its
    second receive. Time is moved, never waited for: only a stall of twenty minutes
    between two steps could spoil the first check."""
    require_postgres()
    store = isolated(["--store", POSTGRES_URL])
    a = ServerProcess(tmp_path / "a", *store, "--mode", "relaxed").start()
    b = ServerProcess(tmp_path / "b", *store, "--mode", "relaxed", "--dev-clock").start()
    visibility_s = 12 * 3600
    try:
        url = sqs_client(a.url).create_queue(QueueName="hidden")["QueueUrl"]
        sqs_client(a.url).send_message(QueueUrl=url, MessageBody="once")

        def receive(node: ServerProcess) -> list[dict]:
            return sqs_client(node.url).receive_message(
                QueueUrl=url, VisibilityTimeout=visibility_s,
                MessageSystemAttributeNames=["ApproximateReceiveCount"]).get("Messages", [])

        [first] = receive(a)
        assert first["Attributes"]["ApproximateReceiveCount"] == "1"
        assert receive(b) == [] and receive(a) == []
        advance_clock(b.url, visibility_s - 1200)
        assert receive(b) == []  # twenty minutes of its visibility left
        advance_clock(b.url, 1201)
        [second] = receive(b)
        assert (second["Body"], second["Attributes"]["ApproximateReceiveCount"]) == ("once", "2")
    finally:
        a.stop()
        b.stop()


def test_nodes_with_skewed_clocks_agree_on_delays_and_visibility(tmp_path: Path) -> None:
    """Node b's machine clock runs an hour fast: delays and visibility still follow the
    database's clock, so a 2 s delay set through b lasts about 2 s on a."""
    require_postgres()
    store = isolated(["--store", POSTGRES_URL])
    a = ServerProcess(tmp_path / "a", *store, "--mode", "relaxed").start()
    b = ServerProcess(tmp_path / "b", *store, "--mode", "relaxed",
                      "--dev-clock-skew", "3600").start()
    try:
        url = sqs_client(a.url).create_queue(QueueName="skew")["QueueUrl"]
        sqs_client(b.url).send_message(QueueUrl=url, MessageBody="late", DelaySeconds=2)
        attributes = sqs_client(a.url).get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])["Attributes"]
        assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"
        got = sqs_client(a.url).receive_message(QueueUrl=url, WaitTimeSeconds=10,
                                                VisibilityTimeout=1)
        assert got["Messages"][0]["Body"] == "late"  # an hour's skew would have kept it
        sent = int(sqs_client(a.url).receive_message(
            QueueUrl=url, WaitTimeSeconds=10, AttributeNames=["SentTimestamp"]
        )["Messages"][0]["Attributes"]["SentTimestamp"])
        assert abs(sent / 1000 - time.time()) < 60  # stamped in database time, not b's
    finally:
        a.stop()
        b.stop()


def test_every_node_draws_the_same_charts(pair: tuple[ServerProcess, ServerProcess]) -> None:
    """Sent on one node, received and deleted on the other: each node's console charts
    count both nodes' work (the counts meet in the store), so the two pages agree."""
    a, b = pair
    url = sqs_client(a.url).create_queue(QueueName="charted")["QueueUrl"]
    for i in range(6):
        sqs_client(a.url).send_message(QueueUrl=url, MessageBody=f"m{i}")
    got = sqs_client(b.url).receive_message(QueueUrl=url, MaxNumberOfMessages=4)["Messages"]
    for m in got:
        sqs_client(b.url).delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    wanted = {"sent": "6 in the last hour", "received": "4 in the last hour",
              "deleted": "4 in the last hour", "dead_lettered": "0 in the last hour",
              "failed": "0 in the last hour"}

    def charts(node: ServerProcess) -> dict[str, str]:
        page = Browser(node.url).get("/console/queues/us-east-1/charted").text
        return dict(re.findall(r'data-kind="(\w+)"><figcaption><b>[^<]*</b> ([^<]*)<', page))

    deadline = time.monotonic() + 30  # each node saves its counts every few seconds
    seen = charts(a), charts(b)
    while not seen[0] == seen[1] == {**wanted, "oldest": seen[0].get("oldest")}:
        assert time.monotonic() < deadline, seen
        time.sleep(0.5)
        seen = charts(a), charts(b)
    overview = [re.search(r"<title>Received in the last hour: 4;[^<]*</title>",
                          Browser(n.url).get("/console").text) for n in (a, b)]
    assert overview[0] and overview[1] and overview[0].group() == overview[1].group()


def test_a_drain_asked_on_one_node_answers_the_workers_poll_parked_on_the_other(
        pair: tuple[ServerProcess, ServerProcess]) -> None:
    """DrainWorker reaches a worker's PollMessages parked on another node at once, through
    the store's NOTIFY (as a send does): the five-minute poll answers `{"Drain": true}`
    long before the test's own, shorter, wait for it ends."""
    a, b = pair
    url = sqs_client(a.url).create_queue(QueueName="drained")["QueueUrl"]

    _workers(b, "AnnounceWorker", {"WorkerId": "w-on-b", "Queue": "drained",
                                   "TtlSeconds": 600})
    with ThreadPoolExecutor(1) as pool:
        poll = pool.submit(_workers, b, "PollMessages", {
            "QueueUrl": url, "WaitTimeSeconds": 300, "WorkerId": "w-on-b"}, 120)
        time.sleep(0.5)  # let it park; if it has not yet, it answers the same
        _workers(a, "DrainWorker", {"WorkerId": "w-on-b"})
        assert poll.result(110) == {"Drain": True}
