"""The Query protocol (form-encoded Action=..., XML replies), as kombu and older SDKs speak it."""

from __future__ import annotations

import base64
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from tests.server.helpers import (
    ACCOUNT_ID,
    QUERY_NS,
    RawClient,
    RawResponse,
    arn,
    assert_query_error,
    counts,
    md5_hex,
    md5_of_attributes,
    strip_ns,
    unique,
)
from tests.support import ServerProcess

NS = {"sqs": QUERY_NS}


def _ok(resp: RawResponse, action: str) -> ET.Element:
    """A successful Query reply: <ActionResponse xmlns=...><ActionResult/>...<RequestId/>."""
    assert resp.status == 200, resp.body[:500]
    assert "xml" in (resp.header("content-type") or "")
    root = resp.xml()
    assert root.tag == f"{{{QUERY_NS}}}{action}Response", root.tag
    assert root.findtext("sqs:ResponseMetadata/sqs:RequestId", namespaces=NS)
    return strip_ns(root)


def _create(raw: RawClient, name: str | None = None, **attrs: str) -> str:
    params = [("Action", "CreateQueue"), ("QueueName", name or unique())]
    for i, (key, value) in enumerate(attrs.items(), 1):
        params += [(f"Attribute.{i}.Name", key), (f"Attribute.{i}.Value", value)]
    root = _ok(raw.query(params), "CreateQueue")
    url = root.findtext("CreateQueueResult/QueueUrl")
    assert url
    return url


def test_create_queue_and_get_url(raw: RawClient, server: ServerProcess) -> None:
    name = unique()
    url = _create(raw, name, VisibilityTimeout="45")
    assert url == f"http://127.0.0.1:{server.port}/{ACCOUNT_ID}/{name}"
    root = _ok(raw.query({"Action": "GetQueueUrl", "QueueName": name}), "GetQueueUrl")
    assert root.findtext("GetQueueUrlResult/QueueUrl") == url


def test_create_queue_idempotent_and_conflict(raw: RawClient) -> None:
    name = unique()
    _create(raw, name, DelaySeconds="1")
    _create(raw, name, DelaySeconds="1")
    resp = raw.query({"Action": "CreateQueue", "QueueName": name,
                      "Attribute.1.Name": "DelaySeconds", "Attribute.1.Value": "2"})
    assert_query_error(resp, "QueueAlreadyExists")


def test_list_queues(raw: RawClient) -> None:
    prefix = unique("ql")
    urls = {_create(raw, f"{prefix}-{i}") for i in range(2)}
    root = _ok(raw.query({"Action": "ListQueues", "QueueNamePrefix": prefix}), "ListQueues")
    assert {e.text for e in root.findall("ListQueuesResult/QueueUrl")} == urls


def test_get_queue_attributes_all(raw: RawClient) -> None:
    name = unique()
    url = _create(raw, name, VisibilityTimeout="45")
    root = _ok(raw.query({"Action": "GetQueueAttributes", "QueueUrl": url,
                          "AttributeName.1": "All"}), "GetQueueAttributes")
    attrs = {a.findtext("Name"): a.findtext("Value")
             for a in root.findall("GetQueueAttributesResult/Attribute")}
    assert attrs["VisibilityTimeout"] == "45"
    assert attrs["QueueArn"] == arn(name)
    assert attrs["ApproximateNumberOfMessages"] == "0"


def test_set_queue_attributes(raw: RawClient, sqs: Any) -> None:
    url = _create(raw)
    _ok(raw.query({"Action": "SetQueueAttributes", "QueueUrl": url,
                   "Attribute.1.Name": "DelaySeconds", "Attribute.1.Value": "7"}),
        "SetQueueAttributes")
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DelaySeconds"])
    assert got["Attributes"]["DelaySeconds"] == "7"


