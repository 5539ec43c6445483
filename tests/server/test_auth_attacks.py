"""Forged requests: each is signed correctly by botocore, then tampered with.

Every forgery is refused and leaves the server as it was; the untampered request of each
kind passes. Expected codes and wording come from AWS, not from us:
- SQS API reference, "Common Errors": IncompleteSignature (400), MissingAuthenticationToken
  and InvalidClientTokenId (403);
- IAM user guide, "Troubleshoot signed requests": the scope messages (date, service,
  region) of SignatureDoesNotMatch (403);
- SQS's own "Signature expired: X is now earlier than Y (Z - 15 min.)", SignatureDoesNotMatch
  403, recorded from a ReceiveMessage call in aws/aws-sdk-go#487;
- "There were headers present in the request which were not signed" (AccessDenied, 403),
  recorded from AWS in coda/packs-sdk#3093 and soto-project/soto-core#99;
- AccessDenied 403 "Access to the resource https://sqs.<region>.amazonaws.com/ is denied."
  for a key without permission, recorded in aws/aws-sdk-php#188 and island-is#7812.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlencode, urlsplit

import boto3
import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from tests.server.conftest import Launcher
from tests.server.helpers import (
    JSON_CONTENT_TYPE,
    RawClient,
    RawResponse,
    assert_json_error,
    assert_query_error,
    raises_sqs,
    unique,
)
from tests.server.test_workers_api import workers_call
from tests.support import ServerProcess

ADMIN, ADMIN_SECRET = "AKIDADMIN", "admin/secret+1"
PRODUCER, PRODUCER_SECRET = "AKIDPRODUCER", "producer-secret"
READER, READER_SECRET = "AKIDREADER", "reader-secret"
ORDERS, ORDERS_SECRET = "AKIDORDERS", "orders-secret"
TEMP, TEMP_SECRET, TEMP_TOKEN = "ASIATEMP", "temp-secret", "session-token-value"
FORM = "application/x-www-form-urlencoded; charset=utf-8"

CONFIG = f"""
access_keys:
  {ADMIN}: {json.dumps(ADMIN_SECRET)}
  {PRODUCER}:
    secret: {PRODUCER_SECRET}
    actions: ["SendMessage*", "sqs:GetQueueUrl"]
    queues: ["orders-*"]
  {READER}:
    secret: {READER_SECRET}
    actions: ["ListQueues", "GetQueue*"]
  {ORDERS}:
    secret: {ORDERS_SECRET}
    queues: ["orders-*"]
  {TEMP}:
    secret: {TEMP_SECRET}
    session_token: {TEMP_TOKEN}
