"""Behaviour held against what AWS was recorded doing (issue 21).

Every expected value here comes from outside Conveyor, named in the test's docstring:

- "recording": LocalStack's snapshots of real AWS responses, repository localstack/localstack,
  tests/aws/services/sqs/test_sqs.snapshot.json (recorded 14-11-2023, JSON protocol unless
  the entry says "-query") and tests/aws/services/sqs/test_sqs_move_task.snapshot.json
  (recorded 01-2024), with the test in test_sqs.py / test_sqs_move_task.py that made each.
  In a JSON recording `Error.Code` is the x-amzn-query-error code and `QueryErrorCode` the
  `__type` name (botocore parsers.py, _do_query_compatible_error_parse).
- "validated": a LocalStack test marked `@markers.aws.validated` (run against AWS), in
  tests/aws/services/sqs/test_sqs.py, where no snapshot holds the value.
- botocore's SQS model, the SQS API reference and the X-Ray developer guide where named.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.server.conftest import QueueFactory
from tests.server.helpers import (
    ACCOUNT_ID,
    RawClient,
    RawResponse,
    assert_query_error,
    md5_of_attributes,
    raises_sqs,
    strip_ns,
    unique,
    wait_for,
)
from tests.support import ServerProcess

MIB = 1024 * 1024


def _json_error(resp: RawResponse) -> tuple[int, str, str, str]:
    """(status, __type name, x-amzn-query-error, message) of a JSON-protocol error."""
    body = resp.json()
    return (resp.status, body["__type"].rsplit("#", 1)[-1],
            resp.header("x-amzn-query-error") or "", body["message"])


def _query_error(resp: RawResponse) -> tuple[int, str, str, str]:
    """(status, Type, Code, Message) of a Query-protocol error."""
    error = assert_query_error(resp, None, resp.status)
    return (resp.status, error.findtext("Type") or "", error.findtext("Code") or "",
            error.findtext("Message") or "")


# --------------------------------------------------------------------------- the error table


@pytest.mark.parametrize(("request_", "expected"), [
    # test_send_receive_max_number_of_messages
    (("ReceiveMessage", {"MaxNumberOfMessages": 11}),
     (400, "InvalidParameterValueException", "InvalidParameterValue;Sender",
      "Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and "
      "10, if provided.")),
    # test_too_many_entries_in_batch_request
    (("DeleteMessageBatch", {"Entries": [{"Id": str(i), "ReceiptHandle": "x"}
                                         for i in range(20)]}),
     (400, "TooManyEntriesInBatchRequest",
      "AWS.SimpleQueueService.TooManyEntriesInBatchRequest;Sender",
      "Maximum number of entries per request are 10. You have sent 20.")),
    # test_invalid_batch_id
    (("SendMessageBatch", {"Entries": [{"Id": "invalid:id", "MessageBody": "x"}]}),
     (400, "InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId;Sender",
      "A batch entry id can only contain alphanumeric characters, hyphens and underscores. "
      "It can be at most 80 letters long.")),
    # test_send_message_with_empty_string_attribute
    (("SendMessage", {"MessageBody": "test", "MessageAttributes": {
        "ErrorDetails": {"StringValue": "", "DataType": "String"}}}),
     (400, "InvalidParameterValueException", "InvalidParameterValue;Sender",
      "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type "
      "'String'.")),
], ids=["invalid-value", "too-many-entries", "batch-entry-id", "empty-attribute"])
def test_json_errors_as_recorded(raw: RawClient, make_queue: QueueFactory,
                                 request_: tuple[str, dict], expected: tuple) -> None:
    """JSON: `__type` the name AWS sends, x-amzn-query-error the Query code, as recorded
    (recording, the entries named beside each case)."""
    action, payload = request_
    resp = raw.json_call(action, {"QueueUrl": make_queue(), **payload})
    assert _json_error(resp) == expected


def test_missing_parameter_json_and_query(raw: RawClient, make_queue: QueueFactory) -> None:
    """A missing MessageGroupId on a FIFO queue: MissingRequiredParameterException in JSON,
    MissingParameter in Query (recording, test_posting_to_fifo_requires_deduplicationid_group_id:
    "missing-parameter" and "missing-parameter-query")."""
    url = make_queue(fifo=True, ContentBasedDeduplication=True)
    resp = raw.json_call("SendMessage", {"QueueUrl": url, "MessageBody": "x"})
    assert _json_error(resp) == (400, "MissingRequiredParameterException",
                                 "MissingParameter;Sender",
                                 "The request must contain the parameter MessageGroupId.")
    resp = raw.query({"Action": "SendMessage", "QueueUrl": url, "MessageBody": "x"})
    assert _query_error(resp) == (400, "Sender", "MissingParameter",
                                  "The request must contain the parameter MessageGroupId.")


def test_json_error_document_has_only_type_and_message(raw: RawClient) -> None:
    """A JSON error's body is `__type` and `message` and nothing else, its Query code and
    fault in the x-amzn-query-error header: the exact error botocore's own functional test
    stubs as SQS's answer to a DeleteQueue of an unknown queue (boto/botocore,
    tests/functional/test_sqs.py, test_query_compatible_error_parsing)."""
    resp = raw.json_call("DeleteQueue", {"QueueUrl": f"http://x/{ACCOUNT_ID}/{unique()}"})
    assert resp.status == 400
    assert resp.json() == {"__type": "com.amazonaws.sqs#QueueDoesNotExist",
                           "message": "The specified queue does not exist."}
    assert resp.header("x-amzn-query-error") == "AWS.SimpleQueueService.NonExistentQueue;Sender"


def test_receive_matching_no_attribute_in_query(raw: RawClient, make_queue: QueueFactory) -> None:
    """MessageAttributeNames matching none of a message's attributes, in the Query
    protocol: no MessageAttribute and no MD5OfMessageAttributes (an empty map has no XML
    form; the 06-07-2023 recording of test_receive_message_message_attribute_names_filters,
    made with the Query protocol, has neither in "only_non_existing_names")."""
    url = make_queue()
    raw.query({"Action": "SendMessage", "QueueUrl": url, "MessageBody": "msg",
               "MessageAttribute.1.Name": "Hello",
               "MessageAttribute.1.Value.DataType": "String",
               "MessageAttribute.1.Value.StringValue": "There"})
    resp = raw.query({"Action": "ReceiveMessage", "QueueUrl": url, "WaitTimeSeconds": "1",
                      "MessageAttributeName.1": "Foo"})
    assert resp.status == 200
    message = strip_ns(resp.xml()).find("ReceiveMessageResult/Message")
    assert message is not None and message.findtext("Body") == "msg"
    assert message.find("MessageAttribute") is None
    assert message.find("MD5OfMessageAttributes") is None


def test_boto3_reports_the_query_codes(sqs: Any, make_queue: QueueFactory) -> None:
    """boto3 (awsQueryCompatible) reports the x-amzn-query-error code as Error.Code and the
    `__type` name as Error.QueryErrorCode, exactly as in AWS's recordings
    (recording, test_send_receive_max_number_of_messages, test_non_existent_queue)."""
    url = make_queue()
    with raises_sqs("InvalidParameterValue") as caught:
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=11)
    assert caught[0].response["Error"] == {
        "Code": "InvalidParameterValue", "QueryErrorCode": "InvalidParameterValueException",
        "Type": "Sender", "Message": "Value 11 for parameter MaxNumberOfMessages is invalid. "
                                     "Reason: Must be between 1 and 10, if provided."}
    with raises_sqs("AWS.SimpleQueueService.NonExistentQueue") as caught:
        sqs.get_queue_url(QueueName=unique("missing"))
    assert caught[0].response["Error"] == {
        "Code": "AWS.SimpleQueueService.NonExistentQueue", "QueryErrorCode": "QueueDoesNotExist",
        "Type": "Sender", "Message": "The specified queue does not exist."}
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):  # the modeled class, as against AWS
        sqs.get_queue_url(QueueName=unique("missing"))


def test_queue_does_not_exist_wording_per_protocol(raw: RawClient) -> None:
    """JSON "The specified queue does not exist.", Query "... for this wsdl version."
    (recording, test_non_existent_queue: queue-does-not-exist / queue-does-not-exist-query)."""
    name = unique("missing")
    assert _json_error(raw.json_call("GetQueueUrl", {"QueueName": name})) == (
        400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue;Sender",
        "The specified queue does not exist.")
    assert _query_error(raw.query({"Action": "GetQueueUrl", "QueueName": name})) == (
        400, "Sender", "AWS.SimpleQueueService.NonExistentQueue",
        "The specified queue does not exist for this wsdl version.")


def test_queue_name_exists(raw: RawClient) -> None:
    """QueueNameExists in JSON, QueueAlreadyExists as its Query code (recording,
    test_create_queue_with_different_attributes_raises_exception)."""
    name = unique()
    raw.json_call("CreateQueue", {"QueueName": name, "Attributes": {"DelaySeconds": "1"}})
    resp = raw.json_call("CreateQueue", {"QueueName": name, "Attributes": {"DelaySeconds": "2"}})
    assert _json_error(resp) == (
        400, "QueueNameExists", "QueueAlreadyExists;Sender",
        "A queue already exists with the same name and a different value for attribute "
        "DelaySeconds")


# --------------------------------------------------------------------------- purge


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_second_purge_within_60_s(strict_raw: RawClient, protocol: str) -> None:
    """PurgeQueueInProgress, HTTP 403, in both protocols (recording,
    test_successive_purge_calls_fail: purge_queue_error and purge-error-code-query)."""
    name = unique()
    url = strict_raw.json_call("CreateQueue", {"QueueName": name}).json()["QueueUrl"]
    expected = f"Only one PurgeQueue operation on {name} is allowed every 60 seconds."
    if protocol == "json":
        assert strict_raw.json_call("PurgeQueue", {"QueueUrl": url}).status == 200
        assert _json_error(strict_raw.json_call("PurgeQueue", {"QueueUrl": url})) == (
            403, "PurgeQueueInProgress", "AWS.SimpleQueueService.PurgeQueueInProgress;Sender",
            expected)
    else:
        assert strict_raw.query({"Action": "PurgeQueue", "QueueUrl": url}).status == 200
        assert _query_error(strict_raw.query({"Action": "PurgeQueue", "QueueUrl": url})) == (
            403, "Sender", "AWS.SimpleQueueService.PurgeQueueInProgress", expected)


# --------------------------------------------------------------------------- Query over GET


def _presigned_get(server: ServerProcess, url: str, params: dict[str, str],
                   headers: dict[str, str] | None = None) -> RawResponse:
    """A GET signed in the query string, as LocalStack's validated tests send it."""
    request = AWSRequest(method="GET", url=f"{url}?{urlencode(params)}", headers=headers or {})
    SigV4QueryAuth(Credentials("test", "test"), "sqs", "us-east-1", expires=300).add_auth(request)
    parts = urlsplit(request.url)
    return RawClient(server.url).request("GET", f"{parts.path}?{parts.query}",
                                         headers=headers, sign=False)


