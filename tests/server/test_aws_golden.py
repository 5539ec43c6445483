"""JSON-protocol exchanges as AWS answered them in a third set of public recordings.

yavosh/pail keeps golden files of requests it sent to real SQS (test/diff/testdata/golden/
sqs-*.json, made by the scenarios of test/diff/sqs_sns_test.go): for each step the HTTP
status, the x-amzn-query-error header and the whole `__type`, and the body's keys. Each
test below replays one scenario's steps, named as there, against a Conveyor server.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.server.conftest import Launcher, QueueFactory
from tests.server.helpers import RawClient, RawResponse, unique
from tests.server.test_auth import ACCESS_KEY, SECRET_KEY
from tests.support import ServerProcess

SQS, CORAL = "com.amazonaws.sqs#", "com.amazon.coral.service#"


def _error(resp: RawResponse) -> tuple[int, str, str]:
    return resp.status, resp.json()["__type"], resp.header("x-amzn-query-error") or ""


def _invalid_value() -> tuple[int, str, str]:
    return 400, CORAL + "InvalidParameterValueException", "InvalidParameterValue;Sender"


ERROR_STEPS: dict[str, tuple[str, dict[str, Any], tuple[int, str, str]]] = {
    "create-queue-conflict": ("CreateQueue", {"QueueName": "{name}",
                                              "Attributes": {"VisibilityTimeout": "60"}},
                              (400, SQS + "QueueNameExists", "QueueAlreadyExists;Sender")),
    "create-invalid-name": ("CreateQueue", {"QueueName": "{name} bad"}, _invalid_value()),
    "get-attributes-invalid-name": ("GetQueueAttributes", {"AttributeNames": ["Bogus"]},
                                    (400, SQS + "InvalidAttributeName",
                                     "InvalidAttributeName;Sender")),
    "set-attributes-invalid-value": ("SetQueueAttributes",
                                     {"Attributes": {"VisibilityTimeout": "99999"}},
                                     (400, SQS + "InvalidAttributeValue",
                                      "InvalidAttributeValue;Sender")),
    "set-attributes-unknown": ("SetQueueAttributes", {"Attributes": {"Bogus": "1"}},
                               (400, SQS + "InvalidAttributeName", "InvalidAttributeName;Sender")),
    "send-too-long": ("SendMessage", {"MessageBody": "x" * 1025}, _invalid_value()),
    "send-invalid-chars": ("SendMessage", {"MessageBody": "\0"},
                           (400, SQS + "InvalidMessageContents", "InvalidMessageContents;Sender")),
    "send-empty-body": ("SendMessage", {"MessageBody": ""},
                        (400, CORAL + "MissingRequiredParameterException",
                         "MissingParameter;Sender")),
    "receive-max-11": ("ReceiveMessage", {"MaxNumberOfMessages": 11}, _invalid_value()),
    "receive-wait-21": ("ReceiveMessage", {"WaitTimeSeconds": 21}, _invalid_value()),
    "get-queue-url-missing-name": ("GetQueueUrl", {}, _invalid_value()),
    "unknown-operation": ("Bogus", {}, (400, CORAL + "UnknownOperationException",
                                        "InvalidAction;Sender")),
    "delete-garbage-handle": ("DeleteMessage", {"ReceiptHandle": "garbage"},
                              (404, SQS + "ReceiptHandleIsInvalid",
                               "ReceiptHandleIsInvalid;Sender")),
    # sqs-edge-cases.json
    "send-missing-queue-url": ("SendMessage", {"QueueUrl": None, "MessageBody": "x"},
                               (400, SQS + "QueueDoesNotExist",
                                "AWS.SimpleQueueService.NonExistentQueue;Sender")),
    "delete-missing-receipt-handle": ("DeleteMessage", {},
                                      (400, CORAL + "MissingRequiredParameterException",
                                       "MissingParameter;Sender")),
    "change-visibility-missing-timeout": ("ChangeMessageVisibility", {"ReceiptHandle": "garbage"},
                                          (400, CORAL + "MissingRequiredParameterException",
                                           "MissingParameter;Sender")),
    "send-dedup-id-standard": ("SendMessage", {"MessageBody": "x", "MessageDeduplicationId": "d"},
                               _invalid_value()),
    "send-string-list-values": ("SendMessage", {"MessageBody": "x", "MessageAttributes": {
        "a": {"DataType": "String", "StringListValues": ["v"]}}},
        (400, SQS + "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation;Sender")),
    "send-binary-list-values": ("SendMessage", {"MessageBody": "x", "MessageAttributes": {
        "a": {"DataType": "Binary", "BinaryListValues": ["AQID"]}}},
        (400, SQS + "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation;Sender")),
    "set-fifo-false-standard": ("SetQueueAttributes", {"Attributes": {"FifoQueue": "false"}},
                                (400, SQS + "InvalidAttributeName", "InvalidAttributeName;Sender")),
    "create-fifo-false-standard": ("CreateQueue", {"QueueName": "{name}-std",
                                                   "Attributes": {"FifoQueue": "false"}},
                                   (400, SQS + "InvalidAttributeName",
                                    "InvalidAttributeName;Sender")),
    "allow-by-queue-no-arns": ("SetQueueAttributes", {"Attributes": {
        "RedriveAllowPolicy": '{"redrivePermission":"byQueue"}'}}, _invalid_value()),
    "allow-all-with-arns": ("SetQueueAttributes", {"Attributes": {
        "RedriveAllowPolicy": '{"redrivePermission":"allowAll","sourceQueueArns":["{arn}"]}'}},
        _invalid_value()),
}


@pytest.mark.parametrize("step", list(ERROR_STEPS))
def test_errors(raw: RawClient, step: str) -> None:
    """Status, `__type` and x-amzn-query-error of each refused step (sqs-errors.json,
    sqs-visibility.json and sqs-edge-cases.json: the step of the same name; the queue's
    MaximumMessageSize is 1024, as the scenario's "set-max-size" makes it)."""
    name = unique("golden")
    url = raw.json_call("CreateQueue", {"QueueName": name, "Attributes": {
        "VisibilityTimeout": "30", "MaximumMessageSize": "1024"}}).json()["QueueUrl"]
    action, payload, expected = ERROR_STEPS[step]
    text = json.dumps(payload).replace("{name}", name).replace("{arn}", _arn(raw, url))
    payload = {"QueueUrl": url, **json.loads(text)}
    if "QueueName" in payload or action in ("GetQueueUrl", "Bogus") or not payload["QueueUrl"]:
        del payload["QueueUrl"]
    assert _error(raw.json_call(action, payload)) == expected


def _arn(raw: RawClient, url: str) -> str:
    return raw.json_call("GetQueueAttributes", {"QueueUrl": url, "AttributeNames": [
        "QueueArn"]}).json()["Attributes"]["QueueArn"]


@pytest.mark.parametrize("body", [b"{", b"[]", b'"x"'])
def test_malformed_json(raw: RawClient, body: bytes) -> None:
    """A body that is not JSON, or not a JSON object (sqs-errors.json, "malformed-json";
    sqs-edge-cases.json, "body-array", "body-string")."""
    resp = raw.json_call("GetQueueUrl", raw_body=body)
    assert _error(resp) == (400, CORAL + "SerializationException", "MalformedInput;Sender")


def test_redrive_to_itself_and_allow_by_queue(raw: RawClient, make_queue: QueueFactory) -> None:
    """A queue may be its own dead-letter queue, and allow itself by ARN
    (sqs-edge-cases.json, "redrive-to-self", "allow-by-queue", "get-allow-by-queue")."""
    url = make_queue()
    arn = _arn(raw, url)
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 1})
    allow = {"redrivePermission": "byQueue", "sourceQueueArns": [arn]}
    for attributes in ({"RedrivePolicy": policy}, {"RedriveAllowPolicy": json.dumps(allow)}):
        resp = raw.json_call("SetQueueAttributes", {"QueueUrl": url, "Attributes": attributes})
        assert (resp.status, resp.json()) == (200, {})
    got = raw.json_call("GetQueueAttributes", {"QueueUrl": url, "AttributeNames": [
        "RedriveAllowPolicy"]}).json()["Attributes"]["RedriveAllowPolicy"]
    assert json.loads(got) == allow


