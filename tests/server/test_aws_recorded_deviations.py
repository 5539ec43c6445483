"""The last deviations from AWS that issue 30 lists, each held to the newest recording found.

Each test names its source:

- cloudfoundry/csb-brokerpak-aws, fifo_throughput_queues.md ("API limitations"): CreateQueue
  errors that real SQS returned to the broker's Terraform (aws-sdk-go-v2) for a standard queue.
- LocalStack, tests/aws/services/sqs/test_sqs.py: tests marked `@markers.aws.validated` (run
  against AWS), and test_sqs_move_task.snapshot.json (recorded against AWS, 03-01-2024).
- localstack/localstack pull requests #10324 (2024-02-26) and #10887 (2024-05-24): what
  LocalStack's maintainers found AWS doing when a FIFO queue's DeduplicationScope is changed.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.conftest import QueueFactory
from tests.server.helpers import RawClient, raises_sqs, strip_ns, unique, wait_for
from tests.server.test_aws_recorded import _count, _dlq_with_messages, _query_error


@pytest.mark.parametrize(("name", "value"), [("DeduplicationScope", "messageGroup"),
                                             ("FifoThroughputLimit", "perMessageGroupId")])
def test_fifo_only_attributes_on_a_standard_queue(sqs: Any, raw: RawClient,
                                                  make_queue: QueueFactory, name: str,
                                                  value: str) -> None:
    """CreateQueue of a standard queue with DeduplicationScope or FifoThroughputLimit:
    InvalidAttributeName, "You can specify the <name> only when FifoQueue is set to true."
    (csb-brokerpak-aws, fifo_throughput_queues.md: "InvalidAttributeName: You can specify the
    FifoThroughputLimit only when FifoQueue is set to true."; the DeduplicationScope line reads
    the same, its final period cut in the quote). SetQueueAttributes on a standard queue
    checks the same rule."""
    message = f"You can specify the {name} only when FifoQueue is set to true."
    with raises_sqs("InvalidAttributeName") as caught:
        sqs.create_queue(QueueName=unique(), Attributes={name: value})
    assert caught[0].response["Error"]["Message"] == message
    url = make_queue()
    with raises_sqs("InvalidAttributeName") as caught:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={name: value})
    assert caught[0].response["Error"]["Message"] == message
    resp = raw.query({"Action": "CreateQueue", "QueueName": unique(),
                      "Attribute.1.Name": name, "Attribute.1.Value": value})
    assert _query_error(resp) == (400, "Sender", "InvalidAttributeName", message)


def test_content_based_deduplication_on_a_standard_queue_is_still_unknown(sqs: Any) -> None:
    """Only the two attributes above have their own message; the recording quotes none for
    ContentBasedDeduplication, which stays an unknown attribute as before."""
    with raises_sqs("InvalidAttributeName") as caught:
        sqs.create_queue(QueueName=unique(), Attributes={"ContentBasedDeduplication": "true"})
    assert caught[0].response["Error"]["Message"] == (
        "Unknown Attribute ContentBasedDeduplication.")


def test_an_empty_receive_in_xml_is_one_empty_element(raw: RawClient,
                                                      make_queue: QueueFactory) -> None:
    """ReceiveMessage on an empty queue, Query protocol: `<ReceiveMessageResult/>`
    (LocalStack's AWS-validated TestSqsQueryApi.test_get_send_and_receive_messages asserts
    `"<ReceiveMessageResult/>" in response.text` for a queue with no messages)."""
    url = make_queue()
    resp = raw.query({"Action": "ReceiveMessage", "QueueUrl": url})
    assert resp.status == 200
    assert b"<ReceiveMessageResult/>" in resp.body
    raw.query({"Action": "SendMessage", "QueueUrl": url, "MessageBody": "foobar"})
    resp = raw.query({"Action": "ReceiveMessage", "QueueUrl": url})
    result = strip_ns(resp.xml()).find("ReceiveMessageResult")
    assert result is not None and result.findtext("Message/Body") == "foobar"


def test_changing_deduplication_scope_keeps_the_created_one(sqs: Any) -> None:
    """A FIFO queue created with queue-wide deduplication and then set to `messageGroup`
    (high throughput) reads the new attributes but goes on deduplicating queue-wide:
    LocalStack's maintainers, checking against AWS (localstack/localstack#10324: "You can
    change the attributes, but AWS does not seem to change the deduplication behaviour of the
    queue"; #10887: it "cannot be changed on AWS after queue creation")."""
    url = sqs.create_queue(QueueName=unique() + ".fifo",
                           Attributes={"FifoQueue": "true"})["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={
        "DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (got["DeduplicationScope"], got["FifoThroughputLimit"]) == (
        "messageGroup", "perMessageGroupId")
    assert not any(name.startswith("conveyor:") for name in got)
    first = sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="A",
                             MessageDeduplicationId="same")
    again = sqs.send_message(QueueUrl=url, MessageBody="b", MessageGroupId="B",
                             MessageDeduplicationId="same")
    assert again["MessageId"] == first["MessageId"]  # a duplicate, queue-wide
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                   WaitTimeSeconds=1).get("Messages", [])
    assert [m["Body"] for m in received] == ["a"]


def test_a_queue_created_with_message_group_scope_deduplicates_per_group(sqs: Any) -> None:
    """The other side of the rule above: created with `messageGroup`, the same deduplication
    id in two groups is two messages (AWS, as checked in floci-io/floci#908, 2026-05-18:
    "(distinct — both messages accepted)")."""
    url = sqs.create_queue(QueueName=unique() + ".fifo", Attributes={
        "FifoQueue": "true", "DeduplicationScope": "messageGroup",
        "FifoThroughputLimit": "perMessageGroupId"})["QueueUrl"]
    first = sqs.send_message(QueueUrl=url, MessageBody="A", MessageGroupId="GroupA",
                             MessageDeduplicationId="SameDedup")
    second = sqs.send_message(QueueUrl=url, MessageBody="B", MessageGroupId="GroupB",
                              MessageDeduplicationId="SameDedup")
    assert first["MessageId"] != second["MessageId"]


RUNNING_KEYS = {"ApproximateNumberOfMessagesMoved", "ApproximateNumberOfMessagesToMove",
                "DestinationArn", "MaxNumberOfMessagesPerSecond", "SourceArn",
                "StartedTimestamp", "Status", "TaskHandle"}


def test_a_running_move_task_as_recorded(sqs: Any, make_queue: QueueFactory) -> None:
    """A RUNNING task lists exactly the recorded members (test_sqs_move_task.snapshot.json,
    test_move_task_cancel, "list-while", 03-01-2024). Its ApproximateNumberOfMessagesMoved
    was recorded as 0 after two messages had already arrived: AWS's figure lags (the test
    says "in AWS, approximate number of messages may take a while to update" and skips
    verifying this value as non-deterministic). Conveyor's figure is never more than what
    arrived, and never less than the recorded 0."""
    dlq, dlq_arn = _dlq_with_messages(sqs, make_queue, 10)
    dest = make_queue()
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=make_queue.arn_of(
        dest), MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    wait_for(lambda: _count(sqs, dest) >= 2, timeout_s=30, what="2 moved")
    [running] = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
    arrived = _count(sqs, dest)
    assert set(running) == RUNNING_KEYS
    assert (running["Status"], running["TaskHandle"], running["MaxNumberOfMessagesPerSecond"],
            running["ApproximateNumberOfMessagesToMove"]) == ("RUNNING", handle, 1, 10)
    assert 0 <= running["ApproximateNumberOfMessagesMoved"] <= arrived
    sqs.cancel_message_move_task(TaskHandle=handle)
