"""Fair queues: a MessageGroupId on a standard queue is validated, kept and returned, and a
noisy group does not hold back the others (service/rules.py, fair queues), over HTTP on
the store under test."""

from __future__ import annotations

from typing import Any

from tests.server.conftest import QueueFactory
from tests.server.helpers import RawClient, raises_sqs, strip_ns


def test_a_group_on_a_standard_queue_is_kept_and_returned(sqs: Any, raw: RawClient,
                                                          make_queue: QueueFactory) -> None:
    """"In standard queues, using MessageGroupId enables fair queues" (SQS API reference,
    SendMessage): the group comes back as the MessageGroupId system attribute, on both
    protocols, from a single send and from a batch."""
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="one", MessageGroupId="tenant-1")
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "b", "MessageBody": "two", "MessageGroupId": "tenant-2"}])
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0,
                              MessageSystemAttributeNames=["MessageGroupId"])["Messages"]
    assert sorted((m["Body"], m["Attributes"]["MessageGroupId"]) for m in got) == [
        ("one", "tenant-1"), ("two", "tenant-2")]
    resp = raw.query({"Action": "ReceiveMessage", "QueueUrl": url, "MaxNumberOfMessages": "10",
                      "AttributeName.1": "MessageGroupId"})
    assert resp.status == 200, resp.body
    groups = sorted(a.findtext("Value") for a in strip_ns(resp.xml()).iter("Attribute")
                    if a.findtext("Name") == "MessageGroupId")
    assert groups == ["tenant-1", "tenant-2"]


def test_a_bad_group_on_a_standard_queue_is_refused(sqs: Any, make_queue: QueueFactory) -> None:
    """Validated as on a FIFO queue (SQS Developer Guide, message quotas: "Valid values:
    alphanumeric characters and punctuation", 128 characters). The message is AWS's wording
    for a bad MessageGroupId as public reports quote it (serverless-nextjs/serverless-next.js
    #1616, with HTTP 400, Code InvalidParameterValue, Type Sender; LeanerCloud/AutoSpotting
    #470); none of them is of a standard queue, so that AWS refuses it there too is our
    reading of the quotas page."""
    url = make_queue()
    with raises_sqs("InvalidParameterValue") as caught:
        sqs.send_message(QueueUrl=url, MessageBody="m", MessageGroupId="a b")
    assert caught[0].response["Error"]["Message"] == (
        "Value a b for parameter MessageGroupId is invalid. Reason: MessageGroupId can only "
        "include alphanumeric and punctuation characters. 1 to 128 in length.")


def test_a_noisy_tenant_does_not_hold_back_a_quiet_one(sqs: Any,
                                                       make_queue: QueueFactory) -> None:
    url = make_queue()
    for start in range(0, 500, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"noisy-{start + i}", "MessageGroupId": "noisy"}
            for i in range(10)])
    sqs.send_message(QueueUrl=url, MessageBody="quiet", MessageGroupId="quiet")
    bodies = [m["Body"] for m in sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600)["Messages"]]
    assert "quiet" in bodies