def test_get_actions_on_a_queue_url(server: ServerProcess, sqs: Any,
                                    make_queue: QueueFactory) -> None:
    """GET with query-string auth works on a queue's URL (validated:
    test_get_send_and_receive_messages, test_get_queue_attributes_with_query_args)."""
    url = make_queue()
    assert _presigned_get(server, url, {"Action": "SendMessage", "MessageBody": "foobar"}
                          ).status == 200
    resp = _presigned_get(server, url, {"Action": "ReceiveMessage"})
    assert resp.status == 200 and b"<Body>foobar</Body>" in resp.body
    resp = _presigned_get(server, url, {"Action": "GetQueueAttributes",
                                        "AttributeName.1": "QueueArn"})
    assert b"<Attribute><Name>QueueArn</Name><Value>arn:aws:sqs:" in resp.body


def test_get_list_queues_on_the_endpoint(server: ServerProcess, make_queue: QueueFactory) -> None:
    """ListQueues by GET on the service endpoint (validated:
    test_get_list_queues_with_query_auth)."""
    prefix = unique("qget")
    url = make_queue(prefix=prefix)
    resp = _presigned_get(server, server.url + "/", {"Action": "ListQueues", "Version":
                                                     "2012-11-05", "QueueNamePrefix": prefix})
    assert resp.status == 200 and b"<ListQueuesResponse" in resp.body
    assert url.encode() in resp.body


