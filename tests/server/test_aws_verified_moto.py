"""The cases of a second public SQS suite that its authors verified against AWS, and of a
third: the SQS connector of Ballerina, whose tests run against SQS itself.

moto's tests/test_sqs/test_sqs.py (moto 5.2.5, getmoto/moto) marks the tests it ran against
real AWS with `@aws_verified` / `@sqs_aws_verified` and `@pytest.mark.aws_verified`; each
test below restates one of them against a Conveyor server, through boto3 (the JSON
protocol), and names it. Where a case depends on the protocol, the Query protocol is held
to the same facts.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.conftest import QueueFactory
from tests.server.helpers import ACCOUNT_ID, RawClient, assert_query_error, raises_sqs, unique

NON_EXISTENT = "AWS.SimpleQueueService.NonExistentQueue"
# moto's tests name an unknown queue by a URL of AWS's own host: the queue is found by its
# path (account and name), whatever host the URL names.
UNKNOWN_URL = f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT_ID}/unknown-{unique()}"

UNKNOWN_QUEUE_CALLS: dict[str, dict[str, Any]] = {
    # test_get_queue_url_error_not_exists
    "get_queue_url": {"QueueName": unique("not-exists")},
    # test_get_queue_url_error_not_exists: a "URL" that is no URL at all
    "get_queue_attributes": {"QueueUrl": "http://whatever-incorrect-queue-address"},
    # test_delete_queue_error_not_exists
    "delete_queue": {"QueueUrl": UNKNOWN_URL},
    # test_delete_message_from_unknown_url
    "delete_message": {"QueueUrl": UNKNOWN_URL, "ReceiptHandle": "unknown"},
    # test_list_queue_tags_errors
    "list_queue_tags": {"QueueUrl": UNKNOWN_URL},
    # test_tag_unknown_queue
    "tag_queue": {"QueueUrl": UNKNOWN_URL, "Tags": {"t": "v"}},
    # test_untag_unknown_queue
    "untag_queue": {"QueueUrl": UNKNOWN_URL, "TagKeys": ["tag1"]},
}


@pytest.mark.parametrize("call", sorted(UNKNOWN_QUEUE_CALLS))
def test_unknown_queue(sqs: Any, call: str) -> None:
    """Every action on a queue that does not exist: AWS.SimpleQueueService.NonExistentQueue,
    HTTP 400 (moto's _verify_unknown_queue_error, in the tests named in
    UNKNOWN_QUEUE_CALLS and test_get_unknown_queue_by_name,
    test_get_queue_attributes_error_not_exists)."""
    with raises_sqs(NON_EXISTENT, 400):
        getattr(sqs, call)(**UNKNOWN_QUEUE_CALLS[call])


def test_unknown_queue_by_another_hosts_url_in_query(raw: RawClient) -> None:
    """The same in the Query protocol, the queue named by a URL of AWS's host
    (test_get_queue_attributes_error_not_exists)."""
    resp = raw.query({"Action": "GetQueueAttributes", "QueueUrl": UNKNOWN_URL,
                      "AttributeName.1": "All"})
    assert_query_error(resp, NON_EXISTENT, 400)


def test_new_fifo_queue_attributes(sqs: Any, make_queue: QueueFactory) -> None:
    """A new FIFO queue's attributes (test_create_fifo_queue)."""
    url = make_queue(fifo=True)
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert {k: attributes[k] for k in (
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed", "ContentBasedDeduplication",
        "DeduplicationScope", "DelaySeconds", "FifoQueue", "FifoThroughputLimit",
        "MaximumMessageSize", "MessageRetentionPeriod", "ReceiveMessageWaitTimeSeconds",
        "VisibilityTimeout")} == {
        "ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0",
        "ApproximateNumberOfMessagesDelayed": "0", "ContentBasedDeduplication": "false",
        "DeduplicationScope": "queue", "DelaySeconds": "0", "FifoQueue": "true",
        "FifoThroughputLimit": "perQueue", "MaximumMessageSize": "1048576",
        "MessageRetentionPeriod": "345600", "ReceiveMessageWaitTimeSeconds": "0",
        "VisibilityTimeout": "30"}
    assert attributes["QueueArn"] == (
        f"arn:aws:sqs:us-east-1:{ACCOUNT_ID}:{url.rsplit('/', 1)[1]}")
    assert attributes["CreatedTimestamp"].isdigit()
    assert attributes["LastModifiedTimestamp"].isdigit()


def test_delete_message_batch_with_zero_entries(sqs: Any, make_queue: QueueFactory) -> None:
    """(test_delete_message_batch_with_zero_entries)"""
    with raises_sqs("AWS.SimpleQueueService.EmptyBatchRequest") as caught:
        sqs.delete_message_batch(QueueUrl=make_queue(), Entries=[])
    assert caught[0].response["Error"]["Message"] == (
        "There should be at least one DeleteMessageBatchRequestEntry in the request.")


BATCH_ID_MESSAGE = ("A batch entry id can only contain alphanumeric characters, hyphens and "
                    "underscores. It can be at most 80 letters long.")