def test_send_receive_delete_with_attributes(raw: RawClient, sqs: Any) -> None:
    url = _create(raw)
    blob = bytes(range(10))
    sent = _ok(raw.query([
        ("Action", "SendMessage"), ("QueueUrl", url), ("MessageBody", "héllo <xml> & co"),
        ("MessageAttribute.1.Name", "colour"),
        ("MessageAttribute.1.Value.DataType", "String"),
        ("MessageAttribute.1.Value.StringValue", "blue"),
        ("MessageAttribute.2.Name", "size"),
        ("MessageAttribute.2.Value.DataType", "Number"),
        ("MessageAttribute.2.Value.StringValue", "12"),
        ("MessageAttribute.3.Name", "raw"),
        ("MessageAttribute.3.Value.DataType", "Binary"),
        ("MessageAttribute.3.Value.BinaryValue", base64.b64encode(blob).decode()),
    ]), "SendMessage")
    expected_attrs = {"colour": {"DataType": "String", "StringValue": "blue"},
                      "size": {"DataType": "Number", "StringValue": "12"},
                      "raw": {"DataType": "Binary", "BinaryValue": blob}}
    result = sent.find("SendMessageResult")
    assert result is not None
    assert result.findtext("MD5OfMessageBody") == md5_hex("héllo <xml> & co")
    assert result.findtext("MD5OfMessageAttributes") == md5_of_attributes(expected_attrs)
    message_id = result.findtext("MessageId")
    assert message_id

    got = _ok(raw.query({"Action": "ReceiveMessage", "QueueUrl": url, "AttributeName.1": "All",
                         "MessageAttributeName.1": "All", "WaitTimeSeconds": "1"}),
              "ReceiveMessage")
    messages = got.findall("ReceiveMessageResult/Message")
    assert len(messages) == 1
    msg = messages[0]
    assert msg.findtext("MessageId") == message_id
    assert msg.findtext("Body") == "héllo <xml> & co"
    assert msg.findtext("MD5OfBody") == md5_hex("héllo <xml> & co")
    system = {a.findtext("Name"): a.findtext("Value") for a in msg.findall("Attribute")}
    assert {"SenderId", "SentTimestamp", "ApproximateReceiveCount",
            "ApproximateFirstReceiveTimestamp"} <= set(system)
    user: dict[str, dict[str, Any]] = {}
    for attr in msg.findall("MessageAttribute"):
        value = attr.find("Value")
        assert value is not None
        entry: dict[str, Any] = {"DataType": value.findtext("DataType")}
        if value.find("BinaryValue") is not None:
            entry["BinaryValue"] = base64.b64decode(value.findtext("BinaryValue") or "")
        else:
            entry["StringValue"] = value.findtext("StringValue")
        user[attr.findtext("Name") or ""] = entry
    assert user == expected_attrs
    assert msg.findtext("MD5OfMessageAttributes") == md5_of_attributes(expected_attrs)

    handle = msg.findtext("ReceiptHandle")
    assert handle
    _ok(raw.query({"Action": "DeleteMessage", "QueueUrl": url, "ReceiptHandle": handle}),
        "DeleteMessage")
    assert counts(sqs, url) == (0, 0, 0)


def test_queue_url_in_request_path(raw: RawClient, sqs: Any) -> None:
    """Older SDKs (boto2, kombu) POST to the queue URL instead of passing QueueUrl."""
    url = _create(raw)
    path = "/" + url.split("/", 3)[3]
    _ok(raw.query({"Action": "SendMessage", "MessageBody": "via path"}, path=path),
        "SendMessage")
    root = _ok(raw.query({"Action": "ReceiveMessage", "WaitTimeSeconds": "1"}, path=path),
               "ReceiveMessage")
    assert root.findtext("ReceiveMessageResult/Message/Body") == "via path"


def test_batches(raw: RawClient, sqs: Any) -> None:
    url = _create(raw)
    params = [("Action", "SendMessageBatch"), ("QueueUrl", url)]
    for i in range(3):
        params += [(f"SendMessageBatchRequestEntry.{i + 1}.Id", f"e{i}"),
                   (f"SendMessageBatchRequestEntry.{i + 1}.MessageBody", f"body{i}")]
    params += [("SendMessageBatchRequestEntry.4.Id", "bad"),
               ("SendMessageBatchRequestEntry.4.MessageBody", "x"),
               ("SendMessageBatchRequestEntry.4.DelaySeconds", "901")]
    root = _ok(raw.query(params), "SendMessageBatch")
    ok = root.findall("SendMessageBatchResult/SendMessageBatchResultEntry")
    assert sorted(e.findtext("Id") or "" for e in ok) == ["e0", "e1", "e2"]
    for entry in ok:
        assert entry.findtext("MD5OfMessageBody") == md5_hex(
            "body" + (entry.findtext("Id") or "")[1:])
        assert entry.findtext("MessageId")
    failed = root.findall("SendMessageBatchResult/BatchResultErrorEntry")
    assert [(e.findtext("Id"), e.findtext("Code"), e.findtext("SenderFault"))
            for e in failed] == [("bad", "InvalidParameterValue", "true")]

    got = _ok(raw.query({"Action": "ReceiveMessage", "QueueUrl": url,
                         "MaxNumberOfMessages": "10", "WaitTimeSeconds": "1"}), "ReceiveMessage")
    handles = [m.findtext("ReceiptHandle") or "" for m in
               got.findall("ReceiveMessageResult/Message")]
    assert handles
    params = [("Action", "DeleteMessageBatch"), ("QueueUrl", url)]
    for i, handle in enumerate(handles):
        params += [(f"DeleteMessageBatchRequestEntry.{i + 1}.Id", f"d{i}"),
                   (f"DeleteMessageBatchRequestEntry.{i + 1}.ReceiptHandle", handle)]
    root = _ok(raw.query(params), "DeleteMessageBatch")
    deleted = root.findall("DeleteMessageBatchResult/DeleteMessageBatchResultEntry")
    assert len(deleted) == len(handles)


