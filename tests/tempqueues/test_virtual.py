"""Virtual queues on a real host queue: routing, isolation, local waits, orphans, idleness."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conveyor.tempqueues import InvalidVirtualQueueAttributes, VirtualQueuesClient
from conveyor.tempqueues.core import VirtualQueueId
from tests.support import ANSWERED_WITHIN_S

from .conftest import CallCounter


def wait_until(predicate: Callable[[], bool], timeout_s: float = 15.0) -> bool:
    """Poll `predicate` until true or the (generous) deadline passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def host_url(client_factory: Callable[[], Any], queue_name: str) -> str:
    return client_factory().create_queue(QueueName=queue_name)["QueueUrl"]


@pytest.fixture
def virtual(client_factory: Callable[[], Any]) -> Iterator[VirtualQueuesClient]:
    client = VirtualQueuesClient(client_factory(), poll_wait_s=1)
    yield client
    client.shutdown()


def create(virtual: VirtualQueuesClient, host_url: str, name: str, **attributes: str) -> str:
    return virtual.create_queue(QueueName=name,
                                Attributes={"HostQueueUrl": host_url, **attributes})["QueueUrl"]


def receive_all(virtual: VirtualQueuesClient, url: str, expected: int) -> list[str]:
    bodies: list[str] = []
    deadline = time.monotonic() + 15
    while len(bodies) < expected and time.monotonic() < deadline:
        for message in virtual.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                               WaitTimeSeconds=1).get("Messages", []):
            bodies.append(message["Body"])
            virtual.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


def test_create_is_local_and_url_names_host(virtual: VirtualQueuesClient, host_url: str) -> None:
    counter = CallCounter(virtual.sqs)
    url = create(virtual, host_url, "alpha")
    assert url == host_url + "#alpha"
    assert create(virtual, host_url, "alpha") == url  # idempotent, like CreateQueue
    virtual.delete_queue(QueueUrl=url)
    assert counter.calls["CreateQueue"] == 0
    assert counter.calls["DeleteQueue"] == 0
    with pytest.raises(virtual.sqs.exceptions.QueueDoesNotExist):
        virtual.receive_message(QueueUrl=url, WaitTimeSeconds=0)


def test_send_and_receive_route_by_virtual_queue(virtual: VirtualQueuesClient,
                                                 host_url: str) -> None:
    a, b = create(virtual, host_url, "a"), create(virtual, host_url, "b")
    virtual.send_message(QueueUrl=a, MessageBody="for a")
    virtual.send_message_batch(QueueUrl=b, Entries=[
        {"Id": "1", "MessageBody": "for b 1"}, {"Id": "2", "MessageBody": "for b 2"}])
    assert sorted(receive_all(virtual, b, 2)) == ["for b 1", "for b 2"]
    assert receive_all(virtual, a, 1) == ["for a"]
    # Deleting went through to the host queue: nothing is left there.
    attributes = virtual.sqs.get_queue_attributes(
        QueueUrl=host_url, AttributeNames=["ApproximateNumberOfMessages",
                                           "ApproximateNumberOfMessagesNotVisible"])
    assert set(attributes["Attributes"].values()) == {"0"}


def test_many_virtual_queues_on_one_host_stay_isolated(virtual: VirtualQueuesClient,
                                                       host_url: str) -> None:
    urls = [create(virtual, host_url, f"v{i}") for i in range(40)]
    senders = [threading.Thread(target=lambda u=url, i=i: [
        virtual.send_message(QueueUrl=u, MessageBody=f"v{i}:{n}") for n in range(3)])
        for i, url in enumerate(urls)]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join()
    for i, url in enumerate(urls):
        assert sorted(receive_all(virtual, url, 3)) == [f"v{i}:{n}" for n in range(3)]
    assert virtual.host_queue_urls == [host_url]  # one receiver for all forty


def test_wait_time_is_honoured_locally(virtual: VirtualQueuesClient, host_url: str) -> None:
    url = create(virtual, host_url, "waiting")
    counter = CallCounter(virtual.sqs)
    got: list[dict[str, Any]] = []
    receiver = threading.Thread(target=lambda: got.append(
        virtual.receive_message(QueueUrl=url, WaitTimeSeconds=10)))
    receiver.start()
    time.sleep(0.2)  # let the receive start waiting before the message exists
    virtual.send_message(QueueUrl=url, MessageBody="late")
    receiver.join(15)
    assert [m["Body"] for m in got[0]["Messages"]] == ["late"]
    # An empty wait returns empty, and waiting never sends a virtual URL to the server.
    assert virtual.receive_message(QueueUrl=url, WaitTimeSeconds=1) == {}
    assert virtual.receive_message(QueueUrl=url, WaitTimeSeconds=0) == {}
    assert not [u for u in counter.urls if "#" in u]


def test_unknown_virtual_queue_goes_to_the_handler(client_factory: Callable[[], Any],
                                                   host_url: str) -> None:
    seen: list[tuple[VirtualQueueId, str]] = []

    def handler(queue: VirtualQueueId, message: dict[str, Any]) -> bool:
        seen.append((queue, message["Body"]))
        return True

    virtual = VirtualQueuesClient(client_factory(), poll_wait_s=1, orphan_handler=handler)
    try:
        create(virtual, host_url, "known")
        virtual.send_message(QueueUrl=host_url + "#ghost", MessageBody="lost")
        assert wait_until(lambda: bool(seen))
        assert seen == [(VirtualQueueId(host_url, "ghost"), "lost")]
    finally:
        virtual.shutdown()