@pytest.mark.parametrize("action", ["CreateQueue", "ListQueues", "FooBar"])
def test_get_refused_actions(server: ServerProcess, make_queue: QueueFactory,
                             action: str) -> None:
    """A queue's URL does not take CreateQueue or ListQueues, and no unknown action:
    InvalidAction, 400 (validated: test_get_create_queue_fails, test_get_list_queues_fails,
    test_invalid_action_raises_exception)."""
    resp = _presigned_get(server, make_queue(), {"Action": action, "QueueName": unique()})
    assert _query_error(resp) == (400, "Sender", "InvalidAction",
                                  f"The action {action} is not valid for this endpoint.")


def test_get_missing_parameter(server: ServerProcess, make_queue: QueueFactory) -> None:
    """Validated: test_valid_action_with_missing_parameter_raises_exception."""
    resp = _presigned_get(server, make_queue(), {"Action": "SendMessage"})
    assert _query_error(resp) == (400, "Sender", "MissingParameter",
                                  "The request must contain the parameter MessageBody.")


@pytest.mark.parametrize("accept", [None, "application/json"])
def test_get_without_action(server: ServerProcess, make_queue: QueueFactory,
                            accept: str | None) -> None:
    """No Action: 404 and <UnknownOperationException/>, in XML even to a client that accepts
    JSON (validated: test_get_without_query_returns_unknown_operation,
    test_get_without_query_json_format_returns_returns_xml)."""
    headers = {"Accept": accept} if accept else None
    resp = _presigned_get(server, make_queue(), {}, headers)
    assert resp.status == 404 and b"<UnknownOperationException" in resp.body


def test_get_on_deleted_queue(server: ServerProcess, sqs: Any, make_queue: QueueFactory) -> None:
    """Validated: test_get_on_deleted_queue_fails."""
    url = make_queue()
    sqs.delete_queue(QueueUrl=url)
    resp = _presigned_get(server, url, {"Action": "GetQueueAttributes",
                                        "AttributeName.1": "QueueArn"})
    assert _query_error(resp) == (400, "Sender", "AWS.SimpleQueueService.NonExistentQueue",
                                  "The specified queue does not exist for this wsdl version.")


