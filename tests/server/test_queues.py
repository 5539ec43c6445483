"""Queue management actions: create, find, list, delete, attributes, tags, permissions."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.server.conftest import QueueFactory
from tests.server.helpers import ACCOUNT_ID, arn, counts, queue_name_of, raises_sqs, unique
from tests.support import ServerProcess, sqs_client

NON_EXISTENT = "AWS.SimpleQueueService.NonExistentQueue"

STANDARD_ATTRIBUTES = {
    "QueueArn", "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed", "CreatedTimestamp", "LastModifiedTimestamp",
    "VisibilityTimeout", "MaximumMessageSize", "MessageRetentionPeriod", "DelaySeconds",
    "ReceiveMessageWaitTimeSeconds",
}
FIFO_ATTRIBUTES = {"FifoQueue", "ContentBasedDeduplication", "DeduplicationScope",
                   "FifoThroughputLimit"}


# --------------------------------------------------------------------------- CreateQueue


def test_create_queue_returns_url_from_host_header(sqs: Any, server: ServerProcess) -> None:
    name = unique()
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    assert url == f"http://127.0.0.1:{server.port}/{ACCOUNT_ID}/{name}"


def test_queue_url_follows_the_host_the_client_used(server: ServerProcess) -> None:
    client = sqs_client(f"http://localhost:{server.port}")
    name = unique()
    url = client.create_queue(QueueName=name)["QueueUrl"]
    assert url == f"http://localhost:{server.port}/{ACCOUNT_ID}/{name}"
    assert client.get_queue_url(QueueName=name)["QueueUrl"] == url


def test_create_queue_is_idempotent_for_identical_attributes(sqs: Any) -> None:
    name = unique()
    attrs = {"VisibilityTimeout": "45", "DelaySeconds": "2"}
    first = sqs.create_queue(QueueName=name, Attributes=attrs)["QueueUrl"]
    second = sqs.create_queue(QueueName=name, Attributes=attrs)["QueueUrl"]
    assert first == second
    plain = unique()
    assert (sqs.create_queue(QueueName=plain)["QueueUrl"]
            == sqs.create_queue(QueueName=plain)["QueueUrl"])


def test_create_queue_with_different_attributes_is_refused(sqs: Any) -> None:
    name = unique()
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"]
    with raises_sqs("QueueAlreadyExists"):
        sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "60"})
    # nothing changed
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
    assert attrs["Attributes"]["VisibilityTimeout"] == "45"


def test_create_queue_raises_modeled_exception_class(sqs: Any) -> None:
    name = unique()
    sqs.create_queue(QueueName=name, Attributes={"DelaySeconds": "1"})
    with pytest.raises(sqs.exceptions.QueueNameExists):
        sqs.create_queue(QueueName=name, Attributes={"DelaySeconds": "2"})


def test_create_queue_with_all_settable_attributes(sqs: Any, make_queue: QueueFactory) -> None:
    dlq = make_queue()
    attrs = {
        "DelaySeconds": "5",
        "MaximumMessageSize": "2048",
        "MessageRetentionPeriod": "3600",
        "ReceiveMessageWaitTimeSeconds": "3",
        "VisibilityTimeout": "100",
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": make_queue.arn_of(dlq),
                                     "maxReceiveCount": 4}),
    }
    url = make_queue(**attrs)
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    for key in ("DelaySeconds", "MaximumMessageSize", "MessageRetentionPeriod",
                "ReceiveMessageWaitTimeSeconds", "VisibilityTimeout"):
        assert got[key] == attrs[key], key
    policy = json.loads(got["RedrivePolicy"])
    assert policy["deadLetterTargetArn"] == make_queue.arn_of(dlq)
    assert int(policy["maxReceiveCount"]) == 4


def test_create_queue_with_tags(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(tags={"team": "billing", "env": "test"})
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "billing", "env": "test"}


def test_relaxed_mode_allows_recreating_a_deleted_queue_at_once(sqs: Any) -> None:
    name = unique()
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="old")
    sqs.delete_queue(QueueUrl=url)
    again = sqs.create_queue(QueueName=name)["QueueUrl"]
    assert again == url
    assert counts(sqs, again) == (0, 0, 0)


# --------------------------------------------------------------------------- GetQueueUrl


def test_get_queue_url(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    assert sqs.get_queue_url(QueueName=queue_name_of(url))["QueueUrl"] == url
    got = sqs.get_queue_url(QueueName=queue_name_of(url), QueueOwnerAWSAccountId=ACCOUNT_ID)
    assert got["QueueUrl"] == url


def test_get_queue_url_of_missing_queue(sqs: Any) -> None:
    with raises_sqs(NON_EXISTENT):
        sqs.get_queue_url(QueueName=unique("missing"))
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName=unique("missing"))


def test_queue_names_are_case_sensitive(sqs: Any) -> None:
    name = "Case-" + unique()
    sqs.create_queue(QueueName=name)
    with raises_sqs(NON_EXISTENT):
        sqs.get_queue_url(QueueName=name.lower())


def test_queue_found_by_url_path_whatever_host(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    foreign = f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT_ID}/{queue_name_of(url)}"
    sqs.send_message(QueueUrl=foreign, MessageBody="via foreign host")
    other = f"http://somewhere.invalid:1/{ACCOUNT_ID}/{queue_name_of(url)}"
    msgs = sqs.receive_message(QueueUrl=other, WaitTimeSeconds=1).get("Messages", [])
    assert [m["Body"] for m in msgs] == ["via foreign host"]


def test_unknown_queue_url_is_non_existent(sqs: Any, server: ServerProcess) -> None:
    url = f"{server.url}/{ACCOUNT_ID}/{unique('nope')}"
    with raises_sqs(NON_EXISTENT):
        sqs.send_message(QueueUrl=url, MessageBody="x")
    with raises_sqs(NON_EXISTENT):
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])


# --------------------------------------------------------------------------- regions


def test_regions_are_kept_apart(server: ServerProcess) -> None:
    east = sqs_client(server.url, region="us-east-1")
    west = sqs_client(server.url, region="eu-west-1")
    name = unique("region")
    east_url = east.create_queue(QueueName=name)["QueueUrl"]
    with raises_sqs(NON_EXISTENT):
        west.get_queue_url(QueueName=name)
    assert east_url not in west.list_queues(QueueNamePrefix=name).get("QueueUrls", [])

    west_url = west.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "77"})[
        "QueueUrl"]
    west_arn = west.get_queue_attributes(QueueUrl=west_url, AttributeNames=["QueueArn"])
    assert west_arn["Attributes"]["QueueArn"] == arn(name, "eu-west-1")
    east_arn = east.get_queue_attributes(QueueUrl=east_url, AttributeNames=["All"])
    assert east_arn["Attributes"]["QueueArn"] == arn(name, "us-east-1")
    assert east_arn["Attributes"]["VisibilityTimeout"] == "30"

    west.send_message(QueueUrl=west_url, MessageBody="west")
    assert counts(east, east_url) == (0, 0, 0)
    assert counts(west, west_url) == (1, 0, 0)


# --------------------------------------------------------------------------- ListQueues


def test_list_queues_by_prefix(sqs: Any) -> None:
    prefix = unique("lp")
    urls = {sqs.create_queue(QueueName=f"{prefix}-{i}")["QueueUrl"] for i in range(3)}
    sqs.create_queue(QueueName=unique("other"))
    got = sqs.list_queues(QueueNamePrefix=prefix)["QueueUrls"]
    assert set(got) == urls
    assert "NextToken" not in sqs.list_queues(QueueNamePrefix=prefix)


def test_list_queues_without_prefix_includes_new_queue(sqs: Any,
                                                       make_queue: QueueFactory) -> None:
    url = make_queue()
    assert url in sqs.list_queues(MaxResults=1000)["QueueUrls"]


def test_list_queues_with_unmatched_prefix_is_empty(sqs: Any) -> None:
    assert sqs.list_queues(QueueNamePrefix=unique("none")).get("QueueUrls", []) == []


def test_list_queues_prefix_is_literal_and_any_length(sqs: Any) -> None:
    """A prefix is compared as plain text: no wildcards, case-sensitive, and one longer
    than any queue name simply matches nothing (it once overflowed SQLite's LIKE)."""
    base = unique("lit")
    underscore = sqs.create_queue(QueueName=f"{base}_a")["QueueUrl"]
    sqs.create_queue(QueueName=f"{base}Xa")
    sqs.create_queue(QueueName=f"{base.upper()}_b")
    assert sqs.list_queues(QueueNamePrefix=f"{base}_")["QueueUrls"] == [underscore]
    assert sqs.list_queues(QueueNamePrefix=f"{base}%").get("QueueUrls", []) == []
    for prefix in (base + "x" * 100_000, "é☃" * 1000):
        assert sqs.list_queues(QueueNamePrefix=prefix).get("QueueUrls", []) == []


def test_list_queues_pagination(sqs: Any) -> None:
    prefix = unique("pg")
    urls = {sqs.create_queue(QueueName=f"{prefix}-{i}")["QueueUrl"] for i in range(5)}
    seen: list[str] = []
    pages = 0
    kwargs: dict[str, Any] = {"QueueNamePrefix": prefix, "MaxResults": 2}
    while True:
        page = sqs.list_queues(**kwargs)
        pages += 1
        assert len(page.get("QueueUrls", [])) <= 2
        seen.extend(page.get("QueueUrls", []))
        if "NextToken" not in page:
            break
        kwargs["NextToken"] = page["NextToken"]
        assert pages < 10
    assert pages == 3
    assert sorted(seen) == sorted(urls)


def test_list_queues_paginator(sqs: Any) -> None:
    prefix = unique("pp")
    urls = {sqs.create_queue(QueueName=f"{prefix}-{i}")["QueueUrl"] for i in range(3)}
    paginator = sqs.get_paginator("list_queues")
    seen = [u for page in paginator.paginate(QueueNamePrefix=prefix,
                                             PaginationConfig={"PageSize": 1})
            for u in page.get("QueueUrls", [])]
    assert sorted(seen) == sorted(urls)


# --------------------------------------------------------------------------- DeleteQueue


def test_delete_queue(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    sqs.delete_queue(QueueUrl=url)
    with raises_sqs(NON_EXISTENT):
        sqs.get_queue_url(QueueName=queue_name_of(url))
    with raises_sqs(NON_EXISTENT):
        sqs.send_message(QueueUrl=url, MessageBody="x")
    assert url not in sqs.list_queues(QueueNamePrefix=queue_name_of(url)).get("QueueUrls", [])


def test_delete_missing_queue(sqs: Any, server: ServerProcess) -> None:
    with raises_sqs(NON_EXISTENT):
        sqs.delete_queue(QueueUrl=f"{server.url}/{ACCOUNT_ID}/{unique('gone')}")


# --------------------------------------------------------------------------- attributes


def test_get_all_attributes_of_a_standard_queue(sqs: Any, make_queue: QueueFactory) -> None:
    before = int(time.time())
    url = make_queue()
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert set(attrs) >= STANDARD_ATTRIBUTES
    assert not FIFO_ATTRIBUTES & set(attrs) - {"FifoQueue"}
    assert attrs.get("FifoQueue", "false") == "false"
    assert attrs["QueueArn"] == arn(queue_name_of(url))
    assert attrs["VisibilityTimeout"] == "30"
    assert attrs["MessageRetentionPeriod"] == "345600"
    assert attrs["DelaySeconds"] == "0"
    assert attrs["ReceiveMessageWaitTimeSeconds"] == "0"
    assert attrs["ApproximateNumberOfMessages"] == "0"
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "0"
    assert attrs["ApproximateNumberOfMessagesDelayed"] == "0"
    created = int(attrs["CreatedTimestamp"])  # epoch seconds
    assert before - 120 <= created <= time.time() + 120
    assert int(attrs["LastModifiedTimestamp"]) >= created


def test_default_attributes_in_strict_mode(strict_sqs: Any,
                                          make_strict_queue: QueueFactory) -> None:
    url = make_strict_queue()
    attrs = strict_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["MaximumMessageSize"] == "1048576"  # SQS's default (and maximum) since 2025
    assert attrs["VisibilityTimeout"] == "30"
    assert attrs["MessageRetentionPeriod"] == "345600"
    assert attrs["DelaySeconds"] == "0"
    assert attrs["ReceiveMessageWaitTimeSeconds"] == "0"


def test_get_all_attributes_of_a_fifo_queue(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True)
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert set(attrs) >= STANDARD_ATTRIBUTES | FIFO_ATTRIBUTES
    assert attrs["FifoQueue"] == "true"
    assert attrs["ContentBasedDeduplication"] == "false"
    assert attrs["DeduplicationScope"] == "queue"
    assert attrs["FifoThroughputLimit"] == "perQueue"
    assert attrs["QueueArn"] == arn(queue_name_of(url))


@pytest.mark.parametrize("name", sorted(STANDARD_ATTRIBUTES))
def test_get_each_attribute_by_name(sqs: Any, make_queue: QueueFactory, name: str) -> None:
    url = make_queue()
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[name])["Attributes"]
    assert set(attrs) == {name}


def test_get_attributes_without_names_returns_none(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    assert sqs.get_queue_attributes(QueueUrl=url).get("Attributes", {}) == {}


def test_get_unknown_attribute_name(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    with raises_sqs("InvalidAttributeName"):
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["NoSuchAttribute"])


def test_message_counters(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=600)
    assert counts(sqs, url) == (3, 0, 1)
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)
    assert counts(sqs, url) == (2, 1, 1)


def test_set_queue_attributes(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    created = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["LastModifiedTimestamp"])
    new = {"VisibilityTimeout": "120", "DelaySeconds": "10", "MaximumMessageSize": "4096",
           "MessageRetentionPeriod": "86400", "ReceiveMessageWaitTimeSeconds": "20"}
    sqs.set_queue_attributes(QueueUrl=url, Attributes=new)
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    for key, value in new.items():
        assert got[key] == value, key
    assert int(got["LastModifiedTimestamp"]) >= int(
        created["Attributes"]["LastModifiedTimestamp"])


def test_set_policy_attribute_round_trips(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    policy = {"Version": "2012-10-17", "Statement": [{
        "Sid": "s1", "Effect": "Allow", "Principal": {"AWS": ACCOUNT_ID},
        "Action": "sqs:SendMessage", "Resource": arn(queue_name_of(url))}]}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(policy)})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]
    assert json.loads(got["Policy"]) == policy