def test_change_message_visibility(raw: RawClient, sqs: Any) -> None:
    url = _create(raw)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    handle = sqs.receive_message(QueueUrl=url)["Messages"][0]["ReceiptHandle"]
    _ok(raw.query({"Action": "ChangeMessageVisibility", "QueueUrl": url,
                   "ReceiptHandle": handle, "VisibilityTimeout": "0"}),
        "ChangeMessageVisibility")
    assert counts(sqs, url) == (1, 0, 0)


def test_tags_and_purge_and_delete(raw: RawClient) -> None:
    url = _create(raw)
    _ok(raw.query({"Action": "TagQueue", "QueueUrl": url, "Tag.1.Key": "team",
                   "Tag.1.Value": "ops"}), "TagQueue")
    root = _ok(raw.query({"Action": "ListQueueTags", "QueueUrl": url}), "ListQueueTags")
    tags = {t.findtext("Key"): t.findtext("Value") for t in root.findall("ListQueueTagsResult/Tag")}
    assert tags == {"team": "ops"}
    _ok(raw.query({"Action": "PurgeQueue", "QueueUrl": url}), "PurgeQueue")
    _ok(raw.query({"Action": "DeleteQueue", "QueueUrl": url}), "DeleteQueue")


def test_non_existent_queue_error(raw: RawClient, server: ServerProcess) -> None:
    resp = raw.query({"Action": "GetQueueUrl", "QueueName": unique("missing")})
    error = assert_query_error(resp, "AWS.SimpleQueueService.NonExistentQueue")
    assert error.findtext("Type") == "Sender"
    root = strip_ns(resp.xml())
    assert root.findtext("RequestId")
    resp = raw.query({"Action": "SendMessage", "MessageBody": "x",
                      "QueueUrl": f"{server.url}/{ACCOUNT_ID}/{unique('missing')}"})
    assert_query_error(resp, "AWS.SimpleQueueService.NonExistentQueue")


def test_error_response_namespace(raw: RawClient) -> None:
    resp = raw.query({"Action": "GetQueueUrl", "QueueName": unique("missing")})
    assert resp.xml().tag == f"{{{QUERY_NS}}}ErrorResponse"


