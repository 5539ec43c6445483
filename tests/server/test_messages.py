"""Standard queues: send, receive, delete, visibility, delays, long polling, attributes, MD5s."""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.server.conftest import QueueFactory
from tests.server.helpers import (
    advance_clock,
    counts,
    md5_hex,
    md5_of_attributes,
    raises_sqs,
    receive_all,
    wait_for,
)
from tests.support import LongPoll, ServerProcess, sqs_client

ATTRIBUTES = {
    "greeting": {"DataType": "String", "StringValue": "héllo wörld"},
    "count": {"DataType": "Number", "StringValue": "42"},
    "ratio": {"DataType": "Number.float", "StringValue": "-1.5e3"},
    "blob": {"DataType": "Binary", "BinaryValue": bytes(range(256))},
    "image": {"DataType": "Binary.gif", "BinaryValue": b"GIF89a\x00\x01"},
    "kind": {"DataType": "String.custom-type", "StringValue": "special"},
}


def _one(sqs: Any, url: str, **kwargs: Any) -> dict:
    msgs = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2, **kwargs).get("Messages", [])
    assert len(msgs) == 1, msgs
    return msgs[0]


def _none(sqs: Any, url: str, **kwargs: Any) -> None:
    msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, **kwargs).get(
        "Messages", [])
    assert msgs == []


# --------------------------------------------------------------------------- basic round trip


def test_send_receive_delete(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    body = "hello ✓ 𝄞 \t\r\n"
    sent = sqs.send_message(QueueUrl=url, MessageBody=body)
    assert sent["MD5OfMessageBody"] == md5_hex(body)
    assert sent["MessageId"]
    msg = _one(sqs, url)
    assert msg["Body"] == body
    assert msg["MessageId"] == sent["MessageId"]
    assert msg["MD5OfBody"] == md5_hex(body)
    assert msg["ReceiptHandle"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
    assert counts(sqs, url) == (0, 0, 0)


def test_message_ids_are_unique(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    ids = {sqs.send_message(QueueUrl=url, MessageBody="same")["MessageId"] for _ in range(5)}
    assert len(ids) == 5


def test_receive_from_empty_queue(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    resp = sqs.receive_message(QueueUrl=url)
    assert resp.get("Messages", []) == []


def test_receive_returns_one_message_by_default(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    assert len(sqs.receive_message(QueueUrl=url)["Messages"]) == 1


def test_receive_at_most_ten(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"a{i}"} for i in range(10)])
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"b{i}"} for i in range(5)])
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    assert 1 <= len(first["Messages"]) <= 10
    rest = receive_all(sqs, url, 15 - len(first["Messages"]), delete=False)
    bodies = [m["Body"] for m in first["Messages"] + rest]
    assert sorted(bodies) == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(5)])


def test_in_flight_message_is_not_received_twice(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="once")
    _one(sqs, url)
    _none(sqs, url)
    assert counts(sqs, url) == (0, 1, 0)


