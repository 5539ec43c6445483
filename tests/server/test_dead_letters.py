"""Dead-letter queues: redrive, RedriveAllowPolicy, ListDeadLetterSourceQueues, move tasks."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.server.conftest import QueueFactory
from tests.server.helpers import arn, counts, md5_of_attributes, raises_sqs, receive_all, wait_for
from tests.support import LongPoll, ServerProcess, sqs_client

ATTRS = {"kind": {"DataType": "String", "StringValue": "invoice"},
         "n": {"DataType": "Number", "StringValue": "7"}}


def _redrive(dlq_arn: str, max_receive_count: int = 2) -> str:
    return json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count})


def _pair(make_queue: QueueFactory, max_receive_count: int = 2,
          fifo: bool = False) -> tuple[str, str]:
    """(source url, dead-letter url)."""
    dlq = make_queue(fifo=fifo)
    src = make_queue(fifo=fifo, RedrivePolicy=_redrive(make_queue.arn_of(dlq),
                                                       max_receive_count))
    return src, dlq


def _dead_letter(sqs: Any, src: str, dlq: str, n: int, max_receive_count: int) -> None:
    """Receive each of the source's n messages max_receive_count times, then once more."""
    for _ in range(max_receive_count):
        msgs = receive_all(sqs, src, n, delete=False)
        assert len(msgs) == n
        sqs.change_message_visibility_batch(QueueUrl=src, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
            for i, m in enumerate(msgs)])
    leftover = sqs.receive_message(QueueUrl=src, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert leftover.get("Messages", []) == []
    wait_for(lambda: counts(sqs, dlq)[0] == n, timeout_s=10, what="messages dead-lettered")


def test_message_moves_after_max_receive_count(sqs: Any, make_queue: QueueFactory) -> None:
    src, dlq = _pair(make_queue, max_receive_count=2)
    sqs.send_message(QueueUrl=src, MessageBody="poison", MessageAttributes=ATTRS)
    original = sqs.receive_message(QueueUrl=src, VisibilityTimeout=0,
                                   MessageSystemAttributeNames=["All"])["Messages"][0]
    second = sqs.receive_message(QueueUrl=src, VisibilityTimeout=0,
                                 MessageSystemAttributeNames=["All"])["Messages"][0]
    assert second["Attributes"]["ApproximateReceiveCount"] == "2"
    # third receive: receive count would exceed 2, so the message goes to the DLQ instead
    assert sqs.receive_message(QueueUrl=src, WaitTimeSeconds=1).get("Messages", []) == []
    assert counts(sqs, src) == (0, 0, 0)
    moved = sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=2, MessageAttributeNames=["All"],
                                MessageSystemAttributeNames=["All"])["Messages"][0]
    assert moved["Body"] == "poison"
    assert moved["MessageId"] == original["MessageId"]
    assert {k: {"DataType": v["DataType"], "StringValue": v["StringValue"]}
            for k, v in moved["MessageAttributes"].items()} == ATTRS
    assert moved["MD5OfMessageAttributes"] == md5_of_attributes(ATTRS)
    assert moved["Attributes"]["SentTimestamp"] == original["Attributes"]["SentTimestamp"]
    assert moved["Attributes"]["DeadLetterQueueSourceArn"] == make_queue.arn_of(src)


def test_only_poison_messages_move(sqs: Any, make_queue: QueueFactory) -> None:
    src, dlq = _pair(make_queue, max_receive_count=1)
    sqs.send_message(QueueUrl=src, MessageBody="poison")
    poison = sqs.receive_message(QueueUrl=src, VisibilityTimeout=0)["Messages"][0]
    sqs.send_message(QueueUrl=src, MessageBody="healthy")
    bodies = [m["Body"] for m in receive_all(sqs, src, 1)]
    assert bodies == ["healthy"]
    moved = receive_all(sqs, dlq, 1)
    assert [m["MessageId"] for m in moved] == [poison["MessageId"]]