@pytest.mark.parametrize(("entries", "code", "message"), [
    ([], "AWS.SimpleQueueService.EmptyBatchRequest",
     "There should be at least one SendMessageBatchRequestEntry in the request."),
    ([{"Id": "", "MessageBody": "body_1"}],
     "AWS.SimpleQueueService.InvalidBatchEntryId", BATCH_ID_MESSAGE),
    ([{"Id": ".!@#$%^&*()+=", "MessageBody": "body_1"}],
     "AWS.SimpleQueueService.InvalidBatchEntryId", BATCH_ID_MESSAGE),
    ([{"Id": "i" * 81, "MessageBody": "body_1"}],
     "AWS.SimpleQueueService.InvalidBatchEntryId", BATCH_ID_MESSAGE),
    ([{"Id": "id_1", "MessageBody": "b" * 1048577}],
     "AWS.SimpleQueueService.BatchRequestTooLong",
     "Batch requests cannot be longer than 1048576 bytes. You have sent 1048577 bytes."),
    ([{"Id": "id_1", "MessageBody": "body_1"}, {"Id": "id_2", "MessageBody": "body_2"},
      {"Id": "id_2", "MessageBody": "body_2"}, {"Id": "id_1", "MessageBody": "body_1"}],
     "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "Id id_2 repeated."),
    ([{"Id": f"id_{i}", "MessageBody": f"body_{i}"} for i in range(11)],
     "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
     "Maximum number of entries per request are 10. You have sent 11."),
], ids=["empty", "empty-id", "bad-id", "long-id", "too-long", "repeated-id", "eleven"])
def test_send_message_batch_errors(strict_sqs: Any, make_strict_queue: QueueFactory,
                                   entries: list[dict[str, Any]], code: str,
                                   message: str) -> None:
    """(test_send_message_batch_errors, on a server with SQS's own limits; only the first
    repeated Id is named.) The codes are the Query codes AWS's own iOS SDK maps these
    errors from (aws-amplify/aws-sdk-ios, AWSSQS/AWSSQSService.m, errorCodeDictionary);
    the botocore model in the venv (1.44.x) no longer carries them. The Ballerina
    connector's tests against SQS show BatchEntryIdsNotDistinct with "Id idA repeated."."""
    with raises_sqs(code) as caught:
        strict_sqs.send_message_batch(QueueUrl=make_strict_queue(), Entries=entries)
    assert caught[0].response["Error"]["Message"] == message


def test_send_message_batch_to_an_unknown_queue(sqs: Any, make_queue: QueueFactory) -> None:
    """(test_send_message_batch_errors: the queue's URL with "-not-existing" added)"""
    with raises_sqs(NON_EXISTENT, 400):
        sqs.send_message_batch(QueueUrl=make_queue() + "-not-existing",
                               Entries=[{"Id": "id_1", "MessageBody": "body_1"}])


@pytest.mark.parametrize("queue_delay", [None, "10"], ids=["no-queue-delay", "queue-delay"])
def test_fifo_send_delay_seconds(sqs: Any, queue_delay: str | None) -> None:
    """On a FIFO queue a per-message DelaySeconds other than 0 is refused, 0 or none is
    taken, whatever the queue's own delay; the queue named by its bare name in QueueUrl
    (test_send_message_delay_seconds_validation)."""
    name = unique("moto") + ".fifo"
    attributes = {"FifoQueue": "true", **({"DelaySeconds": queue_delay} if queue_delay else {})}
    sqs.create_queue(QueueName=name, Attributes=attributes)
    sent = {"QueueUrl": name, "MessageBody": "test", "MessageGroupId": "test"}
    with raises_sqs("InvalidParameterValue") as caught:
        sqs.send_message(**sent, DelaySeconds=5, MessageDeduplicationId=unique())
    assert caught[0].response["Error"]["Message"] == (
        "Value 5 for parameter DelaySeconds is invalid. Reason: The request include "
        "parameter that is not valid for this queue type.")
    sqs.send_message(**sent, DelaySeconds=0, MessageDeduplicationId=unique())
    sqs.send_message(**sent, MessageDeduplicationId=unique())
    sqs.delete_queue(QueueUrl=name)


@pytest.mark.parametrize("key", ["", "k" * 129], ids=["empty", "129"])
def test_tag_key_length(sqs: Any, make_queue: QueueFactory, key: str) -> None:
    """A tag key of 0 or more than 128 characters: InvalidParameterValue, HTTP 400, "Tag
    keys must be between 1 and 128 characters in length." (the tests the Ballerina SQS
    connector runs against SQS, ballerina-platform/module-ballerinax-aws.sqs,
    testTagQueueWithEmptyTagKey; moto's test_untag_queue_errors words it the same)."""
    with raises_sqs("InvalidParameterValue", 400) as caught:
        sqs.tag_queue(QueueUrl=make_queue(), Tags={key: "production"})
    assert caught[0].response["Error"]["Message"] == (
        "Tag keys must be between 1 and 128 characters in length.")
