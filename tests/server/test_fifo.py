"""FIFO queues: order per group, group locking, deduplication, sequence numbers, attempts."""

from __future__ import annotations

import threading
import time
from typing import Any

from tests.server.conftest import QueueFactory
from tests.server.helpers import (
    RawClient,
    assert_query_error,
    counts,
    raises_sqs,
    receive_all,
    unique,
)
from tests.support import LongPoll, ServerProcess, sqs_client


def _send(sqs: Any, url: str, body: str, group: str = "g", dedup: str | None = None,
          **kwargs: Any) -> dict:
    params: dict[str, Any] = {"QueueUrl": url, "MessageBody": body, "MessageGroupId": group}
    params["MessageDeduplicationId"] = dedup if dedup is not None else body
    params.update(kwargs)
    return sqs.send_message(**params)


def _receive(sqs: Any, url: str, n: int = 10, **kwargs: Any) -> list[dict]:
    return sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=n, **kwargs).get(
        "Messages", [])


def test_order_within_one_group(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    bodies = [f"m{i:02d}" for i in range(15)]
    for body in bodies:
        _send(sqs, url, body)
    got: list[str] = []
    while len(got) < 15:
        msgs = _receive(sqs, url)
        assert msgs, f"stalled after {got}"
        got.extend(m["Body"] for m in msgs)
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)])
    assert got == bodies


def test_order_per_group_with_interleaved_groups(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    for i in range(5):
        _send(sqs, url, f"a{i}", group="A")
        _send(sqs, url, f"b{i}", group="B")
    got = receive_all(sqs, url, 10, MessageSystemAttributeNames=["MessageGroupId"])
    per_group: dict[str, list[str]] = {}
    for msg in got:
        per_group.setdefault(msg["Attributes"]["MessageGroupId"], []).append(msg["Body"])
    assert per_group == {"A": [f"a{i}" for i in range(5)], "B": [f"b{i}" for i in range(5)]}


def test_group_is_held_while_a_message_is_in_flight(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    _send(sqs, url, "a1", group="A")
    _send(sqs, url, "a2", group="A")
    first = _receive(sqs, url, n=1)
    assert [m["Body"] for m in first] == ["a1"]
    assert _receive(sqs, url) == []  # a2 waits behind in-flight a1
    _send(sqs, url, "b1", group="B")
    assert [m["Body"] for m in _receive(sqs, url)] == ["b1"]  # other groups still flow
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])
    assert [m["Body"] for m in _receive(sqs, url)] == ["a2"]


def test_returned_message_keeps_its_place(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    for body in ("x1", "x2", "x3"):
        _send(sqs, url, body)
    first = _receive(sqs, url, n=1)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"],
                                  VisibilityTimeout=0)
    assert [m["Body"] for m in _receive(sqs, url)] == ["x1", "x2", "x3"]


def test_deduplication_by_id(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    first = _send(sqs, url, "one", dedup="same-id")
    again = _send(sqs, url, "two", dedup="same-id")
    assert first["MessageId"] and again["MessageId"]
    _send(sqs, url, "three", dedup="other-id")
    msgs = receive_all(sqs, url, 2)
    assert [m["Body"] for m in msgs] == ["one", "three"]
    assert counts(sqs, url) == (0, 0, 0)


def test_deduplication_after_delete_still_applies(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    _send(sqs, url, "one", dedup="d1")
    receive_all(sqs, url, 1)
    _send(sqs, url, "one again", dedup="d1")
    assert counts(sqs, url) == (0, 0, 0)


def test_content_based_deduplication(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True, ContentBasedDeduplication="true")
    for body in ("same", "same", "different", "same"):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g")
    msgs = receive_all(sqs, url, 2, MessageSystemAttributeNames=["All"])
    assert [m["Body"] for m in msgs] == ["same", "different"]
    assert all(m["Attributes"]["MessageDeduplicationId"] for m in msgs)


def test_explicit_id_wins_over_content(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True, ContentBasedDeduplication="true")
    sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g",
                     MessageDeduplicationId="x")
    sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g",
                     MessageDeduplicationId="y")
    assert len(receive_all(sqs, url, 2)) == 2


