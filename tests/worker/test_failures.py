"""When the app fails, hangs or is not there; retention; dead letters."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time

from aiohttp import web

from conveyor.clock import Clock
from tests.server.helpers import advance_clock
from tests.support import free_port
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


def test_hanging_app_is_abandoned_after_inactivity_timeout(sqs, queue_name):
    url = make_queue(sqs, queue_name)
    release = asyncio.Event()

    async def hang_first(request: Recorded) -> web.StreamResponse:
        if request.receive_count == 1:
            await release.wait()  # never answers in time
        return web.Response(status=200)

    async def scenario() -> None:
        async with recording_app(hang_first) as app, running_worker(
                url, app.url, InactivityTimeout=1) as worker:
            msgid = (await aio(sqs.send_message, QueueUrl=url, MessageBody="x"))["MessageId"]
            await wait_until(lambda: queue_total(sqs, url) == 0, what="the delete")
            timeouts = worker.metrics.value("conveyor_worker_messages_failed_total",
                                            status="inactivity-timeout")
            release.set()
        assert [r.receive_count for r in app.calls_for(msgid)] == [1, 2]
        assert timeouts == 1

    run(scenario())


def test_refused_connection_holds_the_message_until_the_app_listens(sqs, queue_name):
    """Tried again here (the circuit breaker's probe), not given back: it costs no
    receive (issue 22)."""
    url = make_queue(sqs, queue_name)
    port = free_port()

    async def scenario() -> None:
        async with running_worker(url, f"http://127.0.0.1:{port}",
                                  ErrorVisibilityTimeout=1) as worker:
            msgid = (await aio(sqs.send_message, QueueUrl=url, MessageBody="x"))["MessageId"]
            await wait_until(lambda: worker.metrics.value(
                "conveyor_worker_messages_failed_total", status="connect-failed") >= 1,
                what="a refused connection")
            async with recording_app(port=port) as app:
                await wait_until(lambda: queue_total(sqs, url) == 0, what="the delete")
        [request] = app.calls_for(msgid)
        assert request.receive_count == 1

    run(scenario())


def test_message_older_than_retention_period_is_deleted_unposted(sqs, queue_name):
    url = make_queue(sqs, queue_name)

    async def scenario() -> None:
        async with recording_app() as app, running_worker(
                url, app.url, RetentionPeriod=86400, clock=Clock(offset_s=2 * 86400)) as worker:
            await aio(sqs.send_message, QueueUrl=url, MessageBody="stale")
            await wait_until(lambda: queue_total(sqs, url) == 0, what="the delete")
            expired = worker.metrics.value("conveyor_worker_messages_expired_total")
        assert app.requests == []
        assert expired == 1

    run(scenario())


def test_retention_period_counts_from_sent_timestamp(clock_server, clock_sqs, queue_name,
                                                     caplog):
    """Seed 000: RetentionPeriod is how long a message is valid. One that waited in the
    backlog longer than that is not POSTed, though this is its first receive."""
    sqs = clock_sqs
    url = make_queue(sqs, queue_name)
    msgid = sqs.send_message(QueueUrl=url, MessageBody="stale")["MessageId"]
    advance_clock(clock_server.url, 120)  # it waits two minutes before anyone receives it

    async def scenario() -> None:
        async with recording_app() as app, running_worker(
                url, app.url, RetentionPeriod=60) as worker:
            await wait_until(lambda: queue_total(sqs, url) == 0, what="the delete")
            expired = worker.metrics.value("conveyor_worker_messages_expired_total")
        assert app.requests == []
        assert expired == 1

    with caplog.at_level(logging.INFO, logger="conveyor.worker"):
        run(scenario())
    [line] = [r.getMessage() for r in caplog.records if "expired" in r.getMessage()]
    assert f"message={msgid}" in line
    assert f"queue={queue_name}" in line
    age = re.search(r"age=(\d+)s", line)
    assert age is not None and int(age.group(1)) >= 120


def test_expired_message_goes_to_the_dead_letter_queue_when_asked(clock_server, clock_sqs,
                                                                  queue_name):
    sqs = clock_sqs
    dlq_url = make_queue(sqs, f"{queue_name}-dlq")
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url,
                                       AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = make_queue(sqs, queue_name, RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 10}))
    attributes = {"tenant": {"DataType": "String", "StringValue": "acme"},
                  "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xff"}}
    sqs.send_message(QueueUrl=url, MessageBody="stale", MessageAttributes=attributes)
    advance_clock(clock_server.url, 120)

    async def scenario() -> None:
        async with recording_app() as app, running_worker(
                url, app.url, RetentionPeriod=60, ExpiredToDeadLetter=True) as worker:
            dead = await _receive_one(sqs, dlq_url)
            await wait_until(lambda: queue_total(sqs, url) == 0, what="the delete")
            expired = worker.metrics.value("conveyor_worker_messages_expired_total")
        assert app.requests == []
        assert dead["Body"] == "stale"
        assert dead["MessageAttributes"] == attributes
        assert expired == 1

    run(scenario())


def test_max_retries_ends_in_dead_letter_queue_intact(sqs, queue_name):
    body = json.dumps({"order": 1042, "note": "ünïcode ✓"})
    attributes = {
        "tenant": {"DataType": "String", "StringValue": "acme"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
    }

    async def fail(_request: Recorded) -> web.StreamResponse:
        return web.Response(status=500)

    async def scenario() -> None:
        # The worker creates the queue and its dead-letter queue (CreateQueue defaults on).
        configured = sqs.meta.endpoint_url + "/000000000000/" + queue_name
        async with recording_app(fail) as app, running_worker(
                configured, app.url, MaxRetries=3) as worker:
            url, dlq_url = worker.queue_url, worker.queues.dead_letter_url
            sent = await aio(sqs.send_message, QueueUrl=url, MessageBody=body,
                             MessageAttributes=attributes)
            dead = await _receive_one(sqs, dlq_url)
            dead_lettered = worker.metrics.value("conveyor_worker_messages_dead_lettered_total")
        policy = json.loads(sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]["RedrivePolicy"])
        assert int(policy["maxReceiveCount"]) == 3
        assert dead["MessageId"] == sent["MessageId"]
        assert dead["Body"] == body
        assert dead["MessageAttributes"] == attributes
        assert [r.receive_count for r in app.calls_for(sent["MessageId"])] == [1, 2, 3]
        assert dead_lettered == 1
        assert queue_total(sqs, url) == 0

    run(scenario())


async def _receive_one(sqs, url: str) -> dict:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = await aio(sqs.receive_message, QueueUrl=url, WaitTimeSeconds=1,
                           MessageAttributeNames=["All"])
        if answer.get("Messages"):
            return answer["Messages"][0]
    raise AssertionError(f"nothing arrived in {url}")


def test_retry_after_is_honoured_and_backoff_logged(sqs, queue_name, caplog):
    url = make_queue(sqs, queue_name)

    async def throttle(_request: Recorded) -> web.StreamResponse:
        return web.Response(status=429, headers={"Retry-After": "7"})

    async def scenario() -> None:
        async with recording_app(throttle) as app, running_worker(url, app.url):
            await aio(sqs.send_message, QueueUrl=url, MessageBody="x")
            await wait_until(lambda: "retry in 7s" in caplog.text, what="the failure log")
            calls = len(app.requests)
        assert calls == 1  # not back before its Retry-After
        [line] = [r.getMessage() for r in caplog.records if "job failed" in r.getMessage()]
        assert f"queue={queue_name}" in line
        assert "status=429" in line
        assert "receive_count=1" in line

    with caplog.at_level(logging.WARNING, logger="conveyor.worker"):
        run(scenario())