def test_query_batch_error_codes(raw: RawClient) -> None:
    url = _create(raw)
    resp = raw.query({"Action": "SendMessageBatch", "QueueUrl": url,
                      "SendMessageBatchRequestEntry.1.Id": "a",
                      "SendMessageBatchRequestEntry.1.MessageBody": "x",
                      "SendMessageBatchRequestEntry.2.Id": "a",
                      "SendMessageBatchRequestEntry.2.MessageBody": "y"})
    assert_query_error(resp, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct")
    resp = raw.query({"Action": "DeleteMessageBatch", "QueueUrl": url})
    assert_query_error(resp, "AWS.SimpleQueueService.EmptyBatchRequest")


def test_invalid_action(raw: RawClient) -> None:
    assert_query_error(raw.query({"Action": "Frobnicate"}), "InvalidAction")


def test_missing_action(raw: RawClient) -> None:
    """No Action: 404 and a bare <UnknownOperationException/> (LocalStack's AWS-validated
    test_get_without_query_returns_unknown_operation)."""
    resp = raw.query({"QueueName": "x"})
    assert (resp.status, resp.body) == (404, b"<UnknownOperationException/>")


def test_missing_parameter(raw: RawClient) -> None:
    url = _create(raw)
    assert_query_error(raw.query({"Action": "SendMessage", "QueueUrl": url}), "MissingParameter")


@pytest.mark.parametrize("value", ["ten", "", "1.5", "99999999999999999999999"])
def test_bad_numbers(raw: RawClient, value: str) -> None:
    url = _create(raw)
    resp = raw.query({"Action": "ReceiveMessage", "QueueUrl": url,
                      "MaxNumberOfMessages": value})
    assert_query_error(resp, {"InvalidParameterValue", "MalformedQueryString",
                              "InvalidQueryParameter", "MissingParameter"})


def test_malformed_form_body(raw: RawClient) -> None:
    resp = raw.request("POST", "/", b"Action=CreateQueue&QueueName=%zz%&\xff\xfe",
                       {"Content-Type": "application/x-www-form-urlencoded"})
    assert 400 <= resp.status < 500
    assert b"Traceback" not in resp.body


def test_kombu_round_trip(server: ServerProcess) -> None:
    kombu = pytest.importorskip("kombu")
    prefix = unique("kombu") + "-"
    options = {"region": "us-east-1", "is_secure": False, "wait_time_seconds": 1,
               "polling_interval": 0.1, "queue_name_prefix": prefix}
    url = f"sqs://test:test@127.0.0.1:{server.port}"
    with kombu.Connection(url, transport_options=options) as conn:
        queue = conn.SimpleQueue("jobs")
        queue.put({"task": "resize", "id": 7})
        message = queue.get(block=True, timeout=10)
        assert message.payload == {"task": "resize", "id": 7}
        message.ack()
        queue.close()


def test_list_queues_pagination(raw: RawClient) -> None:
    prefix = unique("qp")
    urls = {_create(raw, f"{prefix}-{i}") for i in range(3)}
    seen: list[str] = []
    params = {"Action": "ListQueues", "QueueNamePrefix": prefix, "MaxResults": "2"}
    for _ in range(5):
        root = _ok(raw.query(params), "ListQueues")
        seen += [e.text or "" for e in root.findall("ListQueuesResult/QueueUrl")]
        token = root.findtext("ListQueuesResult/NextToken")
        if not token:
            break
        params["NextToken"] = token
    assert sorted(seen) == sorted(urls)


def test_strict_query_errors(strict_raw: RawClient) -> None:
    name = unique()
    url = _create(strict_raw, name)
    _ok(strict_raw.query({"Action": "DeleteQueue", "QueueUrl": url}), "DeleteQueue")
    resp = strict_raw.query({"Action": "CreateQueue", "QueueName": name})
    assert_query_error(resp, "AWS.SimpleQueueService.QueueDeletedRecently")
    resp = strict_raw.query({"Action": "SendMessage", "QueueUrl": _create(strict_raw),
                             "MessageBody": "bad \x01 char"})
    assert_query_error(resp, "InvalidMessageContents")


def test_get_request_with_query_string(raw: RawClient) -> None:
    prefix = unique("qg")
    url = _create(raw, prefix)
    resp = raw.request("GET", f"/?Action=ListQueues&QueueNamePrefix={prefix}&Version=2012-11-05")
    root = _ok(resp, "ListQueues")
    assert [e.text for e in root.findall("ListQueuesResult/QueueUrl")] == [url]


def test_trace_header_system_attribute(raw: RawClient) -> None:
    url = _create(raw)
    root = _ok(raw.query([
        ("Action", "SendMessage"), ("QueueUrl", url), ("MessageBody", "traced"),
        ("MessageSystemAttribute.1.Name", "AWSTraceHeader"),
        ("MessageSystemAttribute.1.Value.DataType", "String"),
        ("MessageSystemAttribute.1.Value.StringValue", "Root=1-abc")]), "SendMessage")
    expected = md5_of_attributes({"AWSTraceHeader": {"DataType": "String",
                                                     "StringValue": "Root=1-abc"}})
    assert root.findtext("SendMessageResult/MD5OfMessageSystemAttributes") == expected
    got = _ok(raw.query({"Action": "ReceiveMessage", "QueueUrl": url, "AttributeName.1": "All",
                         "WaitTimeSeconds": "1"}), "ReceiveMessage")
    attrs = {a.findtext("Name"): a.findtext("Value")
             for a in got.findall("ReceiveMessageResult/Message/Attribute")}
    assert attrs["AWSTraceHeader"] == "Root=1-abc"
