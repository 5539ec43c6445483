"""The Conveyor server's embedded blob store speaks a small, honest subset of S3.

Expected answers come from the Amazon S3 API Reference: PutObject / GetObject /
HeadObject / DeleteObject (DeleteObject answers 204 also for a key that was not there;
a single-part PUT's ETag is the body's MD5), and "Error responses" (ErrorResponses.html):
NoSuchKey 404 "The specified key does not exist.", NoSuchBucket 404 "The specified
bucket does not exist", InvalidBucketName 400, KeyTooLongError 400, EntityTooLarge 400,
SignatureDoesNotMatch / InvalidAccessKeyId / AccessDenied 403, each as an XML
`<Error><Code/><Message/>...<RequestId/></Error>` body, and a HEAD error without a body.
Keys are opaque names, never paths: traversal attempts must not reach outside the bucket.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from conveyor.payloads.pointer import EMBEDDED_BUCKET, EMBEDDED_STORE_PATH
from tests.payloads.conftest import s3_client
from tests.support import ServerProcess

MAX_OBJECT = 1024 * 1024
TRAVERSALS = ["../../../../etc/passwd", "../escape", "a/../../escape", "..", ".",
              "/absolute/escape", "..\\..\\escape", "escape\x00.txt", "%2e%2e/escape"]


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory) -> Iterator[ServerProcess]:
    """A server with a full key, a key for SQS only and a read/write (no delete) S3 key."""
    data = tmp_path_factory.mktemp("s3-keyed")
    config = data / "conveyor.yaml"
    config.write_text(
        "access_keys:\n"
        "  AKFULL: full-secret\n"
        "  AKSQS: {secret: sqs-secret, actions: [SendMessage, ReceiveMessage]}\n"
        "  AKRW: {secret: rw-secret, actions: ['s3:GetObject', 's3:PutObject']}\n")
    proc = ServerProcess(data, "--config", str(config), "--payload-max-bytes",
                         str(MAX_OBJECT)).start()
    yield proc
    proc.stop()


def _s3(server: ServerProcess, key: str = "AKFULL", secret: str = "full-secret"):
    return s3_client(server.url + EMBEDDED_STORE_PATH, key, secret)


def _code(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    response = exc.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


def test_put_get_head_delete_round_trip(keyed_server):
    s3 = _s3(keyed_server)
    body = os.urandom(300_000)
    put = s3.put_object(Bucket=EMBEDDED_BUCKET, Key="jobs/2026/a b+c.json", Body=body,
                        ContentType="application/json")
    assert put["ETag"] == f'"{hashlib.md5(body).hexdigest()}"'
    got = s3.get_object(Bucket=EMBEDDED_BUCKET, Key="jobs/2026/a b+c.json")
    assert got["Body"].read() == body
    assert got["ContentType"] == "application/json"
    head = s3.head_object(Bucket=EMBEDDED_BUCKET, Key="jobs/2026/a b+c.json")
    assert head["ContentLength"] == len(body)
    assert head["ETag"] == put["ETag"]
    deleted = s3.delete_object(Bucket=EMBEDDED_BUCKET, Key="jobs/2026/a b+c.json")
    assert deleted["ResponseMetadata"]["HTTPStatusCode"] == 204
    again = s3.delete_object(Bucket=EMBEDDED_BUCKET, Key="jobs/2026/a b+c.json")
    assert again["ResponseMetadata"]["HTTPStatusCode"] == 204


def test_no_such_key_and_no_such_bucket_are_s3_xml_errors(keyed_server):
    s3 = _s3(keyed_server)
    for bucket, key, code, message, element in [
            (EMBEDDED_BUCKET, "missing", "NoSuchKey", "The specified key does not exist.",
             ("Key", "missing")),
            ("no-such-bucket", "missing", "NoSuchBucket",
             "The specified bucket does not exist", ("BucketName", "no-such-bucket"))]:
        url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key})
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(url, timeout=10)
        assert caught.value.code == 404
        assert caught.value.headers["Content-Type"] == "application/xml"
        error = ElementTree.fromstring(caught.value.read())
        assert error.tag == "Error"
        assert error.findtext("Code") == code
        assert error.findtext("Message") == message
        assert error.findtext(element[0]) == element[1]
        assert error.findtext("RequestId")
    with pytest.raises(ClientError) as head:
        s3.head_object(Bucket=EMBEDDED_BUCKET, Key="missing")
    assert _code(head) == ("404", 404)  # HEAD: the status alone, as S3 answers


@pytest.mark.parametrize("key", TRAVERSALS)
def test_keys_are_names_never_paths(strict_server, key):
    """Whatever the key, the object lands in its bucket's directory under a digest name,
    reads back under the same key, and nothing is written or read outside."""
    s3 = s3_client(strict_server.url + EMBEDDED_STORE_PATH)
    # Files written within the server's directory (its queue store's own files aside,
    # which change on their own), and anywhere above it that a "../" could reach.
    root = strict_server.data_dir / "payloads"
    above = strict_server.data_dir.parent
    before = set(above.rglob("*"))
    s3.put_object(Bucket=EMBEDDED_BUCKET, Key=key, Body=b"inside")
    created = set(above.rglob("*")) - before
    written = {p for p in created if p.is_relative_to(root)}
    assert written, "the object was not stored"
    for path in written:
        assert path.parent == root / EMBEDDED_BUCKET
        assert path.name.split(".")[0] == hashlib.sha256(key.encode()).hexdigest()
    assert not [p for p in created if "escape" in p.name or "passwd" in p.name]
    assert s3.get_object(Bucket=EMBEDDED_BUCKET, Key=key)["Body"].read() == b"inside"
    assert not Path("/etc/escape").exists() and not Path("/absolute").exists()
    s3.delete_object(Bucket=EMBEDDED_BUCKET, Key=key)


@pytest.mark.parametrize("path", [
    "/../../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/conveyor-payloads/../../x",
    "/..%2f..%2fetc/passwd", "/./x", "/Upper/x", "/a/x"])
def test_raw_traversal_paths_are_refused_or_miss(strict_server, path):
    """Paths no SDK would send, straight over HTTP: a bucket that is not a valid S3 name
    is InvalidBucketName (400); within a bucket, a key that was never stored is NoSuchKey.
    Never the content of a file outside the store."""
    connection = http.client.HTTPConnection("127.0.0.1", strict_server.port, timeout=10)
    connection.request("GET", EMBEDDED_STORE_PATH + path)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    assert response.status in (400, 404), body
    code = ElementTree.fromstring(body).findtext("Code")
    assert code in ("InvalidBucketName", "NoSuchKey", "NoSuchBucket")
    assert b"root:" not in body


def test_key_longer_than_1024_bytes_is_refused(strict_server):
    s3 = s3_client(strict_server.url + EMBEDDED_STORE_PATH)
    with pytest.raises(ClientError) as caught:
        s3.put_object(Bucket=EMBEDDED_BUCKET, Key="k" * 1025, Body=b"x")
    assert _code(caught) == ("KeyTooLongError", 400)


def test_objects_above_payload_max_bytes_are_entity_too_large(keyed_server):
    s3 = _s3(keyed_server)
    s3.put_object(Bucket=EMBEDDED_BUCKET, Key="at-limit", Body=b"x" * MAX_OBJECT)
    with pytest.raises(ClientError) as caught:
        s3.put_object(Bucket=EMBEDDED_BUCKET, Key="over", Body=b"x" * (MAX_OBJECT + 1))
    assert _code(caught) == ("EntityTooLarge", 400)
    with pytest.raises(ClientError):
        s3.head_object(Bucket=EMBEDDED_BUCKET, Key="over")


def test_signatures_and_key_limits_are_checked(keyed_server):
    _s3(keyed_server).put_object(Bucket=EMBEDDED_BUCKET, Key="secret", Body=b"s")
    for key, secret, code in [("AKFULL", "wrong", "SignatureDoesNotMatch"),
                              ("AKNOBODY", "x", "InvalidAccessKeyId"),
                              ("AKSQS", "sqs-secret", "AccessDenied")]:
        with pytest.raises(ClientError) as caught:
            _s3(keyed_server, key, secret).get_object(Bucket=EMBEDDED_BUCKET, Key="secret")
        assert _code(caught) == (code, 403)
    unsigned = urllib.request.Request(
        f"{keyed_server.url}{EMBEDDED_STORE_PATH}/{EMBEDDED_BUCKET}/secret")
    with pytest.raises(urllib.error.HTTPError) as caught_unsigned:
        urllib.request.urlopen(unsigned, timeout=10)
    assert caught_unsigned.value.code == 403
    assert ElementTree.fromstring(caught_unsigned.value.read()).findtext("Code") == \
        "AccessDenied"
    rw = _s3(keyed_server, "AKRW", "rw-secret")
    assert rw.get_object(Bucket=EMBEDDED_BUCKET, Key="secret")["Body"].read() == b"s"
    with pytest.raises(ClientError) as caught_delete:
        rw.delete_object(Bucket=EMBEDDED_BUCKET, Key="secret")
    assert _code(caught_delete) == ("AccessDenied", 403)


def test_the_sqs_api_keeps_its_own_size_limit(strict_server, strict_sqs, queue_name):
    """The store's larger bodies are allowed under its path only: an SQS request still
    meets SQS's limit."""
    url = strict_sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    with pytest.raises(ClientError) as caught:
        strict_sqs.send_message(QueueUrl=url, MessageBody="x" * (2 * 1024 * 1024))
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_put_over_tls_in_aws_chunked_form_is_decoded(tmp_path, certificate):
    """Over HTTPS botocore sends PutObject as an aws-chunked body with a CRC32 trailer and
    `x-amz-content-sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER` (botocore/httpchecksum.py:
    a streaming input over https gets a trailer checksum); the store must keep the object,
    not its framing, and check the trailer."""
    cert, key = certificate
    server = ServerProcess(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key),
                           "--access-key", "AKTLS:tls-secret").start()
    try:
        s3 = boto3.client("s3", endpoint_url=server.url + EMBEDDED_STORE_PATH,
                          region_name="us-east-1", aws_access_key_id="AKTLS",
                          aws_secret_access_key="tls-secret", verify=str(cert),
                          config=Config(s3={"addressing_style": "path"},
                                        retries={"max_attempts": 1}))
        sent: list[dict] = []
        s3.meta.events.register("before-send", lambda request, **_: sent.append(
            dict(request.headers)))
        body = os.urandom(200_000)
        s3.put_object(Bucket=EMBEDDED_BUCKET, Key="over-tls", Body=body)
        assert b"aws-chunked" in sent[0]["Content-Encoding"]  # the form under test
        assert s3.get_object(Bucket=EMBEDDED_BUCKET, Key="over-tls")["Body"].read() == body
    finally:
        server.stop()


@pytest.mark.parametrize(("body", "code"), [
    (b"zz\r\nhello\r\n0\r\n\r\n", "IncompleteBody"),  # a size that is not hex
    (b"ffff\r\nhello\r\n0\r\n\r\n", "IncompleteBody"),  # a chunk longer than the body
    (b"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n", "BadDigest"),
])
def test_malformed_aws_chunked_bodies_are_refused(strict_server, body, code):
    """S3's IncompleteBody / BadDigest (400) rather than storing the framing."""
    connection = http.client.HTTPConnection("127.0.0.1", strict_server.port, timeout=10)
    connection.request("PUT", f"{EMBEDDED_STORE_PATH}/{EMBEDDED_BUCKET}/chunked", body=body,
                       headers={"Content-Encoding": "aws-chunked",
                                "X-Amz-Content-SHA256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER"})
    response = connection.getresponse()
    answer = response.read()
    connection.close()
    assert response.status == 400
    assert ElementTree.fromstring(answer).findtext("Code") == code
