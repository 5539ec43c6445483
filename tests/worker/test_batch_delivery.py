"""BatchSize: several messages per POST as AWS Lambda's SQS event, the answer read as Lambda's
partial batch response — against a real Conveyor server (boto3 over a socket) and a real
app server (tests/worker/apps/batch_app.py, `http.server`, a process of its own).

What is expected comes from the AWS Lambda Developer Guide, "Using Lambda with Amazon SQS":
the example events (the document's shape), "Reporting batch item failures" (FIFO: stop at
the first failure, the messages after it are not processed) and its "Success and failure
conditions" (empty or null list, empty or null response: all succeeded; invalid JSON, an
empty or null itemIdentifier, a bad key name, an id not in the batch: the whole batch
failed); Lambda's 6 MB response payload quota ("Lambda quotas") bounds the answer.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from conveyor.worker import load_config
from conveyor.worker.batch_delivery import INVALID_ANSWER, ITEM_FAILED, InvalidAnswer, failed_ids
from conveyor.worker.config import ConfigError
from tests.support import free_port
from tests.worker.conftest import aio, make_queue, queue_total, run, running_worker, wait_until
from tests.worker.test_app_servers import APPS, AppServer, _process, serving

BATCH_APP = AppServer("batch app (http.server)",
                      lambda port: [sys.executable, str(APPS / "batch_app.py"), str(port)],
                      (), "python:http.server")
WORKER = {"BatchSize": 10, "HttpConnections": 2, "InactivityTimeout": 2}


def _posts(record: Path) -> list[dict[str, Any]]:
    """Every record the app received, in order."""
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines() if line]


def _queues(sqs: Any, name: str, *, fifo: bool = False, max_receive: int = 3) -> tuple[str, str]:
    suffix = ".fifo" if fifo else ""
    extra = {"FifoQueue": "true"} if fifo else {}
    dlq = make_queue(sqs, f"{name}-dlq{suffix}", **extra)
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])
    policy = json.dumps({"deadLetterTargetArn": arn["Attributes"]["QueueArn"],
                         "maxReceiveCount": max_receive})
    return make_queue(sqs, name + suffix, RedrivePolicy=policy, **extra), dlq


def _send(sqs: Any, url: str, bodies: list[str], group: str | None = None) -> list[str]:
    """Send the bodies in order (one call each, so a FIFO group keeps this order)."""
    extra = {"MessageGroupId": group} if group else {}
    ids = []
    for i, body in enumerate(bodies):
        if group:
            extra["MessageDeduplicationId"] = f"{group}-{i}"
        ids.append(sqs.send_message(QueueUrl=url, MessageBody=body, **extra)["MessageId"])
    return ids


def test_listed_messages_are_retried_and_dead_lettered_the_others_deleted(
        sqs, queue_name, tmp_path):
    """Lambda's rule: the messages listed in batchItemFailures become visible again, the
    others are deleted. Each retry here is a new receive (ApproximateReceiveCount 2), and a
    message failing maxReceiveCount times lands in the dead-letter queue, as in one-message
    mode. Sent before the worker starts, the first receive's 10 messages go in one POST."""
    record = tmp_path / "posts.jsonl"
    bodies = ["ok"] * 12 + ["fail-once"] * 4 + ["fail-always"] * 2

    async def scenario() -> dict[str, float]:
        url, dlq = await aio(_queues, sqs, queue_name, max_receive=2)
        ids = dict(zip(await aio(_send, sqs, url, bodies), bodies, strict=True))
        with serving(BATCH_APP, tmp_path, record) as app_url:
            async with running_worker(url, app_url, MaxRetries=2, **WORKER) as worker:
                await wait_until(lambda: queue_total(sqs, url) == 0
                                 and queue_total(sqs, dlq) == 2, timeout_s=60,
                                 what="every message deleted or dead-lettered")
                metrics = worker.metrics
                counted = {
                    "succeeded": metrics.value("conveyor_worker_messages_succeeded_total"),
                    "item_failed": metrics.value("conveyor_worker_messages_failed_total",
                                                 status=ITEM_FAILED),
                    "partial": metrics.value("conveyor_worker_batches_total",
                                             outcome="partial"),
                }
        posts = _posts(record)
        counts = collections.Counter(post["id"] for post in posts)
        assert {msgid: counts[msgid] for msgid in ids} == {
            msgid: {"ok": 1, "fail-once": 2, "fail-always": 2}[body]
            for msgid, body in ids.items()}
        last = {post["id"]: post for post in posts}  # a retry is a new receive
        assert all(last[msgid]["count"] == 2 for msgid, body in ids.items() if body != "ok")
        assert max(post["size"] for post in posts) == 10
        return counted

    counted = run(scenario())
    assert counted["succeeded"] == 16
    assert counted["item_failed"] == 4 + 2 * 2
    assert counted["partial"] >= 1