def test_set_redrive_policy_and_remove_it(sqs: Any, make_queue: QueueFactory) -> None:
    dlq, url = make_queue(), make_queue()
    policy = json.dumps({"deadLetterTargetArn": make_queue.arn_of(dlq), "maxReceiveCount": 3})
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]
    assert json.loads(got["RedrivePolicy"])["deadLetterTargetArn"] == make_queue.arn_of(dlq)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": ""})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "RedrivePolicy" not in got


def test_set_attributes_on_missing_queue(sqs: Any, server: ServerProcess) -> None:
    with raises_sqs(NON_EXISTENT):
        sqs.set_queue_attributes(QueueUrl=f"{server.url}/{ACCOUNT_ID}/{unique('x')}",
                                 Attributes={"DelaySeconds": "1"})


def test_set_unknown_attribute_changes_nothing(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    with raises_sqs("InvalidAttributeName"):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "99",
                                                           "Bogus": "1"})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
    assert got["Attributes"]["VisibilityTimeout"] == "30"


def test_set_invalid_attribute_value_changes_nothing(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    with raises_sqs("InvalidAttributeValue"):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "7",
                                                           "VisibilityTimeout": "43201"})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert got["DelaySeconds"] == "0"
    assert got["VisibilityTimeout"] == "30"