"""


@pytest.fixture(scope="module")
def secured(launch: Launcher, tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    config = tmp_path_factory.mktemp("keys") / "conveyor.yaml"
    config.write_text(CONFIG)
    return launch("--mode", "relaxed", "--config", str(config))


def client(server: ServerProcess, key: str = ADMIN, secret: str = ADMIN_SECRET,
           token: str | None = None) -> Any:
    return boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1",
                        aws_access_key_id=key, aws_secret_access_key=secret,
                        aws_session_token=token, config=Config(retries={"max_attempts": 1}))


@pytest.fixture
def queue(secured: ServerProcess) -> str:
    return client(secured).create_queue(QueueName=unique("orders"))["QueueUrl"]


@contextmanager
def signing_at(moment: datetime) -> Iterator[None]:
    """botocore signs as if its clock said `moment`."""
    naive = moment.astimezone(UTC).replace(tzinfo=None)
    with mock.patch("botocore.auth.get_current_datetime", return_value=naive):
        yield


def sign(server: ServerProcess, body: bytes, headers: dict[str, str], path: str = "/",
         key: str = ADMIN, secret: str = ADMIN_SECRET, signer: type[SigV4Auth] = SigV4Auth,
         service: str = "sqs", region: str = "us-east-1", method: str = "POST",
         token: str | None = None) -> dict[str, str]:
    """The headers botocore sends for this request (Authorization and X-Amz-Date added)."""
    request = AWSRequest(method=method, url=server.url + path, data=body, headers=headers)
    signer(Credentials(key, secret, token), service, region).add_auth(request)
    return dict(request.headers.items())


def json_request(action: str, payload: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    return json.dumps(payload).encode(), {"Content-Type": JSON_CONTENT_TYPE,
                                          "X-Amz-Target": f"AmazonSQS.{action}"}


def query_request(params: dict[str, str]) -> tuple[bytes, dict[str, str]]:
    return urlencode({**params, "Version": "2012-11-05"}).encode(), {"Content-Type": FORM}


def send(server: ServerProcess, body: bytes, headers: dict[str, str], path: str = "/",
         method: str = "POST") -> RawResponse:
    return RawClient(server.url).request(method, path, body, headers, sign=False)


def bodies_in(server: ServerProcess, url: str) -> list[str]:
    """What the queue holds, read with the admin key (and put back)."""
    sqs = client(server)
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    return sorted(m["Body"] for m in got.get("Messages", []))


def message_of(url: str, body: str) -> tuple[bytes, dict[str, str]]:
    return json_request("SendMessage", {"QueueUrl": url, "MessageBody": body})


# --- the signed request itself ------------------------------------------------------------

def test_untampered_requests_of_each_kind_pass(secured: ServerProcess, queue: str) -> None:
    body, headers = message_of(queue, "json")
    assert send(secured, body, sign(secured, body, headers)).status == 200
    body, headers = query_request({"Action": "SendMessage", "QueueUrl": queue,
                                   "MessageBody": "query"})
    assert send(secured, body, sign(secured, body, headers)).status == 200
    assert bodies_in(secured, queue) == ["json", "query"]


# --- the body -----------------------------------------------------------------------------

def test_swapped_body_is_refused(secured: ServerProcess, queue: str) -> None:
    body, headers = message_of(queue, "original")
    signed = sign(secured, body, headers)
    forged, _ = message_of(queue, "forged")
    assert_json_error(send(secured, forged, signed), "SignatureDoesNotMatch", 403)
    assert bodies_in(secured, queue) == []


@pytest.mark.parametrize("signed_with_header", [True, False], ids=["signed", "added-later"])
def test_swapped_body_with_the_original_hash_header_is_refused(
        secured: ServerProcess, queue: str, signed_with_header: bool) -> None:
    """The attack this issue was filed for: the hash header names the original body."""
    body, headers = message_of(queue, "original")
    original_hash = hashlib.sha256(body).hexdigest()
    if signed_with_header:
        signed = sign(secured, body, {**headers, "X-Amz-Content-SHA256": original_hash})
    else:
        signed = {**sign(secured, body, headers), "X-Amz-Content-SHA256": original_hash}
    forged, _ = message_of(queue, "forged")
    assert_json_error(send(secured, forged, signed), {"SignatureDoesNotMatch", "AccessDenied"},
                      403)
    assert bodies_in(secured, queue) == []
    # The same header over the body it names is fine: it is what S3-minded SDKs send.
    assert send(secured, body, signed).status == (200 if signed_with_header else 403)


def test_unsigned_payload_is_refused(secured: ServerProcess, queue: str) -> None:
    """SQS signs every body; UNSIGNED-PAYLOAD is S3's alone."""
    body, headers = message_of(queue, "unsigned")
    signed = sign(secured, body, {**headers, "X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"})
    assert_json_error(send(secured, body, signed), "SignatureDoesNotMatch", 403)
    assert bodies_in(secured, queue) == []


def test_query_action_rewritten_to_delete_queue_is_refused(secured: ServerProcess,
                                                           queue: str) -> None:
    """A captured Query SendMessage rewritten to DeleteQueue deleted the queue before."""
    body, headers = query_request({"Action": "SendMessage", "QueueUrl": queue,
                                   "MessageBody": "x"})
    signed = sign(secured, body, headers)
    forged, _ = query_request({"Action": "DeleteQueue", "QueueUrl": queue})
    assert_query_error(send(secured, forged, signed), "SignatureDoesNotMatch", 403)
    forged_in_query = send(secured, body, signed, path="/?Action=DeleteQueue")
    assert_query_error(forged_in_query, "SignatureDoesNotMatch", 403)
    assert client(secured).get_queue_url(QueueName=queue.rsplit("/", 1)[1])["QueueUrl"]


# --- the headers --------------------------------------------------------------------------