def _answer_one_batch(sqs: Any, queue_name: str, tmp_path: Path, how: str,
                      metric: str, **labels: str) -> tuple[list[int], float]:
    """Three messages in one batch, answered `how` on their first receive (batch_app.py):
    how many times each was POSTed until the queue was empty, and one metric's value."""
    record = tmp_path / "posts.jsonl"

    async def scenario() -> tuple[list[int], float]:
        url, _dlq = await aio(_queues, sqs, queue_name)
        ids = await aio(_send, sqs, url, [f"answer:{how}", "ok", "ok"])
        with serving(BATCH_APP, tmp_path, record) as app_url:
            async with running_worker(url, app_url, **WORKER) as worker:
                await wait_until(lambda: queue_total(sqs, url) == 0, timeout_s=60,
                                 what="every message deleted")
                value = worker.metrics.value(metric, **labels)
        counts = collections.Counter(post["id"] for post in _posts(record))
        return [counts[msgid] for msgid in ids], value

    return run(scenario())


@pytest.mark.parametrize(("how", "status"), [
    ("malformed", INVALID_ANSWER), ("unknown-id", INVALID_ANSWER),
    ("bad-key", INVALID_ANSWER), ("empty-id", INVALID_ANSWER), ("null-id", INVALID_ANSWER),
    ("array", INVALID_ANSWER), ("huge", INVALID_ANSWER), ("500", "500"),
    ("slow", "inactivity-timeout")])
def test_an_answer_that_fails_the_batch_fails_every_message(how, status, sqs, queue_name,
                                                            tmp_path):
    """Lambda treats the whole batch as failed on invalid JSON, an empty or null
    itemIdentifier, one under a bad key name, or an id that is not in the batch; an answer
    over the 6 MB response quota, one that is not a JSON object, a non-200 and no answer in
    InactivityTimeout fail it too. Every message is POSTed again; none is lost."""
    posts, failed = _answer_one_batch(sqs, queue_name, tmp_path, how,
                                      "conveyor_worker_messages_failed_total", status=status)
    assert posts == [2, 2, 2]
    assert failed == 3


@pytest.mark.parametrize("how", ["empty", "null", "empty-object", "empty-list", "null-list"])
def test_an_answer_without_failures_deletes_every_message(how, sqs, queue_name, tmp_path):
    """Lambda treats the batch as a complete success for an empty or null batchItemFailures
    list and an empty or null response: each message is POSTed once and deleted."""
    posts, ok = _answer_one_batch(sqs, queue_name, tmp_path, how,
                                  "conveyor_worker_batches_total", outcome="ok")
    assert posts == [1, 1, 1]
    assert ok >= 1


