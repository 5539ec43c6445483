"""The I/O-free core: URLs, attributes, idleness, sweep tasks, buffers, pacing."""

from __future__ import annotations

import threading

import pytest

from conveyor.tempqueues import core
from conveyor.tempqueues.buffer import MessageBuffer, VirtualQueue
from conveyor.tempqueues.errors import InvalidVirtualQueueAttributes
from conveyor.tempqueues.heartbeat import TagPacer
from conveyor.tempqueues.names import (
    HEARTBEAT_TAG,
    RETENTION_TAG,
    VIRTUAL_QUEUE_NAME_ATTRIBUTE,
)

HOST = "http://127.0.0.1:9324/000000000000/host"


def test_virtual_urls_round_trip() -> None:
    queue = core.parse_virtual_url(HOST + "#reply-1")
    assert queue == core.VirtualQueueId(HOST, "reply-1")
    assert queue is not None and queue.url == HOST + "#reply-1"
    assert core.parse_virtual_url(HOST) is None


def test_send_to_virtual_queue_goes_to_host_with_name_attribute() -> None:
    queue = core.VirtualQueueId(HOST, "v")
    params = core.to_host_send({"MessageBody": "b", "MessageAttributes": {
        "k": {"DataType": "String", "StringValue": "x"}}}, queue)
    assert params["QueueUrl"] == HOST
    assert params["MessageAttributes"][VIRTUAL_QUEUE_NAME_ATTRIBUTE] == {
        "DataType": "String", "StringValue": "v"}
    assert params["MessageAttributes"]["k"]["StringValue"] == "x"
    batch = core.to_host_batch({"Entries": [{"Id": "1", "MessageBody": "b"}]}, queue)
    assert batch["Entries"][0]["MessageAttributes"][VIRTUAL_QUEUE_NAME_ATTRIBUTE]


def test_virtual_queues_accept_only_host_and_retention() -> None:
    assert core.split_virtual_attributes({"HostQueueUrl": HOST}) == (HOST, None)
    assert core.split_virtual_attributes(
        {"HostQueueUrl": HOST, "IdleQueueRetentionPeriodSeconds": "7"}) == (HOST, 7)
    with pytest.raises(InvalidVirtualQueueAttributes):
        core.split_virtual_attributes({"HostQueueUrl": HOST, "VisibilityTimeout": "5"})
    with pytest.raises(InvalidVirtualQueueAttributes):
        core.parse_retention_s("0")


@pytest.mark.parametrize(("tags", "idle"), [
    ({RETENTION_TAG: "10", HEARTBEAT_TAG: "100000"}, False),  # beat 5 s ago
    ({RETENTION_TAG: "10", HEARTBEAT_TAG: "80000"}, True),  # beat 25 s ago
    ({RETENTION_TAG: "10"}, True),  # never beat
    ({HEARTBEAT_TAG: "1"}, False),  # no retention tag: not a temporary queue
    ({}, False),
])
def test_idleness_from_tags(tags: dict[str, str], idle: bool) -> None:
    assert core.is_idle(tags, now_ms=105_000) is idle


def test_empty_needs_every_count_zero() -> None:
    assert core.is_empty({"ApproximateNumberOfMessages": "0",
                          "ApproximateNumberOfMessagesNotVisible": "0"})
    assert not core.is_empty({"ApproximateNumberOfMessagesNotVisible": "1"})


def test_sweep_tasks_deduplicate_per_epoch_and_queue() -> None:
    a = core.SweepTask("check", 7, HOST).encode()
    assert a == core.SweepTask("check", 7, HOST).encode()
    assert a["MessageDeduplicationId"] != core.SweepTask("check", 8, HOST).encode()[
        "MessageDeduplicationId"]
    assert core.SweepTask.decode(a["MessageBody"]) == core.SweepTask("check", 7, HOST)
    assert core.SweepTask.decode("not json") is None
    assert core.is_stale(core.SweepTask("list", 5), current_epoch=7)
    assert not core.is_stale(core.SweepTask("list", 6), current_epoch=7)


def test_buffer_wakes_waiters_and_replaces_redelivered_messages() -> None:
    buffer = MessageBuffer()
    woken = threading.Event()
    buffer.add_waiter(woken.set)
    buffer.put([{"MessageId": "m1", "ReceiptHandle": "old"}, {"MessageId": "m2"}])
    buffer.put([{"MessageId": "m1", "ReceiptHandle": "new"}])
    assert woken.is_set()
    assert [m["MessageId"] for m in buffer.take(10)] == ["m1", "m2"]
    buffer.put([{"MessageId": "m3"}])
    assert buffer.close() == [{"MessageId": "m3"}]
    assert not buffer.put([{"MessageId": "m4"}])


def test_virtual_queue_idle_only_without_receivers() -> None:
    queue = VirtualQueue(core.VirtualQueueId(HOST, "v"), retention_s=5, now_s=0.0)
    assert not queue.is_expired(5.0)
    queue.receiver_started(1.0)
    assert not queue.is_expired(100.0)
    queue.receiver_ended(2.0)
    assert queue.is_expired(7.5)
    assert not VirtualQueue(core.VirtualQueueId(HOST, "w"), None, 0.0).is_expired(1e9)


def test_tag_pacer_spaces_calls() -> None:
    pacer = TagPacer(rate_per_s=4.0)
    assert [pacer.reserve(10.0) for _ in range(3)] == [0.0, 0.25, 0.5]
    assert pacer.reserve(20.0) == 0.0
