"""What the app receives and what becomes of the message: headers, status codes, limits."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime

import pytest
from aiohttp import web

from conveyor.worker.signing import SIGNATURE_HEADER, verify
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


def test_exact_headers_body_and_path(sqs, queue_name):
    url = make_queue(sqs, queue_name)
    body = '{"hello": "wörld ✓", "n": 1}'
    attributes = {
        "color": {"DataType": "String", "StringValue": "red"},
        "size": {"DataType": "Number", "StringValue": "42"},
        "ratio": {"DataType": "Number.float", "StringValue": "0.5"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
    }

    async def scenario() -> None:
        async with recording_app() as app, running_worker(
                url, app.url, HttpPath="/jobs/run", MimeType="text/x-job; charset=utf-8",
                SigningSecret="s3cret"):
            sent = await aio(sqs.send_message, QueueUrl=url, MessageBody=body,
                             MessageAttributes=attributes)
            await wait_until(lambda: app.requests, what="the POST")
            await wait_until(lambda: queue_total(sqs, url) == 0, what="the delete")
        [request] = app.requests
        headers = request.headers
        assert request.method == "POST"
        assert request.path == "/jobs/run"
        assert request.body == body.encode()
        assert headers["Content-Type"] == "text/x-job; charset=utf-8"
        assert headers["User-Agent"].startswith("aws-sqsd")
        assert headers["X-Aws-Sqsd-Msgid"] == sent["MessageId"]
        assert headers["X-Aws-Sqsd-Queue"] == queue_name
        assert headers["X-Aws-Sqsd-Receive-Count"] == "1"
        first = headers["X-Aws-Sqsd-First-Received-At"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", first)
        assert datetime.strptime(first, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        assert headers["X-Aws-Sqsd-Attr-color"] == "red"
        assert headers["X-Aws-Sqsd-Attr-size"] == "42"
        assert headers["X-Aws-Sqsd-Attr-ratio"] == "0.5"
        assert not any(name.lower() == "x-aws-sqsd-attr-blob" for name in headers)
        assert verify("s3cret", headers[SIGNATURE_HEADER], request.body)
        assert not verify("wrong", headers[SIGNATURE_HEADER], request.body)

    run(scenario())


@pytest.mark.parametrize(("status", "any_2xx", "accepted"), [
    (200, False, True),
    (500, False, False),
    (201, False, False),  # Elastic Beanstalk accepts only 200
    (201, True, True),
    (204, True, True),
    (302, True, False),
])
def test_status_code_decides_delete_or_retry(sqs, queue_name, status, any_2xx, accepted):
    url = make_queue(sqs, queue_name)

    async def answer(_request: Recorded) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": "/elsewhere"})

    async def scenario() -> None:
        async with recording_app(answer) as app, running_worker(
                url, app.url, AcceptAny2xx=str(any_2xx)) as worker:
            msgid = (await aio(sqs.send_message, QueueUrl=url, MessageBody="job"))["MessageId"]
            if accepted:
                await wait_until(lambda: queue_total(sqs, url) == 0, what="the delete")
                assert len(app.calls_for(msgid)) == 1
                assert worker.metrics.value("conveyor_worker_messages_succeeded_total") == 1
            else:
                # ErrorVisibilityTimeout 0: the message comes straight back
                await wait_until(lambda: len(app.calls_for(msgid)) >= 3, what="retries")
                counts = [r.receive_count for r in app.calls_for(msgid)[:3]]
                assert counts == [1, 2, 3]
                failed = worker.metrics.value("conveyor_worker_messages_failed_total",
                                              status=str(status))
                assert failed >= 2
                assert worker.metrics.value("conveyor_worker_messages_succeeded_total") == 0

    run(scenario())


def test_http_connections_limit_under_load(sqs, queue_name):
    url = make_queue(sqs, queue_name)

    async def slow(_request: Recorded) -> web.StreamResponse:
        await asyncio.sleep(0.05)
        return web.Response(status=200)

    async def scenario() -> None:
        async with recording_app(slow) as app, running_worker(url, app.url, HttpConnections=3):
            for start in range(0, 60, 10):
                entries = [{"Id": str(i), "MessageBody": f"job-{start + i}"} for i in range(10)]
                await aio(sqs.send_message_batch, QueueUrl=url, Entries=entries)
            await wait_until(lambda: len({r.body for r in app.requests}) == 60, what="60 jobs")
            await wait_until(lambda: queue_total(sqs, url) == 0, what="the deletes")
        assert app.max_active == 3
        assert len(app.requests) == 60

    run(scenario())


def test_long_job_is_kept_invisible_and_processed_once(sqs, queue_name):
    url = make_queue(sqs, queue_name)

    async def long_job(_request: Recorded) -> web.StreamResponse:
        await asyncio.sleep(3.5)  # 3.5 × the visibility timeout below
        return web.Response(status=200)

    async def scenario() -> None:
        async with recording_app(long_job) as app, running_worker(
                url, app.url, VisibilityTimeout=1, InactivityTimeout=60,
                HttpConnections=5) as worker:
            await aio(sqs.send_message, QueueUrl=url, MessageBody="long")
            await wait_until(lambda: queue_total(sqs, url) == 0, what="the delete")
            extensions = worker.metrics.value("conveyor_worker_visibility_extensions_total")
        assert len(app.requests) == 1
        assert extensions >= 2

    run(scenario())


def test_idle_queue_parks_all_pollers_but_one(sqs, queue_name):
    url = make_queue(sqs, queue_name)

    async def scenario() -> None:
        async with recording_app() as app, running_worker(url, app.url,
                                                          HttpConnections=50) as worker:
            assert worker._pollers > 1
            await wait_until(lambda: worker._idle.active == 1, what="one active poller")
            entries = [{"Id": str(i), "MessageBody": f"j{i}"} for i in range(10)]
            await aio(sqs.send_message_batch, QueueUrl=url, Entries=entries)
            await wait_until(lambda: len(app.requests) == 10, what="the jobs")
            await wait_until(lambda: queue_total(sqs, url) == 0, what="the deletes")

    run(scenario())