@pytest.mark.parametrize("header", ["X-Amz-Target", "X-Amz-Security-Token"])
def test_amz_header_added_after_signing_is_refused(secured: ServerProcess, queue: str,
                                                   header: str) -> None:
    """X-Amz-Target turns a signed Query request into a JSON one; a token changes whose
    credentials speak. Unsigned x-amz-* headers are refused, as AWS refuses them."""
    body, headers = query_request({"Action": "SendMessage", "QueueUrl": queue,
                                   "MessageBody": "x"})
    signed = {**sign(secured, body, headers), header: "AmazonSQS.DeleteQueue"}
    response = send(secured, body, signed)
    assert response.status == 403
    assert b"not signed" in response.body and header.lower().encode() in response.body
    assert bodies_in(secured, queue) == []


class _WithoutHost(SigV4Auth):
    """A correct signature over every header but Host."""

    def headers_to_sign(self, request: AWSRequest) -> Any:
        headers = super().headers_to_sign(request)
        del headers["host"]
        return headers


class _WithoutDate(SigV4Auth):
    def headers_to_sign(self, request: AWSRequest) -> Any:
        headers = super().headers_to_sign(request)
        del headers["x-amz-date"]
        return headers


@pytest.mark.parametrize(("signer", "message"), [
    (_WithoutHost, b"'Host' or ':authority' must be a 'SignedHeader'"),
    (_WithoutDate, b"'X-Amz-Date' must be a 'SignedHeader'"),
])
def test_host_and_date_must_be_signed(secured: ServerProcess, queue: str,
                                      signer: type[SigV4Auth], message: bytes) -> None:
    body, headers = message_of(queue, "x")
    response = send(secured, body, sign(secured, body, headers, signer=signer))
    assert_json_error(response, "IncompleteSignature", 400)
    assert message in response.body
    assert bodies_in(secured, queue) == []


def test_request_signed_for_another_host_is_refused(secured: ServerProcess, queue: str) -> None:
    body, headers = message_of(queue, "x")
    signed = sign(secured, body, headers)
    response = send(secured, body, {**signed, "Host": "sqs.us-east-1.amazonaws.com"})
    assert_json_error(response, "SignatureDoesNotMatch", 403)
    assert bodies_in(secured, queue) == []


# --- the credential scope and the time ------------------------------------------------------

class _ScopedToYesterday(SigV4Auth):
    """Signs with a scope (in the header and the string to sign) dated the day before."""

    def scope(self, request: AWSRequest) -> str:
        key, scope = super().scope(request).split("/", 1)
        return f"{key}/{self.credential_scope(request)}"

    def credential_scope(self, request: AWSRequest) -> str:
        scope = super().credential_scope(request).split("/")
        day = datetime.strptime(scope[0], "%Y%m%d") - timedelta(days=1)
        return "/".join([day.strftime("%Y%m%d"), *scope[1:]])


def test_scope_with_another_service_is_refused(secured: ServerProcess, queue: str) -> None:
    body, headers = message_of(queue, "x")
    response = send(secured, body, sign(secured, body, headers, service="s3"))
    assert_json_error(response, "SignatureDoesNotMatch", 403)
    assert b"Credential should be scoped to correct service: 'sqs'" in response.body
    assert bodies_in(secured, queue) == []


def test_scope_with_another_date_is_refused(secured: ServerProcess, queue: str) -> None:
    body, headers = message_of(queue, "x")
    response = send(secured, body, sign(secured, body, headers, signer=_ScopedToYesterday))
    assert_json_error(response, "SignatureDoesNotMatch", 403)
    assert b"Date in Credential scope does not match YYYYMMDD" in response.body
    assert bodies_in(secured, queue) == []


def test_region_that_names_no_region_is_refused(secured: ServerProcess, queue: str) -> None:
    body, headers = message_of(queue, "x")
    response = send(secured, body, sign(secured, body, headers, region="us east/1"))
    assert response.status in (400, 403)
    assert bodies_in(secured, queue) == []


def test_region_of_the_scope_selects_the_queues_region(secured: ServerProcess) -> None:
    """A message signed for eu-west-1 goes to eu-west-1's queue of that name."""
    name = unique("orders")
    body, headers = json_request("CreateQueue", {"QueueName": name})
    assert send(secured, body, sign(secured, body, headers, region="eu-west-1")).status == 200
    with raises_sqs("AWS.SimpleQueueService.NonExistentQueue"):
        client(secured).get_queue_url(QueueName=name)