def test_queue_life_and_tags(raw: RawClient) -> None:
    """The same CreateQueue twice, a MessageGroupId on a standard queue (a fair queue's),
    and tags: ListQueueTags of a queue without tags is `{}` (sqs-errors.json,
    "create-queue-same", "send-fifo-field-standard-queue", "list-queue-tags-empty")."""
    create = {"QueueName": unique("golden"), "Attributes": {"VisibilityTimeout": "30"}}
    url = raw.json_call("CreateQueue", create).json()["QueueUrl"]
    assert raw.json_call("CreateQueue", create).json() == {"QueueUrl": url}
    sent = raw.json_call("SendMessage", {"QueueUrl": url, "MessageBody": "x",
                                         "MessageGroupId": "g"})
    assert sent.status == 200 and set(sent.json()) == {"MD5OfMessageBody", "MessageId"}
    assert raw.json_call("TagQueue", {"QueueUrl": url, "Tags": {"env": "test"}}).json() == {}
    assert raw.json_call("ListQueueTags", {"QueueUrl": url}).json() == {"Tags": {"env": "test"}}
    assert raw.json_call("UntagQueue", {"QueueUrl": url, "TagKeys": ["env"]}).json() == {}
    assert raw.json_call("ListQueueTags", {"QueueUrl": url}).json() == {}


