"""The worker resolves claim checks: the app gets the real body, never the pointer; the
blob goes after the 200 and the message's deletion, never before; a missing blob fails
its message into the dead-letter queue.

Each test runs against the Conveyor server's embedded store and moto's S3, with messages
sent by the Amazon SQS Extended Client itself (PyPI `amazon-sqs-extended-client` 1.0.1)
or by Conveyor's producer side. The format and the reserved attribute are the Extended
Client's (sqs_extended_client/client.py: MESSAGE_POINTER_CLASS, RESERVED_ATTRIBUTE_NAME,
_receive_message_decorator pops the attribute before the app sees the message); the
default clean-up is the Java client's (ExtendedClientConfiguration.cleanupS3Payload =
true).
"""

from __future__ import annotations

import asyncio
import json
import logging

from aiohttp import web

from conveyor.clock import Clock
from conveyor.payloads.pointer import POINTER_CLASS, SIZE_ATTRIBUTE, Pointer
from tests.payloads.conftest import conveyor_cli, embedded_store, extended_client
from tests.worker.conftest import (
    Recorded,
    aio,
    make_queue,
    queue_total,
    recording_app,
    run,
    running_worker,
    wait_until,
)

# Above SQS's default MaximumMessageSize, 1 MiB since August 2025 (the strict server's;
# botocore's SQS model documents 1,048,576 as the default), so it must be offloaded.
LARGE = json.dumps({"rows": ["ünïcode ✓ " * 40] * 3000})
assert len(LARGE.encode()) > 1_048_576


def _payload_options(blobs) -> dict[str, str]:
    return {"PayloadEndpointURL": blobs.endpoint_url, "PayloadAccessKey": "test:test"}


def _peek(sqs, url: str) -> dict:
    """The message as it sits on the queue, left visible for the worker."""
    [message] = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"],
                                    VisibilityTimeout=0, WaitTimeSeconds=1)["Messages"]
    return message


def _sent_by_extended_client(blobs, server, sqs, queue_name: str) -> tuple[str, str]:
    """A new queue holding LARGE, sent by the Extended Client; the queue URL and blob key."""
    url = make_queue(sqs, queue_name)
    sender = extended_client(server.url, blobs, delete_payloads=False)
    sender.send_message(QueueUrl=url, MessageBody=LARGE)
    return url, json.loads(_peek(sqs, url)["Body"])[1]["s3Key"]


def test_extended_client_message_reaches_the_app_whole(blobs, strict_server, strict_sqs,
                                                       queue_name):
    url = make_queue(strict_sqs, queue_name)
    sender = extended_client(strict_server.url, blobs, delete_payloads=False)
    sender.send_message(QueueUrl=url, MessageBody=LARGE, MessageAttributes={
        "tenant": {"DataType": "String", "StringValue": "acme"}})
    on_queue = _peek(strict_sqs, url)
    pointer_class, where = json.loads(on_queue["Body"])
    assert pointer_class == POINTER_CLASS
    assert where["s3BucketName"] == blobs.bucket
    assert on_queue["MessageAttributes"][SIZE_ATTRIBUTE]["StringValue"] == str(
        len(LARGE.encode()))
    assert blobs.exists(where["s3Key"])

    async def scenario() -> None:
        async with recording_app() as app, running_worker(
                url, app.url, **_payload_options(blobs)):
            await wait_until(lambda: queue_total(strict_sqs, url) == 0, what="the delete")
            await wait_until(lambda: not blobs.exists(where["s3Key"]), what="the blob's delete")
        [posted] = app.requests
        assert posted.body == LARGE.encode()
        assert posted.headers["Content-Type"] == "application/json"  # MimeType's default
        assert posted.headers["X-Aws-Sqsd-Attr-tenant"] == "acme"
        assert f"X-Aws-Sqsd-Attr-{SIZE_ATTRIBUTE}" not in posted.headers

    run(scenario())