def test_query_answers_json_when_asked(server: ServerProcess, make_queue: QueueFactory) -> None:
    """`Accept: application/json` gets the Query reply as JSON, errors included (validated:
    test_get_queue_attributes_json_format, test_get_list_queues_fails_json_format)."""
    url = make_queue()
    accept = {"Accept": "application/json"}
    resp = _presigned_get(server, url, {"Action": "GetQueueAttributes", "AttributeName.1": "All"},
                          accept)
    assert resp.status == 200 and resp.header("content-type") == "application/json"
    attributes = resp.json()["GetQueueAttributesResponse"]["GetQueueAttributesResult"][
        "Attributes"]
    arn = next(a["Value"] for a in attributes if a["Name"] == "QueueArn")
    assert arn.startswith("arn:aws:sqs") and arn.endswith(url.rsplit("/", 1)[1])
    resp = _presigned_get(server, url, {"Action": "ListQueues"}, accept)
    assert resp.status == 400
    error = resp.json()["Error"]
    assert (error["Code"], error["Message"]) == (
        "InvalidAction", "The action ListQueues is not valid for this endpoint.")


# --------------------------------------------------------------------------- queue attributes


def test_create_queue_with_identical_redrive_policy(sqs: Any, make_queue: QueueFactory) -> None:
    """CreateQueue with the existing queue's attributes returns its URL (validated:
    test_create_queue_with_same_attributes_is_idempotent); a RedrivePolicy is a JSON value,
    so `"maxReceiveCount": 100` and `"100"`, or another key order, are the same policy
    (issue 21; AWS stores the policy, and reads maxReceiveCount back as a number:
    validated test_get_specific_queue_attribute_response)."""
    dlq_arn = make_queue.arn_of(make_queue())
    name = unique()
    policy = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 100}
    url = sqs.create_queue(QueueName=name, Attributes={
        "RedrivePolicy": json.dumps(policy), "VisibilityTimeout": "69"})["QueueUrl"]
    same = [json.dumps(policy),
            json.dumps({"maxReceiveCount": "100", "deadLetterTargetArn": dlq_arn}),
            json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "100"})]
    for text in same:
        assert sqs.create_queue(QueueName=name, Attributes={
            "RedrivePolicy": text, "VisibilityTimeout": "69"})["QueueUrl"] == url
    with raises_sqs("QueueAlreadyExists"):
        sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 5})})


def test_fifo_queue_attribute_false(sqs: Any, make_queue: QueueFactory) -> None:
    """CreateQueue with FifoQueue=false: "Unknown Attribute FifoQueue." (SQS's answer to
    CloudFormation's `FifoQueue: false`, quoted in aws/aws-cdk#31922, 2024). In
    SetQueueAttributes FifoQueue is unknown on a standard queue, `true` is accepted on a
    FIFO queue (recording, test_set_unsupported_attribute_fifo)."""
    with raises_sqs("InvalidAttributeName") as caught:
        sqs.create_queue(QueueName=unique(), Attributes={"FifoQueue": "false"})
    assert caught[0].response["Error"]["Message"] == "Unknown Attribute FifoQueue."
    with raises_sqs("InvalidAttributeName") as caught:
        sqs.set_queue_attributes(QueueUrl=make_queue(), Attributes={"FifoQueue": "true"})
    assert caught[0].response["Error"]["Message"] == "Unknown Attribute FifoQueue."
    fifo = make_queue(fifo=True)
    sqs.set_queue_attributes(QueueUrl=fifo, Attributes={"FifoQueue": "true"})
    with raises_sqs("InvalidAttributeValue") as caught:
        sqs.set_queue_attributes(QueueUrl=fifo, Attributes={"FifoQueue": "false"})
    assert caught[0].response["Error"]["Message"] == (
        "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not "
        "supported.")


def test_server_side_encryption_attributes(sqs: Any, make_queue: QueueFactory) -> None:
    """Recording, test_sse_queue_attributes and test_sse_kms_and_sqs_are_mutually_exclusive."""
    names = ["KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled"]
    kms = make_queue()
    sqs.set_queue_attributes(QueueUrl=kms, Attributes={
        "KmsMasterKeyId": "testKeyId", "KmsDataKeyReusePeriodSeconds": "6000",
        "SqsManagedSseEnabled": "false"})
    assert sqs.get_queue_attributes(QueueUrl=kms, AttributeNames=names)["Attributes"] == {
        "KmsMasterKeyId": "testKeyId", "KmsDataKeyReusePeriodSeconds": "6000",
        "SqsManagedSseEnabled": "false"}
    managed = make_queue()
    sqs.set_queue_attributes(QueueUrl=managed, Attributes={"SqsManagedSseEnabled": "true"})
    assert sqs.get_queue_attributes(QueueUrl=managed, AttributeNames=names)["Attributes"] == {
        "SqsManagedSseEnabled": "true"}
    with raises_sqs("InvalidAttributeName") as caught:
        sqs.set_queue_attributes(QueueUrl=managed, Attributes={
            "KmsMasterKeyId": "testKeyId", "SqsManagedSseEnabled": "true"})
    assert caught[0].response["Error"]["Message"] == (
        "You can use one type of server-side encryption (SSE) at one time. You can either "
        "enable KMS SSE or SQS SSE.")
    # back to SSE-SQS: the KMS attributes go, as on a queue that never had them
    sqs.set_queue_attributes(QueueUrl=kms, Attributes={"SqsManagedSseEnabled": "true"})
    assert sqs.get_queue_attributes(QueueUrl=kms, AttributeNames=names)["Attributes"] == {
        "SqsManagedSseEnabled": "true"}