def test_fifo_dead_letter_queue(sqs: Any, make_queue: QueueFactory) -> None:
    src, dlq = _pair(make_queue, max_receive_count=1, fifo=True)
    sqs.send_message(QueueUrl=src, MessageBody="f1", MessageGroupId="g",
                     MessageDeduplicationId="1")
    sqs.send_message(QueueUrl=src, MessageBody="f2", MessageGroupId="g",
                     MessageDeduplicationId="2")
    first = sqs.receive_message(QueueUrl=src, VisibilityTimeout=0)["Messages"][0]
    assert first["Body"] == "f1"
    # f1 exceeded its receive count: it leaves, and the group moves on to f2
    nxt = receive_all(sqs, src, 1)
    assert [m["Body"] for m in nxt] == ["f2"]
    moved = receive_all(sqs, dlq, 1, MessageSystemAttributeNames=["All"])
    assert [m["Body"] for m in moved] == ["f1"]
    assert moved[0]["Attributes"]["MessageGroupId"] == "g"


def test_fifo_source_needs_fifo_dead_letter_queue(sqs: Any, make_queue: QueueFactory) -> None:
    standard = make_queue()
    src = make_queue(fifo=True)
    with raises_sqs("InvalidParameterValue"):
        sqs.set_queue_attributes(QueueUrl=src, Attributes={
            "RedrivePolicy": _redrive(make_queue.arn_of(standard))})


def test_list_dead_letter_source_queues(sqs: Any, make_queue: QueueFactory) -> None:
    dlq = make_queue()
    dlq_arn = make_queue.arn_of(dlq)
    sources = {make_queue(RedrivePolicy=_redrive(dlq_arn)) for _ in range(3)}
    make_queue()  # unrelated
    got = sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"]
    assert set(got) == sources
    page = sqs.list_dead_letter_source_queues(QueueUrl=dlq, MaxResults=2)
    assert len(page["queueUrls"]) == 2
    rest = sqs.list_dead_letter_source_queues(QueueUrl=dlq, MaxResults=2,
                                              NextToken=page["NextToken"])
    assert set(page["queueUrls"]) | set(rest["queueUrls"]) == sources


def test_list_dead_letter_sources_of_plain_queue_is_empty(sqs: Any,
                                                          make_queue: QueueFactory) -> None:
    url = make_queue()
    assert sqs.list_dead_letter_source_queues(QueueUrl=url).get("queueUrls", []) == []


def test_dead_letter_target_must_exist(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    with raises_sqs("InvalidParameterValue"):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={
            "RedrivePolicy": _redrive(arn("does-not-exist-" + url[-8:]))})


# --------------------------------------------------------------------------- RedriveAllowPolicy


def test_redrive_allow_policy_deny_all(sqs: Any, make_queue: QueueFactory) -> None:
    dlq = make_queue(RedriveAllowPolicy=json.dumps({"redrivePermission": "denyAll"}))
    src = make_queue()
    with raises_sqs("InvalidParameterValue"):
        sqs.set_queue_attributes(QueueUrl=src, Attributes={
            "RedrivePolicy": _redrive(make_queue.arn_of(dlq))})
    got = sqs.get_queue_attributes(QueueUrl=src, AttributeNames=["All"])["Attributes"]
    assert "RedrivePolicy" not in got
    stored = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["RedriveAllowPolicy"])
    assert json.loads(stored["Attributes"]["RedriveAllowPolicy"]) == {
        "redrivePermission": "denyAll"}


def test_redrive_allow_policy_by_queue(sqs: Any, make_queue: QueueFactory) -> None:
    allowed = make_queue()
    dlq = make_queue(RedriveAllowPolicy=json.dumps({
        "redrivePermission": "byQueue", "sourceQueueArns": [make_queue.arn_of(allowed)]}))
    refused = make_queue()
    with raises_sqs("InvalidParameterValue"):
        sqs.set_queue_attributes(QueueUrl=refused, Attributes={
            "RedrivePolicy": _redrive(make_queue.arn_of(dlq))})
    sqs.set_queue_attributes(QueueUrl=allowed, Attributes={
        "RedrivePolicy": _redrive(make_queue.arn_of(dlq))})
    # refused at creation too
    with raises_sqs("InvalidParameterValue"):
        make_queue(RedrivePolicy=_redrive(make_queue.arn_of(dlq)))


def test_redrive_allow_policy_allow_all(sqs: Any, make_queue: QueueFactory) -> None:
    dlq = make_queue(RedriveAllowPolicy=json.dumps({"redrivePermission": "allowAll"}))
    make_queue(RedrivePolicy=_redrive(make_queue.arn_of(dlq)))


def test_redrive_allow_policy_validated(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    with raises_sqs("InvalidParameterValue"):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={
            "RedriveAllowPolicy": json.dumps({"redrivePermission": "sometimes"})})
    with raises_sqs("InvalidParameterValue"):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={
            "RedriveAllowPolicy": json.dumps({"redrivePermission": "byQueue"})})


