"""Conveyor's producer side writes what the Amazon SQS Extended Client reads: bodies
offloaded by `conveyor message send` and by `conveyor.payloads.Offloader` come back whole
through the Extended Client's receive_message (PyPI `amazon-sqs-extended-client` 1.0.1,
whose _receive_message_decorator resolves a message carrying `ExtendedPayloadSize`, and
whose delete_message deletes the blob when asked), on the embedded store and moto's S3.
"""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.config import Config

from conveyor.payloads import BlobSettings, BlobStore, Offloader, OffloadError
from conveyor.payloads.pointer import SIZE_ATTRIBUTE
from tests.payloads.conftest import conveyor_cli, extended_client
from tests.payloads.test_worker import LARGE
from tests.worker.conftest import make_queue


def _receive(sqs, url: str) -> dict:
    [message] = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"],
                                    WaitTimeSeconds=1)["Messages"]
    return message


def test_conveyor_message_send_is_read_back_by_the_extended_client(
        blobs, strict_server, strict_sqs, queue_name):
    url = make_queue(strict_sqs, queue_name)
    sent = conveyor_cli("message", "send", url, "-", "-a", "tenant=acme", "--endpoint-url",
                        strict_server.url, "--payload-endpoint-url", blobs.endpoint_url,
                        "--payload-bucket", blobs.bucket, stdin=LARGE)
    assert sent.returncode == 0, sent.stderr
    reader = extended_client(strict_server.url, blobs, delete_payloads=True)
    message = _receive(reader, url)
    assert message["Body"] == LARGE
    assert message["MessageAttributes"] == {
        "tenant": {"DataType": "String", "StringValue": "acme"}}  # the reserved one popped
    key = reader.get_from_receipt_handle_by_marker(message["ReceiptHandle"], "-..s3Key..-")
    assert blobs.exists(key)
    reader.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert not blobs.exists(key)


def test_conveyor_message_send_offloads_to_the_embedded_store_by_default(
        strict_server, strict_sqs, queue_name):
    """On a Conveyor server nothing needs configuring: the server's own store is used."""
    url = make_queue(strict_sqs, queue_name)
    sent = conveyor_cli("message", "send", url, "-", "--endpoint-url", strict_server.url,
                        stdin=LARGE)
    assert sent.returncode == 0, sent.stderr
    message = _receive(strict_sqs, url)
    assert json.loads(message["Body"])[1]["s3BucketName"] == "conveyor-payloads"
    assert SIZE_ATTRIBUTE in message["MessageAttributes"]


def test_a_body_within_the_queue_limit_is_sent_as_it_is(blobs, strict_server, strict_sqs,
                                                        queue_name):
    url = make_queue(strict_sqs, queue_name)
    sent = conveyor_cli("message", "send", url, '{"small": true}', "--endpoint-url",
                        strict_server.url, "--payload-endpoint-url", blobs.endpoint_url,
                        "--payload-bucket", blobs.bucket)
    assert sent.returncode == 0, sent.stderr
    message = _receive(strict_sqs, url)
    assert message["Body"] == '{"small": true}'
    assert "MessageAttributes" not in message


def test_payload_threshold_follows_the_queue_maximum_message_size(
        blobs, strict_server, strict_sqs, queue_name):
    """A queue whose MaximumMessageSize is 1 KiB gets a 2 KiB body as a pointer."""
    url = make_queue(strict_sqs, queue_name, MaximumMessageSize="1024")
    sent = conveyor_cli("message", "send", url, "x" * 2048, "--endpoint-url",
                        strict_server.url, "--payload-endpoint-url", blobs.endpoint_url,
                        "--payload-bucket", blobs.bucket)
    assert sent.returncode == 0, sent.stderr
    reader = extended_client(strict_server.url, blobs, delete_payloads=False)
    assert _receive(reader, url)["Body"] == "x" * 2048


def test_the_python_helper_is_read_back_by_the_extended_client(blobs, strict_server,
                                                               strict_sqs, queue_name):
    url = make_queue(strict_sqs, queue_name)
    offloader = Offloader(BlobStore(BlobSettings(blobs.endpoint_url, "us-east-1",
                                                 "test:test", blobs.bucket)))
    producer = boto3.client("sqs", endpoint_url=strict_server.url, region_name="us-east-1",
                            aws_access_key_id="test", aws_secret_access_key="test",
                            config=Config(retries={"max_attempts": 1}))
    offloader.send_message(producer, QueueUrl=url, MessageBody=LARGE)
    offloader.send_message(producer, QueueUrl=url, MessageBody="small")
    batch = offloader.send_message_batch(producer, QueueUrl=url, Entries=[
        {"Id": "big", "MessageBody": LARGE + " "}, {"Id": "small", "MessageBody": "small 2"}])
    assert sorted(entry["Id"] for entry in batch["Successful"]) == ["big", "small"]
    reader = extended_client(strict_server.url, blobs, delete_payloads=False)
    bodies = set()
    for _ in range(10):
        answer = reader.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                        MessageAttributeNames=["All"], WaitTimeSeconds=1)
        bodies |= {m["Body"] for m in answer.get("Messages", [])}
        if len(bodies) == 4:
            break
    assert bodies == {LARGE, "small", LARGE + " ", "small 2"}


def test_a_reserved_attribute_is_refused_like_the_extended_client_does(blobs):
    """The Extended Client refuses to send a message that already carries its attribute
    (ExceptionMessages.INVALID_ATTRIBUTE_NAME_PRESENT)."""
    offloader = Offloader(BlobStore(BlobSettings(blobs.endpoint_url, "us-east-1",
                                                 "test:test", blobs.bucket)), always=True)
    with pytest.raises(OffloadError, match=SIZE_ATTRIBUTE):
        offloader.offload("body", {SIZE_ATTRIBUTE: {"DataType": "Number", "StringValue": "1"}})
