"""SQS's limits and bad input, with SQS's error codes, on a strict-mode (default) server.

Codes are the Query-era codes that botocore exposes as Error.Code (from x-amzn-query-error).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.server.conftest import QueueFactory
from tests.server.helpers import ACCOUNT_ID, counts, raises_sqs, unique

MIB = 1024 * 1024
IPV = "InvalidParameterValue"
BATCH_ACTIONS = ("send", "delete", "change")


def _entries(action: str, ids: list[str], handle: str = "garbage") -> list[dict]:
    if action == "send":
        return [{"Id": i, "MessageBody": "x"} for i in ids]
    if action == "delete":
        return [{"Id": i, "ReceiptHandle": f"{handle}-{n}"} for n, i in enumerate(ids)]
    return [{"Id": i, "ReceiptHandle": f"{handle}-{n}", "VisibilityTimeout": 10}
            for n, i in enumerate(ids)]


def _batch(sqs: Any, action: str, url: str, entries: list[dict]) -> dict:
    call = {"send": sqs.send_message_batch, "delete": sqs.delete_message_batch,
            "change": sqs.change_message_visibility_batch}[action]
    return call(QueueUrl=url, Entries=entries)


# --------------------------------------------------------------------------- message size


def test_message_of_one_mib_is_accepted(strict_sqs: Any, make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    body = "x" * MIB
    strict_sqs.send_message(QueueUrl=url, MessageBody=body)
    msg = strict_sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"][0]
    assert len(msg["Body"]) == MIB


def test_message_over_one_mib_is_refused(strict_sqs: Any,
                                         make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    with raises_sqs(IPV):
        strict_sqs.send_message(QueueUrl=url, MessageBody="x" * (MIB + 1))
    assert counts(strict_sqs, url) == (0, 0, 0)


def test_attributes_count_towards_message_size(strict_sqs: Any,
                                               make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    with raises_sqs(IPV):
        strict_sqs.send_message(QueueUrl=url, MessageBody="x" * (MIB - 4), MessageAttributes={
            "name": {"DataType": "String", "StringValue": "value"}})


def test_queue_maximum_message_size(strict_sqs: Any, make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue(MaximumMessageSize=1024)
    strict_sqs.send_message(QueueUrl=url, MessageBody="x" * 1024)
    with raises_sqs(IPV):
        strict_sqs.send_message(QueueUrl=url, MessageBody="x" * 1025)
    assert counts(strict_sqs, url) == (1, 0, 0)


def test_multibyte_body_size_counts_bytes(strict_sqs: Any,
                                          make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue(MaximumMessageSize=1024)
    with raises_sqs(IPV):  # 513 characters of 2 bytes each
        strict_sqs.send_message(QueueUrl=url, MessageBody="é" * 513)


@pytest.mark.parametrize("size", ["1023", "1048577", "big"])
def test_maximum_message_size_range(strict_sqs: Any, size: str) -> None:
    name = unique()
    with raises_sqs("InvalidAttributeValue"):
        strict_sqs.create_queue(QueueName=name, Attributes={"MaximumMessageSize": size})
    with raises_sqs("AWS.SimpleQueueService.NonExistentQueue"):
        strict_sqs.get_queue_url(QueueName=name)


# --------------------------------------------------------------------------- message contents


@pytest.mark.parametrize("body", ["nul \x00", "bell \x07", "vt \x0b", "\ufffe", "\uffff"])
def test_invalid_characters_in_body(strict_sqs: Any, make_strict_queue: QueueFactory,
                                    body: str) -> None:
    url = make_strict_queue()
    with raises_sqs("InvalidMessageContents"):
        strict_sqs.send_message(QueueUrl=url, MessageBody=body)
    assert counts(strict_sqs, url) == (0, 0, 0)


def test_allowed_character_edges(strict_sqs: Any, make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    body = "\t\n\r \ud7ff\ue000\ufffd\U00010000\U0010ffff"
    strict_sqs.send_message(QueueUrl=url, MessageBody=body)
    msg = strict_sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"][0]
    assert msg["Body"] == body


def test_empty_body(strict_sqs: Any, make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    with raises_sqs("MissingParameter"):
        strict_sqs.send_message(QueueUrl=url, MessageBody="")


# --------------------------------------------------------------------------- message attributes


def test_eleven_message_attributes(strict_sqs: Any, make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    attrs = {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(11)}
    with raises_sqs(IPV):
        strict_sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes=attrs)
    del attrs["a10"]
    strict_sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes=attrs)
    assert counts(strict_sqs, url) == (1, 0, 0)


@pytest.mark.parametrize("name", ["AWS.thing", "Amazon.thing", "a..b", ".lead", "trail.",
                                  "has space", "sl/ash", "x" * 257])
def test_invalid_message_attribute_names(strict_sqs: Any, make_strict_queue: QueueFactory,
                                         name: str) -> None:
    url = make_strict_queue()
    with raises_sqs(IPV):
        strict_sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes={
            name: {"DataType": "String", "StringValue": "v"}})


def test_valid_message_attribute_name_characters(strict_sqs: Any,
                                                 make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    name = "Az09_-.x" + "y" * 248  # 256 characters
    strict_sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes={
        name: {"DataType": "String", "StringValue": "v"}})


@pytest.mark.parametrize("value", [
    {"DataType": "Strin", "StringValue": "v"},
    {"DataType": "", "StringValue": "v"},
    {"DataType": "String"},
    {"DataType": "String", "StringValue": ""},
    {"DataType": "Number", "StringValue": "abc"},
    {"DataType": "Binary", "StringValue": "not binary"},
    {"DataType": "String", "BinaryValue": b"wrong slot"},
])
def test_invalid_message_attribute_values(strict_sqs: Any, make_strict_queue: QueueFactory,
                                          value: dict) -> None:
    url = make_strict_queue()
    with raises_sqs(IPV):
        strict_sqs.send_message(QueueUrl=url, MessageBody="x",
                                MessageAttributes={"attr": value})
    assert counts(strict_sqs, url) == (0, 0, 0)


def test_unknown_system_attribute_on_send(strict_sqs: Any,
                                          make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    with raises_sqs(IPV):
        strict_sqs.send_message(QueueUrl=url, MessageBody="x", MessageSystemAttributes={
            "SenderId": {"DataType": "String", "StringValue": "me"}})


# --------------------------------------------------------------------------- batches


@pytest.mark.parametrize("action", BATCH_ACTIONS)
def test_batch_of_eleven(strict_sqs: Any, make_strict_queue: QueueFactory, action: str) -> None:
    url = make_strict_queue()
    with raises_sqs("AWS.SimpleQueueService.TooManyEntriesInBatchRequest"):
        _batch(strict_sqs, action, url, _entries(action, [str(i) for i in range(11)]))
    assert counts(strict_sqs, url) == (0, 0, 0)


@pytest.mark.parametrize("action", BATCH_ACTIONS)
def test_empty_batch(strict_sqs: Any, make_strict_queue: QueueFactory, action: str) -> None:
    url = make_strict_queue()
    with raises_sqs("AWS.SimpleQueueService.EmptyBatchRequest"):
        _batch(strict_sqs, action, url, [])


@pytest.mark.parametrize("action", BATCH_ACTIONS)
def test_duplicate_batch_ids(strict_sqs: Any, make_strict_queue: QueueFactory,
                             action: str) -> None:
    url = make_strict_queue()
    with raises_sqs("AWS.SimpleQueueService.BatchEntryIdsNotDistinct"):
        _batch(strict_sqs, action, url, _entries(action, ["a", "b", "a"]))
    assert counts(strict_sqs, url) == (0, 0, 0)


@pytest.mark.parametrize("action", BATCH_ACTIONS)
@pytest.mark.parametrize("bad_id", ["has space", "dot.ted", "x" * 81, "", "ünï"])
def test_invalid_batch_entry_id(strict_sqs: Any, make_strict_queue: QueueFactory, action: str,
                                bad_id: str) -> None:
    url = make_strict_queue()
    with raises_sqs("AWS.SimpleQueueService.InvalidBatchEntryId"):
        _batch(strict_sqs, action, url, _entries(action, ["ok", bad_id]))
    assert counts(strict_sqs, url) == (0, 0, 0)


def test_batch_entry_id_limits_accepted(strict_sqs: Any,
                                        make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    resp = strict_sqs.send_message_batch(QueueUrl=url, Entries=_entries(
        "send", ["A-z_0-9", "x" * 80, "1"]))
    assert len(resp["Successful"]) == 3


def test_batch_request_too_long(strict_sqs: Any, make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    entries = [{"Id": str(i), "MessageBody": "x" * (MIB // 4)} for i in range(5)]
    with raises_sqs("AWS.SimpleQueueService.BatchRequestTooLong"):
        strict_sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert counts(strict_sqs, url) == (0, 0, 0)


def test_batch_of_exactly_one_mib_is_accepted(strict_sqs: Any,
                                              make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    entries = [{"Id": str(i), "MessageBody": "x" * (MIB // 4)} for i in range(4)]
    resp = strict_sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert len(resp["Successful"]) == 4


# --------------------------------------------------------------------------- queue names


@pytest.mark.parametrize("name", ["x" * 81, "has space", "dot.ted", "sl/ash", "ünï", "q!",
                                  "x" * 77 + ".fifo"])
def test_invalid_queue_names(strict_sqs: Any, name: str) -> None:
    attrs = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
    with raises_sqs(IPV):
        strict_sqs.create_queue(QueueName=name, Attributes=attrs)


def test_empty_queue_name(strict_sqs: Any) -> None:
    with raises_sqs(IPV):
        strict_sqs.create_queue(QueueName="")


def test_longest_queue_names(strict_sqs: Any) -> None:
    base = unique("n")
    strict_sqs.create_queue(QueueName=base + "x" * (80 - len(base)))
    fifo = base + "f" * (75 - len(base)) + ".fifo"
    url = strict_sqs.create_queue(QueueName=fifo, Attributes={"FifoQueue": "true"})["QueueUrl"]
    assert url.endswith(f"/{ACCOUNT_ID}/{fifo}")


# --------------------------------------------------------------------------- queue attributes


def test_unknown_attribute_on_create(strict_sqs: Any) -> None:
    name = unique()
    with raises_sqs("InvalidAttributeName"):
        strict_sqs.create_queue(QueueName=name, Attributes={"Colour": "blue"})
    with raises_sqs("AWS.SimpleQueueService.NonExistentQueue"):
        strict_sqs.get_queue_url(QueueName=name)


def test_read_only_attribute_on_create(strict_sqs: Any) -> None:
    with raises_sqs("InvalidAttributeName"):
        strict_sqs.create_queue(QueueName=unique(), Attributes={"QueueArn": "arn:aws:sqs:x"})


@pytest.mark.parametrize(("attribute", "value"), [
    ("VisibilityTimeout", "-1"), ("VisibilityTimeout", "43201"), ("VisibilityTimeout", "ten"),
    ("DelaySeconds", "901"), ("DelaySeconds", "-1"),
    ("MessageRetentionPeriod", "59"), ("MessageRetentionPeriod", "1209601"),
    ("ReceiveMessageWaitTimeSeconds", "21"),
])
def test_invalid_attribute_values_on_create(strict_sqs: Any, attribute: str, value: str) -> None:
    name = unique()
    with raises_sqs("InvalidAttributeValue"):
        strict_sqs.create_queue(QueueName=name, Attributes={attribute: value})
    with raises_sqs("AWS.SimpleQueueService.NonExistentQueue"):
        strict_sqs.get_queue_url(QueueName=name)


@pytest.mark.parametrize(("attribute", "value"), [
    ("VisibilityTimeout", "0"), ("VisibilityTimeout", "43200"), ("DelaySeconds", "900"),
    ("MessageRetentionPeriod", "60"), ("MessageRetentionPeriod", "1209600"),
    ("ReceiveMessageWaitTimeSeconds", "20"), ("MaximumMessageSize", "1024"),
    ("MaximumMessageSize", "1048576"),
])
def test_attribute_range_edges_accepted(strict_sqs: Any, attribute: str, value: str) -> None:
    url = strict_sqs.create_queue(QueueName=unique(), Attributes={attribute: value})["QueueUrl"]
    got = strict_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[attribute])
    assert got["Attributes"][attribute] == value


def test_fifo_only_attribute_on_standard_queue(strict_sqs: Any) -> None:
    with raises_sqs("InvalidAttributeName"):
        strict_sqs.create_queue(QueueName=unique(),
                                Attributes={"ContentBasedDeduplication": "true"})


def test_fifo_queue_attribute_cannot_change(strict_sqs: Any,
                                            make_strict_queue: QueueFactory) -> None:
    """LocalStack's recording of AWS (test_set_unsupported_attribute_fifo, 14-11-2023)."""
    url = make_strict_queue(fifo=True)
    with raises_sqs("InvalidAttributeValue") as caught:
        strict_sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "false"})
    assert caught[0].response["Error"]["Message"] == (
        "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not "
        "supported.")


