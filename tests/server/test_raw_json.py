"""Hand-built JSON 1.0 requests: error shapes, and malformed input that must never be a 500."""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any

import pytest

from tests.server.conftest import QueueFactory
from tests.server.helpers import (
    ACCOUNT_ID,
    JSON_CONTENT_TYPE,
    RawClient,
    RawResponse,
    assert_json_error,
    counts,
    strip_ns,
    unique,
)
from tests.support import ServerProcess


def assert_any_error(resp: RawResponse, status: set[int] | None = None) -> None:
    """A 4xx whose body is a well-formed error of either protocol."""
    assert 400 <= resp.status < 500, f"HTTP {resp.status}: {resp.body[:300]!r}"
    if status is not None:
        assert resp.status in status
    assert b"Traceback" not in resp.body
    if resp.body.lstrip().startswith(b"<"):
        root = strip_ns(resp.xml())
        if root.tag == "UnknownOperationException":  # no action at all: AWS's bare 404
            assert resp.status == 404
            return
        assert root.tag == "ErrorResponse"
        assert root.findtext("Error/Code")
    else:
        body = resp.json()
        assert "__type" in body, body


def test_json_success_shape(raw: RawClient) -> None:
    name = unique()
    resp = raw.json_call("CreateQueue", {"QueueName": name})
    assert resp.status == 200
    assert resp.header("content-type").startswith(JSON_CONTENT_TYPE)
    assert resp.json()["QueueUrl"].endswith(f"/{ACCOUNT_ID}/{name}")
    assert resp.header("x-amzn-requestid")


def test_json_error_shape(raw: RawClient) -> None:
    resp = raw.json_call("GetQueueUrl", {"QueueName": unique("missing")})
    assert resp.status == 400
    assert resp.header("content-type").startswith(JSON_CONTENT_TYPE)
    body = resp.json()
    assert body["__type"] == "com.amazonaws.sqs#QueueDoesNotExist"
    assert body["message"]
    assert resp.header("x-amzn-query-error") == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    assert resp.header("x-amzn-requestid")