@pytest.mark.parametrize(("offset", "message"), [
    (timedelta(minutes=-16), b"Signature expired: "),
    (timedelta(minutes=16), b"Signature not yet current: "),
])
def test_replay_outside_15_minutes_is_refused(secured: ServerProcess, queue: str,
                                              offset: timedelta, message: bytes) -> None:
    body, headers = message_of(queue, "stale")
    with signing_at(datetime.now(UTC) + offset):
        signed = sign(secured, body, headers)
    response = send(secured, body, signed)
    assert_json_error(response, "SignatureDoesNotMatch", 403)
    assert message in response.body
    assert bodies_in(secured, queue) == []


def test_request_signed_14_minutes_ago_still_passes(secured: ServerProcess, queue: str) -> None:
    body, headers = message_of(queue, "recent")
    with signing_at(datetime.now(UTC) - timedelta(minutes=14)):
        signed = sign(secured, body, headers)
    assert send(secured, body, signed).status == 200


# --- presigned URLs --------------------------------------------------------------------------

def presigned(server: ServerProcess, params: dict[str, str], expires_s: int = 60,
              at: datetime | None = None) -> str:
    """A presigned Query-protocol GET, the way botocore's SigV4QueryAuth makes one."""
    url = f"{server.url}/?{urlencode({**params, 'Version': '2012-11-05'})}"
    request = AWSRequest(method="GET", url=url)
    with signing_at(at or datetime.now(UTC)):
        SigV4QueryAuth(Credentials(ADMIN, ADMIN_SECRET), "sqs", "us-east-1",
                       expires=expires_s).add_auth(request)
    parts = urlsplit(request.url)
    return f"{parts.path}?{parts.query}"


def test_presigned_url_works(secured: ServerProcess, queue: str) -> None:
    path = presigned(secured, {"Action": "SendMessage", "QueueUrl": queue,
                               "MessageBody": "presigned"})
    response = send(secured, b"", {}, path=path, method="GET")
    assert response.status == 200, response.body
    assert bodies_in(secured, queue) == ["presigned"]


def test_presigned_url_expired_is_refused(secured: ServerProcess, queue: str) -> None:
    path = presigned(secured, {"Action": "SendMessage", "QueueUrl": queue,
                               "MessageBody": "late"},
                     expires_s=60, at=datetime.now(UTC) - timedelta(seconds=120))
    response = send(secured, b"", {}, path=path, method="GET")
    assert_query_error(response, "SignatureDoesNotMatch", 403)
    assert b"Signature expired" in response.body
    assert bodies_in(secured, queue) == []


@pytest.mark.parametrize("tamper", [
    lambda p: p.replace("MessageBody=presigned", "MessageBody=forged"),
    lambda p: p.replace("Action=SendMessage", "Action=DeleteQueue"),
    lambda p: p.replace("X-Amz-Expires=60", "X-Amz-Expires=6000"),
    lambda p: p + "&Action=DeleteQueue",
    lambda p: p.replace("X-Amz-SignedHeaders=host", "X-Amz-SignedHeaders=x-foo"),
], ids=["body", "action", "expiry", "extra-parameter", "signed-headers"])
def test_presigned_url_altered_is_refused(secured: ServerProcess, queue: str, tamper: Any) -> None:
    path = presigned(secured, {"Action": "SendMessage", "QueueUrl": queue,
                               "MessageBody": "presigned"})
    forged = tamper(path)
    assert forged != path
    response = send(secured, b"", {}, path=forged, method="GET")
    assert response.status in (400, 403), response.body
    assert b"<Code>" in response.body
    assert bodies_in(secured, queue) == []
    assert client(secured).get_queue_url(QueueName=queue.rsplit("/", 1)[1])


# --- temporary credentials -------------------------------------------------------------------