def test_the_blob_stays_until_the_app_answers_200(blobs, strict_server, strict_sqs, queue_name):
    url, key = _sent_by_extended_client(blobs, strict_server, strict_sqs, queue_name)
    answer = asyncio.Event()
    attempts: list[Recorded] = []

    async def fail_then_wait(request: Recorded) -> web.StreamResponse:
        attempts.append(request)
        if len(attempts) == 1:
            return web.Response(status=500)
        await answer.wait()
        return web.Response(status=200)

    async def scenario() -> None:
        async with recording_app(fail_then_wait) as app, running_worker(
                url, app.url, **_payload_options(blobs)):
            await wait_until(lambda: len(app.requests) == 2, what="the second attempt")
            # A failed POST and one still open: the blob must still be there.
            assert await aio(blobs.exists, key)
            assert app.requests[0].body == app.requests[1].body == LARGE.encode()
            answer.set()
            await wait_until(lambda: queue_total(strict_sqs, url) == 0, what="the delete")
            await wait_until(lambda: not blobs.exists(key), what="the blob's delete")

    run(scenario())


def test_delete_payloads_off_keeps_the_blob(blobs, strict_server, strict_sqs, queue_name):
    url, key = _sent_by_extended_client(blobs, strict_server, strict_sqs, queue_name)

    async def scenario() -> None:
        async with recording_app() as app, running_worker(
                url, app.url, DeletePayloads="false", **_payload_options(blobs)):
            await wait_until(lambda: queue_total(strict_sqs, url) == 0, what="the delete")
        assert [r.body for r in app.requests] == [LARGE.encode()]

    run(scenario())
    assert blobs.exists(key)


def test_a_missing_blob_fails_its_message_into_the_dead_letter_queue(
        blobs, strict_server, strict_sqs, queue_name, caplog):
    """The pointer names a key nobody stored: each attempt fails without a POST, is
    logged with the bucket and key, and after MaxRetries the message (pointer and all)
    sits in the dead-letter queue."""
    pointer = Pointer(blobs.bucket, "never-stored")

    async def scenario() -> None:
        configured = strict_server.url + "/000000000000/" + queue_name
        async with recording_app() as app, running_worker(
                configured, app.url, MaxRetries=2, **_payload_options(blobs)) as worker:
            dlq_url = worker.queues.dead_letter_url
            await aio(strict_sqs.send_message, QueueUrl=worker.queue_url,
                      MessageBody=pointer.body(), MessageAttributes=pointer.attributes(10))
            dead = await _receive_one(strict_sqs, dlq_url)
        assert app.requests == []
        assert dead["Body"] == pointer.body()
        assert SIZE_ATTRIBUTE in dead["MessageAttributes"]

    with caplog.at_level(logging.WARNING, logger="conveyor.worker"):
        run(scenario())
    failures = [r.getMessage() for r in caplog.records if "payload-unavailable" in
                r.getMessage()]
    assert len(failures) == 2
    assert all(f"s3://{blobs.bucket}/never-stored" in line for line in failures)


def test_a_pointer_to_another_bucket_is_refused_with_payload_bucket(
        blobs, strict_server, strict_sqs, queue_name, caplog):
    """PayloadBucket limits what a sender can make the worker read and delete."""
    url, key = _sent_by_extended_client(blobs, strict_server, strict_sqs, queue_name)

    async def scenario() -> None:
        async with recording_app() as app, running_worker(
                url, app.url, PayloadBucket="another-bucket", **_payload_options(blobs)):
            await wait_until(lambda: "is not PayloadBucket" in caplog.text,
                             what="the refusal")
        assert app.requests == []

    with caplog.at_level(logging.WARNING, logger="conveyor.worker"):
        run(scenario())
    assert blobs.exists(key)


def test_compressed_body_from_conveyor_message_send_is_inflated_for_the_app(
        blobs, strict_server, strict_sqs, queue_name):
    url = make_queue(strict_sqs, queue_name)
    sent = conveyor_cli("message", "send", url, "-", "--compress", "--endpoint-url",
                        strict_server.url, "--payload-endpoint-url", blobs.endpoint_url,
                        "--payload-bucket", blobs.bucket, stdin=LARGE)
    assert sent.returncode == 0, sent.stderr
    on_queue = _peek(strict_sqs, url)
    assert on_queue["MessageAttributes"]["ConveyorPayloadEncoding"]["StringValue"] == "gzip"
    stored = int(on_queue["MessageAttributes"][SIZE_ATTRIBUTE]["StringValue"])
    assert stored < len(LARGE.encode())  # what is stored is the compressed body

    posted = _delivered_once(url, strict_sqs, blobs)
    assert posted.body == LARGE.encode()
    assert "X-Aws-Sqsd-Attr-ConveyorPayloadEncoding" not in posted.headers