# --------------------------------------------------------------------------- move tasks


def _tasks(sqs: Any, source_arn: str) -> list[dict]:
    return sqs.list_message_move_tasks(SourceArn=source_arn, MaxResults=10).get("Results", [])


def _wait_task(sqs: Any, source_arn: str, statuses: set[str]) -> dict:
    return wait_for(lambda: next((t for t in _tasks(sqs, source_arn)
                                  if t["Status"] in statuses), None),
                    timeout_s=20, what=f"move task in {statuses}")


def test_move_task_back_to_source(sqs: Any, make_queue: QueueFactory) -> None:
    src, dlq = _pair(make_queue, max_receive_count=1)
    sqs.send_message_batch(QueueUrl=src, Entries=[
        {"Id": str(i), "MessageBody": f"m{i}"} for i in range(5)])
    _dead_letter(sqs, src, dlq, 5, 1)
    dlq_arn = make_queue.arn_of(dlq)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]
    assert handle
    done = _wait_task(sqs, dlq_arn, {"COMPLETED"})
    assert done["SourceArn"] == dlq_arn
    assert int(done["ApproximateNumberOfMessagesMoved"]) == 5
    assert int(done["StartedTimestamp"]) > 0
    assert counts(sqs, dlq) == (0, 0, 0)
    bodies = sorted(m["Body"] for m in receive_all(sqs, src, 5))
    assert bodies == [f"m{i}" for i in range(5)]


def test_move_task_to_chosen_destination(sqs: Any, make_queue: QueueFactory) -> None:
    src, dlq = _pair(make_queue, max_receive_count=1)
    dest = make_queue()
    sqs.send_message_batch(QueueUrl=src, Entries=[
        {"Id": str(i), "MessageBody": f"m{i}",
         "MessageAttributes": {"i": {"DataType": "Number", "StringValue": str(i)}}}
        for i in range(3)])
    _dead_letter(sqs, src, dlq, 3, 1)
    dlq_arn, dest_arn = make_queue.arn_of(dlq), make_queue.arn_of(dest)
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=dest_arn,
                                MaxNumberOfMessagesPerSecond=100)
    done = _wait_task(sqs, dlq_arn, {"COMPLETED"})
    assert done["DestinationArn"] == dest_arn
    assert int(done["MaxNumberOfMessagesPerSecond"]) == 100
    moved = receive_all(sqs, dest, 3, MessageAttributeNames=["All"])
    assert sorted(m["Body"] for m in moved) == ["m0", "m1", "m2"]
    for msg in moved:
        assert msg["MessageAttributes"]["i"]["StringValue"] == msg["Body"][1:]
    assert counts(sqs, src) == (0, 0, 0)


def test_move_task_cancel(sqs: Any, make_queue: QueueFactory) -> None:
    src, dlq = _pair(make_queue, max_receive_count=1)
    dest = make_queue()
    for start in (0, 10, 20):
        sqs.send_message_batch(QueueUrl=dlq, Entries=[
            {"Id": str(i), "MessageBody": f"m{start + i}"} for i in range(10)])
    dlq_arn = make_queue.arn_of(dlq)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=make_queue.arn_of(
        dest), MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    running = _tasks(sqs, dlq_arn)
    assert running[0]["Status"] == "RUNNING"
    assert running[0]["TaskHandle"] == handle
    # only one active task per source queue: InvalidParameterValue, 400 (LocalStack's
    # recording of AWS, test_sqs_move_task.snapshot.json, test_start_multiple_move_tasks)
    with raises_sqs("InvalidParameterValue"):
        sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=make_queue.arn_of(dest))
    cancelled = sqs.cancel_message_move_task(TaskHandle=handle)
    assert int(cancelled["ApproximateNumberOfMessagesMoved"]) < 30
    final = _wait_task(sqs, dlq_arn, {"CANCELLED"})
    moved = int(final["ApproximateNumberOfMessagesMoved"])
    assert moved < 30
    assert counts(sqs, dest)[0] == moved
    assert counts(sqs, dlq)[0] == 30 - moved


