"""Every rule of a message's life, on every store kind (SQLite, SQLite behind the journal,
PostgreSQL), through the service, on a clock that moves only when told: no sleeps.

The rules live once, in conveyor/service/rules.py; these tests are what keeps the three
stores' claims and primitives honest to them. The first three caught real drifts between
the stores (expired messages, moves onto a message's own queue, the order of moves)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conveyor.sqs.errors import InvalidParameterValue, MessageNotInflight
from tests.store.conformance import CTX, Sqs, run
from tests.store.helpers import KINDS

RETENTION_S = 60  # the shortest SQS allows


def _redrive(dlq_arn: str, max_receive_count: int) -> dict[str, str]:
    return {"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn,
                                         "maxReceiveCount": max_receive_count})}


# --- the three drifts --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
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


@pytest.mark.parametrize("kind", KINDS)
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
        [message] = await sqs.receive(url)
        assert message["Attributes"]["DeadLetterQueueSourceArn"] == arn

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", KINDS)
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


@pytest.mark.parametrize("kind", KINDS)
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


@pytest.mark.parametrize("kind", KINDS)
def test_a_message_one_millisecond_short_of_its_retention_is_received(kind: str,
                                                                      tmp_path: Path) -> None:
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q", MessageRetentionPeriod=RETENTION_S)
        await sqs.send(url, "just in time")
        sqs.advance(RETENTION_S - 0.001)
        assert await sqs.counts(url) == (1, 0, 0)
        assert await sqs.bodies(url) == ["just in time"]

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", KINDS)
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


@pytest.mark.parametrize("kind", KINDS)
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
        assert moved["Attributes"]["ApproximateReceiveCount"] == "1"  # counted afresh
        assert moved["Attributes"]["DeadLetterQueueSourceArn"] == await sqs.arn(source)

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", KINDS)
def test_dead_lettered_messages_take_their_place_in_a_receive(kind: str,
                                                               tmp_path: Path) -> None:
    """A receive reads no more of a backlog than it could return: the messages it moves
    count among its MaxNumberOfMessages."""
    async def scenario(sqs: Sqs) -> None:
        dlq = await sqs.create("dlq")
        url = await sqs.create("q", **_redrive(await sqs.arn(dlq), 1))
        await sqs.send(url, *(f"m-{i}" for i in range(5)))
        assert len(await sqs.receive(url, 10, VisibilityTimeout=0)) == 5
        assert await sqs.receive(url, 2) == []
        assert await sqs.counts(url) == (3, 0, 0)
        assert await sqs.counts(dlq) == (2, 0, 0)

    run(kind, tmp_path, scenario)


# --- visibility --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_visibility_change_outcomes(kind: str, tmp_path: Path) -> None:
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
        with pytest.raises(MessageNotInflight):  # its visibility ran out
            await sqs.call("ChangeMessageVisibility", QueueUrl=url,
                           ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=30)
        [second] = await sqs.receive(url, VisibilityTimeout=10)
        with pytest.raises(InvalidParameterValue):  # no longer the latest receipt
            await sqs.call("ChangeMessageVisibility", QueueUrl=url,
                           ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=30)
        result = await sqs.call("ChangeMessageVisibilityBatch", QueueUrl=url, Entries=[
            {"Id": "new", "ReceiptHandle": second["ReceiptHandle"], "VisibilityTimeout": 0},
            {"Id": "old", "ReceiptHandle": first["ReceiptHandle"], "VisibilityTimeout": 0}])
        assert [e["Id"] for e in result["Successful"]] == ["new"]
        assert [e["Id"] for e in result["Failed"]] == ["old"]
        assert await sqs.counts(url) == (1, 0, 0)

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", KINDS)
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


@pytest.mark.parametrize("kind", KINDS)
def test_a_stale_handle_deletes_nothing(kind: str, tmp_path: Path) -> None:
    """On a standard queue, a handle that is not the latest receipt "succeeds but might not
    delete"; on a FIFO queue a handle whose visibility ran out is refused."""
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q")
        fifo = await sqs.create("q.fifo", FifoQueue="true")
        await sqs.send(url, "m")
        await sqs.send(fifo, "f", MessageGroupId="g", MessageDeduplicationId="f")
        [first] = await sqs.receive(url, VisibilityTimeout=0)
        await sqs.receive(url, VisibilityTimeout=0)
        await sqs.call("DeleteMessage", QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
        assert await sqs.counts(url) == (1, 0, 0)
        [held] = await sqs.receive(fifo, VisibilityTimeout=5)
        sqs.advance(5)
        with pytest.raises(InvalidParameterValue):
            await sqs.call("DeleteMessage", QueueUrl=fifo, ReceiptHandle=held["ReceiptHandle"])
        assert await sqs.counts(fifo) == (1, 0, 0)

    run(kind, tmp_path, scenario)


# --- FIFO groups -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_fifo_group_is_held_while_one_of_its_messages_is_in_flight(kind: str,
                                                                     tmp_path: Path) -> None:
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q.fifo", FifoQueue="true", ContentBasedDeduplication="true")
        for body, group in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("a3", "a"), ("b2", "b")):
            await sqs.send(url, body, MessageGroupId=group)
        [a1] = await sqs.receive(url, 1, VisibilityTimeout=10)
        assert a1["Body"] == "a1"
        assert await sqs.bodies(url, 10, VisibilityTimeout=10) == ["b1", "b2"]
        assert await sqs.bodies(url) == []  # both groups held
        sqs.advance(10)  # a1's and b's visibility ran out: in order again
        assert await sqs.bodies(url, 2, VisibilityTimeout=10) == ["a1", "a2"]
        sqs.advance(10)
        [again] = await sqs.receive(url, 1)
        await sqs.call("DeleteMessage", QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
        assert await sqs.bodies(url, 10) == ["a2", "b1", "a3", "b2"]  # in sequence

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", KINDS)
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


# --- the console's delete of unreceived messages -----------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
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
