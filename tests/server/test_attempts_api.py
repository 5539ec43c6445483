"""Failed delivery attempts kept with their message (`ConveyorWorkers.RecordAttempts` /
`GetMessageAttempts`, service/attempts.py), on every store: a dead letter tells why it
died, and SQS's own answers stay SQS's."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from tests.server.conftest import Launcher, QueueFactory
from tests.server.helpers import RawClient, assert_json_error
from tests.server.test_console_actions import botocore_enum
from tests.server.test_workers_api import workers_call
from tests.support import ServerProcess, sqs_client


def record(raw: RawClient, queue_url: str, *entries: dict[str, Any]) -> dict[str, Any]:
    resp = workers_call(raw, "RecordAttempts", {"QueueUrl": queue_url, "Entries": list(entries)})
    assert resp.status == 200, resp.body
    return resp.json()


def attempts(raw: RawClient, queue_url: str, message_id: str) -> list[dict[str, Any]]:
    resp = workers_call(raw, "GetMessageAttempts", {"QueueUrl": queue_url,
                                                    "MessageId": message_id})
    assert resp.status == 200, resp.body
    assert resp.json()["MessageId"] == message_id
    return resp.json()["Attempts"]


def entry(handle: str, at: int, entry_id: str = "0", **more: Any) -> dict[str, Any]:
    return {"Id": entry_id, "ReceiptHandle": handle, "At": at, "Reason": "http-500",
            "Status": 500, **more}


def receive_one(sqs: Any, url: str, **kwargs: Any) -> dict[str, Any] | None:
    got = sqs.receive_message(QueueUrl=url, **kwargs).get("Messages", [])
    return got[0] if got else None


def test_a_dead_letter_keeps_the_attempts_of_its_life_in_its_source_queue(
        raw: RawClient, sqs: Any, make_queue: QueueFactory) -> None:
    dlq = make_queue(prefix="att-dlq")
    source = make_queue(prefix="att", RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": make_queue.arn_of(dlq), "maxReceiveCount": 2}))
    message_id = sqs.send_message(QueueUrl=source, MessageBody="poison")["MessageId"]

    first = receive_one(sqs, source, VisibilityTimeout=0)
    assert first is not None
    assert record(raw, source, entry(first["ReceiptHandle"], 1_000,
                                     AnswerHead="boom: división by zero",
                                     WorkerId="host:1:w")) == {"Successful": [{"Id": "0"}]}
    # In flight: read back through its queue while a worker holds it.
    second = receive_one(sqs, source, VisibilityTimeout=30)
    assert second is not None and second["MessageId"] == message_id
    assert [a["At"] for a in attempts(raw, source, message_id)] == [1_000]
    sqs.change_message_visibility(QueueUrl=source, ReceiptHandle=second["ReceiptHandle"],
                                  VisibilityTimeout=0)
    assert receive_one(sqs, source) is None  # the third receive moved it
    # The worker's record of its second failure arrives after the move: kept all the same.
    assert record(raw, source, entry(second["ReceiptHandle"], 2_000, Status=429,
                                     Reason="http-429")) == {"Successful": [{"Id": "0"}]}

    assert attempts(raw, dlq, message_id) == [
        {"At": 1_000, "Reason": "http-500", "Status": 500,
         "AnswerHead": "boom: división by zero", "WorkerId": "host:1:w"},
        {"At": 2_000, "Reason": "http-429", "Status": 429}]
    assert_json_error(workers_call(raw, "GetMessageAttempts", {
        "QueueUrl": source, "MessageId": message_id}), "InvalidParameterValue")  # moved on

    # SQS's own answers stay SQS's: a receive returns only the attributes botocore's model
    # names (MessageSystemAttributeName) and no message attributes were added.
    dead = receive_one(sqs, dlq, MessageSystemAttributeNames=["All"],
                       MessageAttributeNames=["All"])
    assert dead is not None
    assert set(dead["Attributes"]) <= set(botocore_enum("MessageSystemAttributeName"))
    assert "MessageAttributes" not in dead and "MD5OfMessageAttributes" not in dead


@pytest.mark.parametrize("fifo", [False, True])
def test_only_the_last_attempts_are_kept(raw: RawClient, sqs: Any, make_queue: QueueFactory,
                                         fifo: bool) -> None:
    """Limits.max_attempts_kept (10): a message's row stays small however often it fails.
    (Standard queues' fresh messages live in the embedded store's journal, FIFO queues'
    in SQLite: both paths.)"""
    url = make_queue(prefix="att-bound", fifo=fifo)
    extra = {"MessageGroupId": "g", "MessageDeduplicationId": "d"} if fifo else {}
    message_id = sqs.send_message(QueueUrl=url, MessageBody="x", **extra)["MessageId"]
    got = receive_one(sqs, url, VisibilityTimeout=60)
    assert got is not None
    handle = got["ReceiptHandle"]
    record(raw, url, *[entry(handle, at, str(at)) for at in range(1, 11)])
    record(raw, url, *[entry(handle, at, str(at)) for at in range(11, 14)])
    assert [a["At"] for a in attempts(raw, url, message_id)] == list(range(4, 14))


def test_recorded_attempts_survive_kill_9(private_server: ServerProcess) -> None:
    """An acknowledged record is durable: on the embedded store a standard queue's fresh
    message lives in the journal, so the record is replayed from it."""
    sqs, raw = sqs_client(private_server.url), RawClient(private_server.url)
    url = sqs.create_queue(QueueName="att-restart")["QueueUrl"]
    message_id = sqs.send_message(QueueUrl=url, MessageBody="x")["MessageId"]
    got = receive_one(sqs, url, VisibilityTimeout=60)
    assert got is not None
    record(raw, url, entry(got["ReceiptHandle"], 5))
    private_server.kill()
    private_server.start()
    assert [a["At"] for a in attempts(raw, url, message_id)] == [5]


def test_a_limited_key_reads_and_records_only_its_queues(launch: Launcher, tmp_path: Any
                                                         ) -> None:
    """Both calls name their queue (QueueUrl): a key limited to queues acts on those only."""
    config = tmp_path / "conveyor.yaml"
    config.write_text("access_keys:\n  AKIDADMIN: admin-secret\n"
                      "  AKIDORDERS: {secret: orders-secret, queues: [\"orders-*\"]}\n")
    server = launch("--mode", "relaxed", "--config", str(config))
    admin = boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1",
                         aws_access_key_id="AKIDADMIN", aws_secret_access_key="admin-secret")
    orders = RawClient(server.url, access_key="AKIDORDERS", secret_key="orders-secret")
    for name, allowed in (("orders-att", True), ("billing-att", False)):
        url = admin.create_queue(QueueName=name)["QueueUrl"]
        message_id = admin.send_message(QueueUrl=url, MessageBody="x")["MessageId"]
        handle = admin.receive_message(QueueUrl=url)["Messages"][0]["ReceiptHandle"]
        recorded = workers_call(orders, "RecordAttempts",
                                {"QueueUrl": url, "Entries": [entry(handle, 1)]})
        read = workers_call(orders, "GetMessageAttempts",
                            {"QueueUrl": url, "MessageId": message_id})
        if allowed:
            assert (recorded.status, read.status) == (200, 200)
            assert [a["At"] for a in read.json()["Attempts"]] == [1]
        else:
            assert_json_error(recorded, "AccessDenied", status=403)
            assert_json_error(read, "AccessDenied", status=403)


def test_a_handle_whose_message_is_gone_or_unreceived_is_refused_per_entry(
        raw: RawClient, sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(prefix="att-gone")
    other = make_queue(prefix="att-other")
    sqs.send_message(QueueUrl=url, MessageBody="x")
    got = receive_one(sqs, url)
    assert got is not None
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got["ReceiptHandle"])
    sqs.send_message(QueueUrl=other, MessageBody="y")
    theirs = receive_one(sqs, other)
    assert theirs is not None
    answer = record(raw, url, entry(got["ReceiptHandle"], 1, "gone"),
                    entry(theirs["ReceiptHandle"], 1, "theirs"), entry("bm90IGEgaGFuZGxl", 1,
                                                                       "junk"))
    assert "Successful" not in answer
    assert {f["Id"]: (f["Code"], f["SenderFault"]) for f in answer["Failed"]} == {
        "gone": ("ReceiptHandleIsInvalid", True), "theirs": ("ReceiptHandleIsInvalid", True),
        "junk": ("ReceiptHandleIsInvalid", True)}


BAD_ENTRIES = [
    {"At": "1000"}, {"At": -1}, {"At": True}, {"At": 1.5}, {"At": 2 ** 60},
    {"Reason": ""}, {"Reason": "HTTP 500"}, {"Reason": "x" * 65}, {"Reason": 500},
    {"Status": 700}, {"Status": "500"}, {"Status": 99},
    {"AnswerHead": "é" * 257}, {"AnswerHead": 5},
    {"WorkerId": "w w"}, {"WorkerId": ""},
]


@pytest.mark.parametrize("bad", BAD_ENTRIES)
def test_a_bad_attempt_fails_its_entry_alone(raw: RawClient, sqs: Any,
                                             make_queue: QueueFactory, bad: dict) -> None:
    url = make_queue(prefix="att-bad")
    message_id = sqs.send_message(QueueUrl=url, MessageBody="x")["MessageId"]
    got = receive_one(sqs, url, VisibilityTimeout=60)
    assert got is not None
    answer = record(raw, url, {**entry(got["ReceiptHandle"], 1, "bad"), **bad},
                    entry(got["ReceiptHandle"], 2, "good", AnswerHead="é" * 256))
    assert answer["Successful"] == [{"Id": "good"}]
    [failure] = answer["Failed"]
    assert (failure["Id"], failure["Code"], failure["SenderFault"]) == (
        "bad", "InvalidParameterValue", True)
    assert [a["At"] for a in attempts(raw, url, message_id)] == [2]


def test_bad_requests_get_sqs_errors(raw: RawClient, make_queue: QueueFactory) -> None:
    url = make_queue(prefix="att-req")
    handle = "eA=="
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("RecordAttempts", {"Entries": [entry(handle, 1)]}, "MissingParameter"),
        ("RecordAttempts", {"QueueUrl": 5, "Entries": [entry(handle, 1)]},
         "InvalidParameterValue"),
        ("RecordAttempts", {"QueueUrl": url + "-nope", "Entries": [entry(handle, 1)]},
         "AWS.SimpleQueueService.NonExistentQueue"),
        ("RecordAttempts", {"QueueUrl": url, "Entries": "x"}, "InvalidParameterValue"),
        ("RecordAttempts", {"QueueUrl": url, "Entries": [1]}, "InvalidParameterValue"),
        ("RecordAttempts", {"QueueUrl": url}, "MissingParameter"),
        ("RecordAttempts", {"QueueUrl": url, "Entries": []},
         "AWS.SimpleQueueService.EmptyBatchRequest"),
        ("RecordAttempts", {"QueueUrl": url, "Entries": [entry(handle, 1, str(i))
                                                         for i in range(11)]},
         "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"),
        ("RecordAttempts", {"QueueUrl": url, "Entries": [entry(handle, 1), entry(handle, 2)]},
         "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"),
        ("RecordAttempts", {"QueueUrl": url, "Entries": [entry(handle, 1, 7)]},  # type: ignore[arg-type]
         "AWS.SimpleQueueService.InvalidBatchEntryId"),
        ("GetMessageAttempts", {"QueueUrl": url}, "MissingParameter"),
        ("GetMessageAttempts", {"QueueUrl": url, "MessageId": 5}, "InvalidParameterValue"),
        ("GetMessageAttempts", {"QueueUrl": url, "MessageId": "x" * 129},
         "InvalidParameterValue"),
        ("GetMessageAttempts", {"QueueUrl": url, "MessageId": "no-such-message"},
         "InvalidParameterValue"),
        ("GetMessageAttempts", {"MessageId": "m"}, "MissingParameter"),
    ]
    for action, payload, code in cases:
        assert_json_error(workers_call(raw, action, payload), code)


def test_the_calls_are_not_part_of_the_sqs_api(raw: RawClient, make_queue: QueueFactory
                                                ) -> None:
    url = make_queue(prefix="att-sqs")
    assert_json_error(workers_call(raw, "GetMessageAttempts",
                                   {"QueueUrl": url, "MessageId": "m"}, prefix="AmazonSQS."))
    resp = raw.query({"Action": "GetMessageAttempts", "QueueUrl": url, "MessageId": "m"})
    assert resp.status == 400 and b"Traceback" not in resp.body


def test_the_console_shows_a_dead_letters_attempts(server: ServerProcess, raw: RawClient,
                                                   sqs: Any, make_queue: QueueFactory) -> None:
    from tests.server.helpers import Browser, queue_name_of

    dlq = make_queue(prefix="att-con-dlq")
    source = make_queue(prefix="att-con", RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": make_queue.arn_of(dlq), "maxReceiveCount": 1}))
    message_id = sqs.send_message(QueueUrl=source, MessageBody="poison")["MessageId"]
    got = receive_one(sqs, source, VisibilityTimeout=0)
    assert got is not None
    record(raw, source, entry(got["ReceiptHandle"], 1_796_000_000_123,
                              AnswerHead="<b>ZeroDivisionError</b>", WorkerId="host:1:w"))
    assert receive_one(sqs, source) is None  # moved
    page = Browser(server.url).get(
        f"/console/queues/us-east-1/{queue_name_of(dlq)}/messages/{message_id}").text
    section = page.split("<h2>Failed attempts</h2>", 1)[1]
    assert "http-500 (HTTP 500)" in section and "host:1:w" in section
    assert "&lt;b&gt;ZeroDivisionError&lt;/b&gt;" in section  # escaped, never markup
    assert 'datetime="2026-11-30T00:53:20Z"' in section  # ISO 8601, as HTML's datetime takes it