def _delivered_once(url: str, sqs, blobs) -> Recorded:
    """Run a worker until the queue is empty; the one request its app received."""
    async def scenario() -> list[Recorded]:
        async with recording_app() as app, running_worker(
                url, app.url, **_payload_options(blobs)):
            await wait_until(lambda: queue_total(sqs, url) == 0, what="the delete")
        return app.requests

    [posted] = run(scenario())
    return posted


async def _receive_one(sqs, url: str) -> dict:
    for _ in range(30):
        answer = await aio(sqs.receive_message, QueueUrl=url, WaitTimeSeconds=1,
                           MessageAttributeNames=["All"])
        if answer.get("Messages"):
            return answer["Messages"][0]
    raise AssertionError(f"nothing arrived in {url}")


def test_the_legacy_pointer_and_attribute_are_resolved_too(strict_server, strict_sqs,
                                                           queue_name):
    """Older Java clients wrote `com.amazon.sqs.javamessaging.MessageS3Pointer` and
    `SQSLargePayloadSize`; the Extended Client still writes them with
    use_legacy_attribute (LEGACY_MESSAGE_POINTER_CLASS, LEGACY_RESERVED_ATTRIBUTE_NAME)."""
    blobs = embedded_store(strict_server)
    url = make_queue(strict_sqs, queue_name)
    sender = extended_client(strict_server.url, blobs, delete_payloads=False)
    sender.use_legacy_attribute = True
    sender.send_message(QueueUrl=url, MessageBody=LARGE)
    on_queue = _peek(strict_sqs, url)
    assert json.loads(on_queue["Body"])[0] == "com.amazon.sqs.javamessaging.MessageS3Pointer"
    assert "SQSLargePayloadSize" in on_queue["MessageAttributes"]

    posted = _delivered_once(url, strict_sqs, blobs)
    assert posted.body == LARGE.encode()
    assert "X-Aws-Sqsd-Attr-SQSLargePayloadSize" not in posted.headers


def test_an_expired_message_is_deleted_unposted_with_its_blob(strict_server, strict_sqs,
                                                              queue_name):
    """RetentionPeriod over (the worker's wall clock moved past it): deleted unposted, as
    Elastic Beanstalk does, and - no copy of it living on - its blob with it."""
    blobs = embedded_store(strict_server)
    url, key = _sent_by_extended_client(blobs, strict_server, strict_sqs, queue_name)

    async def scenario() -> None:
        async with recording_app() as app, running_worker(
                url, app.url, clock=Clock(offset_s=400_000), RetentionPeriod=345600,
                **_payload_options(blobs)):
            await wait_until(lambda: queue_total(strict_sqs, url) == 0, what="the delete")
            await wait_until(lambda: not blobs.exists(key), what="the blob's delete")
        assert app.requests == []

    run(scenario())


def test_batches_carry_whole_bodies_and_a_missing_blob_fails_alone(
        strict_server, strict_sqs, queue_name):
    """With BatchSize, each record's `body` is the stored body (Lambda's SQS event shape,
    as batch_delivery.py builds it), its messageAttributes without the reserved one; a
    message whose blob is missing is left out of the POST and retried, the others done."""
    blobs = embedded_store(strict_server)
    url, key = _sent_by_extended_client(blobs, strict_server, strict_sqs, queue_name)
    strict_sqs.send_message(QueueUrl=url, MessageBody="inline")
    missing = Pointer(blobs.bucket, "never-stored")
    strict_sqs.send_message(QueueUrl=url, MessageBody=missing.body(),
                            MessageAttributes=missing.attributes(10))

    async def empty_answer(_request: Recorded) -> web.StreamResponse:
        return web.Response(status=200, text="")  # Lambda's "all succeeded"

    async def scenario() -> list[dict]:
        async with recording_app(empty_answer) as app, running_worker(
                url, app.url, BatchSize=10, **_payload_options(blobs)):
            await wait_until(lambda: not blobs.exists(key), what="the blob's delete")
            await wait_until(lambda: queue_total(strict_sqs, url) == 1, what="two deletes")
        return [record for request in app.requests
                for record in json.loads(request.body)["Records"]]

    records = run(scenario())
    bodies = sorted(record["body"] for record in records)
    assert bodies == sorted([LARGE, "inline"])
    assert all(SIZE_ATTRIBUTE not in record["messageAttributes"] for record in records)