@pytest.mark.parametrize(("g_bodies", "again_from", "h_again", "status", "counted"), [
    (["ok", "ok", "fail-once", "ok", "ok"], 2, False, ITEM_FAILED,
     {"failed": 1, "unprocessed": 2}),
    (["answer:500", "ok", "ok", "ok", "ok"], 0, True, "500",
     {"failed": 2, "unprocessed": 5}),
], ids=["listed", "whole-batch-500"])
def test_fifo_group_stops_at_its_first_failure(g_bodies, again_from, h_again, status, counted,
                                               sqs, queue_name, tmp_path):
    """FIFO (Lambda: "stop processing messages after the first failure and return all failed
    and unprocessed messages"). Listed: the app lists only the third message of group g; the
    two behind it are not deleted although the app did not list them — they are POSTed
    again after it, in order, and are not counted as failures; group h in the same batch
    goes on. Whole batch failed (500): each group's first is the failure, the rest of each
    group waits behind it, and both groups go again in order."""
    record = tmp_path / "posts.jsonl"

    async def scenario() -> dict[str, float]:
        url, dlq = await aio(_queues, sqs, queue_name, fifo=True)
        g = await aio(_send, sqs, url, g_bodies, "g")
        h = await aio(_send, sqs, url, ["ok", "ok"], "h")
        with serving(BATCH_APP, tmp_path, record) as app_url:
            async with running_worker(url, app_url, **WORKER) as worker:
                await wait_until(lambda: queue_total(sqs, url) == 0, timeout_s=60,
                                 what="every message deleted")
                metrics = worker.metrics
                seen = {
                    "failed": metrics.value("conveyor_worker_messages_failed_total",
                                            status=status),
                    "unprocessed": metrics.value("conveyor_worker_messages_unprocessed_total"),
                }
            dead_letters = queue_total(sqs, dlq)
        posts = _posts(record)
        assert [post["id"] for post in posts if post["group"] == "g"] == g + g[again_from:]
        assert [post["id"] for post in posts if post["group"] == "h"] == h + (h if h_again
                                                                             else [])
        assert posts[0]["size"] == 7  # one receive, one POST: both groups, in order
        assert dead_letters == 0
        return seen

    assert run(scenario()) == counted


def test_the_document_is_lambdas_sqs_event(sqs, queue_name, tmp_path):
    """The shape of the Lambda Developer Guide's example SQS event: Records of messageId,
    receiptHandle, body, attributes (ApproximateReceiveCount, SentTimestamp...),
    messageAttributes in Lambda's camelCase, md5OfBody, eventSource aws:sqs, eventSourceARN
    and awsRegion."""
    record = tmp_path / "posts.jsonl"

    async def scenario() -> dict[str, Any]:
        url, _dlq = await aio(_queues, sqs, queue_name)
        sent = await aio(sqs.send_message, QueueUrl=url, MessageBody="ok", MessageAttributes={
            "color": {"DataType": "String", "StringValue": "red"}})
        with serving(BATCH_APP, tmp_path, record) as app_url:
            async with running_worker(url, app_url, **WORKER):
                await wait_until(lambda: queue_total(sqs, url) == 0, timeout_s=60,
                                 what="the message deleted")
        event = json.loads(Path(str(record) + ".first.json").read_bytes())
        arn = await aio(sqs.get_queue_attributes, QueueUrl=url, AttributeNames=["QueueArn"])
        return {"event": event, "sent": sent, "arn": arn["Attributes"]["QueueArn"]}

    result = run(scenario())
    (item,) = result["event"]["Records"]
    assert item["messageId"] == result["sent"]["MessageId"]
    assert item["md5OfBody"] == result["sent"]["MD5OfMessageBody"]
    assert item["body"] == "ok"
    assert item["receiptHandle"]
    assert item["attributes"]["ApproximateReceiveCount"] == "1"
    assert item["attributes"]["SentTimestamp"].isdigit()
    assert item["messageAttributes"] == {"color": {
        "stringValue": "red", "stringListValues": [], "binaryListValues": [],
        "dataType": "String"}}
    assert item["eventSource"] == "aws:sqs"
    assert item["eventSourceARN"] == result["arn"]
    assert item["awsRegion"] == "us-east-1"


@pytest.mark.parametrize(("answer", "failed"), [
    (b"", set()), (b"  \n", set()), (b"null", set()), (b"{}", set()),
    (b'{"batchItemFailures": null}', set()), (b'{"batchItemFailures": []}', set()),
    (b'{"batchItemFailures": [{"itemIdentifier": "b"}, {"itemIdentifier": "b"}]}', {"b"}),
    (b'{"batchItemFailures": [{"itemIdentifier": "a"}, {"itemIdentifier": "c"}]}',
     {"a", "c"})])
def test_answers_that_list_failures_or_none(answer, failed):
    """Lambda's "Success and failure conditions": an empty or null list and an empty or null
    response mean all succeeded; the listed ids failed (listed twice, once)."""
    assert failed_ids(answer, ["a", "b", "c"]) == failed


