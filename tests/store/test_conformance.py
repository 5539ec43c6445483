"""Every rule of a message's life, on every store kind (SQLite, SQLite behind the journal,
PostgreSQL), through the service, on a clock that moves only when told: no sleeps.

The rules live once, in conveyor/service/rules.py; these tests are what keeps the three
stores' claims and primitives honest to them. The first three caught real drifts between
the stores (expired messages, moves onto a message's own queue, the order of moves)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from conveyor.sqs.errors import InvalidParameterValue
from conveyor.store.base import Store
from tests.store.conformance import CONFORMANCE_KINDS, CTX, Sqs, run

RETENTION_S = 60  # the shortest SQS allows


def _redrive(dlq_arn: str, max_receive_count: int) -> dict[str, str]:
    return {"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn,
                                         "maxReceiveCount": max_receive_count})}


# --- the three drifts --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_expired_messages_take_no_place_in_a_receive(kind: str, tmp_path: Path) -> None:
    """A message past its retention period is gone ("Amazon SQS automatically deletes
    messages left in a queue longer than the retention period"), whether or not the sweep
    has deleted it yet: a receive returns up to MaxNumberOfMessages live messages, never
    fewer because expired ones came first. (SQLite and the journal returned none here.)"""
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q", MessageRetentionPeriod=RETENTION_S)
        await sqs.send(url, "old-1", "old-2", "old-3")
        sqs.advance(RETENTION_S - 10)
        await sqs.send(url, "young-1", "young-2")
        sqs.advance(15)  # the old ones are past retention, not swept yet
        assert sorted(await sqs.bodies(url, 3)) == ["young-1", "young-2"]

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_a_message_is_never_moved_onto_its_own_queue(kind: str, tmp_path: Path) -> None:
    """A queue that is its own dead-letter queue: a move task sending its messages "back
    to their source" would put each onto the queue it is in. The task fails, saying why,
    and the message stays as it was. (PostgreSQL left the task running for ever; SQLite
    moved the message onto itself, forgetting its source, and failed a step later.)"""
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("loop")
        arn = await sqs.arn(url)
        await sqs.call("SetQueueAttributes", QueueUrl=url, Attributes=_redrive(arn, 1))
        await sqs.send(url, "poison")
        assert await sqs.bodies(url, VisibilityTimeout=0) == ["poison"]
        assert await sqs.bodies(url, VisibilityTimeout=0) == []  # dead-lettered onto itself
        await sqs.call("StartMessageMoveTask", SourceArn=arn)
        await sqs.service.run_move_tasks(CTX)
        [task] = (await sqs.call("ListMessageMoveTasks", SourceArn=arn))["Results"]
        assert (task["Status"], task["ApproximateNumberOfMessagesMoved"]) == ("FAILED", 0)
        assert "queue it is in" in task["FailureReason"]
        # Its receive count went along (test_dead_letters_keep_their_receive_count), so
        # only a higher maxReceiveCount lets it be received here again.
        await sqs.call("SetQueueAttributes", QueueUrl=url, Attributes=_redrive(arn, 5))
        [message] = await sqs.receive(url)
        assert message["Attributes"]["DeadLetterQueueSourceArn"] == arn
        assert message["Attributes"]["ApproximateReceiveCount"] == "2"

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_messages_move_oldest_first(kind: str, tmp_path: Path) -> None:
    """"Dead-letter queues redrive messages in the order they are received, starting with
    the oldest message": oldest by SentTimestamp, whatever order they were stored in (here
    the clock stepped back between the sends, as a node's clock may). (PostgreSQL moved in
    storage order.)"""
    async def scenario(sqs: Sqs) -> None:
        dlq = await sqs.create("dlq")
        source = await sqs.create("source", **_redrive(await sqs.arn(dlq), 3))
        target = await sqs.create("target")
        sqs.advance(600)
        await sqs.send(dlq, "stored-first")
        sqs.advance(-300)  # the clock steps back
        await sqs.send(dlq, "sent-first")
        sqs.advance(301)  # both visible again
        assert source
        await sqs.call("StartMessageMoveTask", SourceArn=await sqs.arn(dlq),
                       DestinationArn=await sqs.arn(target), MaxNumberOfMessagesPerSecond=1)
        await sqs.service.run_move_tasks(CTX)  # one message at once at this rate
        assert await sqs.bodies(target) == ["sent-first"]
        await sqs.service.run_move_tasks(CTX)  # the next one only a second later
        assert await sqs.bodies(target) == []
        sqs.advance(1)
        await sqs.service.run_move_tasks(CTX)
        assert await sqs.bodies(target) == ["stored-first"]

    run(kind, tmp_path, scenario)


# --- retention ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_an_expired_message_is_not_received_counted_or_moved_then_swept(kind: str,
                                                                        tmp_path: Path) -> None:
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q", MessageRetentionPeriod=RETENTION_S)
        await sqs.send(url, "visible")
        await sqs.send(url, "delayed", DelaySeconds=120)
        await sqs.send(url, "in flight")
        [taken] = await sqs.receive(url, 1)
        assert await sqs.counts(url) == (1, 1, 1)
        sqs.advance(RETENTION_S)  # every one of them exactly at its retention's end
        assert await sqs.counts(url) == (0, 0, 0)
        assert await sqs.bodies(url) == []
        assert await sqs.service.peek(await sqs.service.queue(CTX, "q"), 10) == []
        assert await sqs.service.expire_messages() == 3
        assert await sqs.service.expire_messages() == 0
        assert taken["Body"] in {"visible", "in flight"}

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_a_message_one_millisecond_short_of_its_retention_is_received(kind: str,
                                                                      tmp_path: Path) -> None:
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q", MessageRetentionPeriod=RETENTION_S)
        await sqs.send(url, "just in time")
        sqs.advance(RETENTION_S - 0.001)
        assert await sqs.counts(url) == (1, 0, 0)
        assert await sqs.bodies(url) == ["just in time"]

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_a_purge_takes_what_was_sent_before_it(kind: str, tmp_path: Path) -> None:
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q")
        await sqs.send(url, "a", "b")
        await sqs.call("PurgeQueue", QueueUrl=url)
        sqs.advance(1)
        await sqs.send(url, "after")
        assert await sqs.counts(url) == (1, 0, 0)
        assert await sqs.bodies(url) == ["after"]

    run(kind, tmp_path, scenario)


# --- maxReceiveCount ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_a_message_moves_when_its_receive_count_would_exceed_the_maximum(
        kind: str, fifo: bool, tmp_path: Path) -> None:
    """"When the ReceiveCount for a message exceeds the maxReceiveCount for a queue, Amazon
    SQS moves the message to a dead-letter queue": received twice, then moved."""
    suffix = ".fifo" if fifo else ""
    extra = {"MessageGroupId": "g", "MessageDeduplicationId": "d"} if fifo else {}

    async def scenario(sqs: Sqs) -> None:
        attrs = {"FifoQueue": "true"} if fifo else {}
        dlq = await sqs.create("dlq" + suffix, **attrs)
        source = await sqs.create("q" + suffix, **attrs, **_redrive(await sqs.arn(dlq), 2))
        await sqs.send(source, "poison", **extra)
        for count in ("1", "2"):
            [m] = await sqs.receive(source, VisibilityTimeout=0)
            assert m["Attributes"]["ApproximateReceiveCount"] == count
        assert await sqs.receive(source, VisibilityTimeout=0) == []
        assert await sqs.counts(source) == (0, 0, 0)
        assert await sqs.counts(dlq) == (1, 0, 0)
        [moved] = await sqs.receive(dlq)
        assert moved["Body"] == "poison"
        assert moved["Attributes"]["DeadLetterQueueSourceArn"] == await sqs.arn(source)

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_dead_letters_keep_their_receive_count(kind: str, fifo: bool, tmp_path: Path) -> None:
    """A dead letter's ApproximateReceiveCount goes on from the source queue's ("the number
    of times a message has been received across all queues", SQS API reference,
    ReceiveMessage): at its first receive in the dead-letter queue it is maxReceiveCount
    + 1, and its ApproximateFirstReceiveTimestamp is its first receive in the source queue.
    Both as AWS was seen answering (yavosh/pail's recording sqs-dead-letter.json:
    maxReceiveCount 1, then 2 in the dead-letter queue; tests/server/test_aws_golden.py
    replays it): a drill against SQS (eu-west-3) received a message 5 times with
    maxReceiveCount 5 (counts 1 to 5), then read it from the dead-letter queue with
    "ApproximateReceiveCount": "6"; a Lambda event from a dead-letter queue
    (ap-southeast-1) carried "ApproximateReceiveCount": "3" and an
    ApproximateFirstReceiveTimestamp 4 ms after the SentTimestamp, the source's first
    receive. The receive that moved it is not counted: it delivered nothing."""
    suffix, attrs = (".fifo", {"FifoQueue": "true"}) if fifo else ("", {})
    extra = {"MessageGroupId": "g", "MessageDeduplicationId": "d"} if fifo else {}

    async def scenario(sqs: Sqs) -> None:
        dlq = await sqs.create("dlq" + suffix, **attrs)
        source = await sqs.create("q" + suffix, **attrs, **_redrive(await sqs.arn(dlq), 5))
        await sqs.send(source, "poison", **extra)
        for count in range(1, 6):
            [m] = await sqs.receive(source, VisibilityTimeout=0)
            assert m["Attributes"]["ApproximateReceiveCount"] == str(count)
            first = m["Attributes"]["ApproximateFirstReceiveTimestamp"]
            sqs.advance(1)
        assert await sqs.receive(source) == []
        sqs.advance(1)
        [moved] = await sqs.receive(dlq, VisibilityTimeout=0)
        assert moved["Attributes"]["ApproximateReceiveCount"] == "6"
        assert moved["Attributes"]["ApproximateFirstReceiveTimestamp"] == first
        [again] = await sqs.receive(dlq)
        assert again["Attributes"]["ApproximateReceiveCount"] == "7"

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_dead_lettered_messages_take_their_place_in_a_receive(kind: str,
                                                               tmp_path: Path) -> None:
    """Each claim reads no more of a backlog than it could return: the messages it moves
    count among its MaxNumberOfMessages (tests/store/test_receive.py); a receive whose
    claim only moved claims again, until it has messages or nothing more moves, so a
    backlog of spent messages is not drained one empty receive at a time."""
    async def scenario(sqs: Sqs) -> None:
        dlq = await sqs.create("dlq")
        url = await sqs.create("q", **_redrive(await sqs.arn(dlq), 1))
        await sqs.send(url, *(f"m-{i}" for i in range(5)))
        assert len(await sqs.receive(url, 10, VisibilityTimeout=0)) == 5
        assert await sqs.receive(url, 2) == []
        assert await sqs.counts(url) == (0, 0, 0)
        assert await sqs.counts(dlq) == (5, 0, 0)

    run(kind, tmp_path, scenario)