def test_fifo_attributes_stored(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(fifo=True, ContentBasedDeduplication="true",
                     DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId")
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert got["ContentBasedDeduplication"] == "true"
    assert got["DeduplicationScope"] == "messageGroup"
    assert got["FifoThroughputLimit"] == "perMessageGroupId"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"ContentBasedDeduplication": "false",
                                                       "DeduplicationScope": "queue",
                                                       "FifoThroughputLimit": "perQueue"})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert got["ContentBasedDeduplication"] == "false"
    assert got["DeduplicationScope"] == "queue"
    assert got["FifoThroughputLimit"] == "perQueue"


# --------------------------------------------------------------------------- PurgeQueue


def test_purge_queue_removes_visible_delayed_and_in_flight(sqs: Any,
                                                           make_queue: QueueFactory) -> None:
    url = make_queue()
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    sqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=300)
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=1)
    sqs.purge_queue(QueueUrl=url)
    assert counts(sqs, url) == (0, 0, 0)
    sqs.send_message(QueueUrl=url, MessageBody="after purge")
    msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                               WaitTimeSeconds=2).get("Messages", [])
    assert [m["Body"] for m in msgs] == ["after purge"]


def test_purge_missing_queue(sqs: Any, server: ServerProcess) -> None:
    with raises_sqs(NON_EXISTENT):
        sqs.purge_queue(QueueUrl=f"{server.url}/{ACCOUNT_ID}/{unique('x')}")