def test_visibility(raw: RawClient, make_queue: QueueFactory) -> None:
    """sqs-visibility.json: a handle changed to 0 and then, the message not received
    again, to 10 s: both 200, and the message is hidden again; deleting twice is 200."""
    url = make_queue()
    raw.json_call("SendMessage", {"QueueUrl": url, "MessageBody": "hello"})
    [message] = raw.json_call("ReceiveMessage", {"QueueUrl": url, "VisibilityTimeout": 30,
                                                 "WaitTimeSeconds": 5}).json()["Messages"]
    assert set(message) == {"Body", "MD5OfBody", "MessageId", "ReceiptHandle"}
    assert raw.json_call("ReceiveMessage", {"QueueUrl": url}).json() == {}
    handle = {"QueueUrl": url, "ReceiptHandle": message["ReceiptHandle"]}
    for seconds in (0, 10):
        resp = raw.json_call("ChangeMessageVisibility", {**handle, "VisibilityTimeout": seconds})
        assert (resp.status, resp.json()) == (200, {})
    assert raw.json_call("ReceiveMessage", {"QueueUrl": url, "WaitTimeSeconds": 1}).json() == {}
    counts = raw.json_call("GetQueueAttributes", {"QueueUrl": url, "AttributeNames": [
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]}).json()
    assert counts == {"Attributes": {"ApproximateNumberOfMessages": "0",
                                     "ApproximateNumberOfMessagesNotVisible": "1"}}
    for _ in range(2):
        assert raw.json_call("DeleteMessage", handle).status == 200