# --------------------------------------------------------------------------- permissions


def test_permission_lifecycle(sqs: Any, make_queue: QueueFactory) -> None:
    """The Policy AddPermission writes, and its refusals (recording,
    test_sqs_permission_lifecycle: one principal and one action are strings, two principals
    a list; a label in use, a label not found)."""
    url = make_queue()
    arn = make_queue.arn_of(url)
    sqs.add_permission(QueueUrl=url, AWSAccountIds=[ACCOUNT_ID, "668614515564"],
                       Actions=["ReceiveMessage"], Label="crossaccountpermission")
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])
                        ["Attributes"]["Policy"])
    [statement] = policy["Statement"]
    assert (policy["Version"], policy["Id"]) == ("2008-10-17", f"{arn}/SQSDefaultPolicy")
    assert sorted(statement["Principal"]["AWS"]) == [
        f"arn:aws:iam::{ACCOUNT_ID}:root", "arn:aws:iam::668614515564:root"]
    assert {k: v for k, v in statement.items() if k != "Principal"} == {
        "Sid": "crossaccountpermission", "Effect": "Allow", "Action": "SQS:ReceiveMessage",
        "Resource": arn}
    sqs.remove_permission(QueueUrl=url, Label="crossaccountpermission")
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])
    sqs.add_permission(QueueUrl=url, AWSAccountIds=[ACCOUNT_ID], Actions=["ReceiveMessage"],
                       Label="crossaccountpermission")
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])
                        ["Attributes"]["Policy"])
    assert policy["Statement"][0]["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT_ID}:root"}
    with raises_sqs("InvalidParameterValue") as caught:
        sqs.add_permission(QueueUrl=url, AWSAccountIds=["668614515564"],
                           Actions=["ReceiveMessage"], Label="crossaccountpermission")
    assert caught[0].response["Error"]["Message"] == (
        "Value crossaccountpermission for parameter Label is invalid. Reason: Already exists.")
    with raises_sqs("InvalidParameterValue") as caught:
        sqs.remove_permission(QueueUrl=url, Label="crossaccountpermission2")
    assert caught[0].response["Error"]["Message"] == (
        "Value crossaccountpermission2 for parameter Label is invalid. Reason: can't find "
        "label.")


def test_actions_that_cannot_be_granted(sqs: Any, make_queue: QueueFactory) -> None:
    """A batch action is no grantable action: SQS answers "Please refer to the appropriate
    WSDL for a list of valid actions." (quoted from SQS in cloudtools/awacs#34 and
    aws/aws-cdk#2381). An action only the owner may call gets moto's wording (no recording
    of AWS's found; see the README's compatibility notes)."""
    url = make_queue()
    with raises_sqs("InvalidParameterValue") as caught:
        sqs.add_permission(QueueUrl=url, AWSAccountIds=[ACCOUNT_ID],
                           Actions=["ChangeMessageVisibilityBatch"], Label="batch")
    assert caught[0].response["Error"]["Message"] == (
        "Value SQS:ChangeMessageVisibilityBatch for parameter ActionName is invalid. Reason: "
        "Please refer to the appropriate WSDL for a list of valid actions.")
    with raises_sqs("InvalidParameterValue") as caught:
        sqs.add_permission(QueueUrl=url, AWSAccountIds=[ACCOUNT_ID], Actions=["DeleteQueue"],
                           Label="owner")
    assert caught[0].response["Error"]["Message"] == (
        "Value SQS:DeleteQueue for parameter ActionName is invalid. Reason: Only the queue "
        "owner is allowed to invoke this action.")


# --------------------------------------------------------------------------- messages