def test_concurrent_receivers_share_without_duplicates(sqs: Any, server: ServerProcess,
                                                       make_queue: QueueFactory) -> None:
    url = make_queue()
    total = 60
    for start in range(0, total, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": str(start + i)} for i in range(10)])

    def consume(_: int) -> list[str]:
        client = sqs_client(server.url)
        got: list[str] = []
        empty = 0
        while empty < 2:
            msgs = client.receive_message(QueueUrl=url, MaxNumberOfMessages=3).get(
                "Messages", [])
            empty = 0 if msgs else empty + 1
            got.extend(m["Body"] for m in msgs)
        return got

    with ThreadPoolExecutor(4) as pool:
        results = [b for part in pool.map(consume, range(4)) for b in part]
    assert sorted(results, key=int) == [str(i) for i in range(total)]


# --------------------------------------------------------------------------- visibility


def test_receive_visibility_override_makes_message_reappear(sqs: Any,
                                                            make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="again")
    first = _one(sqs, url, VisibilityTimeout=1, MessageSystemAttributeNames=["All"])
    assert first["Attributes"]["ApproximateReceiveCount"] == "1"
    second = wait_for(lambda: sqs.receive_message(
        QueueUrl=url, WaitTimeSeconds=1, MessageSystemAttributeNames=["All"]).get("Messages"),
        timeout_s=15, what="message visible again")[0]
    assert second["MessageId"] == first["MessageId"]
    assert second["ReceiptHandle"] != first["ReceiptHandle"]
    assert second["Attributes"]["ApproximateReceiveCount"] == "2"
    assert (second["Attributes"]["ApproximateFirstReceiveTimestamp"]
            == first["Attributes"]["ApproximateFirstReceiveTimestamp"])


def test_handles_of_a_batch_receive_name_their_message_and_that_receive(
        sqs: Any, make_queue: QueueFactory) -> None:
    """One receive of several messages: each handle deletes only its own message, also a
    handle from an earlier receive of it (on a standard queue an earlier handle deletes,
    getmoto/moto#4655, verified against AWS; rules.delete_takes_any_receipt), and a
    delete repeated with another handle of a deleted message succeeds."""
    url = make_queue()
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"m{i}"} for i in range(3)])
    earlier = wait_for(lambda: _all_three(sqs, url, VisibilityTimeout=0), timeout_s=10,
                       what="three messages in one receive")
    later = wait_for(lambda: _all_three(sqs, url, VisibilityTimeout=300), timeout_s=10,
                     what="the same three again")
    assert {m["MessageId"] for m in later} == {m["MessageId"] for m in earlier}
    later_of = {m["MessageId"]: m for m in later}
    sqs.delete_message(QueueUrl=url, ReceiptHandle=earlier[0]["ReceiptHandle"])
    assert counts(sqs, url) == (0, 2, 0)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=later_of[earlier[0]["MessageId"]][
        "ReceiptHandle"])
    sqs.delete_message(QueueUrl=url, ReceiptHandle=later_of[earlier[1]["MessageId"]][
        "ReceiptHandle"])
    assert counts(sqs, url) == (0, 1, 0)


def _all_three(sqs: Any, url: str, **kwargs: Any) -> list[dict] | None:
    msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                               **kwargs).get("Messages", [])
    return msgs if len(msgs) == 3 else None