def test_batches(raw: RawClient, make_queue: QueueFactory) -> None:
    """sqs-batches.json: a NUL body fails its entry alone; a MessageGroupId on a standard
    queue is taken; a garbage handle fails its entry of a visibility or delete batch with
    ReceiptHandleIsInvalid, SenderFault true."""
    url = make_queue()
    body = raw.json_call("SendMessageBatch", {"QueueUrl": url, "Entries": [
        {"Id": "ok", "MessageBody": "fine"}, {"Id": "bad", "MessageBody": "\0"}]}).json()
    assert [e["Id"] for e in body["Successful"]] == ["ok"]
    assert [(f["Id"], f["Code"], f["SenderFault"]) for f in body["Failed"]] == [
        ("bad", "InvalidMessageContents", True)]
    body = raw.json_call("SendMessageBatch", {"QueueUrl": url, "Entries": [
        {"Id": "ok", "MessageBody": "fine"},
        {"Id": "fifo", "MessageBody": "fine", "MessageGroupId": "g"}]}).json()
    assert set(body) == {"Successful"} and [e["Id"] for e in body["Successful"]] == ["ok", "fifo"]
    [message] = raw.json_call("ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 1,
                                                 "WaitTimeSeconds": 5}).json()["Messages"]
    for action, extra in (("ChangeMessageVisibilityBatch", {"VisibilityTimeout": 0}),
                          ("DeleteMessageBatch", {})):
        body = raw.json_call(action, {"QueueUrl": url, "Entries": [
            {"Id": "x", "ReceiptHandle": message["ReceiptHandle"], **extra},
            {"Id": "y", "ReceiptHandle": "garbage", **extra}]}).json()
        assert body["Successful"] == [{"Id": "x"}]
        assert [(f["Id"], f["Code"], f["SenderFault"]) for f in body["Failed"]] == [
            ("y", "ReceiptHandleIsInvalid", True)]


def test_dead_letters(raw: RawClient, make_queue: QueueFactory) -> None:
    """sqs-dead-letter.json: redrive policies refused with InvalidParameterValue (a FIFO
    dead-letter queue for a standard source, a maxReceiveCount of 0, a target that does not
    exist, a target whose RedriveAllowPolicy denies all); a message received once with
    maxReceiveCount 1 moves at the next receive, and the dead-letter queue's first receive
    shows ApproximateReceiveCount 2 and the source's ARN."""
    name = unique("golden")
    dlq = raw.json_call("CreateQueue", {"QueueName": name + "-dlq"}).json()["QueueUrl"]
    fifo_dlq = make_queue(fifo=True)
    arn_of = {url: raw.json_call("GetQueueAttributes", {"QueueUrl": url, "AttributeNames": [
        "QueueArn"]}).json()["Attributes"]["QueueArn"] for url in (dlq, fifo_dlq)}

    def create_source(target: str, count: int) -> RawResponse:
        return raw.json_call("CreateQueue", {"QueueName": name, "Attributes": {
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": target,
                                         "maxReceiveCount": count})}})

    assert _error(create_source(arn_of[fifo_dlq], 1)) == _invalid_value()
    assert _error(create_source(arn_of[dlq], 0)) == _invalid_value()
    assert _error(create_source(arn_of[dlq] + "-nope", 1)) == _invalid_value()
    raw.json_call("SetQueueAttributes", {"QueueUrl": dlq, "Attributes": {
        "RedriveAllowPolicy": json.dumps({"redrivePermission": "denyAll"})}})
    assert _error(create_source(arn_of[dlq], 1)) == _invalid_value()
    raw.json_call("SetQueueAttributes", {"QueueUrl": dlq, "Attributes": {
        "RedriveAllowPolicy": json.dumps({"redrivePermission": "allowAll"})}})
    source = create_source(arn_of[dlq], 1).json()["QueueUrl"]
    raw.json_call("SendMessage", {"QueueUrl": source, "MessageBody": "poison"})
    receive = {"MessageSystemAttributeNames": ["All"], "VisibilityTimeout": 0,
               "WaitTimeSeconds": 1}
    [once] = raw.json_call("ReceiveMessage", {"QueueUrl": source, **receive}).json()["Messages"]
    assert once["Attributes"]["ApproximateReceiveCount"] == "1"
    assert raw.json_call("ReceiveMessage", {"QueueUrl": source, **receive}).json() == {}
    [moved] = raw.json_call("ReceiveMessage", {"QueueUrl": dlq, **receive}).json()["Messages"]
    assert moved["Body"] == "poison"
    assert moved["Attributes"]["ApproximateReceiveCount"] == "2"
    assert moved["Attributes"]["DeadLetterQueueSourceArn"] == arn_of[dlq][:-4]