@pytest.mark.parametrize("count", [0, 1001, -1])
def test_max_receive_count_out_of_range(strict_sqs: Any, make_strict_queue: QueueFactory,
                                        count: int) -> None:
    dlq, url = make_strict_queue(), make_strict_queue()
    policy = json.dumps({"deadLetterTargetArn": make_strict_queue.arn_of(dlq),
                         "maxReceiveCount": count})
    with raises_sqs(IPV):
        strict_sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})
    got = strict_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "RedrivePolicy" not in got


@pytest.mark.parametrize("count", [1, 1000])
def test_max_receive_count_edges(strict_sqs: Any, make_strict_queue: QueueFactory,
                                 count: int) -> None:
    dlq = make_strict_queue()
    make_strict_queue(RedrivePolicy=json.dumps({
        "deadLetterTargetArn": make_strict_queue.arn_of(dlq), "maxReceiveCount": count}))


@pytest.mark.parametrize(("policy", "code"), [
    ("not json", "InvalidAttributeValue"),
    (json.dumps({"maxReceiveCount": 3}), IPV),
    (json.dumps({"deadLetterTargetArn": "arn:nope", "maxReceiveCount": 3}), IPV)])
def test_malformed_redrive_policy(strict_sqs: Any, make_strict_queue: QueueFactory,
                                  policy: str, code: str) -> None:
    url = make_strict_queue()
    with raises_sqs(code):
        strict_sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})