# --- visibility --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_visibility_change_outcomes(kind: str, tmp_path: Path) -> None:
    """As real AWS answers (LocalStack's AWS-validated tests, tests/aws/services/sqs/
    test_sqs.py): a handle whose visibility ran out still changes it while nobody received
    the message again (test_change_message_visibility_after_visibility_timeout_expiration:
    HTTP 200); on a standard queue the handle of an earlier receive changes it too
    (test_terminate_visibility_timeout_after_receive); a deleted message's handle is refused
    with "Message does not exist or is not available for visibility timeout change."
    (test_change_visibility_on_deleted_message_raises_invalid_parameter_value)."""
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q")
        await sqs.send(url, "m")
        [first] = await sqs.receive(url, VisibilityTimeout=10)
        await sqs.call("ChangeMessageVisibility", QueueUrl=url,
                       ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=30)
        sqs.advance(29)
        assert await sqs.counts(url) == (0, 1, 0)  # extended from 10 s to 30 s
        sqs.advance(1)
        assert await sqs.counts(url) == (1, 0, 0)
        await sqs.call("ChangeMessageVisibility", QueueUrl=url,  # ran out, not received again
                       ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=30)
        assert await sqs.counts(url) == (0, 1, 0)
        sqs.advance(30)
        [second] = await sqs.receive(url, VisibilityTimeout=10)
        await sqs.call("ChangeMessageVisibility", QueueUrl=url,  # an earlier receive's handle
                       ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0)
        assert await sqs.bodies(url, VisibilityTimeout=10) == ["m"]
        result = await sqs.call("ChangeMessageVisibilityBatch", QueueUrl=url, Entries=[
            {"Id": "new", "ReceiptHandle": second["ReceiptHandle"], "VisibilityTimeout": 0},
            {"Id": "old", "ReceiptHandle": first["ReceiptHandle"], "VisibilityTimeout": 0}])
        assert [e["Id"] for e in result["Successful"]] == ["new", "old"]
        assert await sqs.counts(url) == (1, 0, 0)
        [third] = await sqs.receive(url)
        await sqs.call("DeleteMessage", QueueUrl=url, ReceiptHandle=third["ReceiptHandle"])
        with pytest.raises(InvalidParameterValue) as raised:
            await sqs.call("ChangeMessageVisibility", QueueUrl=url,
                           ReceiptHandle=third["ReceiptHandle"], VisibilityTimeout=42)
        assert raised.value.message == (
            f"Value {third['ReceiptHandle']} for parameter ReceiptHandle is invalid. Reason: "
            "Message does not exist or is not available for visibility timeout change.")

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_visibility_timeout_zero_makes_a_fresh_handles_message_visible_at_once(
        kind: str, tmp_path: Path) -> None:
    """"...you can terminate the visibility timeout by calling ChangeMessageVisibility with
    VisibilityTimeout set to 0. The message then becomes visible to other consumers
    immediately" (SQS API reference, ChangeMessageVisibility); LocalStack's AWS-validated
    test_change_message_visibility_not_permanent and
    test_delete_message_deletes_with_change_visibility_timeout."""
    async def scenario(sqs: Sqs) -> None:
        for name, extra in (("q", {}), ("q.fifo", {"MessageGroupId": "g",
                                                   "MessageDeduplicationId": "d"})):
            url = await sqs.create(name, **({"FifoQueue": "true"} if extra else {}))
            await sqs.send(url, "m", **extra)
            [message] = await sqs.receive(url)
            assert await sqs.receive(url) == []
            await sqs.call("ChangeMessageVisibility", QueueUrl=url,
                           ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
            assert await sqs.bodies(url) == ["m"]
            assert await sqs.bodies(url) == []  # the receive's own visibility holds it again

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_counts_follow_each_message_through_its_states(kind: str, tmp_path: Path) -> None:
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q")
        await sqs.send(url, "now", "taken")
        await sqs.send(url, "later", DelaySeconds=5)
        assert await sqs.counts(url) == (2, 0, 1)
        await sqs.receive(url, 1, VisibilityTimeout=10)
        assert await sqs.counts(url) == (1, 1, 1)
        sqs.advance(5)
        assert await sqs.counts(url) == (2, 1, 0)
        sqs.advance(5)
        assert await sqs.counts(url) == (3, 0, 0)

    run(kind, tmp_path, scenario)


# --- deletes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_an_earlier_handle_deletes_on_a_standard_queue_only(kind: str,
                                                           tmp_path: Path) -> None:
    """On a standard queue the handle of an earlier receive deletes the message, and
    deleting again with either handle succeeds (moto's test_delete_message_using_old_
    receipt_handle, from getmoto/moto#4655, "verified against AWS"; rules.
    delete_takes_any_receipt); on a FIFO queue a handle whose visibility ran out is
    refused."""
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q")
        fifo = await sqs.create("q.fifo", FifoQueue="true")
        await sqs.send(url, "m")
        await sqs.send(fifo, "f", MessageGroupId="g", MessageDeduplicationId="f")
        [first] = await sqs.receive(url, VisibilityTimeout=0)
        [second] = await sqs.receive(url, VisibilityTimeout=0)
        assert first["ReceiptHandle"] != second["ReceiptHandle"]
        await sqs.call("DeleteMessage", QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
        assert await sqs.counts(url) == (0, 0, 0)
        await sqs.call("DeleteMessage", QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
        await sqs.call("DeleteMessage", QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])
        [held] = await sqs.receive(fifo, VisibilityTimeout=5)
        sqs.advance(5)
        with pytest.raises(InvalidParameterValue):
            await sqs.call("DeleteMessage", QueueUrl=fifo, ReceiptHandle=held["ReceiptHandle"])
        assert await sqs.counts(fifo) == (1, 0, 0)

    run(kind, tmp_path, scenario)


# --- FIFO groups -------------------------------------------------------------------------------


# What real AWS delivered, as recorded by LocalStack's AWS-validated tests
# (localstack/localstack, tests/aws/services/sqs/test_sqs.py, the tests named in each
# docstring); where a test accepts two orders, the one it marks "aws" is asserted. The
# clock stands still between sends here, so sends made one after another in a recording
# become equal send times ordered by sequence number, as there; it moves a millisecond
# after them, as real time moves between the sends and the calls that follow.


async def _fifo(sqs: Sqs, *bodies: str, **attributes: Any) -> str:
    """A FIFO queue with content-based deduplication, each body "gN-mK" sent to group-N."""
    url = await sqs.create("q.fifo", FifoQueue="true", ContentBasedDeduplication="true",
                           **attributes)
    for body in bodies:
        await sqs.send(url, body, MessageGroupId="group-" + body.split("-")[0][1:])
    sqs.advance(0.001)
    return url


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_a_fifo_receive_takes_one_groups_messages_first(kind: str, tmp_path: Path) -> None:
    """test_fifo_receive_message_group_id_ordering: "even though we sent a message from
    group 2 in between messages of group 1, the messages arrive in order of the message
    groups"; "Amazon SQS first attempts to return as many messages with the same message
    group ID as possible" (SQS Developer Guide, FIFO delivery logic)."""
    async def scenario(sqs: Sqs) -> None:
        url = await _fifo(sqs, "g1-m1", "g2-m1", "g1-m2", "g1-m3")
        assert await sqs.bodies(url, 10) == ["g1-m1", "g1-m2", "g1-m3", "g2-m1"]

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_a_fifo_group_received_in_part_is_held_whole(kind: str, tmp_path: Path) -> None:
    """test_fifo_receive_message_visibility_timeout_shared_in_group: two of group 1's four
    messages received, the next receive gets group 2's; once both visibilities ran out,
    group 3 (never received) comes first, then the groups in the order they came back."""
    async def scenario(sqs: Sqs) -> None:
        url = await _fifo(sqs, "g1-m1", "g1-m2", "g1-m3", "g1-m4", "g2-m1", "g3-m1",
                          VisibilityTimeout=1)
        assert await sqs.bodies(url, 2) == ["g1-m1", "g1-m2"]
        assert await sqs.bodies(url, 1) == ["g2-m1"]
        sqs.advance(2)
        assert await sqs.bodies(url, 10, VisibilityTimeout=0) == [
            "g3-m1", "g1-m1", "g1-m2", "g1-m3", "g1-m4", "g2-m1"]

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_a_fifo_receive_with_zero_visibility_releases_its_groups(kind: str,
                                                                 tmp_path: Path) -> None:
    """test_fifo_receive_message_with_zero_visibility_timeout: the groups a
    VisibilityTimeout=0 receive took come back behind the one it did not reach, group 2
    whole although only its first message was taken."""
    async def scenario(sqs: Sqs) -> None:
        url = await _fifo(sqs, "g1-m1", "g2-m1", "g2-m2", "g3-m1", "g1-m2")
        assert await sqs.bodies(url, 3, VisibilityTimeout=0) == ["g1-m1", "g1-m2", "g2-m1"]
        assert await sqs.bodies(url, 10, VisibilityTimeout=0) == [
            "g3-m1", "g1-m1", "g1-m2", "g2-m1", "g2-m2"]

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
@pytest.mark.parametrize("how", ["terminate", "change"])
def test_a_fifo_group_comes_back_when_its_first_message_does(kind: str, how: str,
                                                             tmp_path: Path) -> None:
    """test_fifo_message_group_visibility_after_terminate_visibility_timeout and
    ..._after_change_message_visibility: "a message group becomes visible as soon as a
    message within it has become visible again", behind the group that waited, and only
    its visible messages come (g1-m2 is still in flight)."""
    async def scenario(sqs: Sqs) -> None:
        url = await _fifo(sqs, "g1-m1", "g1-m2", "g2-m1", VisibilityTimeout=30)
        first, _ = await sqs.receive(url, 2)
        await sqs.call("ChangeMessageVisibility", QueueUrl=url,
                       ReceiptHandle=first["ReceiptHandle"],
                       VisibilityTimeout=0 if how == "terminate" else 1)
        sqs.advance(0 if how == "terminate" else 2)
        assert await sqs.bodies(url, 3) == ["g2-m1", "g1-m1"]

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_deleting_a_fifo_groups_messages_releases_it(kind: str, tmp_path: Path) -> None:
    """test_fifo_message_group_visibility_after_delete (the order it marks "aws"); the
    second "g1-m2" is a duplicate by content and never enqueued."""
    async def scenario(sqs: Sqs) -> None:
        url = await _fifo(sqs, "g1-m1", "g2-m1", "g1-m2", "g2-m2", "g1-m2", "g1-m3", "g1-m4",
                          "g3-m1")
        taken = await sqs.receive(url, 2)
        assert [m["Body"] for m in taken] == ["g1-m1", "g1-m2"]
        for message in taken:
            await sqs.call("DeleteMessage", QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        assert await sqs.bodies(url, 10) == ["g2-m1", "g2-m2", "g1-m3", "g1-m4", "g3-m1"]

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_a_partly_deleted_fifo_group_stays_held(kind: str, tmp_path: Path) -> None:
    """test_fifo_message_group_visibility_after_partial_delete: one of the two received
    messages deleted, the other still in flight: the group stays held."""
    async def scenario(sqs: Sqs) -> None:
        url = await _fifo(sqs, "g1-m1", "g2-m1", "g1-m2", "g2-m2", "g1-m2", "g1-m3", "g1-m4",
                          "g3-m1")
        taken = await sqs.receive(url, 2)
        await sqs.call("DeleteMessage", QueueUrl=url, ReceiptHandle=taken[0]["ReceiptHandle"])
        assert await sqs.bodies(url, 10) == ["g2-m1", "g2-m2", "g3-m1"]

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_fifo_order_holds_after_a_timeout_and_a_queue_delay(kind: str, tmp_path: Path) -> None:
    """test_fifo_messages_in_order_after_timeout, test_fifo_queue_send_message_with_delay_
    on_queue_works and test_fifo_approx_number_of_messages."""
    async def scenario(sqs: Sqs) -> None:
        url = await _fifo(sqs, "g1-m1", "g1-m2", "g1-m3", VisibilityTimeout=1)
        for _ in range(2):
            assert await sqs.bodies(url, 10) == ["g1-m1", "g1-m2", "g1-m3"]
            sqs.advance(2)
        delayed = await sqs.create("d.fifo", FifoQueue="true", ContentBasedDeduplication="true",
                                   DelaySeconds=2)
        for body in ("message-1", "message-2", "message-3"):
            await sqs.send(delayed, body, MessageGroupId="1")
        assert await sqs.bodies(delayed) == []
        sqs.advance(3)
        assert await sqs.bodies(delayed, 3) == ["message-1", "message-2", "message-3"]
        counted = await sqs.create("c.fifo", FifoQueue="true", ContentBasedDeduplication="true")
        for body, group in (("g1-m1", "1"), ("g1-m2", "1"), ("g1-m3", "1"), ("g2-m1", "2"),
                            ("g3-m1", "3")):
            await sqs.send(counted, body, MessageGroupId=group)
        taken = await sqs.receive(counted, 4)
        assert (await sqs.counts(counted))[0] == 1
        for message in taken:
            await sqs.call("DeleteMessage", QueueUrl=counted,
                           ReceiptHandle=message["ReceiptHandle"])
        assert (await sqs.counts(counted))[0] == 1

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_an_expired_fifo_message_neither_is_received_nor_holds_its_group(
        kind: str, tmp_path: Path) -> None:
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q.fifo", FifoQueue="true", ContentBasedDeduplication="true",
                               MessageRetentionPeriod=RETENTION_S)
        await sqs.send(url, "old", MessageGroupId="g")
        await sqs.receive(url, VisibilityTimeout=3600)  # in flight, holding g
        sqs.advance(RETENTION_S - 1)
        await sqs.send(url, "young", MessageGroupId="g")
        assert await sqs.bodies(url) == []  # g is held
        sqs.advance(1)  # "old" expires in flight: g is free
        assert await sqs.bodies(url) == ["young"]

    run(kind, tmp_path, scenario)


# --- FIFO sends, purge, validation -------------------------------------------------------------


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_a_fifo_send_takes_delay_seconds_zero_only(kind: str, tmp_path: Path) -> None:
    """DelaySeconds=0 on a FIFO queue is taken, the queue's delay applying (LocalStack's
    AWS-validated test_send_message_with_delay_0_works_for_fifo); any other value is
    refused as recorded (test_fifo_queue_send_message_with_delay_seconds_fails:
    InvalidParameterValue, HTTP 400)."""
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q.fifo", FifoQueue="true", DelaySeconds=5)
        await sqs.send(url, "m", MessageGroupId="test", MessageDeduplicationId="42",
                       DelaySeconds=0)
        assert await sqs.counts(url) == (0, 0, 1)
        sqs.advance(5)
        assert await sqs.bodies(url) == ["m"]
        with pytest.raises(InvalidParameterValue) as raised:
            await sqs.send(url, "n", MessageGroupId="1", MessageDeduplicationId="1",
                           DelaySeconds=2)
        assert raised.value.message == (
            "Value 2 for parameter DelaySeconds is invalid. Reason: The request include "
            "parameter that is not valid for this queue type.")
        assert raised.value.status == 400

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
@pytest.mark.parametrize(("missing", "message"), [
    ("MessageGroupId", "The request must contain the parameter MessageGroupId."),
    ("MessageDeduplicationId", "The queue should either have ContentBasedDeduplication "
                               "enabled or MessageDeduplicationId provided explicitly")])
def test_a_fifo_batch_lacking_a_group_or_deduplication_id_fails_whole(
        kind: str, missing: str, message: str, tmp_path: Path) -> None:
    """Recorded from AWS (LocalStack's test_send_batch_missing_message_group_id_for_fifo_
    queue and test_send_batch_missing_deduplication_id_for_fifo_queue): the whole request
    fails with InvalidParameterValue, HTTP 400, the first entry unsent too."""
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q.fifo", FifoQueue="true", ContentBasedDeduplication="false")
        second = {"Id": "b", "MessageBody": "messageBody", "MessageGroupId": "test-group",
                  "MessageDeduplicationId": "dedup-b"}
        del second[missing]
        with pytest.raises(InvalidParameterValue) as raised:
            await sqs.call("SendMessageBatch", QueueUrl=url, Entries=[
                {"Id": "a", "MessageBody": "messageBody", "MessageGroupId": "test-group",
                 "MessageDeduplicationId": "dedup-a"}, second])
        assert (raised.value.message, raised.value.status) == (message, 400)
        assert await sqs.counts(url) == (0, 0, 0)

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_a_purge_clears_a_fifo_queues_deduplication_history(kind: str, tmp_path: Path) -> None:
    """LocalStack's AWS-validated test_purge_queue_clears_fifo_deduplication_cache: the
    same deduplication id sent after a purge is a new message."""
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q.fifo", FifoQueue="true")
        await sqs.send(url, "message-1", MessageGroupId="g", MessageDeduplicationId="d")
        await sqs.call("PurgeQueue", QueueUrl=url)
        await sqs.send(url, "message-2", MessageGroupId="g", MessageDeduplicationId="d")
        assert await sqs.bodies(url) == ["message-2"]

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
@pytest.mark.parametrize("name", ["q", "q.fifo"])
@pytest.mark.parametrize("value", ["", "g" * 129, "QA-P3-ERR5 INTERIOR", "é"])
def test_group_and_deduplication_ids_are_validated_on_both_queue_types(
        kind: str, name: str, value: str, tmp_path: Path) -> None:
    """"The length of MessageGroupId is 128 characters. Valid values: alphanumeric
    characters and punctuation" (SQS API reference, SendMessage; Developer Guide, message
    quotas: the same on standard queues, where a MessageGroupId makes a fair queue); AWS's
    answer, as quoted from production logs: "Value CTC#QA-P3-ERR5 INTERIOR for parameter
    MessageGroupId is invalid. Reason: MessageGroupId can only include alphanumeric and
    punctuation characters. 1 to 128 in length." (the same wording from AWS in public
    reports: serverless-nextjs/serverless-next.js#1616 and LeanerCloud/AutoSpotting#470
    for MessageGroupId, opennextjs/opennextjs-aws#138 for MessageDeduplicationId; none of
    them shows AWS's answer to an empty or non-ASCII id). A MessageDeduplicationId on a standard
    queue is refused whatever its value ("The request include parameter that is not valid
    for this queue type")."""
    async def scenario(sqs: Sqs) -> None:
        fifo = name.endswith(".fifo")
        url = await sqs.create(name, **({"FifoQueue": "true"} if fifo else {}))
        with pytest.raises(InvalidParameterValue) as raised:
            await sqs.send(url, "m", MessageGroupId=value,
                           **({"MessageDeduplicationId": "d"} if fifo else {}))
        assert raised.value.message == (
            f"Value {value} for parameter MessageGroupId is invalid. Reason: MessageGroupId "
            "can only include alphanumeric and punctuation characters. 1 to 128 in length.")
        if fifo:
            with pytest.raises(InvalidParameterValue) as raised:
                await sqs.send(url, "m", MessageGroupId="g", MessageDeduplicationId=value)
            assert raised.value.message == (
                f"Value {value} for parameter MessageDeduplicationId is invalid. Reason: "
                "MessageDeduplicationId can only include alphanumeric and punctuation "
                "characters. 1 to 128 in length.")
        assert await sqs.counts(url) == (0, 0, 0)
        await sqs.send(url, "ok", MessageGroupId="g" * 128,
                       **({"MessageDeduplicationId": "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"}
                          if fifo else {}))
        [message] = await sqs.receive(url)
        assert message["Attributes"]["MessageGroupId"] == "g" * 128

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_a_receive_that_only_dead_letters_looks_again(kind: str, tmp_path: Path) -> None:
    """A receive whose claim went entirely to the dead-letter queue returns the visible
    messages after them instead of an empty answer ("When the ReceiveCount for a message
    exceeds the maxReceiveCount ... Amazon SQS moves the message to a dead-letter queue";
    the receive itself still gets what is visible, as LocalStack's AWS-validated
    test_dead_letter_queue_max_receive_count shows)."""
    async def scenario(sqs: Sqs) -> None:
        dlq = await sqs.create("dlq")
        url = await sqs.create("q", **_redrive(await sqs.arn(dlq), 1))
        await sqs.send(url, "m1", "m2", "m3")
        assert len(await sqs.receive(url, 10, VisibilityTimeout=0)) == 3
        await sqs.send(url, "m4")
        assert await sqs.bodies(url, 1) == ["m4"]
        assert await sqs.counts(dlq) == (3, 0, 0)

    run(kind, tmp_path, scenario)


# --- fair queues -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_a_noisy_group_does_not_hold_back_the_others(kind: str, tmp_path: Path) -> None:
    """SQS fair queues: "In standard queues, using MessageGroupId enables fair queues. It is
    used to identify the tenant a message belongs to, helping maintain consistent message
    dwell time across all tenants during noisy neighbor events" (SQS API reference,
    SendMessage). One tenant's 1,000 queued messages delay ten other tenants' messages by
    no more than two receives of ten (service/rules.py, fair queues); without groups they
    would wait for the whole backlog."""
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q")
        for start in range(0, 1000, 10):
            await sqs.call("SendMessageBatch", QueueUrl=url, Entries=[
                {"Id": str(i), "MessageBody": f"noisy-{start + i}", "MessageGroupId": "noisy"}
                for i in range(10)])
        sqs.advance(1)
        for tenant in range(10):
            await sqs.send(url, f"quiet-{tenant}", MessageGroupId=f"tenant-{tenant}")
        got: list[str] = []
        for _ in range(2):
            got += await sqs.bodies(url, 10, VisibilityTimeout=600)
        assert {b for b in got if b.startswith("quiet")} == {f"quiet-{t}" for t in range(10)}
        assert len(got) == 20
        [one] = await sqs.receive(url, 1, VisibilityTimeout=600)
        assert one["Attributes"]["MessageGroupId"] == "noisy"

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_fair_receives_take_turns_and_fill_up(kind: str, tmp_path: Path) -> None:
    """Single-message receives visit the groups in turn; a receive of ten fills up from
    the groups it found (oldest first within each), then from messages without a group."""
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q")
        for group in ("a", "b", "c"):
            for i in range(3):
                await sqs.send(url, f"{group}{i}", MessageGroupId=group)
        await sqs.send(url, "plain")
        turns = [(await sqs.bodies(url, 1, VisibilityTimeout=600))[0] for _ in range(4)]
        assert turns == ["a0", "b0", "c0", "a1"]
        assert await sqs.bodies(url, 10, VisibilityTimeout=600) == [
            "b1", "c1", "a2", "b2", "c2", "plain"]

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_switching_a_fifo_queue_to_high_throughput_keeps_delivering(kind: str,
                                                                    tmp_path: Path) -> None:
    """High throughput can be turned on for an existing FIFO queue (SQS Developer Guide,
    "Enabling high throughput for FIFO queues": DeduplicationScope=messageGroup,
    FifoThroughputLimit=perMessageGroupId; LocalStack's AWS-validated
    test_fifo_message_attributes receives from such a queue as from any FIFO queue): what
    was queued before comes first and in order and each group's order holds. Deduplication
    stays in the scope the queue was created with, as AWS does (localstack/localstack#10324
    and #10887, maintainers reporting AWS's behaviour; tests/server/
    test_aws_recorded_deviations.py): b0 repeats a0's id across groups and is dropped."""
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q.fifo", FifoQueue="true")
        for i in range(3):
            await sqs.send(url, f"a{i}", MessageGroupId="a", MessageDeduplicationId=f"d{i}")
        await sqs.call("SetQueueAttributes", QueueUrl=url, Attributes={
            "DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"})
        await sqs.send(url, "b0", MessageGroupId="b", MessageDeduplicationId="d0")
        await sqs.send(url, "a3", MessageGroupId="a", MessageDeduplicationId="x")
        await sqs.send(url, "a3-again", MessageGroupId="a", MessageDeduplicationId="x")
        assert await sqs.bodies(url, 10) == ["a0", "a1", "a2", "a3"]

    run(kind, tmp_path, scenario)


# --- the console's delete of unreceived messages -----------------------------------------------


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_a_message_no_receipt_names_is_dropped_and_a_received_one_left(
        kind: str, tmp_path: Path) -> None:
    """The console deletes a message never received (or a dead letter not received since
    it landed) by its place, not a receipt; one received between the operator's look and
    the click stays with its receiver."""
    async def scenario(sqs: Sqs) -> None:
        service = sqs.service
        dlq = await sqs.create("dlq")
        url = await sqs.create("q", **_redrive(await sqs.arn(dlq), 1))
        await sqs.send(url, "fresh")
        queue = await service.queue(CTX, url)
        [(fresh, _)] = await service.peek(queue, 10)
        assert fresh.receipt is None
        assert await service.drop_unreceived(queue, [fresh], "ops") == [fresh.message_id]
        assert await sqs.counts(url) == (0, 0, 0)

        await sqs.send(url, "taken")
        [(looked, _)] = await service.peek(queue, 10)
        [got] = await sqs.receive(url, VisibilityTimeout=0)  # received after the look
        assert await service.drop_unreceived(queue, [looked], "ops") == []
        assert await sqs.counts(url) == (1, 0, 0)

        assert await sqs.bodies(url, VisibilityTimeout=0) == []  # dead-lettered
        dead = await service.queue(CTX, dlq)
        [(letter, _)] = await service.peek(dead, 10)
        assert letter.message_id == got["MessageId"] and letter.receipt is None
        assert await service.drop_unreceived(dead, [letter], "ops") == [letter.message_id]
        assert await sqs.counts(dlq) == (0, 0, 0)

    run(kind, tmp_path, scenario)


# --- the interface ----------------------------------------------------------------------------


@pytest.mark.parametrize("store_class", [
    "conveyor.store.sqlite:SqliteStore", "conveyor.store.journal:JournaledStore",
    "conveyor.store.postgres:PostgresStore", "conveyor.store.shards:ShardedStore"])
def test_every_store_has_every_operation_of_the_interface(store_class: str) -> None:
    """A store that lacks an operation fails only when a call reaches it (the sharded store
    had no take_tokens once queue rates were added): every member of base.Store, on each."""
    module, name = store_class.split(":")
    cls = getattr(importlib.import_module(module), name)
    wanted = {m for m in vars(Store) if not m.startswith("_")}
    assert sorted(m for m in wanted if not hasattr(cls, m)) == []
