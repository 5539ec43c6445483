"""A queue's identity is its own (DESIGN.md, invariant 6): ids are never reused, and
deleting a queue ends every task and record keyed by it, so that a queue created later,
under any name, the deleted one's included, starts empty in every respect.

Through a real server and boto3, on every store. The store-level side (every table and
lease-name kind, found by introspecting both stores' schemas) is tests/store/test_identity.py.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import apsw

from conveyor.store import sqlite
from tests.server.conftest import Launcher, QueueFactory
from tests.server.helpers import (
    RawClient,
    advance_clock,
    counts,
    queue_name_of,
    raises_sqs,
    receive_all,
    unique,
    wait_for,
)
from tests.support import ServerProcess, sqs_client

WORKERS = "ConveyorWorkers."
LEASES = "ConveyorLease."


def _redrive(dlq_arn: str) -> dict[str, str]:
    return {"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})}


def _tasks(sqs: Any, arn: str) -> list[dict[str, Any]]:
    return sqs.list_message_move_tasks(SourceArn=arn, MaxResults=10)["Results"]


def test_a_deleted_queues_move_task_does_not_live_on_in_the_next_queue(
        sqs: Any, make_queue: QueueFactory) -> None:
    """Issue 30, defect 2: a move task still running when its source queue is deleted
    re-attached itself to the next queue created (the embedded store handed that queue the
    deleted one's id), showed in its ListMessageMoveTasks, refused it a task of its own
    ("There is already a task running") and moved its messages out. The deleted queue is
    created last here, so that its id is the one the embedded store would hand out next."""
    dest = make_queue(prefix="dest")
    src = make_queue(prefix="src")
    old = make_queue(prefix="old")
    old_arn = make_queue.arn_of(old)
    sqs.set_queue_attributes(QueueUrl=src, Attributes=_redrive(old_arn))
    for start in range(0, 30, 10):
        sqs.send_message_batch(QueueUrl=old, Entries=[
            {"Id": str(i), "MessageBody": f"old-{start + i}"} for i in range(10)])
    old_handle = sqs.start_message_move_task(
        SourceArn=old_arn, DestinationArn=make_queue.arn_of(dest),
        MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    sqs.delete_queue(QueueUrl=old)
    new = make_queue(prefix="new")
    new_arn = make_queue.arn_of(new)
    sqs.set_queue_attributes(QueueUrl=src, Attributes=_redrive(new_arn))
    sqs.send_message_batch(QueueUrl=new, Entries=[
        {"Id": str(i), "MessageBody": f"new-{i}"} for i in range(5)])
    assert _tasks(sqs, new_arn) == []
    moved_before = counts(sqs, dest)[0]
    # The old task ran at 1 message a second: given a few of its steps, it moves nothing
    # of the new queue's (a bound on what happens, not a timing).
    wait_for(lambda: _tasks(sqs, new_arn) == [] and counts(sqs, new)[0] == 5,
             timeout_s=5, what="the new queue keeps its messages")
    assert counts(sqs, dest)[0] == moved_before
    # The old task's handle names a source that no longer exists (LocalStack's recording of
    # AWS, test_sqs_move_task.snapshot.json: ResourceNotFoundException for such a handle).
    with raises_sqs("ResourceNotFoundException", 404):
        sqs.cancel_message_move_task(TaskHandle=old_handle)
    handle = sqs.start_message_move_task(SourceArn=new_arn,
                                         DestinationArn=make_queue.arn_of(dest))["TaskHandle"]
    [task] = _tasks(sqs, new_arn)
    assert task["Status"] in ("RUNNING", "COMPLETED")
    assert task.get("TaskHandle", handle) == handle


def test_a_queue_recreated_under_a_deleted_name_starts_empty(
        sqs: Any, make_queue: QueueFactory, raw: RawClient) -> None:
    """Everything the old queue had is gone from the new one of the same name: messages,
    tags, permissions (Policy), attributes, FIFO deduplication ids, move tasks, workers'
    and scalers' announcements, drain requests, scaling decisions and the periodic-task
    leases named after it (relaxed mode: no QueueDeletedRecently minute)."""
    name = unique("reborn") + ".fifo"
    fifo = {"FifoQueue": "true"}
    url = sqs.create_queue(QueueName=name, Attributes={**fifo, "VisibilityTimeout": "77"},
                           tags={"team": "old"})["QueueUrl"]
    arn = make_queue.arn_of(url)
    src = make_queue(fifo=True, prefix="src", RedrivePolicy=_redrive(arn)["RedrivePolicy"])
    sqs.add_permission(QueueUrl=url, Label="old-grant", AWSAccountIds=["111122223333"],
                       Actions=["SendMessage"])
    sent = sqs.send_message(QueueUrl=url, MessageBody="old", MessageGroupId="g",
                            MessageDeduplicationId="dedup-1")
    sqs.start_message_move_task(SourceArn=arn, DestinationArn=make_queue.arn_of(
        make_queue(fifo=True, prefix="dest")), MaxNumberOfMessagesPerSecond=1)
    call = _extension_caller(raw)
    call(WORKERS + "AnnounceWorker", {"WorkerId": f"w-{name}", "Queue": name,
                                      "TtlSeconds": 300, "Status": {"busy": 1}})
    call(WORKERS + "AnnounceWorker", {"WorkerId": f"s-{name}", "Queue": name, "Kind": "scaler",
                                      "TtlSeconds": 300})
    call(WORKERS + "DrainWorker", {"WorkerId": f"w-{name}"})
    call(WORKERS + "RecordScalingDecision", {"Queue": name, "Decision": {"desired": 3}})
    cron = f"conveyor-cron:{name}"  # the periodic-task leader's lease, and a run ledger
    for lease in (cron, f"{cron}#runs:nightly"):
        call(LEASES + "AcquireLease", {"Name": lease, "Holder": "h", "TtlSeconds": 300})
    other_worker = f"w-other-{name}"  # another queue's worker stays
    call(WORKERS + "AnnounceWorker", {"WorkerId": other_worker, "Queue": f"other-{name}",
                                      "TtlSeconds": 300})

    sqs.delete_queue(QueueUrl=url)
    assert sqs.create_queue(QueueName=name, Attributes=fifo)["QueueUrl"] == url
    sqs.set_queue_attributes(QueueUrl=src, Attributes=_redrive(arn))

    assert counts(sqs, url) == (0, 0, 0)
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["VisibilityTimeout"] == "30" and "Policy" not in attributes
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)
    again = sqs.send_message(QueueUrl=url, MessageBody="new", MessageGroupId="g",
                             MessageDeduplicationId="dedup-1")
    assert again["MessageId"] != sent["MessageId"]  # not taken for the old one's duplicate
    assert counts(sqs, url)[0] == 1
    assert _tasks(sqs, arn) == []
    workers = call(WORKERS + "ListWorkers", {})["Workers"]
    assert [w["WorkerId"] for w in workers if name in w["Queue"]] == [other_worker]
    assert call(WORKERS + "ListScalingDecisions", {"Queue": name})["Decisions"] == []
    for lease in (cron, f"{cron}#runs:nightly"):
        assert call(LEASES + "GetLease", {"Name": lease}) == {}, lease
    # A worker of the new queue announcing itself is not told to drain (the drain request
    # is a lease record no lease call can name: service/workers.py).
    assert call(WORKERS + "AnnounceWorker", {"WorkerId": f"w-{name}", "Queue": name,
                                             "TtlSeconds": 300}) == {}


def test_the_name_of_a_deleted_queue_waits_a_minute_in_strict_mode(launch: Launcher) -> None:
    """"After you delete a queue, you must wait at least 60 seconds before creating a queue
    with the same name" (SQS API reference, CreateQueue): QueueDeletedRecently, Query code
    AWS.SimpleQueueService.QueueDeletedRecently (botocore's model), until the minute has
    passed on the server's clock; then the queue is new and empty."""
    server = launch("--dev-clock")  # strict mode, on a clock the test moves
    sqs = sqs_client(server.url)
    name = unique("cool")
    url = sqs.create_queue(QueueName=name, tags={"t": "old"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="old")
    sqs.delete_queue(QueueUrl=url)
    advance_clock(server.url, 50)
    with raises_sqs("AWS.SimpleQueueService.QueueDeletedRecently"):
        sqs.create_queue(QueueName=name)
    advance_clock(server.url, 11)
    assert sqs.create_queue(QueueName=name)["QueueUrl"] == url
    assert counts(sqs, url) == (0, 0, 0)
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)


def _extension_caller(raw: RawClient) -> Any:
    """Call one of Conveyor's own JSON 1.0 actions (full X-Amz-Target given); its answer."""
    def call(target: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = raw.request("POST", "/", json.dumps(body).encode(), {
            "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": target})
        assert resp.status == 200, (target, resp.body)
        return resp.json()

    return call


def test_the_server_takes_a_version_1_database_on(tmp_path: Path) -> None:
    """A data directory made by schema version 1 (the embedded store's queue ids then
    INTEGER PRIMARY KEY: a new queue took the id of the one deleted last): the server
    starts on it, its queues and messages are all there, and a queue created now does not
    inherit the deleted one's move task, which pointed at the id it would have taken."""
    db = apsw.Connection(str(tmp_path / "conveyor.db"))
    db.execute(sqlite.SCHEMA)  # version 1's tables, as a version-1 server made them
    db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    attributes = json.dumps({"MessageRetentionPeriod": "345600", "VisibilityTimeout": "30",
                             "DelaySeconds": "0", "MaximumMessageSize": "262144",
                             "ReceiveMessageWaitTimeSeconds": "0"})
    for queue_id, name in ((1, "kept"), (2, "deleted")):
        db.execute("INSERT INTO queues (id, region, name, attributes, tags, created_s,"
                   " modified_s) VALUES (?, 'us-east-1', ?, ?, '{}', 0, 0)",
                   (queue_id, name, attributes))
    now_ms = int(time.time() * 1000)
    for seq in range(1, 4):
        db.execute("INSERT INTO messages (seq, queue_id, message_id, body, md5_body, sent_ms,"
                   " sender_id, visible_at) VALUES (?, 1, ?, ?, ?, ?, 's', 0)",
                   (seq, f"00000000-0000-4000-8000-00000000000{seq}", f"body-{seq}",
                    hashlib.md5(f"body-{seq}".encode()).hexdigest(), now_ms))
    db.execute("DELETE FROM queues WHERE id=2")
    db.execute("INSERT INTO move_tasks VALUES ('h', 2, ?)", (json.dumps({
        "handle": "h", "source_queue_id": 2, "destination_queue_id": 1,
        "max_per_second": None, "status": "RUNNING", "started_ms": now_ms,
        "extra": {"SourceArn": "arn:aws:sqs:us-east-1:000000000000:deleted"}}),))
    db.close()
    server = ServerProcess(tmp_path, "--mode", "relaxed").start()
    try:
        sqs = sqs_client(server.url)
        kept = sqs.get_queue_url(QueueName="kept")["QueueUrl"]
        assert counts(sqs, kept) == (3, 0, 0)
        new = sqs.create_queue(QueueName="new")["QueueUrl"]
        sqs.set_queue_attributes(QueueUrl=kept, Attributes=_redrive(
            sqs.get_queue_attributes(QueueUrl=new, AttributeNames=["QueueArn"])[
                "Attributes"]["QueueArn"]))
        new_arn = f"arn:aws:sqs:us-east-1:000000000000:{queue_name_of(new)}"
        assert _tasks(sqs, new_arn) == []
        sqs.send_message(QueueUrl=new, MessageBody="x")
        assert sorted(m["Body"] for m in receive_all(sqs, kept, 3)) == [
            "body-1", "body-2", "body-3"]
        server.restart()  # a second start finds version 2 and changes nothing
        assert counts(sqs, new) == (1, 0, 0) and _tasks(sqs, new_arn) == []
    finally:
        server.stop()