def test_message_attribute_names_filters(sqs: Any, make_queue: QueueFactory) -> None:
    """MessageAttributeNames as AWS filters, with the MD5 of what is returned (recording,
    test_receive_message_message_attribute_names_filters: the MD5s are AWS's). Names that
    match none of the message's attributes give an empty map and no MD5 in JSON
    ("only_non_existing_names": `"MessageAttributes": {}`)."""
    url = make_queue(VisibilityTimeout=0)
    sqs.send_message(QueueUrl=url, MessageBody="msg", MessageAttributes={
        "Help.Me": {"DataType": "String", "StringValue": "Me"},
        "Hello": {"DataType": "String", "StringValue": "There"},
        "General": {"DataType": "String", "StringValue": "Kenobi"}})
    cases = {("All",): ({"General", "Hello", "Help.Me"}, "4c360f3fdafd970e05fae2f149d997f5"),
             ("*",): ({"General", "Hello", "Help.Me"}, "4c360f3fdafd970e05fae2f149d997f5"),
             (".*",): ({"General", "Hello", "Help.Me"}, "4c360f3fdafd970e05fae2f149d997f5"),
             ("Hello", "General"): ({"General", "Hello"}, "fca026605781cb4126a1e9044df24232"),
             ("Foo", "Hello"): ({"Hello"}, "a311262e065454b75da111d535b8dacd"),
             ("Hel.*",): ({"Hello", "Help.Me"}, "83fee93c1bcd8b9a5a923ffacdc636c7"),
             ("Foo", "Help"): (set(), None)}
    for names, (expected, md5) in cases.items():
        [message] = sqs.receive_message(QueueUrl=url, MessageAttributeNames=list(names),
                                        WaitTimeSeconds=1)["Messages"]
        assert set(message["MessageAttributes"]) == expected, names
        assert message.get("MD5OfMessageAttributes") == md5, names
    [bare] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert "MessageAttributes" not in bare  # none asked for ("empty_filter")


def test_non_ascii_attribute_names(sqs: Any, make_queue: QueueFactory) -> None:
    """Letters of any script are accepted, `§` and other punctuation are not (validated:
    test_send_message_with_invalid_string_attributes)."""
    url = make_queue()
    attributes = {"attr.1øßä": {"StringValue": "Valida", "DataType": "String"}}
    sent = sqs.send_message(QueueUrl=url, MessageBody="test", MessageAttributes=attributes)
    assert sent["MD5OfMessageAttributes"] == md5_of_attributes(attributes)
    [message] = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"],
                                    WaitTimeSeconds=1)["Messages"]
    assert message["MessageAttributes"] == attributes
    for char in ["!", '"', "§", "(", "?"]:
        with raises_sqs("InvalidParameterValue"):
            sqs.send_message(QueueUrl=url, MessageBody="test", MessageAttributes={
                f"Invalid-{char}-attr": {"StringValue": "Valid", "DataType": "String"}})


def test_batch_too_long_counts_attributes(strict_sqs: Any,
                                          make_strict_queue: QueueFactory) -> None:
    """Bodies and attributes together over the batch limit: BatchRequestTooLong (recording,
    test_send_message_batch_with_oversized_contents: a body 8 bytes under the limit with an
    8-byte attribute, plus a 1-byte body, "You have sent 262145 bytes." when the limit was
    262,144; since August 2025 it is 1 MiB, SQS Developer Guide, quotas)."""
    url = make_strict_queue()
    attributes = {"k": {"DataType": "String", "StringValue": "x"}}
    with raises_sqs("AWS.SimpleQueueService.BatchRequestTooLong") as caught:
        strict_sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": "1", "MessageBody": "a" * (MIB - 8), "MessageAttributes": attributes},
            {"Id": "2", "MessageBody": "a"}])
    assert caught[0].response["Error"] == {
        "Code": "AWS.SimpleQueueService.BatchRequestTooLong",
        "QueryErrorCode": "BatchRequestTooLong", "Type": "Sender",
        "Message": f"Batch requests cannot be longer than {MIB} bytes. You have sent "
                   f"{MIB + 1} bytes."}


def test_successful_batch_has_no_failed_list(raw: RawClient, make_queue: QueueFactory) -> None:
    """A batch that fully succeeds has no `Failed` in JSON (issue 21, from recent recordings
    of AWS; LocalStack's 14-11-2023 recording of
    test_send_message_batch_with_oversized_contents_with_updated_maximum_message_size still
    showed `"Failed": []`, so AWS changed this since)."""
    url = make_queue()
    body = raw.json_call("SendMessageBatch", {"QueueUrl": url, "Entries": [
        {"Id": "1", "MessageBody": "a"}, {"Id": "2", "MessageBody": "b"}]}).json()
    assert set(body) == {"Successful"} and len(body["Successful"]) == 2
    receipts = [m["ReceiptHandle"] for m in raw.json_call("ReceiveMessage", {
        "QueueUrl": url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1}).json()["Messages"]]
    body = raw.json_call("DeleteMessageBatch", {"QueueUrl": url, "Entries": [
        {"Id": str(i), "ReceiptHandle": r} for i, r in enumerate(receipts)]}).json()
    assert set(body) == {"Successful"}


