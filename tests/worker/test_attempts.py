"""Each failed attempt is logged and kept with its message (worker/attempts.py): a real
worker, a real app that fails in each way, a real server on each store; the dead letter's
attempts read back through the API (issue 34, item 5)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web

from conveyor.client import Attempt, SQSClient
from conveyor.client.attempts import answer_head
from conveyor.worker.attempts import reason_of
from conveyor.worker.delivery import Outcome
from tests.support import (
    POSTGRES_URL,
    STORES,
    ServerProcess,
    free_port,
    isolated,
    require_postgres,
    sqs_client,
)
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

TRACEBACK = ("Traceback (most recent call last):\n  File \"app.py\", line 7\n"
             "ZeroDivisionError: división by zero\n" + "x" * 600)  # past 512 bytes


@pytest.fixture(scope="module", params=STORES)
def store_server(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[ServerProcess]:
    """A relaxed server on each store (PostgreSQL's skipped locally without one)."""
    args = ["--mode", "relaxed"]
    if request.param == "postgresql":
        require_postgres()
        args += isolated(["--store", POSTGRES_URL])
    proc = ServerProcess(tmp_path_factory.mktemp(f"att-{request.param}"), *args).start()
    yield proc
    proc.stop()


async def dead_letter_of(sqs: Any, dlq_url: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = await aio(sqs.receive_message, QueueUrl=dlq_url, WaitTimeSeconds=1,
                        VisibilityTimeout=0)
        if got.get("Messages"):
            return got["Messages"][0]
    raise AssertionError(f"nothing arrived in {dlq_url}")


async def recorded(endpoint: str, queue_url: str, message_id: str, count: int
                   ) -> list[Attempt]:
    """The message's attempts, once `count` are kept (the last is recorded after the
    message moved on, FLUSH_AFTER_S later)."""
    async with SQSClient(endpoint) as client:
        found: list[Attempt] = []

        async def enough() -> bool:
            found[:] = await client.message_attempts(queue_url, message_id)
            return len(found) >= count

        await wait_until(enough, what=f"{count} recorded attempts")
        return found


def test_a_dead_letter_says_why_it_died(store_server: ServerProcess, queue_name: str) -> None:
    """Refused (the app is not up yet), then a 500 with a traceback, a 429, a timeout:
    MaxRetries 3 dead-letters it, and its dead letter carries all four attempts."""
    sqs = sqs_client(store_server.url)
    port = free_port()
    hang = asyncio.Event()

    async def failing(request: Recorded) -> web.StreamResponse:
        n = len(app.calls_for(request.msgid))
        if n == 1:
            return web.Response(status=500, text=TRACEBACK)
        if n == 2:
            return web.Response(status=429, text="slow down", headers={"Retry-After": "0"})
        await hang.wait()  # past InactivityTimeout
        return web.Response(status=200)

    async def scenario() -> tuple[list[Attempt], str, int, int]:
        nonlocal app
        configured = f"{store_server.url}/000000000000/{queue_name}"
        started_ms = int(time.time() * 1000)
        async with running_worker(configured, f"http://127.0.0.1:{port}", MaxRetries=3,
                                  InactivityTimeout=1) as worker:
            url, dlq_url = worker.queue_url, worker.queues.dead_letter_url
            message_id = (await aio(sqs.send_message, QueueUrl=url,
                                    MessageBody="job"))["MessageId"]
            await wait_until(lambda: worker.metrics.value(
                "conveyor_worker_messages_failed_total", status="connect-failed") >= 1,
                what="a refused connection")
            async with recording_app(failing, port=port) as app:
                dead = await dead_letter_of(sqs, dlq_url)
                assert dead["MessageId"] == message_id
                found = await recorded(store_server.url, dlq_url, message_id, 4)
                hang.set()
            worker_id = worker.presence.worker_id
        return found, worker_id, started_ms, int(time.time() * 1000)

    app: Any = None
    found, worker_id, started_ms, ended_ms = run(scenario())
    assert [(a.reason, a.status) for a in found] == [
        ("refused", None), ("http-500", 500), ("http-429", 429), ("timeout", None)]
    assert found[1].answer_head == TRACEBACK.encode()[:512].decode()
    assert len(found[1].answer_head.encode()) == 512
    assert found[2].answer_head == "slow down"
    assert found[0].answer_head == found[3].answer_head == ""
    assert all(a.worker_id == worker_id for a in found)
    times = [a.at_ms for a in found]
    assert times == sorted(times) and started_ms <= times[0] and times[-1] <= ended_ms


def test_a_message_keeps_only_its_last_attempts(server: ServerProcess, queue_name: str
                                                ) -> None:
    """Limits.max_attempts_kept: 12 failures, the last 10 kept."""
    sqs = sqs_client(server.url)

    async def failing(request: Recorded) -> web.StreamResponse:
        return web.Response(status=500, text=f"failure {request.receive_count}")

    async def scenario() -> list[Attempt]:
        configured = f"{server.url}/000000000000/{queue_name}"
        async with recording_app(failing) as app, running_worker(
                configured, app.url, MaxRetries=12) as worker:
            message_id = (await aio(sqs.send_message, QueueUrl=worker.queue_url,
                                    MessageBody="poison"))["MessageId"]
            dlq_url = worker.queues.dead_letter_url
            await dead_letter_of(sqs, dlq_url)
            await wait_until(lambda: len(app.calls_for(message_id)) == 12, what="12 POSTs")
            async with SQSClient(server.url) as client:
                found: list[Attempt] = []

                async def last_kept() -> bool:
                    found[:] = await client.message_attempts(dlq_url, message_id)
                    return bool(found) and found[-1].answer_head == "failure 12"

                await wait_until(last_kept, what="the 12th failure recorded")
                return found

    found = run(scenario())
    assert [a.answer_head for a in found] == [f"failure {n}" for n in range(3, 13)]


def test_batched_failures_are_kept_per_message(server: ServerProcess, queue_name: str) -> None:
    """With BatchSize the app's partial batch response fails one message of the batch:
    that one's attempt is kept, with the head of the answer that named it."""
    sqs = sqs_client(server.url)
    failed_ids: list[str] = []

    async def partial(request: Recorded) -> web.StreamResponse:
        records = json.loads(request.body)["Records"]
        failures = [{"itemIdentifier": r["messageId"]} for r in records
                    if r["body"] == "bad"]
        return web.json_response({"batchItemFailures": failures})

    async def scenario() -> tuple[list[Attempt], int]:
        configured = f"{server.url}/000000000000/{queue_name}"
        async with recording_app(partial) as app, running_worker(
                configured, app.url, MaxRetries=1, BatchSize=2) as worker:
            url, dlq_url = worker.queue_url, worker.queues.dead_letter_url
            await aio(sqs.send_message_batch, QueueUrl=url, Entries=[
                {"Id": "good", "MessageBody": "good"}, {"Id": "bad", "MessageBody": "bad"}])
            dead = await dead_letter_of(sqs, dlq_url)
            failed_ids.append(dead["MessageId"])
            found = await recorded(server.url, dlq_url, dead["MessageId"], 1)
            await wait_until(lambda: queue_total(sqs, url) == 0, what="the good one deleted")
            posts = len(app.requests)
        return found, posts

    found, posts = run(scenario())
    [attempt] = found
    assert attempt.reason == "batch-item-failure" and attempt.status is None
    assert json.loads(attempt.answer_head) == {
        "batchItemFailures": [{"itemIdentifier": failed_ids[0]}]}
    assert posts >= 1


def test_on_moto_attempts_are_logged_and_the_worker_carries_on(moto_sqs_url: str,
                                                               queue_name: str,
                                                               caplog: Any) -> None:
    moto = sqs_client(moto_sqs_url)
    url = make_queue(moto, queue_name)

    async def fail_twice(request: Recorded) -> web.StreamResponse:
        if request.receive_count <= 2:
            return web.Response(status=500, text=f"nope {request.receive_count}")
        return web.Response(status=200)

    async def scenario() -> tuple[list[str], float]:
        async with recording_app(fail_twice) as app, running_worker(
                url, app.url, CreateQueue=False, BatchSize=0) as worker:
            ids = [(await aio(moto.send_message, QueueUrl=url, MessageBody=f"m{i}"))[
                "MessageId"] for i in range(2)]
            await wait_until(lambda: queue_total(moto, url) == 0, what="both deleted")
            await wait_until(lambda: len(app.requests) == 6, what="six POSTs")
        # Read once the worker has stopped: it records attempts in the background, so the
        # refused call may come after the deletes (at the latest, in the drain).
        calls = worker.metrics.value("conveyor_worker_api_calls_total",
                                     action="RecordAttempts", outcome="HTTP500")
        return ids, calls

    with caplog.at_level(logging.DEBUG, logger="conveyor.worker"):
        ids, calls = run(scenario())
    lines = [r.getMessage() for r in caplog.records]
    failed = [line for line in lines if line.startswith("attempt failed:")]
    assert sorted(failed) == sorted(
        f"attempt failed: queue={queue_name} message={message_id} status=500 "
        f"reason=http-500 answer='nope {n}'" for message_id in ids for n in (1, 2))
    said = [line for line in lines if line.startswith("job failed:")]  # what people read
    assert sorted(line.rsplit(" ", 1)[-1] for line in said) == ["1'", "1'", "2'", "2'"]
    assert all("answer='nope " in line for line in said)
    assert len([line for line in lines if "does not keep attempts" in line]) == 1
    assert calls == 1  # refused once, then never asked again


@pytest.mark.parametrize(("outcome", "expected"), [
    (Outcome(False, "500", 0.1), ("http-500", 500)),
    (Outcome(False, "429", 0.1, retry_after_s=3), ("http-429", 429)),
    (Outcome(False, "connect-failed", 0.0), ("refused", None)),
    (Outcome(False, "inactivity-timeout", 1.0), ("timeout", None)),
    (Outcome(False, "payload-unavailable", 0.0), ("payload-unavailable", None)),
    (Outcome(False, "batch-item-failure", 0.0), ("batch-item-failure", None)),
    (Outcome(False, "Weird Thing!", 0.0), ("weird-thing", None)),
])
def test_each_outcome_has_a_short_reason(outcome: Outcome, expected: tuple) -> None:
    assert reason_of(outcome) == expected


def test_an_answer_head_is_text_of_at_most_512_bytes() -> None:
    assert answer_head(b"plain") == "plain"
    assert answer_head(b"\xff" * 600) == "\ufffd" * 170  # 3 bytes each: 510 of 512
    assert answer_head("é".encode() * 300) == "é" * 256  # cut between characters
    assert len(answer_head("€".encode() * 200).encode()) <= 512