def test_deduplication_scope_message_group(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True, DeduplicationScope="messageGroup",
                     FifoThroughputLimit="perMessageGroupId")
    _send(sqs, url, "in A", group="A", dedup="shared")
    _send(sqs, url, "in B", group="B", dedup="shared")
    _send(sqs, url, "dup in A", group="A", dedup="shared")
    bodies = sorted(m["Body"] for m in receive_all(sqs, url, 2))
    assert bodies == ["in A", "in B"]
    assert counts(sqs, url) == (0, 0, 0)


def test_deduplication_scope_queue(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    _send(sqs, url, "in A", group="A", dedup="shared")
    _send(sqs, url, "in B", group="B", dedup="shared")
    assert [m["Body"] for m in receive_all(sqs, url, 1)] == ["in A"]


def test_sequence_numbers(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    sent = [_send(sqs, url, f"s{i}") for i in range(3)]
    numbers = [s["SequenceNumber"] for s in sent]
    assert all(n.isdigit() for n in numbers)
    assert [int(n) for n in numbers] == sorted({int(n) for n in numbers})
    msgs = receive_all(sqs, url, 3, MessageSystemAttributeNames=["All"])
    assert [m["Attributes"]["SequenceNumber"] for m in msgs] == numbers
    for msg in msgs:
        assert msg["Attributes"]["MessageGroupId"] == "g"
        assert msg["Attributes"]["MessageDeduplicationId"] == msg["Body"]


def test_batch_send_keeps_order_and_returns_sequence_numbers(sqs: Any,
                                                             make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    resp = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": f"e{i}", "MessageBody": f"b{i}", "MessageGroupId": "g",
         "MessageDeduplicationId": f"d{i}"} for i in range(10)])
    assert not resp.get("Failed")
    by_id = {e["Id"]: int(e["SequenceNumber"]) for e in resp["Successful"]}
    assert [by_id[f"e{i}"] for i in range(10)] == sorted(by_id.values())
    assert [m["Body"] for m in _receive(sqs, url)] == [f"b{i}" for i in range(10)]