@pytest.fixture(scope="module")
def keyed(launch: Launcher) -> ServerProcess:
    """A server that takes only requests signed with the authentication tests' key."""
    return launch("--mode", "relaxed", "--access-key", f"{ACCESS_KEY}:{SECRET_KEY}")


@pytest.mark.parametrize(("key", "secret", "sign", "expected"), [
    (None, None, False, (403, CORAL + "AccessDeniedException", "AccessDenied;Sender")),
    ("AKIDUNKNOWN", SECRET_KEY, True,
     (403, CORAL + "UnrecognizedClientException", "InvalidClientTokenId;Sender")),
    (ACCESS_KEY, "wrong", True,
     (403, CORAL + "InvalidSignatureException", "SignatureDoesNotMatch;Sender")),
], ids=["no-credentials", "unknown-key", "bad-signature"])
def test_auth_errors(keyed: ServerProcess, key: str | None, secret: str | None, sign: bool,
                     expected: tuple[int, str, str]) -> None:
    """sqs-auth-errors.json: a ListQueues without credentials, with a key AWS does not
    know, and with a wrong signature."""
    raw = RawClient(keyed.url, access_key=key or ACCESS_KEY, secret_key=secret or SECRET_KEY)
    assert _error(raw.json_call("ListQueues", {"QueueNamePrefix": "x"}, sign=sign)) == expected


def test_incomplete_signature(keyed: ServerProcess) -> None:
    """An Authorization header with nothing but a bogus Credential (sqs-edge-cases.json,
    "incomplete-signature")."""
    resp = RawClient(keyed.url).request("POST", "/", b'{"QueueNamePrefix":"x"}', {
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues",
        "Authorization": "AWS4-HMAC-SHA256 Credential=bogus"}, sign=False)
    assert _error(resp) == (400, CORAL + "IncompleteSignatureException",
                            "IncompleteSignature;Sender")


def test_message_attributes(raw: RawClient, make_queue: QueueFactory) -> None:
    """sqs-message-attributes.json: AWS's MD5s of three attributes (String, Number,
    Binary) and of the one a filter by name or by prefix keeps; a standard queue's system
    attributes under "All"; no attributes when none are asked for."""
    url = make_queue()
    sent = raw.json_call("SendMessage", {"QueueUrl": url, "MessageBody": "hello",
                                         "MessageAttributes": {
        "color": {"DataType": "String", "StringValue": "blue"},
        "count": {"DataType": "Number", "StringValue": "3"},
        "blob": {"DataType": "Binary", "BinaryValue": "AQID"}}}).json()
    assert sent["MD5OfMessageAttributes"] == "d838729972a4b70e2d2acd9d59ac847c"
    receive = {"QueueUrl": url, "WaitTimeSeconds": 5, "VisibilityTimeout": 0}
    [every] = raw.json_call("ReceiveMessage", {
        **receive, "MaxNumberOfMessages": 1, "MessageAttributeNames": ["All"],
        "MessageSystemAttributeNames": ["All"]}).json()["Messages"]
    assert every["MD5OfMessageAttributes"] == "d838729972a4b70e2d2acd9d59ac847c"
    assert every["MessageAttributes"]["blob"] == {"DataType": "Binary", "BinaryValue": "AQID"}
    assert set(every["Attributes"]) == {"ApproximateFirstReceiveTimestamp",
                                        "ApproximateReceiveCount", "SenderId", "SentTimestamp"}
    for names in (["color"], ["col.*"]):
        [some] = raw.json_call("ReceiveMessage", {
            **receive, "MessageAttributeNames": names}).json()["Messages"]
        assert some["MD5OfMessageAttributes"] == "da1b33cc3cbfe8b1630921e78e6b9880"
        assert some["MessageAttributes"] == {"color": {"DataType": "String",
                                                       "StringValue": "blue"}}
    [bare] = raw.json_call("ReceiveMessage", receive).json()["Messages"]
    assert set(bare) == {"Body", "MD5OfBody", "MessageId", "ReceiptHandle"}