def test_json_error_codes_without_a_shape(raw: RawClient, make_queue: QueueFactory) -> None:
    """The errors the model declares no shape for carry AWS's ...Exception names in JSON,
    in the namespace of AWS's request layer, and their Query code in x-amzn-query-error
    (LocalStack's recording of AWS, tests/aws/services/sqs/test_sqs.snapshot.json,
    test_send_receive_max_number_of_messages, 14-11-2023: Code InvalidParameterValue,
    QueryErrorCode InvalidParameterValueException; the whole `__type` as recorded in
    yavosh/pail, test/diff/testdata/golden/sqs-errors.json, "receive-max-11")."""
    url = make_queue()
    resp = raw.json_call("ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 11})
    body = assert_json_error(resp, "InvalidParameterValue")
    assert body == {"__type": "com.amazon.coral.service#InvalidParameterValueException",
                    "message": "Value 11 for parameter MaxNumberOfMessages is invalid. "
                               "Reason: Must be between 1 and 10, if provided."}
    assert resp.header("x-amzn-query-error") == "InvalidParameterValue;Sender"


def test_json_batch_error_shape(raw: RawClient, make_queue: QueueFactory) -> None:
    url = make_queue()
    resp = raw.json_call("SendMessageBatch", {"QueueUrl": url, "Entries": [
        {"Id": "a", "MessageBody": "x"}, {"Id": "a", "MessageBody": "y"}]})
    body = assert_json_error(resp, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct")
    assert body["__type"].rsplit("#", 1)[-1] == "BatchEntryIdsNotDistinct"
    assert resp.header("x-amzn-query-error") == \
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct;Sender"


@pytest.mark.parametrize("body", [b"{not json", b"{\"QueueName\": ", b"[]", b"\"a string\"",
                                  b"null", b"42", b"{\"QueueName\": \"a\"} trailing"])
def test_malformed_json(raw: RawClient, body: bytes) -> None:
    assert_any_error(raw.json_call("CreateQueue", raw_body=body))


def test_empty_body(raw: RawClient) -> None:
    assert_any_error(raw.json_call("CreateQueue", raw_body=b""))


def test_non_utf8_body(raw: RawClient) -> None:
    assert_any_error(raw.json_call("CreateQueue", raw_body=b'{"QueueName": "\xff\xfe\xfa"}'))


@pytest.mark.parametrize("payload", [
    {"QueueName": 123},
    {"QueueName": None},
    {"QueueName": ["a"]},
    {"QueueName": {"a": 1}},
    {"QueueName": "NAME", "Attributes": ["VisibilityTimeout", "10"]},
    {"QueueName": "NAME", "Attributes": {"VisibilityTimeout": {"deep": 1}}},
    {"QueueName": "NAME", "Attributes": {"VisibilityTimeout": 10}},
    {"QueueName": "NAME", "tags": "team=x"},
])
def test_wrong_types_on_create(raw: RawClient, payload: dict, sqs: Any) -> None:
    name = unique()
    if payload.get("QueueName") == "NAME":
        payload = {**payload, "QueueName": name}
    assert_any_error(raw.json_call("CreateQueue", payload))
    assert sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", []) == []


@pytest.mark.parametrize("extra", [
    {"MessageBody": ["x"]},
    {"MessageBody": 5},
    {"MessageBody": "x", "DelaySeconds": "soon"},
    {"MessageBody": "x", "DelaySeconds": 1.5},
    {"MessageBody": "x", "MessageAttributes": "x"},
    {"MessageBody": "x", "MessageAttributes": {"a": "x"}},
    {"MessageBody": "x", "MessageAttributes": {"a": {"DataType": 1, "StringValue": "v"}}},
    {"MessageBody": "x", "MessageAttributes": {"a": {"DataType": "Binary",
                                                      "BinaryValue": "***not base64***"}}},
])
def test_wrong_types_on_send_change_nothing(raw: RawClient, sqs: Any, make_queue: QueueFactory,
                                            extra: dict) -> None:
    url = make_queue()
    assert_any_error(raw.json_call("SendMessage", {"QueueUrl": url, **extra}))
    assert counts(sqs, url) == (0, 0, 0)


@pytest.mark.parametrize("extra", [
    {"MaxNumberOfMessages": "ten"}, {"WaitTimeSeconds": [1]}, {"VisibilityTimeout": "x"},
    {"MessageAttributeNames": "All"}, {"MaxNumberOfMessages": 1e30},
])
def test_wrong_types_on_receive(raw: RawClient, sqs: Any, make_queue: QueueFactory,
                                extra: dict) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    assert_any_error(raw.json_call("ReceiveMessage", {"QueueUrl": url, **extra}))
    assert counts(sqs, url) == (1, 0, 0)


@pytest.mark.parametrize("entries", [
    {"Id": "a", "MessageBody": "x"},
    "entries",
    [{"Id": "a", "MessageBody": "x"}, "second"],
    [{"Id": "a", "MessageBody": "x"}, {"Id": 2, "MessageBody": "y"}],
    [{"Id": "a", "MessageBody": "x"}, {"Id": "b"}],  # a required member missing
])
def test_wrong_batch_shapes_change_nothing(raw: RawClient, sqs: Any, make_queue: QueueFactory,
                                           entries: Any) -> None:
    url = make_queue()
    assert_any_error(raw.json_call("SendMessageBatch", {"QueueUrl": url, "Entries": entries}))
    assert counts(sqs, url) == (0, 0, 0)


def test_missing_required_parameters(raw: RawClient, make_queue: QueueFactory) -> None:
    """A missing QueueName is an invalid value and a missing QueueUrl names no queue, as
    AWS answers (LocalStack's AWS-validated TestMissingParameter.test_sqs_create_queue;
    yavosh/pail's recordings of AWS, test/diff/testdata/golden/sqs-errors.json,
    "get-queue-url-missing-name", and sqs-edge-cases.json, "send-missing-queue-url")."""
    url = make_queue()
    assert_json_error(raw.json_call("SendMessage", {"QueueUrl": url}), "MissingParameter")
    assert_json_error(raw.json_call("CreateQueue", {}), "InvalidParameterValue")
    assert_json_error(raw.json_call("DeleteMessage", {"QueueUrl": url}), "MissingParameter")
    assert_json_error(raw.json_call("ChangeMessageVisibility",
                                    {"QueueUrl": url, "ReceiptHandle": "x"}),
                      "MissingParameter")
    assert_json_error(raw.json_call("SendMessage", {"MessageBody": "x"}),
                      "AWS.SimpleQueueService.NonExistentQueue")


def test_missing_target(raw: RawClient) -> None:
    assert_any_error(raw.json_call(None, {"QueueName": unique()}))


@pytest.mark.parametrize("target", ["AmazonSQS.Frobnicate", "AmazonSQS.", "AmazonSQS",
                                    "DynamoDB_20120810.ListTables", "AmazonSQS.createqueue"])
def test_unknown_action(raw: RawClient, target: str) -> None:
    resp = raw.request("POST", "/", b"{}", {"Content-Type": JSON_CONTENT_TYPE,
                                           "X-Amz-Target": target})
    assert_any_error(resp)
    if resp.body.lstrip().startswith(b"{"):
        code = (resp.header("x-amzn-query-error") or resp.json()["__type"]).split(";")[0]
        codes = {"InvalidAction", "UnknownOperationException", "UnknownOperation"}
        if not target.startswith("AmazonSQS.") or target == "AmazonSQS.":
            codes.add("MissingAction")  # no SQS action named at all
        assert code.rsplit("#", 1)[-1] in codes


def test_unknown_content_type(raw: RawClient) -> None:
    resp = raw.request("POST", "/", b"<xml/>", {"Content-Type": "application/xml"})
    assert_any_error(resp)


@pytest.mark.parametrize(("path", "junk", "expected"),
                         [("/", "x" * 200_000, 431), ("/" + "q" * 70_000, "", 414)],
                         ids=["header", "url"])
def test_huge_head_is_refused(server: ServerProcess, path: str, junk: str,
                              expected: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("POST", path, body=b"{}", headers={
            "Content-Type": JSON_CONTENT_TYPE, "X-Amz-Target": "AmazonSQS.ListQueues",
            "X-Junk": junk})
        response = conn.getresponse()
        status, body = response.status, response.read()
    finally:
        conn.close()
    assert status == expected, (status, body)  # never processed, never a 500
    assert b"too large" in body or b"too long" in body


def test_many_headers(server: ServerProcess) -> None:
    headers = {f"X-H{i}": "v" for i in range(500)}
    headers.update({"Content-Type": JSON_CONTENT_TYPE, "X-Amz-Target": "AmazonSQS.ListQueues"})
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("POST", "/", body=b"{}", headers=headers)
        status = conn.getresponse().status
    finally:
        conn.close()
    assert status == 200  # 500 small headers stay well within the 64 KiB head limit


def test_huge_body_is_refused_cleanly(strict_raw: RawClient,
                                     make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    payload = json.dumps({"QueueUrl": url, "MessageBody": "x" * (12 * 1024 * 1024)}).encode()
    try:
        resp = strict_raw.json_call("SendMessage", raw_body=payload)
    except (ConnectionError, http.client.HTTPException):
        return  # dropping an oversized request is acceptable; answering 5xx is not
    assert_any_error(resp)


def test_garbage_http_request(server: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n")
        data = sock.recv(1024)
    assert not data.startswith(b"HTTP/1.1 5")


def test_unknown_path_is_not_a_500(raw: RawClient) -> None:
    resp = raw.request("GET", "/no/such/thing")
    assert resp.status < 500


def test_server_still_healthy_after_abuse(raw: RawClient, sqs: Any) -> None:
    raw.json_call("CreateQueue", raw_body=b"\x00\x01\x02")
    raw.json_call("SendMessage", {"QueueUrl": 5})
    assert sqs.list_queues(MaxResults=1)["ResponseMetadata"]["HTTPStatusCode"] == 200