@pytest.mark.parametrize("answer", [
    b"{", b"[]", b'"a"', b"42", b'{"batchItemFailures": {}}',
    b'{"batchItemFailures": ["a"]}', b'{"batchItemFailures": [{"itemIdentifier": ""}]}',
    b'{"batchItemFailures": [{"itemIdentifier": null}]}',
    b'{"batchItemFailures": [{"itemIdentifier": 7}]}',
    b'{"batchItemFailures": [{"ItemIdentifier": "a"}]}',
    b'{"batchItemFailures": [{"itemIdentifier": "z"}]}'])
def test_answers_that_fail_the_whole_batch(answer):
    """Lambda's "Success and failure conditions": invalid JSON, an empty or null
    itemIdentifier, a bad key name, an id that is not in the batch fail the whole batch;
    so does anything that is not the documented shape."""
    with pytest.raises(InvalidAnswer):
        failed_ids(answer, ["a", "b", "c"])


def test_batch_size_out_of_range_is_a_clear_error():
    """BatchSize runs 0 (off, Elastic Beanstalk's one message per POST) to 100."""
    with pytest.raises(ConfigError, match=r"BatchSize must be between 0 and 100, got 101"):
        load_config({"WorkerQueueURL": "http://127.0.0.1:9324/000000000000/jobs",
                     "BatchSize": "101"})


def test_an_unavailable_app_is_waited_for_and_probed_with_a_batch(sqs, queue_name, tmp_path):
    """While the app refuses connections the circuit breaker holds the messages (no
    receive burnt, nothing dead-lettered); its probe is a batch of one in the same format,
    and once the app answers every message reaches it, each exactly once."""
    record = tmp_path / "posts.jsonl"
    port = free_port()
    env = {**os.environ, "CONVEYOR_TEST_RECORD": str(record)}

    async def scenario() -> float:
        url, dlq = await aio(_queues, sqs, queue_name)
        async with running_worker(url, f"http://127.0.0.1:{port}", **WORKER) as worker:
            ids = await aio(_send, sqs, url, ["ok"] * 5)
            await wait_until(lambda: worker.metrics.value("conveyor_worker_app_available") == 0,
                             what="the breaker to open")
            with _process(BATCH_APP.command(port), port, tmp_path / "app.log", env, cwd=APPS):
                await wait_until(lambda: queue_total(sqs, url) == 0, timeout_s=60,
                                 what="every message deleted")
            available = worker.metrics.value("conveyor_worker_app_available")
        counts = collections.Counter(post["id"] for post in _posts(record))
        assert {msgid: counts[msgid] for msgid in ids} == dict.fromkeys(ids, 1)
        assert queue_total(sqs, dlq) == 0
        assert "Records" in json.loads(Path(str(record) + ".first.json").read_bytes())
        return available

    assert run(scenario()) == 1


def test_a_batching_window_holds_a_batch_until_it_is_full(sqs, queue_name, tmp_path):
    """BatchingWindow, as Lambda's MaximumBatchingWindowInSeconds ("the maximum amount of
    time, in seconds, to gather records before invoking the function", Lambda's
    EventSourceMapping reference): messages sent one by one while the worker runs, well
    within the window, reach the app together, in one POST of BatchSize, not one by one
    as they come (what the worker does without a window)."""
    record = tmp_path / "posts.jsonl"

    async def scenario() -> list[int]:
        url, _dlq = await aio(_queues, sqs, queue_name)
        with serving(BATCH_APP, tmp_path, record) as app_url:
            async with running_worker(url, app_url, BatchSize=5, BatchingWindow=60,
                                      HttpConnections=2, InactivityTimeout=2):
                for _ in range(5):
                    await aio(_send, sqs, url, ["ok"])
                    await asyncio.sleep(0.2)  # each one is received before the next
                await wait_until(lambda: queue_total(sqs, url) == 0, timeout_s=30,
                                 what="every message deleted")
        return [post["size"] for post in _posts(record)]

    assert run(scenario()) == [5] * 5  # five messages, each in the one batch of five