def test_fifo(raw: RawClient) -> None:
    """sqs-fifo.json: a new FIFO queue's attributes (SQS-managed encryption on), its
    refusals (FifoQueue changed, FifoQueue on a name without .fifo, .fifo without
    FifoQueue, no group, no deduplication id, a per-message delay), a duplicate answered
    with the first's id, a group held while its head is in flight, and content-based
    deduplication's id: the SHA-256 of the body."""
    name = unique("golden")
    url = raw.json_call("CreateQueue", {"QueueName": name + ".fifo",
                                        "Attributes": {"FifoQueue": "true"}}).json()["QueueUrl"]
    attributes = raw.json_call("GetQueueAttributes", {"QueueUrl": url, "AttributeNames": [
        "All"]}).json()["Attributes"]
    assert {k: v for k, v in attributes.items() if not k.endswith("Timestamp")} == {
        "ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesDelayed": "0",
        "ApproximateNumberOfMessagesNotVisible": "0", "ContentBasedDeduplication": "false",
        "DeduplicationScope": "queue", "DelaySeconds": "0", "FifoQueue": "true",
        "FifoThroughputLimit": "perQueue", "MaximumMessageSize": "1048576",
        "MessageRetentionPeriod": "345600", "QueueArn": _arn(raw, url),
        "ReceiveMessageWaitTimeSeconds": "0", "SqsManagedSseEnabled": "true",
        "VisibilityTimeout": "30"}
    assert _error(raw.json_call("SetQueueAttributes", {"QueueUrl": url, "Attributes": {
        "FifoQueue": "false"}})) == (400, SQS + "InvalidAttributeValue",
                                     "InvalidAttributeValue;Sender")
    for create in ({"QueueName": name + "-std", "Attributes": {"FifoQueue": "true"}},
                   {"QueueName": name + "-noattr.fifo"}):
        assert _error(raw.json_call("CreateQueue", create)) == _invalid_value()

    def send(**fields: Any) -> RawResponse:
        return raw.json_call("SendMessage", {"QueueUrl": url, **fields})

    assert _error(send(MessageBody="x", MessageDeduplicationId="d0")) == (
        400, CORAL + "MissingRequiredParameterException", "MissingParameter;Sender")
    assert _error(send(MessageBody="x", MessageGroupId="a")) == _invalid_value()
    assert _error(send(MessageBody="x", MessageGroupId="a", MessageDeduplicationId="d0",
                       DelaySeconds=5)) == _invalid_value()
    first = send(MessageBody="a1", MessageGroupId="a", MessageDeduplicationId="1").json()
    assert send(MessageBody="a1", MessageGroupId="a", MessageDeduplicationId="1").json() == first
    send(MessageBody="a2", MessageGroupId="a", MessageDeduplicationId="2")
    receive = {"QueueUrl": url, "MaxNumberOfMessages": 1, "WaitTimeSeconds": 5}
    [a1] = raw.json_call("ReceiveMessage", {**receive, "MessageSystemAttributeNames": [
        "All"]}).json()["Messages"]
    assert a1["Body"] == "a1"
    assert set(a1["Attributes"]) == {
        "ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount", "MessageDeduplicationId",
        "MessageGroupId", "SenderId", "SentTimestamp", "SequenceNumber"}
    assert raw.json_call("ReceiveMessage", {"QueueUrl": url}).json() == {}
    raw.json_call("DeleteMessage", {"QueueUrl": url, "ReceiptHandle": a1["ReceiptHandle"]})
    [a2] = raw.json_call("ReceiveMessage", receive).json()["Messages"]
    assert a2["Body"] == "a2"
    cbd = raw.json_call("CreateQueue", {"QueueName": name + "-cbd.fifo", "Attributes": {
        "FifoQueue": "true", "ContentBasedDeduplication": "true"}}).json()["QueueUrl"]
    for _ in range(2):
        raw.json_call("SendMessage", {"QueueUrl": cbd, "MessageBody": "same",
                                      "MessageGroupId": "g"})
    [same] = raw.json_call("ReceiveMessage", {
        "QueueUrl": cbd, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 5,
        "MessageSystemAttributeNames": ["MessageDeduplicationId"]}).json()["Messages"]
    assert same["Attributes"] == {"MessageDeduplicationId": (
        "0967115f2813a3541eaef77de9d9d5773f1c0c04314b0bbfe4ff3b3b1c55b5d5")}


