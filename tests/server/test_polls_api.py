"""Longer long polls with the announcement folded in (`ConveyorWorkers.PollMessages`)."""

from __future__ import annotations

import threading
import time
import urllib.request
import uuid
from typing import Any

import pytest

from tests.server.helpers import RawClient, assert_json_error, wait_for
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
        wait_for(lambda: worker_id in listed(raw), timeout_s=30, interval_s=0.05,
                 what="the poll's announcement")
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


# -- one poll parked on several queues (QueueUrls) ----------------------------------------

def test_a_poll_on_several_queues_answers_with_a_message_sent_to_any_of_them(
        raw: RawClient, sqs: Any, make_queue: Any) -> None:
    """Parked on three queues, the poll answers with the message sent to the last one, and
    says which queue it came from; its receipt handle deletes it there (DeleteMessage as
    SQS answers it: 200, and the queue is then empty)."""
    urls = [make_queue() for _ in range(3)]
    answers: list[Any] = []
    poll = threading.Thread(target=lambda: answers.append(_poll(raw, {
        "QueueUrls": urls, "WaitTimeSeconds": 120, "MaxNumberOfMessages": 10})))
    poll.start()
    try:
        time.sleep(0.5)  # let it park; if it has not yet, it answers the same
        sqs.send_message(QueueUrl=urls[2], MessageBody="to the third")
    finally:
        poll.join(100)
    [resp] = answers
    assert resp.status == 200, resp.body
    [message] = resp.json()["Messages"]
    assert (message["Body"], message["QueueUrl"]) == ("to the third", urls[2])
    sqs.delete_message(QueueUrl=urls[2], ReceiptHandle=message["ReceiptHandle"])
    attributes = sqs.get_queue_attributes(QueueUrl=urls[2], AttributeNames=["All"])
    assert attributes["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_a_poll_on_several_queues_takes_them_in_turn_and_never_more_than_asked(
        raw: RawClient, sqs: Any, make_queue: Any) -> None:
    """Two queues of 20 messages each: every answer holds at most MaxNumberOfMessages (10)
    in all, and the queue looked at first turns, so two polls in a row empty neither
    queue ahead of the other (a backlog in one never starves the others)."""
    urls = [make_queue() for _ in range(2)]
    for url in urls:
        for start in range(0, 20, 10):
            sqs.send_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "MessageBody": f"{url[-8:]}-{start + i}"} for i in range(10)])
    taken: dict[str, int] = dict.fromkeys(urls, 0)
    for _ in range(2):
        resp = _poll(raw, {"QueueUrls": urls, "WaitTimeSeconds": 0,
                           "MaxNumberOfMessages": 10, "VisibilityTimeout": 600})
        assert resp.status == 200, resp.body
        messages = resp.json()["Messages"]
        assert len(messages) == 10
        for message in messages:
            taken[message["QueueUrl"]] += 1
    assert taken == dict.fromkeys(urls, 10)


@pytest.mark.parametrize(("queue_urls", "code"), [
    ([], "MissingParameter"),
    ("not a list", "InvalidParameterValue"),
    ([1, 2], "InvalidParameterValue"),
    (["{0}", "{0}"], "InvalidParameterValue"),
    (["{0}"] * 65, "InvalidParameterValue"),
    (["{0}", "{0}/nope"], {"QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"}),
])
def test_bad_queue_lists_are_refused(raw: RawClient, make_queue: Any, queue_urls: Any,
                                     code: Any) -> None:
    """A bad QueueUrls gets a clear SQS error, never a trace: the codes are those the SQS
    API reference gives ReceiveMessage for a missing or invalid parameter and an unknown
    queue (MissingParameter, InvalidParameterValue; QueueDoesNotExist, whose Query code
    is AWS.SimpleQueueService.NonExistentQueue: botocore's functional test
    test_query_compatible_error_parsing stubs it so; the venv's model does not carry
    Query codes)."""
    url = make_queue()
    if isinstance(queue_urls, list):
        queue_urls = [u.format(url) if isinstance(u, str) else u for u in queue_urls]
    body = assert_json_error(_poll(raw, {"QueueUrls": queue_urls, "WaitTimeSeconds": 1}),
                             code)
    assert "Traceback" not in body["message"]


def test_a_queue_named_both_ways_is_refused(raw: RawClient, make_queue: Any) -> None:
    url = make_queue()
    body = assert_json_error(_poll(raw, {"QueueUrl": url, "QueueUrls": [url]}),
                             "InvalidParameterValue")
    assert "not both" in body["message"]


# -- a drain request answers the worker's parked poll ---------------------------------------

def test_a_drain_request_answers_the_workers_parked_poll(raw: RawClient,
                                                         make_queue: Any) -> None:
    """A poll naming its worker (WorkerId) and parked for five minutes answers
    `{"Drain": true}` once DrainWorker is asked for that worker; the test's own wait is
    far shorter than the poll's, so only the drain can have answered it."""
    url = make_queue()
    worker_id = f"host:1:{uuid.uuid4().hex[:8]}"
    assert workers_call(raw, "AnnounceWorker", {"WorkerId": worker_id, "Queue": "jobs",
                                                "TtlSeconds": 600}).status == 200
    patient = RawClient(raw.base_url, timeout_s=120)
    answers: list[Any] = []
    poll = threading.Thread(target=lambda: answers.append(_poll(patient, {
        "QueueUrl": url, "WaitTimeSeconds": 300, "WorkerId": worker_id})))
    poll.start()
    try:
        time.sleep(0.5)  # let it park; if it has not yet, it answers the same
        assert workers_call(raw, "DrainWorker", {"WorkerId": worker_id}).status == 200
    finally:
        poll.join(110)
    [resp] = answers
    assert resp.status == 200, resp.body
    assert resp.json() == {"Drain": True}


def test_a_poll_naming_an_undrained_worker_answers_as_ever(raw: RawClient,
                                                           make_queue: Any) -> None:
    resp = _poll(raw, {"QueueUrl": make_queue(), "WaitTimeSeconds": 1,
                       "WorkerId": f"host:1:{uuid.uuid4().hex[:8]}"})
    assert resp.status == 200, resp.body
    assert "Drain" not in resp.json()
    assert_json_error(_poll(raw, {"QueueUrl": make_queue(), "WaitTimeSeconds": 1,
                                  "WorkerId": "w w"}), "InvalidParameterValue")
