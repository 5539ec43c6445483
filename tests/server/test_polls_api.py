"""Longer long polls with the announcement folded in (`ConveyorWorkers.PollMessages`)."""

from __future__ import annotations

import threading
import time
import urllib.request
import uuid
from typing import Any

import pytest

from tests.server.helpers import RawClient, assert_json_error
from tests.server.test_workers_api import listed, workers_call
from tests.support import ServerProcess


def _poll(raw: RawClient, payload: dict[str, Any]) -> Any:
    return workers_call(raw, "PollMessages", payload)


def test_a_poll_longer_than_20_s_gets_a_message_sent_while_it_waits(
        raw: RawClient, sqs: Any, make_queue: Any) -> None:
    url = make_queue()
    worker_id = f"host:1:{uuid.uuid4().hex[:8]}"
    answers: list[Any] = []
    poll = threading.Thread(target=lambda: answers.append(_poll(raw, {
        "QueueUrl": url, "WaitTimeSeconds": 120, "MaxNumberOfMessages": 10,
        "MessageSystemAttributeNames": ["ApproximateReceiveCount"],
        "Announce": {"WorkerId": worker_id, "Queue": "jobs", "TtlSeconds": 150,
                     "Status": {"status": "ok"}}})))
    poll.start()
    try:
        # The announcement is recorded before the poll parks: once it is listed, the poll
        # is (about to be) parked, and the message is sent to a waiting receiver.
        deadline = time.monotonic() + 30
        while worker_id not in listed(raw) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert listed(raw)[worker_id]["Status"] == {"status": "ok"}
        sqs.send_message(QueueUrl=url, MessageBody="wake up")
    finally:
        poll.join(60)
    [resp] = answers
    assert resp.status == 200, resp.body
    [message] = resp.json()["Messages"]
    assert message["Body"] == "wake up"
    assert message["Attributes"] == {"ApproximateReceiveCount": "1"}


def test_an_empty_queue_answers_like_receive_message(raw: RawClient, make_queue: Any) -> None:
    resp = _poll(raw, {"QueueUrl": make_queue(), "WaitTimeSeconds": 0})
    assert resp.status == 200, resp.body
    assert resp.json().get("Messages", []) == []


@pytest.mark.parametrize("payload", [
    {"WaitTimeSeconds": 301}, {"WaitTimeSeconds": -1}, {"WaitTimeSeconds": "60"},
    {"WaitTimeSeconds": True}, {"WaitTimeSeconds": 60, "MaxNumberOfMessages": 11},
    {"WaitTimeSeconds": 60, "Announce": "me"},
    {"WaitTimeSeconds": 60, "Announce": {"WorkerId": "w w", "Queue": "q", "TtlSeconds": 5}},
])
def test_bad_polls_are_refused(raw: RawClient, make_queue: Any,
                               payload: dict[str, Any]) -> None:
    assert_json_error(_poll(raw, {"QueueUrl": make_queue(), **payload}),
                      "InvalidParameterValue")


def test_a_malformed_receive_part_gets_receive_messages_answer(raw: RawClient,
                                                                make_queue: Any) -> None:
    body = assert_json_error(_poll(raw, {"QueueUrl": make_queue(), "WaitTimeSeconds": 1,
                                         "MaxNumberOfMessages": "ten"}))
    assert "MaxNumberOfMessages" in body["message"]
    assert_json_error(_poll(raw, {"QueueUrl": "nope", "WaitTimeSeconds": 1}),
                      {"QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"})


def test_poll_messages_is_not_part_of_the_sqs_api(raw: RawClient, make_queue: Any) -> None:
    url = make_queue()
    assert_json_error(workers_call(raw, "PollMessages", {"QueueUrl": url},
                                   prefix="AmazonSQS."))
    assert_json_error(workers_call(raw, "PollMessages", {"QueueUrl": url},
                                   prefix="ConveyorLease."))


def test_announcements_and_polls_are_named_in_metrics(server: ServerProcess, raw: RawClient,
                                                      make_queue: Any) -> None:
    workers_call(raw, "AnnounceWorker", {"WorkerId": "w", "Queue": "q", "TtlSeconds": 1})
    _poll(raw, {"QueueUrl": make_queue(), "WaitTimeSeconds": 0, "Announce": {
        "WorkerId": "w", "Queue": "q", "TtlSeconds": 1}})
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    assert 'conveyor_requests_total{action="AnnounceWorker",outcome="ok"}' in text
    assert 'conveyor_requests_total{action="PollMessages",outcome="ok"}' in text
    for via in ("AnnounceWorker", "PollMessages"):
        assert f'conveyor_worker_announcements_total{{via="{via}"}}' in text