def test_trace_header_becomes_aws_trace_header(raw: RawClient, make_queue: QueueFactory) -> None:
    """X-Amzn-Trace-Id on a send is every message's AWSTraceHeader; a message's own
    AWSTraceHeader wins (AWS X-Ray Developer Guide, "Amazon SQS and AWS X-Ray"). Its MD5 is
    that of the system attribute (recording of AWS's MD5 for one, 5ae4d5d7636402d80f4eb6d2
    13245a88, in the validated test_system_attributes_have_no_effect_on_attr_md5)."""
    url = make_queue()
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    header = {"X-Amzn-Trace-Id": trace}
    resp = raw.request("POST", "/", json.dumps({"QueueUrl": url, "MessageBody": "t"}).encode(),
                       {"Content-Type": "application/x-amz-json-1.0",
                        "X-Amz-Target": "AmazonSQS.SendMessage", **header})
    assert resp.json()["MD5OfMessageSystemAttributes"] == "5ae4d5d7636402d80f4eb6d213245a88"
    own = {"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=own"}}
    raw.extra_headers = header
    raw.json_call("SendMessageBatch", {"QueueUrl": url, "Entries": [
        {"Id": "a", "MessageBody": "a"}, {"Id": "b", "MessageBody": "b",
                                          "MessageSystemAttributes": own}]})
    raw.extra_headers = {}
    got = {}
    for _ in range(5):
        for m in raw.json_call("ReceiveMessage", {
                "QueueUrl": url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1,
                "MessageSystemAttributeNames": ["AWSTraceHeader"]}).json().get("Messages", []):
            got[m["Body"]] = m["Attributes"]["AWSTraceHeader"]
        if len(got) == 3:
            break
    assert got == {"t": trace, "a": trace, "b": "Root=own"}


# --------------------------------------------------------------------------- move tasks


def _dlq_with_messages(sqs: Any, make_queue: QueueFactory, n: int) -> tuple[str, str]:
    """(dead-letter queue URL, its ARN) holding `n` messages, source configured."""
    dlq = make_queue()
    dlq_arn = make_queue.arn_of(dlq)
    make_queue(RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}))
    for start in range(0, n, 10):
        sqs.send_message_batch(QueueUrl=dlq, Entries=[
            {"Id": str(i), "MessageBody": f"m{start + i}"} for i in range(min(10, n - start))])
    return dlq, dlq_arn


def _handle(task_id: str, source_arn: str) -> str:
    """A task handle in AWS's format (LocalStack's encode_move_task_handle, whose handles
    AWS took apart in the recordings below)."""
    return base64.b64encode(json.dumps({"taskId": task_id, "sourceArn": source_arn},
                                       separators=(",", ":")).encode()).decode()


def test_move_task_errors(sqs: Any, make_queue: QueueFactory) -> None:
    """Codes, statuses and messages as recorded (test_sqs_move_task.snapshot.json:
    test_cancel_with_invalid_task_handle, test_cancel_with_invalid_source_arn_in_task_handle,
    test_cancel_with_invalid_task_id_in_task_handle, test_source_needs_redrive_policy,
    test_destination_needs_to_exist, test_start_multiple_move_tasks)."""
    cases = [
        (lambda: sqs.cancel_message_move_task(TaskHandle="foobared"),
         "InvalidParameterValue", 400, "Value for parameter TaskHandle is invalid."),
        (lambda: sqs.cancel_message_move_task(TaskHandle=_handle(
            "10f57157-fc38-4da9-a113-4de7e12d05dd",
            "arn:aws:sqs:us-east-1:878966065785:test-queue-doesnt-exist-123456")),
         "ResourceNotFoundException", 404,
         "The resource that you specified for the SourceArn parameter doesn't exist."),
        (lambda: sqs.cancel_message_move_task(TaskHandle=_handle(
            "10f57157-fc38-4da9-a113-4de7e12d05aa", make_queue.arn_of(make_queue()))),
         "ResourceNotFoundException", 404, "Task does not exist."),
        (lambda: sqs.start_message_move_task(SourceArn=make_queue.arn_of(make_queue()),
                                             DestinationArn=make_queue.arn_of(make_queue())),
         "InvalidParameterValue", 400, "Source queue must be configured as a Dead Letter Queue."),
    ]
    for call, code, status, message in cases:
        with raises_sqs(code, status) as caught:
            call()
        assert caught[0].response["Error"]["Message"] == message
    dlq, dlq_arn = _dlq_with_messages(sqs, make_queue, 3)
    with raises_sqs("ResourceNotFoundException", 404) as caught:
        sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=make_queue.arn_of(
            make_queue()) + "doesntexist")
    assert caught[0].response["Error"]["Message"] == (
        "The resource that you specified for the DestinationArn parameter doesn't exist.")
    destination = make_queue.arn_of(make_queue())
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=destination,
                                MaxNumberOfMessagesPerSecond=1)
    with raises_sqs("InvalidParameterValue", 400) as caught:
        sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=destination,
                                    MaxNumberOfMessagesPerSecond=1)
    assert caught[0].response["Error"]["Message"] == (
        "There is already a task running. Only one active task is allowed for a source queue "
        "arn at a given time.")


