"""The temporary-queues client: host queues per attribute set, heartbeats, shutdown."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from conveyor.tempqueues import ClientClosed, TemporaryQueuesClient
from conveyor.tempqueues.names import HEARTBEAT_TAG, RETENTION_TAG

from .conftest import CallCounter
from .test_virtual import wait_until


def test_host_queue_per_attribute_set(make_temporary: Callable[..., TemporaryQueuesClient],
                                      prefix: str) -> None:
    client = make_temporary()
    counter = CallCounter(client.sqs)
    plain = [client.create_queue(QueueName=f"p{i}")["QueueUrl"] for i in range(5)]
    slow = [client.create_queue(QueueName=f"s{i}", Attributes={"VisibilityTimeout": "90"})[
        "QueueUrl"] for i in range(5)]
    assert counter.calls["CreateQueue"] == 2  # one host queue per distinct attribute set
    hosts = {url.split("#")[0] for url in plain}, {url.split("#")[0] for url in slow}
    assert len(hosts[0]) == 1 and len(hosts[1]) == 1 and hosts[0] != hosts[1]
    assert sorted(client.host_queue_urls) == sorted(hosts[0] | hosts[1])
    for host in client.host_queue_urls:
        assert host.rsplit("/", 1)[1].startswith(prefix)
    (slow_host,) = hosts[1]
    assert client.sqs.get_queue_attributes(QueueUrl=slow_host, AttributeNames=[
        "VisibilityTimeout"])["Attributes"]["VisibilityTimeout"] == "90"
    for url in plain + slow:
        client.delete_queue(QueueUrl=url)
    assert counter.calls["DeleteQueue"] == 0


def test_concurrent_creates_share_one_host(make_temporary: Callable[...,
                                                                    TemporaryQueuesClient]) -> None:
    client = make_temporary()
    urls: list[str] = []
    threads = [threading.Thread(target=lambda i=i: urls.append(
        client.create_queue(QueueName=f"c{i}")["QueueUrl"])) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({url.split("#")[0] for url in urls}) == 1
    assert len(client.host_queue_urls) == 1


def test_temporary_queues_carry_messages(make_temporary: Callable[...,
                                                                  TemporaryQueuesClient]) -> None:
    client = make_temporary()
    url = client.create_queue(QueueName="work")["QueueUrl"]
    client.send_message(QueueUrl=url, MessageBody="hello")
    message = client.receive_message(QueueUrl=url, WaitTimeSeconds=10)["Messages"][0]
    assert message["Body"] == "hello"
    client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def test_host_queues_are_tagged_and_heartbeated(
        make_temporary: Callable[..., TemporaryQueuesClient]) -> None:
    client = make_temporary(retention_s=30, heartbeat_interval_s=0.2)
    client.create_queue(QueueName="x")
    (host,) = client.host_queue_urls

    def tags() -> dict[str, str]:
        return client.sqs.list_queue_tags(QueueUrl=host)["Tags"]

    first = tags()
    assert first[RETENTION_TAG] == "30"
    assert wait_until(lambda: int(tags()[HEARTBEAT_TAG]) > int(first[HEARTBEAT_TAG]))
    assert client.heartbeater.beats >= 1


def test_shutdown_releases_everything(client_factory: Callable[[], Any], prefix: str) -> None:
    sqs = client_factory()
    client = TemporaryQueuesClient(sqs, prefix=prefix, poll_wait_s=1, heartbeat_interval_s=0.2,
                                   retention_s=30, sweep_period_s=1)
    url = client.create_queue(QueueName="a")["QueueUrl"]
    client.create_queue(QueueName="b", Attributes={"DelaySeconds": "1"})
    hosts = client.host_queue_urls
    assert len(hosts) == 2
    receivers = client.virtual.receivers
    assert len(receivers) == 2 and all(r.alive for r in receivers)
    client.shutdown()
    listed = sqs.list_queues(QueueNamePrefix=prefix).get("QueueUrls", [])
    assert not set(hosts) & set(listed)  # only the shared sweep queue may remain
    assert all(u.endswith("ConveyorSweeper.fifo") for u in listed)
    assert not any(r.alive for r in receivers)
    assert client.heartbeater.join(0) and client.sweeper is not None and client.sweeper.join(0)
    with pytest.raises(ClientClosed):
        client.create_queue(QueueName="c")
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        client.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    client.shutdown()  # twice is harmless
