"""FIFO worker queues: one message per MessageGroupId at the app at a time, in order; a
failing message holds its group back without costing the messages behind it a receive."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

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


def _fifo_with_dead_letter(sqs, name: str, max_receive_count: int) -> tuple[str, str]:
    """A FIFO queue and its FIFO dead-letter queue, made with boto3 before any worker runs."""
    dlq_url = make_queue(sqs, f"{name}-dlq.fifo", FifoQueue="true")
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url,
                                       AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count})
    url = make_queue(sqs, f"{name}.fifo", FifoQueue="true", RedrivePolicy=redrive)
    return url, dlq_url


def _send_all(sqs, url: str, messages: list[tuple[str, str]]) -> None:
    """Send (group, body) pairs in this order, in one batch: one receive sees them all."""
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": body, "MessageGroupId": group,
         "MessageDeduplicationId": body} for i, (group, body) in enumerate(messages)])


def _bodies(app, prefix: str) -> list[str]:
    return [r.body.decode() for r in app.requests if r.body.decode().startswith(prefix)]


def test_failing_message_holds_its_group_while_other_groups_proceed(sqs, queue_name):
    url, _dlq_url = _fifo_with_dead_letter(sqs, queue_name, max_receive_count=5)
    _send_all(sqs, url, [("A", "A1"), ("B", "B1"), ("A", "A2"), ("B", "B2"), ("A", "A3"),
                         ("B", "B3")])
    a1_attempts = 0

    async def behaviour(request: Recorded) -> web.StreamResponse:
        nonlocal a1_attempts
        if request.body != b"A1":
            return web.Response(status=200)
        a1_attempts += 1
        if a1_attempts == 2:
            # While A1 is being retried, group B finishes (the groups run in parallel) and
            # A1, A2, A3 all stay in the queue: nothing of group A is deleted out of order.
            await wait_until(lambda: queue_total(sqs, url) == 3,
                             what="group B done while group A waits")
        return web.Response(status=500 if a1_attempts <= 2 else 200)

    async def scenario() -> None:
        async with recording_app(behaviour) as app, running_worker(
                url, app.url, MaxRetries=5) as worker:
            await wait_until(lambda: queue_total(sqs, url) == 0, what="every delete")
            dead_lettered = worker.metrics.value("conveyor_worker_messages_dead_lettered_total")
        assert _bodies(app, "A") == ["A1", "A1", "A1", "A2", "A3"]
        assert _bodies(app, "B") == ["B1", "B2", "B3"]
        counts = {r.body.decode(): r.receive_count for r in app.requests}
        # The later messages of group A waited here without being received again.
        assert (counts["A2"], counts["A3"]) == (1, 1)
        assert [r.receive_count for r in app.requests if r.body == b"A1"] == [1, 2, 3]
        assert dead_lettered == 0

    run(scenario())


def test_one_request_per_group_at_a_time(sqs, queue_name):
    url = make_queue(sqs, f"{queue_name}.fifo", FifoQueue="true")
    _send_all(sqs, url, [("G", f"G{i}") for i in range(1, 8)])

    async def slow(_request: Recorded) -> web.StreamResponse:
        await asyncio.sleep(0.02)  # gives a second POST of the group the chance to overlap
        return web.Response(status=200)

    async def scenario() -> None:
        async with recording_app(slow) as app, running_worker(url, app.url):
            await wait_until(lambda: queue_total(sqs, url) == 0, what="every delete")
        assert _bodies(app, "G") == [f"G{i}" for i in range(1, 8)]
        assert app.max_active == 1

    run(scenario())


def test_poison_message_is_dead_lettered_and_its_group_carries_on(sqs, queue_name):
    url, dlq_url = _fifo_with_dead_letter(sqs, queue_name, max_receive_count=3)
    _send_all(sqs, url, [("A", "A1"), ("A", "A2"), ("A", "A3")])

    async def poison(request: Recorded) -> web.StreamResponse:
        return web.Response(status=500 if request.body == b"A1" else 200)

    async def scenario() -> None:
        async with recording_app(poison) as app, running_worker(
                url, app.url, MaxRetries=3) as worker:
            await wait_until(lambda: queue_total(sqs, url) == 0, what="the group to finish")
            dead_lettered = worker.metrics.value("conveyor_worker_messages_dead_lettered_total")
        assert _bodies(app, "A") == ["A1", "A1", "A1", "A2", "A3"]
        assert [r.receive_count for r in app.requests] == [1, 2, 3, 1, 1]
        dead = (await aio(sqs.receive_message, QueueUrl=dlq_url, MaxNumberOfMessages=10,
                          WaitTimeSeconds=1, MessageSystemAttributeNames=["All"]))["Messages"]
        assert [(m["Body"], m["Attributes"]["MessageGroupId"]) for m in dead] == [("A1", "A")]
        assert dead_lettered == 1

    run(scenario())


def test_drain_hands_a_held_group_back_in_order(sqs, queue_name):
    url = make_queue(sqs, f"{queue_name}.fifo", FifoQueue="true")
    _send_all(sqs, url, [("A", "A1"), ("A", "A2"), ("A", "A3")])

    async def fail(_request: Recorded) -> web.StreamResponse:
        return web.Response(status=500)

    async def scenario() -> None:
        async with recording_app(fail) as app, running_worker(
                url, app.url, ErrorVisibilityTimeout=600, MaxErrorVisibilityTimeout=600):
            await wait_until(lambda: app.requests, what="the first POST")
        # Stopped while A1 waited for its retry: the whole group is back, A1 first.
        assert _bodies(app, "A") == ["A1"]
        got = (await aio(sqs.receive_message, QueueUrl=url, MaxNumberOfMessages=10,
                         WaitTimeSeconds=1))["Messages"]
        assert [m["Body"] for m in got] == ["A1", "A2", "A3"]

    run(scenario())


def test_held_group_stays_invisible_while_it_waits(sqs, queue_name):
    url = make_queue(sqs, f"{queue_name}.fifo", FifoQueue="true")
    _send_all(sqs, url, [("A", "A1"), ("A", "A2")])

    async def fail_first(request: Recorded) -> web.StreamResponse:
        return web.Response(status=500 if request.receive_count == 1 and request.body == b"A1"
                            else 200)

    async def scenario() -> None:
        # A1's retry waits longer than the visibility timeout: the heartbeat keeps both
        # messages invisible, so no other consumer gets the group meanwhile.
        async with recording_app(fail_first) as app, running_worker(
                url, app.url, VisibilityTimeout=2, ErrorVisibilityTimeout=5):
            await wait_until(lambda: app.requests, what="A1's first POST")
            other = await aio(sqs.receive_message, QueueUrl=url, MaxNumberOfMessages=10,
                              WaitTimeSeconds=3)
            await wait_until(lambda: queue_total(sqs, url) == 0, what="every delete")
        assert other.get("Messages", []) == []
        assert [(r.body.decode(), r.receive_count) for r in app.requests] == [
            ("A1", 1), ("A1", 2), ("A2", 1)]

    run(scenario())