def test_session_token_is_verified(secured: ServerProcess, queue: str) -> None:
    client(secured, TEMP, TEMP_SECRET, TEMP_TOKEN).send_message(QueueUrl=queue, MessageBody="ok")
    for token in ("wrong-token", None):
        with raises_sqs("InvalidClientTokenId", 403):
            client(secured, TEMP, TEMP_SECRET, token).send_message(QueueUrl=queue,
                                                                   MessageBody="no")
    with raises_sqs("InvalidClientTokenId", 403):  # a long-term key with a token
        client(secured, token="made-up").send_message(QueueUrl=queue, MessageBody="no")
    assert bodies_in(secured, queue) == ["ok"]


# --- key policies ------------------------------------------------------------------------------

def test_producer_key_may_only_send_to_its_queues(secured: ServerProcess, queue: str) -> None:
    producer = client(secured, PRODUCER, PRODUCER_SECRET)
    producer.send_message(QueueUrl=queue, MessageBody="one")
    producer.send_message_batch(QueueUrl=queue, Entries=[{"Id": "a", "MessageBody": "two"}])
    assert producer.get_queue_url(QueueName=queue.rsplit("/", 1)[1])["QueueUrl"] == queue
    other = client(secured).create_queue(QueueName=unique("billing"))["QueueUrl"]
    refused = [
        lambda: producer.send_message(QueueUrl=other, MessageBody="elsewhere"),
        lambda: producer.receive_message(QueueUrl=queue),
        lambda: producer.purge_queue(QueueUrl=queue),
        lambda: producer.delete_queue(QueueUrl=queue),
        lambda: producer.create_queue(QueueName=unique("orders")),
        lambda: producer.list_queues(),
    ]
    for call in refused:
        with raises_sqs("AccessDenied", 403) as caught:
            call()
        assert "is denied" in caught[0].response["Error"]["Message"]
    assert bodies_in(secured, queue) == ["one", "two"]
    assert bodies_in(secured, other) == []


def test_read_only_key_reads_and_changes_nothing(secured: ServerProcess, queue: str) -> None:
    reader = client(secured, READER, READER_SECRET)
    assert queue in reader.list_queues(QueueNamePrefix="orders-").get("QueueUrls", [])
    assert reader.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
    for call in (lambda: reader.send_message(QueueUrl=queue, MessageBody="no"),
                 lambda: reader.set_queue_attributes(QueueUrl=queue,
                                                     Attributes={"DelaySeconds": "5"}),
                 lambda: reader.tag_queue(QueueUrl=queue, Tags={"a": "b"})):
        with raises_sqs("AccessDenied", 403):
            call()
    attributes = client(secured).get_queue_attributes(QueueUrl=queue,
                                                      AttributeNames=["DelaySeconds"])
    assert attributes["Attributes"]["DelaySeconds"] == "0"
    assert client(secured).list_queue_tags(QueueUrl=queue).get("Tags", {}) == {}


def test_policy_is_checked_on_the_query_protocol_too(secured: ServerProcess, queue: str) -> None:
    raw = RawClient(secured.url, access_key=PRODUCER, secret_key=PRODUCER_SECRET)
    assert_query_error(raw.query({"Action": "DeleteQueue", "QueueUrl": queue}), "AccessDenied",
                       403)
    assert raw.query({"Action": "SendMessage", "QueueUrl": queue,
                      "MessageBody": "q"}).status == 200
    assert bodies_in(secured, queue) == ["q"]


def test_queue_limited_key_reaches_only_its_queues_workers(secured: ServerProcess) -> None:
    """The worker registry (ConveyorWorkers.*) is ours, so no AWS answer exists; it keeps
    the key-policy rule of the SQS calls: a key limited to some queues may announce workers
    (also inside a PollMessages), record decisions and drain workers only for them (a
    worker's queue is the one it announced: server/authz.py), with SQS's AccessDenied
    wording; a worker that is not there is refused alike, so a key cannot tell another
    queue's worker from none."""
    raw = RawClient(secured.url, access_key=ORDERS, secret_key=ORDERS_SECRET)

    def call(action: str, payload: dict[str, Any]) -> RawResponse:
        return workers_call(raw, action, payload)

    worker = {"WorkerId": "w-orders", "TtlSeconds": 30}
    assert call("AnnounceWorker", {**worker, "Queue": "orders-1"}).status == 200
    assert_json_error(call("AnnounceWorker", {**worker, "Queue": "billing"}), "AccessDenied",
                      403)
    assert_json_error(call("RecordScalingDecision", {"Queue": "billing", "Decision": {}}),
                      "AccessDenied", 403)
    admin = RawClient(secured.url, access_key=ADMIN, secret_key=ADMIN_SECRET)
    billing_worker = {"WorkerId": unique("w-billing"), "TtlSeconds": 30, "Queue": "billing"}
    assert workers_call(admin, "AnnounceWorker", billing_worker).status == 200
    assert_json_error(call("DrainWorker", {"WorkerId": billing_worker["WorkerId"]}),
                      "AccessDenied", 403)
    assert_json_error(call("DrainWorker", {"WorkerId": unique("w-none")}), "AccessDenied", 403)
    assert workers_call(admin, "AnnounceWorker", billing_worker).body == b"{}"  # not draining
    assert call("DrainWorker", {"WorkerId": "w-orders"}).status == 200
    poll = {"QueueUrl": f"{secured.url}/000000000000/orders-1", "WaitTimeSeconds": 0,
            "Announce": {**worker, "Queue": "billing"}}
    assert_json_error(call("PollMessages", poll), "AccessDenied", 403)