def test_receive_request_attempt_id_returns_same_messages(sqs: Any,
                                                          make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    for i in range(4):
        _send(sqs, url, f"m{i}", group=f"g{i % 2}")
    first = _receive(sqs, url, n=3, ReceiveRequestAttemptId="attempt-1")
    assert len(first) == 3
    retry = _receive(sqs, url, n=3, ReceiveRequestAttemptId="attempt-1")
    assert [m["MessageId"] for m in retry] == [m["MessageId"] for m in first]
    assert [m["Body"] for m in retry] == [m["Body"] for m in first]
    # a fresh attempt does not get the in-flight messages again
    other = _receive(sqs, url, n=10, ReceiveRequestAttemptId="attempt-2")
    assert not {m["MessageId"] for m in other} & {m["MessageId"] for m in first}


def test_fifo_requires_message_group_id(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True, ContentBasedDeduplication="true")
    with raises_sqs("MissingParameter"):
        sqs.send_message(QueueUrl=url, MessageBody="x")
    assert counts(sqs, url) == (0, 0, 0)


def test_fifo_requires_dedup_id_without_content_based_dedup(sqs: Any,
                                                            make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    with raises_sqs("InvalidParameterValue"):
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g")
    assert counts(sqs, url) == (0, 0, 0)


def test_fifo_refuses_per_message_delay(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    with raises_sqs("InvalidParameterValue"):
        _send(sqs, url, "x", DelaySeconds=5)


def test_fifo_queue_delay_applies(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True, DelaySeconds=600)
    _send(sqs, url, "x")
    assert counts(sqs, url) == (0, 0, 1)


def test_message_group_id_too_long(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    with raises_sqs("InvalidParameterValue"):
        _send(sqs, url, "x", group="g" * 129)
    _send(sqs, url, "y", group="g" * 128)


def test_deduplication_id_too_long(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    with raises_sqs("InvalidParameterValue"):
        _send(sqs, url, "x", dedup="d" * 129)


def test_fifo_queue_name_needs_suffix(sqs: Any) -> None:
    with raises_sqs("InvalidParameterValue"):
        sqs.create_queue(QueueName=unique(), Attributes={"FifoQueue": "true"})
    with raises_sqs("InvalidParameterValue"):
        sqs.create_queue(QueueName=unique() + ".fifo")


def test_fifo_batch_lacking_a_group_fails_whole(sqs: Any, raw: RawClient,
                                                make_queue: QueueFactory) -> None:
    """Recorded from AWS (LocalStack's test_send_batch_missing_message_group_id_for_fifo_
    queue, test_sqs.snapshot.json): the whole SendMessageBatch fails, InvalidParameterValue,
    "The request must contain the parameter MessageGroupId.", HTTP 400; nothing is sent.
    Both protocols."""
    url = make_queue(fifo=True)
    entries = [
        {"Id": "ok", "MessageBody": "x", "MessageGroupId": "g", "MessageDeduplicationId": "1"},
        {"Id": "nogroup", "MessageBody": "y", "MessageDeduplicationId": "2"}]
    with raises_sqs("InvalidParameterValue") as caught:
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert caught[0].response["Error"]["Message"] == (
        "The request must contain the parameter MessageGroupId.")
    assert caught[0].response["ResponseMetadata"]["HTTPStatusCode"] == 400
    params = {"Action": "SendMessageBatch", "QueueUrl": url}
    for n, entry in enumerate(entries, 1):
        params.update({f"SendMessageBatchRequestEntry.{n}.{k}": v for k, v in entry.items()})
    error = assert_query_error(raw.query(params), "InvalidParameterValue", 400)
    assert error.findtext("Message") == "The request must contain the parameter MessageGroupId."
    assert counts(sqs, url) == (0, 0, 0)


def test_fifo_batch_lacking_a_deduplication_id_fails_whole(sqs: Any,
                                                           make_queue: QueueFactory) -> None:
    """Recorded from AWS (LocalStack's test_send_batch_missing_deduplication_id_for_fifo_
    queue): InvalidParameterValue, HTTP 400, the whole batch unsent."""
    url = make_queue(fifo=True, ContentBasedDeduplication="false")
    with raises_sqs("InvalidParameterValue") as caught:
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": "a", "MessageBody": "m", "MessageGroupId": "g", "MessageDeduplicationId": "d"},
            {"Id": "b", "MessageBody": "m", "MessageGroupId": "g"}])
    assert caught[0].response["Error"]["Message"] == (
        "The queue should either have ContentBasedDeduplication enabled or "
        "MessageDeduplicationId provided explicitly")
    assert counts(sqs, url) == (0, 0, 0)


def test_fifo_takes_delay_seconds_zero(sqs: Any, raw: RawClient,
                                       make_queue: QueueFactory) -> None:
    """LocalStack's AWS-validated test_send_message_with_delay_0_works_for_fifo (an SDK
    wrapper that always sends DelaySeconds=0 can use FIFO queues), on both protocols; a
    non-zero value stays refused with AWS's recorded message."""
    url = make_queue(fifo=True)
    sent = sqs.send_message(QueueUrl=url, DelaySeconds=0, MessageBody="Hello World!",
                            MessageGroupId="test", MessageDeduplicationId="42")
    resp = raw.query({"Action": "SendMessage", "QueueUrl": url, "MessageBody": "again",
                      "DelaySeconds": "0", "MessageGroupId": "test",
                      "MessageDeduplicationId": "43"})
    assert resp.status == 200, resp.body
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert [m["MD5OfBody"] for m in got["Messages"]][0] == sent["MD5OfMessageBody"]
    assert [m["Body"] for m in got["Messages"]] == ["Hello World!", "again"]
    with raises_sqs("InvalidParameterValue") as caught:
        _send(sqs, url, "x", DelaySeconds=2)
    assert caught[0].response["Error"]["Message"] == (
        "Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter "
        "that is not valid for this queue type.")


def test_fifo_receive_fills_up_from_one_group_first(sqs: Any, make_queue: QueueFactory) -> None:
    """LocalStack's AWS-validated test_fifo_receive_message_group_id_ordering: ten messages
    a receive, one group's first; over HTTP with boto3 on the store under test."""
    url = make_queue(fifo=True, ContentBasedDeduplication="true")
    for body, group in (("g1-m1", "1"), ("g2-m1", "2"), ("g1-m2", "1"), ("g1-m3", "1")):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group)
    assert [m["Body"] for m in _receive(sqs, url)] == ["g1-m1", "g1-m2", "g1-m3", "g2-m1"]


def test_long_poll_wakes_on_fifo_send(sqs: Any, server: ServerProcess,
                                      make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    poll = LongPoll(server.url, url, MaxNumberOfMessages=10)
    _send(sqs, url, "wake")
    assert poll.bodies() == ["wake"]


def test_long_poll_wakes_when_group_is_released(sqs: Any, server: ServerProcess,
                                                make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    _send(sqs, url, "first")
    _send(sqs, url, "second")
    held = _receive(sqs, url, n=1)
    poll = LongPoll(server.url, url, MaxNumberOfMessages=10)
    # "second" becomes receivable when "first" is deleted; the waiting poll sees it
    sqs.delete_message(QueueUrl=url, ReceiptHandle=held[0]["ReceiptHandle"])
    assert poll.bodies() == ["second"]


def test_attempt_id_after_delete_gets_new_messages(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    _send(sqs, url, "a")
    _send(sqs, url, "b", group="other")
    first = _receive(sqs, url, n=1, ReceiveRequestAttemptId="same")
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])
    # a deleted message is never handed out again, whatever the attempt id
    again = _receive(sqs, url, n=10, ReceiveRequestAttemptId="same")
    assert first[0]["MessageId"] not in {m["MessageId"] for m in again}


def test_delete_with_expired_receipt_handle(sqs: Any, make_queue: QueueFactory) -> None:
    """FIFO queues refuse a receipt handle whose visibility timeout has run out."""
    url = make_queue(fifo=True)
    _send(sqs, url, "x")
    msg = _receive(sqs, url, n=1, VisibilityTimeout=1)[0]
    deadline = time.monotonic() + 15
    while counts(sqs, url)[0] != 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    with raises_sqs("InvalidParameterValue"):
        sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
    assert counts(sqs, url) == (1, 0, 0)


def test_concurrent_consumers_never_hold_one_group_twice(sqs: Any, server: ServerProcess,
                                                         make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    groups = ["A", "B", "C"]
    for group in groups:
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"{group}{i}", "MessageGroupId": group,
             "MessageDeduplicationId": f"{group}{i}"} for i in range(10)])
    lock = threading.Lock()
    in_flight: set[str] = set()
    seen: dict[str, list[int]] = {g: [] for g in groups}
    violations: list[str] = []

    def consume(_: int) -> None:
        client = sqs_client(server.url)
        idle = 0
        while idle < 3:
            msgs = client.receive_message(QueueUrl=url, MaxNumberOfMessages=3,
                                          MessageSystemAttributeNames=["MessageGroupId"]).get(
                "Messages", [])
            idle = 0 if msgs else idle + 1
            batch_groups = {m["Attributes"]["MessageGroupId"] for m in msgs}
            with lock:
                for group in batch_groups & in_flight:
                    violations.append(f"group {group} handed to two consumers")
                in_flight.update(batch_groups)
                for m in msgs:
                    seen[m["Body"][0]].append(int(m["Body"][1:]))
            time.sleep(0.01)
            with lock:
                in_flight.difference_update(batch_groups)
            for m in msgs:
                client.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not violations
    assert seen == {g: list(range(10)) for g in groups}