def test_move_task_from_queue_that_is_not_a_dlq(sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    with raises_sqs("InvalidParameterValue"):
        sqs.start_message_move_task(SourceArn=make_queue.arn_of(url))


def test_move_task_from_missing_queue(sqs: Any) -> None:
    """404, as AWS answered a missing DestinationArn and SourceArn in LocalStack's
    recordings (test_sqs_move_task.snapshot.json, 2024; today's API reference says 400,
    but what AWS sends wins)."""
    with raises_sqs("ResourceNotFoundException", 404) as caught:
        sqs.start_message_move_task(SourceArn=arn("no-such-dlq-anywhere"))
    assert caught[0].response["Error"]["Message"] == (
        "The resource that you specified for the SourceArn parameter doesn't exist.")


def test_cancel_unknown_move_task(sqs: Any) -> None:
    """A handle that is no task handle (base64, but not of the handle's JSON) is
    InvalidParameterValue (LocalStack's recording of AWS, test_cancel_with_invalid_task_handle)."""
    with raises_sqs("InvalidParameterValue") as caught:
        sqs.cancel_message_move_task(TaskHandle="bm90LWEtdGFzay1oYW5kbGU=")
    assert caught[0].response["Error"]["Message"] == "Value for parameter TaskHandle is invalid."


def test_list_move_tasks_of_queue_without_tasks(sqs: Any, make_queue: QueueFactory) -> None:
    _, dlq = _pair(make_queue)
    assert _tasks(sqs, make_queue.arn_of(dlq)) == []


def test_dead_letter_queue_must_be_in_the_same_region(server: ServerProcess) -> None:
    east = sqs_client(server.url, region="us-east-1")
    west = sqs_client(server.url, region="eu-west-1")
    east_dlq = QueueFactory(east)()
    east_arn = QueueFactory(east).arn_of(east_dlq)
    src = QueueFactory(west)()
    with raises_sqs("InvalidParameterValue"):
        west.set_queue_attributes(QueueUrl=src, Attributes={"RedrivePolicy": _redrive(east_arn)})


def test_move_task_returns_each_message_to_its_own_source(sqs: Any,
                                                          make_queue: QueueFactory) -> None:
    dlq = make_queue()
    dlq_arn = make_queue.arn_of(dlq)
    first = make_queue(RedrivePolicy=_redrive(dlq_arn, 1))
    second = make_queue(RedrivePolicy=_redrive(dlq_arn, 1))
    sqs.send_message(QueueUrl=first, MessageBody="from first")
    sqs.send_message(QueueUrl=second, MessageBody="from second")
    for src in (first, second):
        sqs.receive_message(QueueUrl=src, VisibilityTimeout=0)
        sqs.receive_message(QueueUrl=src, VisibilityTimeout=0)
    wait_for(lambda: counts(sqs, dlq)[0] == 2, what="both dead-lettered")
    sqs.start_message_move_task(SourceArn=dlq_arn)
    _wait_task(sqs, dlq_arn, {"COMPLETED"})
    assert [m["Body"] for m in receive_all(sqs, first, 1)] == ["from first"]
    assert [m["Body"] for m in receive_all(sqs, second, 1)] == ["from second"]


def test_long_poll_on_the_dead_letter_queue_wakes_when_a_message_arrives(
        sqs: Any, server: ServerProcess, make_queue: QueueFactory) -> None:
    src, dlq = _pair(make_queue, max_receive_count=1)
    sqs.send_message(QueueUrl=src, MessageBody="poison")
    sqs.receive_message(QueueUrl=src, VisibilityTimeout=0)  # its one allowed receive
    poll = LongPoll(server.url, dlq)
    sqs.receive_message(QueueUrl=src)  # moves the message to the dead-letter queue
    assert poll.bodies() == ["poison"]  # woken by the move, not at the end of its wait


def test_a_long_poll_does_not_stall_behind_dead_letters(sqs: Any, server: ServerProcess,
                                                         make_queue: QueueFactory) -> None:
    """A receive whose claim only moved messages to the dead-letter queue returns the next
    visible message at once instead of waiting out its WaitTimeSeconds (issue 21: filling
    a 3,000-message dead-letter queue took 2.5 minutes of empty polls)."""
    url, _ = _pair(make_queue, max_receive_count=1)
    sqs.send_message(QueueUrl=url, MessageBody="spent")
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=0)
    assert [m["Body"] for m in first["Messages"]] == ["spent"]  # visible again, first in line
    time.sleep(0.01)
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"m{i}"} for i in range(2)])
    poll = LongPoll(server.url, url, MaxNumberOfMessages=1)  # its claim dead-letters "spent"
    assert poll.bodies() in (["m0"], ["m1"])  # and it answers with the next, not at its end