# --- broken credentials get a clean answer --------------------------------------------------

@pytest.mark.parametrize("authorization", [
    "AWS4-HMAC-SHA256 Credential=AKIDADMIN/20260101/us-east-1/sqs/aws4_request, "
    "SignedHeaders=host;x-amz-date, Signature=" + "é" * 64,
    "AWS4-HMAC-SHA256 Credential=AKIDADMÏN/20260101/us-east-1/sqs/aws4_request, "
    "SignedHeaders=host;x-amz-date, Signature=" + "0" * 64,
    "AWS4-HMAC-SHA256 Credential=AKIDADMIN/20260101/us-east-1/sqs/aws4_request, "
    "SignedHeaders=host;x-amz-date, Signature=" + "0" * 60_000,
    "AWS4-HMAC-SHA256 Credential=/////, SignedHeaders=;, Signature=00",
    "AWS4-HMAC-SHA256",
    "AWS4-HMAC-SHA256 ,,,,===,",
    "Basic QUtJREFETUlOOmFkbWlu",
    "",
])
def test_broken_authorization_gets_a_clean_refusal(secured: ServerProcess,
                                                   authorization: str) -> None:
    body, headers = json_request("ListQueues", {})
    headers = {**headers, "X-Amz-Date": datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"),
               "Authorization": authorization}
    raw = RawClient(secured.url)
    response = raw.request("POST", "/", body,
                           {k: v.encode("utf-8").decode("latin-1") for k, v in headers.items()},
                           sign=False)
    assert response.status in (400, 403), response.body
    assert_json_error(response, None, {400, 403})
    assert "Traceback" not in secured.log()


def test_config_with_a_broken_key_policy_fails_to_start(tmp_path: Path) -> None:
    from conveyor.server.config import ConfigError, load

    for text in ("access_keys: {K: {secret: s, actions: 5}}\n",
                 "access_keys: {K: {secret: s, queues: [\"\"]}}\n",
                 "access_keys: {K: {actions: [\"*\"]}}\n",
                 "access_keys: {K: {secret: s, colour: red}}\n"):
        path = tmp_path / "c.yaml"
        path.write_text(text)
        with pytest.raises(ConfigError):
            load(path)


def test_a_poll_on_several_queues_needs_a_key_for_every_one(secured: ServerProcess) -> None:
    """PollMessages with QueueUrls (ours: no AWS answer exists) keeps the rule of the SQS
    calls for each queue it names: a key limited to `orders-*` may park on several of
    them, not on a list that also names another queue (SQS's AccessDenied wording)."""
    admin = client(secured)
    orders = [admin.create_queue(QueueName=unique("orders"))["QueueUrl"] for _ in range(2)]
    billing = admin.create_queue(QueueName=unique("billing"))["QueueUrl"]
    raw = RawClient(secured.url, access_key=ORDERS, secret_key=ORDERS_SECRET)

    def poll(urls: list[str]) -> RawResponse:
        return workers_call(raw, "PollMessages", {"QueueUrls": urls})

    assert poll(orders).status == 200
    assert_json_error(poll([*orders, billing]), "AccessDenied", 403)
    assert_json_error(poll([billing, *orders]), "AccessDenied", 403)