def _count(sqs: Any, url: str) -> int:
    return int(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages"])["Attributes"]["ApproximateNumberOfMessages"])


def _ended(sqs: Any, source_arn: str) -> dict | None:
    """The source's latest task once it is no longer RUNNING."""
    [task] = sqs.list_message_move_tasks(SourceArn=source_arn)["Results"]
    return task if task["Status"] != "RUNNING" else None


def test_move_task_with_a_rate_moves_everything_and_completes(sqs: Any,
                                                              make_queue: QueueFactory) -> None:
    """With MaxNumberOfMessagesPerSecond=1 the task moves all 4 and ends COMPLETED with
    that count (validated: test_move_task_with_throughput_limit). The rate itself (no less
    than 3 s for 4) is counted per step of a moved clock in tests/service/test_move_rate.py."""
    dlq, dlq_arn = _dlq_with_messages(sqs, make_queue, 4)
    dest = make_queue()
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=make_queue.arn_of(dest),
                                MaxNumberOfMessagesPerSecond=1)
    wait_for(lambda: _count(sqs, dest) == 4, timeout_s=30, what="4 moved")
    task = wait_for(lambda: _ended(sqs, dlq_arn), timeout_s=30, what="completed")
    assert (task["Status"], task["ApproximateNumberOfMessagesMoved"]) == ("COMPLETED", 4)


def test_move_task_cancel_counts_exactly(sqs: Any, make_queue: QueueFactory) -> None:
    """After a cancel, CANCELLED with the count of what arrived, the rest left in the DLQ
    (recording, test_move_task_cancel: rate 1, cancelled after two arrived)."""
    dlq, dlq_arn = _dlq_with_messages(sqs, make_queue, 10)
    dest = make_queue()
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=make_queue.arn_of(
        dest), MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    wait_for(lambda: _count(sqs, dest) >= 2, timeout_s=30, what="2 moved")
    [running] = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
    assert (running["Status"], running["TaskHandle"], running["MaxNumberOfMessagesPerSecond"],
            running["ApproximateNumberOfMessagesToMove"]) == ("RUNNING", handle, 1, 10)
    cancelled = sqs.cancel_message_move_task(TaskHandle=handle)
    [task] = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
    moved = _count(sqs, dest)
    assert task["Status"] == "CANCELLED" and "TaskHandle" not in task
    assert task["ApproximateNumberOfMessagesMoved"] == cancelled[
        "ApproximateNumberOfMessagesMoved"] == moved
    assert _count(sqs, dlq) == 10 - moved


def test_move_task_destination_deleted(sqs: Any, make_queue: QueueFactory) -> None:
    """The destination deleted mid-task: FAILED, FailureReason
    AWS.SimpleQueueService.NonExistentQueue, the messages not moved still in the DLQ
    (recording, test_move_task_delete_destination_queue_while_running)."""
    dlq, dlq_arn = _dlq_with_messages(sqs, make_queue, 10)
    dest = make_queue()
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=make_queue.arn_of(dest),
                                MaxNumberOfMessagesPerSecond=1)
    wait_for(lambda: _count(sqs, dest) >= 1, timeout_s=30, what="1 moved")
    sqs.delete_queue(QueueUrl=dest)
    task = wait_for(lambda: _ended(sqs, dlq_arn), timeout_s=30, what="task ended")
    assert (task["Status"], task["FailureReason"]) == (
        "FAILED", "AWS.SimpleQueueService.NonExistentQueue")
    assert task["ApproximateNumberOfMessagesMoved"] == 10 - _count(sqs, dlq)
    assert 1 <= task["ApproximateNumberOfMessagesMoved"] < 10


def test_query_error_shape_has_type(raw: RawClient) -> None:
    """<Type>Sender</Type> in a Query error (validated: test_invalid_action_raises_exception)."""
    root = strip_ns(raw.query({"Action": "FooBar"}).xml())
    assert root.findtext("Error/Type") == "Sender"


@pytest.mark.parametrize(("params", "expected"), [
    # LocalStack's AWS-validated TestMissingParameter.test_sqs_create_queue
    ({"Action": "CreateQueue", "FooBar": "baz"},
     (400, "Sender", "InvalidParameterValue",
      "Value for parameter QueueName is invalid. Reason: Must specify a queue name.")),
    # LocalStack's AWS-validated TestMissingParameter.test_sqs_send_message
    ({"Action": "SetQueueAttributes", "Version": "2012-11-05", "QueueUrl": "{url}"},
     (400, "Sender", "MissingParameter",
      "The request must contain the parameter Attribute.Name.")),
    # yavosh/pail's recording (JSON) of "delete-garbage-handle": the same status and code
    # in Query (the wording is not recorded)
    ({"Action": "DeleteMessage", "QueueUrl": "{url}", "ReceiptHandle": "garbage"},
     (404, "Sender", "ReceiptHandleIsInvalid", None)),
], ids=["create-without-name", "set-without-attributes", "garbage-handle"])
def test_query_errors_as_validated(raw: RawClient, make_queue: QueueFactory,
                                   params: dict[str, str], expected: tuple) -> None:
    """Query-protocol errors as AWS answers them (the sources beside each case)."""
    url = make_queue()
    resp = raw.query({k: v.replace("{url}", url) for k, v in params.items()})
    status, fault, code, message = _query_error(resp)
    assert (status, fault, code, message if expected[3] else None) == expected