# --------------------------------------------------------------------------- tags


def test_tag_untag_list(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    assert sqs.list_queue_tags(QueueUrl=url).get("Tags", {}) == {}
    sqs.tag_queue(QueueUrl=url, Tags={"a": "1", "b": "2"})
    sqs.tag_queue(QueueUrl=url, Tags={"b": "3", "c": ""})
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"a": "1", "b": "3", "c": ""}
    sqs.untag_queue(QueueUrl=url, TagKeys=["a", "not-there"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"b": "3", "c": ""}


def test_tags_on_missing_queue(sqs: Any, server: ServerProcess) -> None:
    url = f"{server.url}/{ACCOUNT_ID}/{unique('x')}"
    with raises_sqs(NON_EXISTENT):
        sqs.tag_queue(QueueUrl=url, Tags={"a": "1"})
    with raises_sqs(NON_EXISTENT):
        sqs.list_queue_tags(QueueUrl=url)
    with raises_sqs(NON_EXISTENT):
        sqs.untag_queue(QueueUrl=url, TagKeys=["a"])


# --------------------------------------------------------------------------- permissions


def test_add_and_remove_permission(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.add_permission(QueueUrl=url, Label="let-them-send", AWSAccountIds=["111122223333"],
                       Actions=["SendMessage", "ReceiveMessage"])
    policy = json.loads(sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"])
    sids = [s["Sid"] for s in policy["Statement"]]
    assert sids == ["let-them-send"]
    statement = policy["Statement"][0]
    assert statement["Effect"] == "Allow"
    assert statement["Resource"] == arn(queue_name_of(url))
    sqs.remove_permission(QueueUrl=url, Label="let-them-send")
    after = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"]).get(
        "Attributes", {})
    if "Policy" in after and after["Policy"]:
        assert json.loads(after["Policy"]).get("Statement", []) == []


def test_add_permission_with_duplicate_label(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.add_permission(QueueUrl=url, Label="dup", AWSAccountIds=["111122223333"],
                       Actions=["SendMessage"])
    with raises_sqs("InvalidParameterValue"):
        sqs.add_permission(QueueUrl=url, Label="dup", AWSAccountIds=["111122223333"],
                           Actions=["SendMessage"])


def test_remove_unknown_permission(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    with raises_sqs("InvalidParameterValue"):
        sqs.remove_permission(QueueUrl=url, Label="never-added")


def test_permissions_on_missing_queue(sqs: Any, server: ServerProcess) -> None:
    url = f"{server.url}/{ACCOUNT_ID}/{unique('x')}"
    with raises_sqs(NON_EXISTENT):
        sqs.add_permission(QueueUrl=url, Label="l", AWSAccountIds=["111122223333"],
                           Actions=["SendMessage"])
    with raises_sqs(NON_EXISTENT):
        sqs.remove_permission(QueueUrl=url, Label="l")


def test_last_modified_timestamp_moves(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    before = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    time.sleep(1.1)  # the timestamps have a one-second resolution
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "3"})
    after = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert int(after["LastModifiedTimestamp"]) > int(before["LastModifiedTimestamp"])
    assert after["CreatedTimestamp"] == before["CreatedTimestamp"]


def test_queue_url_of_another_account_is_not_found(sqs: Any, make_queue: QueueFactory,
                                                   server: ServerProcess) -> None:
    url = make_queue()
    other = f"{server.url}/111111111111/{queue_name_of(url)}"
    with raises_sqs(NON_EXISTENT):
        sqs.send_message(QueueUrl=other, MessageBody="x")


def test_relaxed_mode_allows_purging_again_at_once(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    sqs.purge_queue(QueueUrl=url)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    sqs.purge_queue(QueueUrl=url)
    assert counts(sqs, url) == (0, 0, 0)