# --------------------------------------------------------------------------- action parameters


@pytest.mark.parametrize(("param", "value"), [
    ("MaxNumberOfMessages", 0), ("MaxNumberOfMessages", 11), ("WaitTimeSeconds", 21),
    ("WaitTimeSeconds", -1), ("VisibilityTimeout", 43201), ("VisibilityTimeout", -1),
])
def test_receive_parameters_out_of_range(strict_sqs: Any, make_strict_queue: QueueFactory,
                                         param: str, value: int) -> None:
    url = make_strict_queue()
    strict_sqs.send_message(QueueUrl=url, MessageBody="x")
    with raises_sqs(IPV):
        strict_sqs.receive_message(QueueUrl=url, **{param: value})
    assert counts(strict_sqs, url) == (1, 0, 0)


@pytest.mark.parametrize("delay", [901, -1])
def test_send_delay_out_of_range(strict_sqs: Any, make_strict_queue: QueueFactory,
                                 delay: int) -> None:
    url = make_strict_queue()
    with raises_sqs(IPV):
        strict_sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=delay)
    assert counts(strict_sqs, url) == (0, 0, 0)


def test_change_visibility_out_of_range(strict_sqs: Any,
                                        make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    strict_sqs.send_message(QueueUrl=url, MessageBody="x")
    msg = strict_sqs.receive_message(QueueUrl=url)["Messages"][0]
    with raises_sqs(IPV):
        strict_sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"],
                                             VisibilityTimeout=43201)


