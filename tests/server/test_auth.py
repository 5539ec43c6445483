"""SigV4 authentication against configured access keys."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from conveyor.server import sigv4
from conveyor.sqs.errors import IncompleteSignature
from tests.server.conftest import Launcher
from tests.server.helpers import (
    JSON_CONTENT_TYPE,
    RawClient,
    arn,
    assert_json_error,
    assert_query_error,
    raises_sqs,
    unique,
)
from tests.support import ServerProcess

ACCESS_KEY = "AKIDCONVEYORTEST"
SECRET_KEY = "s3cr3t/with+chars"
AUTH_FAILURES = {"MissingAuthenticationToken", "InvalidClientTokenId", "SignatureDoesNotMatch",
                 "IncompleteSignature", "AccessDenied", "MissingAuthenticationTokenException"}


@pytest.fixture(scope="module")
def secured(launch: Launcher) -> ServerProcess:
    return launch("--mode", "relaxed", "--access-key", f"{ACCESS_KEY}:{SECRET_KEY}")


def _client(server: ServerProcess, key: str = ACCESS_KEY, secret: str = SECRET_KEY,
            region: str = "us-east-1") -> Any:
    return boto3.client("sqs", endpoint_url=server.url, region_name=region,
                        aws_access_key_id=key, aws_secret_access_key=secret,
                        config=Config(retries={"max_attempts": 1}))


def test_right_credentials_work(secured: ServerProcess) -> None:
    sqs = _client(secured)
    url = sqs.create_queue(QueueName=unique())["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="signed")
    msgs = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert [m["Body"] for m in msgs] == ["signed"]


def test_wrong_secret(secured: ServerProcess) -> None:
    with raises_sqs("SignatureDoesNotMatch", 403):
        _client(secured, secret="wrong").list_queues()


def test_unknown_access_key(secured: ServerProcess) -> None:
    with raises_sqs("InvalidClientTokenId", 403):
        _client(secured, key="AKIDUNKNOWN").list_queues()


def test_rejected_request_changes_nothing(secured: ServerProcess) -> None:
    name = unique()
    with raises_sqs("SignatureDoesNotMatch", 403):
        _client(secured, secret="wrong").create_queue(QueueName=name)
    with raises_sqs("AWS.SimpleQueueService.NonExistentQueue"):
        _client(secured).get_queue_url(QueueName=name)


def test_unsigned_request(secured: ServerProcess) -> None:
    raw = RawClient(secured.url)
    resp = raw.json_call("ListQueues", {}, sign=False)
    assert_json_error(resp, AUTH_FAILURES, 403)


def test_tampered_body(secured: ServerProcess) -> None:
    raw = RawClient(secured.url, access_key=ACCESS_KEY, secret_key=SECRET_KEY)
    signed_body = json.dumps({"QueueName": unique()}).encode()
    req = AWSRequest(method="POST", url=secured.url + "/", data=signed_body, headers={
        "Content-Type": JSON_CONTENT_TYPE, "X-Amz-Target": "AmazonSQS.CreateQueue"})
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "sqs", "us-east-1").add_auth(req)
    headers = dict(req.headers.items())
    evil = json.dumps({"QueueName": unique("evil")}).encode()
    resp = raw.request("POST", "/", evil, headers, sign=False)
    assert_json_error(resp, "SignatureDoesNotMatch", 403)


def test_query_protocol_is_authenticated(secured: ServerProcess) -> None:
    bad = RawClient(secured.url, access_key=ACCESS_KEY, secret_key="wrong")
    assert_query_error(bad.query({"Action": "ListQueues"}), "SignatureDoesNotMatch", 403)
    good = RawClient(secured.url, access_key=ACCESS_KEY, secret_key=SECRET_KEY)
    assert good.query({"Action": "ListQueues"}).status == 200


def test_region_comes_from_credential_scope(secured: ServerProcess) -> None:
    sqs = _client(secured, region="ap-southeast-2")
    name = unique()
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    assert got["Attributes"]["QueueArn"] == arn(name, "ap-southeast-2")


def test_health_needs_no_signature(secured: ServerProcess) -> None:
    raw = RawClient(secured.url)
    assert raw.request("GET", "/health", sign=False).status == 200


def test_authorization_header_parsed_in_any_field_order() -> None:
    """The scope is cached apart from the signature; other layouts still parse whole, and
    a header missing a part is IncompleteSignature (SQS API reference, Common Errors)."""
    scope = "Credential=AK/20261122/eu-west-1/sqs/aws4_request"
    boto_layout = f"AWS4-HMAC-SHA256 {scope}, SignedHeaders=host;x-amz-date, Signature=ab12"
    reordered = f"AWS4-HMAC-SHA256 Signature=cd34, {scope}, SignedHeaders=host;x-amz-date"

    def read(header: str) -> sigv4.Claim | None:
        return sigv4.read("", {"authorization": header})

    first, second = read(boto_layout), read(reordered)
    assert first is not None and second is not None
    assert (first.region, first.signed_headers, first.signature) == (
        "eu-west-1", ("host", "x-amz-date"), "ab12")
    assert (second.access_key, second.signature) == ("AK", "cd34")
    assert read(boto_layout.replace("ab12", "ef56")).signature == "ef56"  # type: ignore[union-attr]
    for incomplete in (f"AWS4-HMAC-SHA256 {scope}, SignedHeaders=host",
                       f"AWS4-HMAC-SHA256 {scope}, Signature=ab12",
                       "AWS4-HMAC-SHA256 Credential=AK/20261122/sqs, SignedHeaders=host, "
                       "Signature=ab12", "Basic dXNlcjpwYXNz"):
        with pytest.raises(IncompleteSignature):
            read(incomplete)