def test_default_orphan_handler_logs_and_deletes(virtual: VirtualQueuesClient, host_url: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "conveyor.tempqueues")
    create(virtual, host_url, "known")
    virtual.send_message(QueueUrl=host_url + "#ghost", MessageBody="lost")
    assert wait_until(lambda: "unknown virtual queue 'ghost'" in caplog.text)

    def host_empty() -> bool:
        attributes = virtual.sqs.get_queue_attributes(
            QueueUrl=host_url, AttributeNames=["ApproximateNumberOfMessages",
                                               "ApproximateNumberOfMessagesNotVisible"])
        return set(attributes["Attributes"].values()) == {"0"}

    assert wait_until(host_empty)


def test_idle_virtual_queues_are_removed(client_factory: Callable[[], Any],
                                         host_url: str) -> None:
    now = [1000.0]
    virtual = VirtualQueuesClient(client_factory(), poll_wait_s=1, reap_interval_s=3600,
                                  monotonic=lambda: now[0])
    try:
        short = create(virtual, host_url, "short", IdleQueueRetentionPeriodSeconds="5")
        forever = create(virtual, host_url, "forever")
        now[0] += 4
        virtual.send_message(QueueUrl=short, MessageBody="x")  # sending is not using it here
        virtual.get_queue_attributes(QueueUrl=short, AttributeNames=["HostQueueUrl"])  # this is
        now[0] += 4
        assert virtual.reap_idle() == []
        now[0] += 2
        assert virtual.reap_idle() == [short]
        assert virtual.virtual_queue_urls == [forever]
        with pytest.raises(virtual.sqs.exceptions.QueueDoesNotExist):
            virtual.receive_message(QueueUrl=short, WaitTimeSeconds=0)
    finally:
        virtual.shutdown()


def test_janitor_removes_idle_queues_in_background(client_factory: Callable[[], Any],
                                                   host_url: str) -> None:
    virtual = VirtualQueuesClient(client_factory(), poll_wait_s=1, reap_interval_s=0.1)
    try:
        url = create(virtual, host_url, "brief", IdleQueueRetentionPeriodSeconds="1")
        assert wait_until(lambda: url not in virtual.virtual_queue_urls)
    finally:
        virtual.shutdown()


def test_virtual_queue_attributes(virtual: VirtualQueuesClient, host_url: str) -> None:
    url = create(virtual, host_url, "attrs", IdleQueueRetentionPeriodSeconds="60")
    attributes = virtual.get_queue_attributes(
        QueueUrl=url, AttributeNames=["HostQueueUrl", "IdleQueueRetentionPeriodSeconds",
                                      "VisibilityTimeout"])["Attributes"]
    assert attributes["HostQueueUrl"] == host_url
    assert attributes["IdleQueueRetentionPeriodSeconds"] == "60"
    assert attributes["VisibilityTimeout"] == "30"
    with pytest.raises(InvalidVirtualQueueAttributes):
        create(virtual, host_url, "bad", VisibilityTimeout="5")
    with pytest.raises(InvalidVirtualQueueAttributes):
        virtual.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "5"})
    virtual.tag_queue(QueueUrl=url, Tags={"team": "red"})
    assert virtual.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "red"}


def test_shutdown_stops_receivers_and_closes_waits(client_factory: Callable[[], Any],
                                                   host_url: str) -> None:
    virtual = VirtualQueuesClient(client_factory(), poll_wait_s=1)
    url = create(virtual, host_url, "closing")
    got: list[dict[str, Any]] = []
    waiter = threading.Thread(target=lambda: got.append(
        virtual.receive_message(QueueUrl=url, WaitTimeSeconds=20)))
    waiter.start()
    time.sleep(0.1)
    virtual.shutdown()
    waiter.join(ANSWERED_WITHIN_S)  # a wait shutdown left open would run 20 s
    assert not waiter.is_alive() and got == [{}]
    assert virtual.virtual_queue_urls == [] and virtual.host_queue_urls == []


def test_wire_format_matches_the_java_client(virtual: VirtualQueuesClient, host_url: str) -> None:
    url = create(virtual, host_url, "interop")
    virtual.stop_receivers()  # read the host queue raw, as another SDK would see it
    virtual.join_receivers(5)
    virtual.sqs.send_message(QueueUrl=host_url, MessageBody="x")  # wake nothing; plain message
    virtual.send_message(QueueUrl=url, MessageBody="tagged")
    bodies = {}
    deadline = time.monotonic() + 10
    while len(bodies) < 2 and time.monotonic() < deadline:
        for m in virtual.sqs.receive_message(QueueUrl=host_url, MaxNumberOfMessages=10,
                                             WaitTimeSeconds=1, MessageAttributeNames=["All"]
                                             ).get("Messages", []):
            bodies[m["Body"]] = m.get("MessageAttributes", {})
    assert bodies["tagged"] == {"__AmazonSQSVirtualQueuesClient.QueueName": {
        "DataType": "String", "StringValue": "interop"}}
    assert bodies["x"] == {}