@pytest.mark.parametrize("max_results", [0, 1001])
def test_list_queues_max_results_out_of_range(strict_sqs: Any, max_results: int) -> None:
    with raises_sqs(IPV):
        strict_sqs.list_queues(MaxResults=max_results)


def test_list_queues_max_results_edge(strict_sqs: Any) -> None:
    strict_sqs.list_queues(MaxResults=1000)


def test_unknown_receive_attribute_name(strict_sqs: Any,
                                        make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    with raises_sqs("InvalidAttributeName"):
        strict_sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["Nonsense"])


# --------------------------------------------------------------------------- tags


def test_too_many_tags(strict_sqs: Any, make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue(tags={f"k{i}": "v" for i in range(50)})
    with raises_sqs(IPV):
        strict_sqs.tag_queue(QueueUrl=url, Tags={"one-more": "v"})
    assert len(strict_sqs.list_queue_tags(QueueUrl=url)["Tags"]) == 50


def test_tag_key_too_long(strict_sqs: Any, make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    with raises_sqs(IPV):
        strict_sqs.tag_queue(QueueUrl=url, Tags={"k" * 129: "v"})


# --------------------------------------------------------------------------- cool-downs


def test_queue_deleted_recently(strict_sqs: Any) -> None:
    name = unique()
    url = strict_sqs.create_queue(QueueName=name)["QueueUrl"]
    strict_sqs.delete_queue(QueueUrl=url)
    with raises_sqs("AWS.SimpleQueueService.QueueDeletedRecently"):
        strict_sqs.create_queue(QueueName=name)
    with pytest.raises(strict_sqs.exceptions.QueueDeletedRecently):
        strict_sqs.create_queue(QueueName=name)


def test_purge_queue_in_progress(strict_sqs: Any, make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    strict_sqs.send_message(QueueUrl=url, MessageBody="x")
    strict_sqs.purge_queue(QueueUrl=url)
    # HTTP 403 as AWS sends it (LocalStack's recording of AWS, test_successive_purge_calls_fail,
    # 14-11-2023, both protocols), not the 400 of today's API reference
    with raises_sqs("AWS.SimpleQueueService.PurgeQueueInProgress", 403):
        strict_sqs.purge_queue(QueueUrl=url)
    other = make_strict_queue()  # the cool-down is per queue
    strict_sqs.purge_queue(QueueUrl=other)


def test_visibility_edges_accepted(strict_sqs: Any, make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    strict_sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=0)
    msg = strict_sqs.receive_message(QueueUrl=url, VisibilityTimeout=43200, WaitTimeSeconds=20,
                                     MaxNumberOfMessages=10)["Messages"][0]
    strict_sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"],
                                         VisibilityTimeout=43200)
    strict_sqs.send_message(QueueUrl=url, MessageBody="y", DelaySeconds=900)
    assert counts(strict_sqs, url) == (0, 1, 1)


def test_purge_in_progress_changes_nothing(strict_sqs: Any,
                                           make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    strict_sqs.purge_queue(QueueUrl=url)
    strict_sqs.send_message(QueueUrl=url, MessageBody="after the first purge")
    with raises_sqs("AWS.SimpleQueueService.PurgeQueueInProgress", None):
        strict_sqs.purge_queue(QueueUrl=url)
    assert counts(strict_sqs, url) == (1, 0, 0)


def test_message_group_id_on_standard_queue(strict_sqs: Any,
                                            make_strict_queue: QueueFactory) -> None:
    """Standard queues accept MessageGroupId (fair queues, 2025); it is no dedup or order key."""
    url = make_strict_queue()
    strict_sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="tenant-1")
    strict_sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="tenant-1")
    assert counts(strict_sqs, url) == (2, 0, 0)


# ------------------------------------------------ characters a queue name or a store refuses
# Found by fuzzing: on PostgreSQL a NUL in any of these was an InternalError (HTTP 500).


@pytest.mark.parametrize("name", ["q\0", "q\x01", "q é", "q%2F"])
def test_a_name_no_queue_can_have_finds_none(strict_sqs: Any, name: str) -> None:
    nowhere = f"http://localhost/{ACCOUNT_ID}/{name}"
    with raises_sqs("AWS.SimpleQueueService.NonExistentQueue"):
        strict_sqs.get_queue_url(QueueName=name)
    with raises_sqs("AWS.SimpleQueueService.NonExistentQueue"):
        strict_sqs.send_message(QueueUrl=nowhere, MessageBody="x")
    with raises_sqs("AWS.SimpleQueueService.NonExistentQueue"):
        strict_sqs.list_dead_letter_source_queues(QueueUrl=nowhere)
    assert strict_sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", []) == []


def test_an_arn_naming_no_possible_queue_is_invalid(strict_sqs: Any) -> None:
    with raises_sqs(IPV):
        strict_sqs.start_message_move_task(
            SourceArn=f"arn:aws:sqs:us-east-1:{ACCOUNT_ID}:dlq\0")


def test_control_characters_in_tags_are_refused(strict_sqs: Any,
                                                make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue(tags={"team": "billing"})
    for tags in ({"team": "bil\0ling"}, {"te\x02am": "billing"}):
        with raises_sqs(IPV):
            strict_sqs.tag_queue(QueueUrl=url, Tags=tags)
    assert strict_sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "billing"}
    name = unique()
    with raises_sqs(IPV):
        strict_sqs.create_queue(QueueName=name, tags={"team": "\0"})
    with raises_sqs("AWS.SimpleQueueService.NonExistentQueue"):
        strict_sqs.get_queue_url(QueueName=name)


def test_control_characters_in_attribute_values_are_refused(
        strict_sqs: Any, make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    with raises_sqs("InvalidAttributeValue"):
        strict_sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": "k\0"})
    attributes = strict_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    assert "KmsMasterKeyId" not in attributes["Attributes"]


def test_a_batch_whose_every_entry_fails_sends_nothing(strict_sqs: Any,
                                                       make_strict_queue: QueueFactory) -> None:
    """Each entry fails with AWS's code: EmptyValue for an empty body (the tests of
    ballerina-platform/module-ballerinax-aws.sqs against SQS,
    testSendMessageBatchPartialFailure), InvalidMessageContents for a NUL (recorded from
    AWS in yavosh/pail, test/diff/testdata/golden/sqs-batches.json, "send-batch-partial");
    both SenderFault."""
    url = make_strict_queue()
    result = strict_sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "empty", "MessageBody": ""}, {"Id": "nul", "MessageBody": "\0"}])
    assert result.get("Successful", []) == []
    assert {f["Id"]: (f["Code"], f["SenderFault"]) for f in result["Failed"]} == {
        "empty": ("EmptyValue", True), "nul": ("InvalidMessageContents", True)}
    assert counts(strict_sqs, url) == (0, 0, 0)