def test_queue_visibility_timeout_applies(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(VisibilityTimeout=1)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    first = _one(sqs, url)
    second = wait_for(lambda: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get(
        "Messages"), timeout_s=15, what="message visible again")[0]
    assert second["MessageId"] == first["MessageId"]


def test_visibility_timeout_zero_on_receive(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    first = _one(sqs, url, VisibilityTimeout=0)
    second = _one(sqs, url, VisibilityTimeout=0)
    assert first["MessageId"] == second["MessageId"]


def test_change_visibility_to_zero_releases_message(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    first = _one(sqs, url)
    _none(sqs, url)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"],
                                  VisibilityTimeout=0)
    second = _one(sqs, url)
    assert second["MessageId"] == first["MessageId"]
    assert second["ReceiptHandle"] != first["ReceiptHandle"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])
    assert counts(sqs, url) == (0, 0, 0)


def test_change_visibility_extends_in_flight(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    msg = _one(sqs, url, VisibilityTimeout=1)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"],
                                  VisibilityTimeout=300)
    time.sleep(2)  # past the original 1 s timeout: still hidden
    _none(sqs, url)
    assert counts(sqs, url) == (0, 1, 0)


def test_change_visibility_of_deleted_message(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    msg = _one(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
    # SQS: "Value ... for parameter ReceiptHandle is invalid. Reason: Message does not exist
    # or is not available for visibility timeout change."
    with raises_sqs("InvalidParameterValue"):
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"],
                                      VisibilityTimeout=10)


def test_change_visibility_after_it_expired_hides_the_message_again(
        sqs: Any, make_queue: QueueFactory) -> None:
    """Recorded from AWS: LocalStack's test_change_message_visibility_after_visibility_
    timeout_expiration answers HTTP 200 for a handle whose visibility ran out while nobody
    received the message again (test_sqs.snapshot.json, "visibility_timeout_expired"), and
    test_extend_message_visibility_timeout_set_in_queue keeps extending such a handle."""
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    msg = _one(sqs, url, VisibilityTimeout=1)
    wait_for(lambda: counts(sqs, url)[0] == 1, timeout_s=15, what="visible again")
    resp = sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"],
                                         VisibilityTimeout=300)
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert counts(sqs, url) == (0, 1, 0)
    assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []


def test_change_visibility_with_garbage_handle(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    with raises_sqs("ReceiptHandleIsInvalid", {400, 404}):
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle="garbage",
                                      VisibilityTimeout=10)


def test_delete_with_garbage_handle(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    with raises_sqs("ReceiptHandleIsInvalid", {400, 404}) as caught:
        sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-receipt-handle")
    assert "not-a-receipt-handle" in caught[0].response["Error"]["Message"]
    assert counts(sqs, url) == (1, 0, 0)


def test_delete_is_idempotent_for_a_valid_handle(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    msg = _one(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
    sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
    assert counts(sqs, url) == (0, 0, 0)


def test_receipt_handle_of_another_queue_is_refused(sqs: Any, make_queue: QueueFactory) -> None:
    url, other = make_queue(), make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    msg = _one(sqs, url)
    with pytest.raises(sqs.exceptions.ClientError):
        sqs.delete_message(QueueUrl=other, ReceiptHandle=msg["ReceiptHandle"])
    assert counts(sqs, url) == (0, 1, 0)


# --------------------------------------------------------------------------- delays


def test_queue_delay(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(DelaySeconds=2)
    sqs.send_message(QueueUrl=url, MessageBody="later")
    assert counts(sqs, url) == (0, 0, 1)
    _none(sqs, url)
    msg = wait_for(lambda: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages"),
                   timeout_s=15, what="delayed message")
    assert msg[0]["Body"] == "later"


def test_message_delay_overrides_queue_delay(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(DelaySeconds=900)
    sqs.send_message(QueueUrl=url, MessageBody="now", DelaySeconds=0)
    sqs.send_message(QueueUrl=url, MessageBody="soon", DelaySeconds=1)
    assert _one(sqs, url)["Body"] == "now"
    msg = wait_for(lambda: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages"),
                   timeout_s=15, what="delayed message")
    assert msg[0]["Body"] == "soon"


def test_long_poll_wakes_when_delay_ends(sqs: Any, server: ServerProcess,
                                         make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="soon", DelaySeconds=1)
    assert LongPoll(server.url, url).bodies() == ["soon"]  # woken, not at the end of its wait


# --------------------------------------------------------------------------- long polling


def test_long_poll_returns_when_a_message_is_sent(sqs: Any, server: ServerProcess,
                                                  make_queue: QueueFactory) -> None:
    url = make_queue()
    poll = LongPoll(server.url, url)
    sqs.send_message(QueueUrl=url, MessageBody="ping")
    assert poll.bodies() == ["ping"]


def test_queue_receive_wait_time_makes_receives_long_polls(sqs: Any, server: ServerProcess,
                                                           make_queue: QueueFactory) -> None:
    url = make_queue(ReceiveMessageWaitTimeSeconds=10)
    sender = sqs_client(server.url)
    timer = threading.Timer(0.5, lambda: sender.send_message(QueueUrl=url, MessageBody="ping"))
    timer.start()
    try:  # no WaitTimeSeconds: the queue's default makes this a long poll that sees the send
        msgs = sqs.receive_message(QueueUrl=url).get("Messages", [])
    finally:
        timer.join()
    assert [m["Body"] for m in msgs] == ["ping"]


def test_wait_time_zero_overrides_queue_default(server: ServerProcess,
                                                make_queue: QueueFactory) -> None:
    url = make_queue(ReceiveMessageWaitTimeSeconds=20)
    assert LongPoll(server.url, url, WaitTimeSeconds=0).bodies() == []  # not the queue's 20 s


def test_moving_the_clock_past_a_long_poll_s_wait_ends_it(clock_server: ServerProcess) -> None:
    sqs = sqs_client(clock_server.url)
    url = QueueFactory(sqs)()
    poll = LongPoll(clock_server.url, url)
    advance_clock(clock_server.url, 10)  # half its wait: it stays parked and sees a send
    sqs.send_message(QueueUrl=url, MessageBody="after 10 s")
    assert poll.bodies() == ["after 10 s"]
    poll = LongPoll(clock_server.url, QueueFactory(sqs)())  # on an empty queue
    advance_clock(clock_server.url, 20)
    assert poll.bodies() == []  # its 20 s are over, though no one waited them out


def test_long_poll_that_times_out_returns_empty(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", []) == []


def test_many_long_polls_each_get_a_message(sqs: Any, server: ServerProcess,
                                            make_queue: QueueFactory) -> None:
    url = make_queue()

    def poll(_: int) -> list[str]:
        client = sqs_client(server.url)
        return [m["Body"] for m in client.receive_message(
            QueueUrl=url, WaitTimeSeconds=10).get("Messages", [])]

    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(poll, i) for i in range(3)]
        time.sleep(0.5)
        for i in range(3):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
        bodies = sorted(b for f in futures for b in f.result())
    # every waiter wakes with one message; none delivered twice
    assert bodies == ["m0", "m1", "m2"]


def test_abandoned_long_poll_does_not_swallow_messages(sqs: Any, server: ServerProcess,
                                                       make_queue: QueueFactory) -> None:
    """A client that goes away mid-wait must not take the next message with it."""
    url = make_queue()
    body = json.dumps({"QueueUrl": url, "WaitTimeSeconds": 20}).encode()
    req = AWSRequest(method="POST", url=server.url + "/", data=body, headers={
        "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": "AmazonSQS.ReceiveMessage"})
    SigV4Auth(Credentials("test", "test"), "sqs", "us-east-1").add_auth(req)
    head = "".join(f"{k}: {v}\r\n" for k, v in req.headers.items())
    wire = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n{head}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(wire)
        time.sleep(0.5)
    time.sleep(0.5)  # the waiter's client is gone now
    sqs.send_message(QueueUrl=url, MessageBody="for a live client")
    msgs = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5).get("Messages", [])
    assert [m["Body"] for m in msgs] == ["for a live client"]


# --------------------------------------------------------------------------- message attributes


def test_message_attributes_round_trip_with_md5(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sent = sqs.send_message(QueueUrl=url, MessageBody="attrs", MessageAttributes=ATTRIBUTES)
    assert sent["MD5OfMessageBody"] == md5_hex("attrs")
    assert sent["MD5OfMessageAttributes"] == md5_of_attributes(ATTRIBUTES)
    msg = _one(sqs, url, MessageAttributeNames=["All"])
    got = msg["MessageAttributes"]
    assert set(got) == set(ATTRIBUTES)
    for name, value in ATTRIBUTES.items():
        assert got[name]["DataType"] == value["DataType"]
        if "BinaryValue" in value:
            assert got[name]["BinaryValue"] == value["BinaryValue"]
        else:
            assert got[name]["StringValue"] == value["StringValue"]
    assert msg["MD5OfMessageAttributes"] == md5_of_attributes(got)
    assert msg["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]


def test_message_attributes_selected_by_name_and_prefix(sqs: Any,
                                                        make_queue: QueueFactory) -> None:
    url = make_queue()
    attrs = {"app.a": {"DataType": "String", "StringValue": "1"},
             "app.b": {"DataType": "String", "StringValue": "2"},
             "other": {"DataType": "String", "StringValue": "3"}}
    sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes=attrs)
    msg = _one(sqs, url, MessageAttributeNames=["other"], VisibilityTimeout=0)
    assert set(msg["MessageAttributes"]) == {"other"}
    msg = _one(sqs, url, MessageAttributeNames=["app.*"], VisibilityTimeout=0)
    assert set(msg["MessageAttributes"]) == {"app.a", "app.b"}
    msg = _one(sqs, url, VisibilityTimeout=0)
    assert "MessageAttributes" not in msg or msg["MessageAttributes"] == {}


def test_no_attributes_unless_asked(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes=ATTRIBUTES)
    msg = _one(sqs, url)
    assert not msg.get("Attributes")
    assert not msg.get("MessageAttributes")


def test_batch_md5s(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    entries = [{"Id": f"e{i}", "MessageBody": f"body {i}",
                "MessageAttributes": {"n": {"DataType": "Number", "StringValue": str(i)}}}
               for i in range(10)]
    resp = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert not resp.get("Failed")
    by_id = {e["Id"]: e for e in resp["Successful"]}
    assert set(by_id) == {e["Id"] for e in entries}
    for entry in entries:
        ok = by_id[entry["Id"]]
        assert ok["MD5OfMessageBody"] == md5_hex(entry["MessageBody"])
        assert ok["MD5OfMessageAttributes"] == md5_of_attributes(entry["MessageAttributes"])
        assert ok["MessageId"]


# --------------------------------------------------------------------------- system attributes


def test_system_attributes(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    before_ms = int(time.time() * 1000)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    msg = _one(sqs, url, MessageSystemAttributeNames=["All"])
    attrs = msg["Attributes"]
    assert {"SenderId", "SentTimestamp", "ApproximateReceiveCount",
            "ApproximateFirstReceiveTimestamp"} <= set(attrs)
    assert attrs["SenderId"]
    sent = int(attrs["SentTimestamp"])  # epoch milliseconds
    assert before_ms - 120_000 <= sent <= time.time() * 1000 + 120_000
    assert int(attrs["ApproximateFirstReceiveTimestamp"]) >= sent
    assert attrs["ApproximateReceiveCount"] == "1"


def test_legacy_attribute_names_parameter(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    msg = _one(sqs, url, AttributeNames=["SentTimestamp"])
    assert set(msg["Attributes"]) == {"SentTimestamp"}


def test_selected_system_attributes(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    msg = _one(sqs, url, MessageSystemAttributeNames=["ApproximateReceiveCount", "SenderId"])
    assert set(msg["Attributes"]) == {"ApproximateReceiveCount", "SenderId"}


def test_aws_trace_header(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    system = {"AWSTraceHeader": {"DataType": "String", "StringValue": trace}}
    sent = sqs.send_message(QueueUrl=url, MessageBody="traced", MessageSystemAttributes=system)
    assert sent["MD5OfMessageSystemAttributes"] == md5_of_attributes(system)
    msg = _one(sqs, url, MessageSystemAttributeNames=["AWSTraceHeader"])
    assert msg["Attributes"] == {"AWSTraceHeader": trace}


def test_aws_trace_header_in_batch(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    system = {"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-abc"}}
    resp = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "x", "MessageSystemAttributes": system}])
    assert resp["Successful"][0]["MD5OfMessageSystemAttributes"] == md5_of_attributes(system)
    msg = _one(sqs, url, MessageSystemAttributeNames=["All"])
    assert msg["Attributes"]["AWSTraceHeader"] == "Root=1-abc"


# --------------------------------------------------------------------------- batches


def test_send_message_batch(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    resp = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "first", "MessageBody": "1"},
        {"Id": "second-2_b", "MessageBody": "2", "DelaySeconds": 600}])
    assert sorted(e["Id"] for e in resp["Successful"]) == ["first", "second-2_b"]
    assert counts(sqs, url) == (1, 0, 1)


def test_partial_send_batch_failure_is_reported_per_entry(sqs: Any,
                                                          make_queue: QueueFactory) -> None:
    url = make_queue()
    resp = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "good", "MessageBody": "fine"},
        {"Id": "bad-body", "MessageBody": "nul \x00 byte"},
        {"Id": "bad-delay", "MessageBody": "x", "DelaySeconds": 901},
        {"Id": "good2", "MessageBody": "also fine"}])
    assert sorted(e["Id"] for e in resp["Successful"]) == ["good", "good2"]
    failed = {e["Id"]: e for e in resp["Failed"]}
    assert set(failed) == {"bad-body", "bad-delay"}
    for entry in failed.values():
        assert entry["SenderFault"] is True
        assert entry["Code"] and entry["Message"]
    assert failed["bad-body"]["Code"] == "InvalidMessageContents"
    assert failed["bad-delay"]["Code"] == "InvalidParameterValue"
    bodies = sorted(m["Body"] for m in receive_all(sqs, url, 2))
    assert bodies == ["also fine", "fine"]


def test_delete_message_batch_with_partial_failure(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": str(i)} for i in range(3)])
    msgs = receive_all(sqs, url, 3, delete=False)
    assert len(msgs) == 3
    entries = [{"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)]
    entries.append({"Id": "bogus", "ReceiptHandle": "garbage"})
    resp = sqs.delete_message_batch(QueueUrl=url, Entries=entries)
    assert sorted(e["Id"] for e in resp["Successful"]) == ["d0", "d1", "d2"]
    assert [(e["Id"], e["Code"], e["SenderFault"]) for e in resp["Failed"]] == [
        ("bogus", "ReceiptHandleIsInvalid", True)]
    assert counts(sqs, url) == (0, 0, 0)


def test_change_message_visibility_batch(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": str(i)} for i in range(2)])
    msgs = receive_all(sqs, url, 2, delete=False)
    resp = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "zero", "ReceiptHandle": msgs[0]["ReceiptHandle"], "VisibilityTimeout": 0},
        {"Id": "long", "ReceiptHandle": msgs[1]["ReceiptHandle"], "VisibilityTimeout": 600},
        {"Id": "bogus", "ReceiptHandle": "garbage", "VisibilityTimeout": 0}])
    assert sorted(e["Id"] for e in resp["Successful"]) == ["long", "zero"]
    assert [(e["Id"], e["Code"], e["SenderFault"]) for e in resp["Failed"]] == [
        ("bogus", "ReceiptHandleIsInvalid", True)]
    assert _one(sqs, url)["MessageId"] == msgs[0]["MessageId"]
    assert counts(sqs, url)[1] == 2


def test_change_visibility_batch_entry_out_of_range(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    msg = _one(sqs, url)
    entries = [{"Id": "big", "ReceiptHandle": msg["ReceiptHandle"], "VisibilityTimeout": 43201}]
    try:  # refused as a whole or for the entry, with InvalidParameterValue either way
        resp = sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries)
    except sqs.exceptions.ClientError as exc:
        assert exc.response["Error"]["Code"] == "InvalidParameterValue"
    else:
        assert [(e["Id"], e["Code"]) for e in resp["Failed"]] == [
            ("big", "InvalidParameterValue")]
    assert counts(sqs, url) == (0, 1, 0)


# --------------------------------------------------------------------------- retention


def test_retention_expiry_removes_messages(clock_server: ServerProcess) -> None:
    """MessageRetentionPeriod=60 is SQS's minimum: expired messages are really gone,
    whatever their state (the server's clock moves on 62 s instead of the test waiting)."""
    sqs = sqs_client(clock_server.url)
    url = QueueFactory(sqs)(MessageRetentionPeriod=60)
    sqs.send_message(QueueUrl=url, MessageBody="visible")
    sqs.send_message(QueueUrl=url, MessageBody="in flight")
    sqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=30)
    in_flight = sqs.receive_message(QueueUrl=url, VisibilityTimeout=300, MaxNumberOfMessages=1)
    assert len(in_flight["Messages"]) == 1
    assert counts(sqs, url) == (1, 1, 1)
    advance_clock(clock_server.url, 59)
    assert counts(sqs, url) == (2, 1, 0)  # the delay is over; nothing has expired yet
    advance_clock(clock_server.url, 3)
    assert counts(sqs, url) == (0, 0, 0)
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []) == []


def test_long_poll_wakes_when_visibility_expires(sqs: Any, server: ServerProcess,
                                                 make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="comes back")
    _one(sqs, url, VisibilityTimeout=1)
    assert LongPoll(server.url, url).bodies() == ["comes back"]


def test_long_poll_wakes_when_visibility_is_released(sqs: Any, server: ServerProcess,
                                                     make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="released")
    held = _one(sqs, url)
    poll = LongPoll(server.url, url)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=held["ReceiptHandle"],
                                  VisibilityTimeout=0)
    assert poll.bodies() == ["released"]