def test_fair_queue(raw: RawClient, make_queue: QueueFactory) -> None:
    """sqs-fair-queue.json: a standard queue refuses FIFO attributes and deduplication
    ids but keeps a MessageGroupId and returns it among "All" system attributes."""
    url = make_queue()
    assert _error(raw.json_call("SetQueueAttributes", {"QueueUrl": url, "Attributes": {
        "ContentBasedDeduplication": "true"}})) == (400, SQS + "InvalidAttributeName",
                                                    "InvalidAttributeName;Sender")
    assert _error(raw.json_call("SendMessage", {"QueueUrl": url, "MessageBody": "x",
                                                "MessageDeduplicationId": "d1"})) == (
        _invalid_value())
    raw.json_call("SendMessage", {"QueueUrl": url, "MessageBody": "tenant",
                                  "MessageGroupId": "tenant-a"})
    [message] = raw.json_call("ReceiveMessage", {"QueueUrl": url, "WaitTimeSeconds": 5,
                                                 "MessageSystemAttributeNames": ["All"]}
                              ).json()["Messages"]
    assert message["Attributes"]["MessageGroupId"] == "tenant-a"
    assert set(message["Attributes"]) == {"ApproximateFirstReceiveTimestamp",
                                          "ApproximateReceiveCount", "MessageGroupId",
                                          "SenderId", "SentTimestamp"}


def test_queue_basics(raw: RawClient) -> None:
    """sqs-queue-basics.json: a new standard queue's attributes (SQS-managed encryption
    on), a received message's keys, an unknown name, ListQueues by prefix."""
    name = unique("golden")
    url = raw.json_call("CreateQueue", {"QueueName": name}).json()["QueueUrl"]
    assert raw.json_call("GetQueueUrl", {"QueueName": name}).json() == {"QueueUrl": url}
    attributes = raw.json_call("GetQueueAttributes", {"QueueUrl": url, "AttributeNames": [
        "All"]}).json()["Attributes"]
    assert {k: v for k, v in attributes.items() if not k.endswith("Timestamp")} == {
        "ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesDelayed": "0",
        "ApproximateNumberOfMessagesNotVisible": "0", "DelaySeconds": "0",
        "MaximumMessageSize": "1048576", "MessageRetentionPeriod": "345600",
        "QueueArn": _arn(raw, url), "ReceiveMessageWaitTimeSeconds": "0",
        "SqsManagedSseEnabled": "true", "VisibilityTimeout": "30"}
    assert attributes["CreatedTimestamp"].isdigit()
    assert attributes["LastModifiedTimestamp"].isdigit()
    raw.json_call("SendMessage", {"QueueUrl": url, "MessageBody": "hello"})
    [message] = raw.json_call("ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 1,
                                                 "WaitTimeSeconds": 5}).json()["Messages"]
    assert message["MD5OfBody"] == "5d41402abc4b2a76b9719d911017c592"
    assert set(message) == {"Body", "MD5OfBody", "MessageId", "ReceiptHandle"}
    assert _error(raw.json_call("GetQueueUrl", {"QueueName": name + "-missing"})) == (
        400, SQS + "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue;Sender")
    assert raw.json_call("ListQueues", {"QueueNamePrefix": name}).json() == {"QueueUrls": [url]}
