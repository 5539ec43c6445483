"""Durability: state survives restarts, and acknowledged sends survive SIGKILL."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from functools import partial

import pytest

from tests.server.conftest import Launcher, QueueFactory
from tests.server.helpers import advance_clock, counts, md5_of_attributes, receive_all, unique
from tests.support import ServerProcess, sqs_client

ATTRS = {"s": {"DataType": "String", "StringValue": "kept"},
         "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01bin"}}


def _bounce(proc: ServerProcess, how: str) -> None:
    if how == "restart":
        proc.restart()
    else:
        proc.kill()
        proc.start()


@pytest.mark.parametrize("how", ["restart", "kill"])
def test_state_survives(private_server: ServerProcess, how: str) -> None:
    sqs = sqs_client(private_server.url)
    make = QueueFactory(sqs)
    dlq = make(prefix="dlq")
    main = make(tags={"team": "ops", "tier": "gold"}, VisibilityTimeout=77,
                MessageRetentionPeriod=3600,
                RedrivePolicy=json.dumps({"deadLetterTargetArn": make.arn_of(dlq),
                                          "maxReceiveCount": 5}))
    inflight = make()
    counted = make()
    delayed = make()
    fifo = make(fifo=True, ContentBasedDeduplication=True)
    before = sqs.get_queue_attributes(QueueUrl=main, AttributeNames=["All"])["Attributes"]

    sqs.send_message(QueueUrl=main, MessageBody="visible", MessageAttributes=ATTRS)
    sqs.send_message(QueueUrl=inflight, MessageBody="in flight")
    handle = sqs.receive_message(QueueUrl=inflight, VisibilityTimeout=600)["Messages"][0][
        "ReceiptHandle"]
    sqs.send_message(QueueUrl=counted, MessageBody="counted")
    for _ in range(2):
        sqs.receive_message(QueueUrl=counted, VisibilityTimeout=0)
    sqs.send_message(QueueUrl=delayed, MessageBody="later", DelaySeconds=600)
    first = sqs.send_message(QueueUrl=fifo, MessageBody="one", MessageGroupId="g")
    receive_all(sqs, fifo, 1)

    _bounce(private_server, how)
    sqs = sqs_client(private_server.url)

    # queues and their attributes and tags
    listed = set(sqs.list_queues(MaxResults=1000)["QueueUrls"])
    assert {dlq, main, inflight, counted, delayed, fifo} <= listed
    after = sqs.get_queue_attributes(QueueUrl=main, AttributeNames=["All"])["Attributes"]
    for key in ("VisibilityTimeout", "MessageRetentionPeriod", "RedrivePolicy", "QueueArn",
                "CreatedTimestamp", "LastModifiedTimestamp"):
        assert after[key] == before[key], key
    assert sqs.list_queue_tags(QueueUrl=main)["Tags"] == {"team": "ops", "tier": "gold"}
    fifo_attrs = sqs.get_queue_attributes(QueueUrl=fifo, AttributeNames=["All"])["Attributes"]
    assert fifo_attrs["FifoQueue"] == "true"
    assert fifo_attrs["ContentBasedDeduplication"] == "true"

    # messages, with their attributes
    msg = sqs.receive_message(QueueUrl=main, MessageAttributeNames=["All"],
                              WaitTimeSeconds=1)["Messages"][0]
    assert msg["Body"] == "visible"
    assert msg["MD5OfMessageAttributes"] == md5_of_attributes(ATTRS)
    assert msg["MessageAttributes"]["b"]["BinaryValue"] == b"\x00\x01bin"

    # in-flight deadline kept, and the receipt handle still works
    assert counts(sqs, inflight) == (0, 1, 0)
    sqs.delete_message(QueueUrl=inflight, ReceiptHandle=handle)
    assert counts(sqs, inflight) == (0, 0, 0)

    # receive count kept
    again = sqs.receive_message(QueueUrl=counted, MessageSystemAttributeNames=["All"],
                                WaitTimeSeconds=1)["Messages"][0]
    assert again["Attributes"]["ApproximateReceiveCount"] == "3"

    # delay kept
    assert counts(sqs, delayed) == (0, 0, 1)

    # FIFO deduplication state and sequence numbers kept
    sqs.send_message(QueueUrl=fifo, MessageBody="one", MessageGroupId="g")
    assert counts(sqs, fifo) == (0, 0, 0)
    nxt = sqs.send_message(QueueUrl=fifo, MessageBody="two", MessageGroupId="g")
    assert int(nxt["SequenceNumber"]) > int(first["SequenceNumber"])


def test_acknowledged_sends_survive_sigkill(private_server: ServerProcess) -> None:
    sqs = sqs_client(private_server.url)
    url = QueueFactory(sqs)()
    for i in range(20):
        sqs.send_message(QueueUrl=url, MessageBody=f"single-{i}")
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"batch-{i}"} for i in range(10)])
    private_server.kill()
    private_server.start()
    sqs = sqs_client(private_server.url)
    bodies = {m["Body"] for m in receive_all(sqs, url, 30)}
    assert bodies == {f"single-{i}" for i in range(20)} | {f"batch-{i}" for i in range(10)}


def test_deletes_survive_sigkill(private_server: ServerProcess) -> None:
    sqs = sqs_client(private_server.url)
    url = QueueFactory(sqs)()
    sqs.send_message(QueueUrl=url, MessageBody="gone")
    sqs.send_message(QueueUrl=url, MessageBody="stays")
    msgs = receive_all(sqs, url, 2, delete=False)
    gone = next(m for m in msgs if m["Body"] == "gone")
    stays = next(m for m in msgs if m["Body"] == "stays")
    sqs.delete_message(QueueUrl=url, ReceiptHandle=gone["ReceiptHandle"])
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=stays["ReceiptHandle"],
                                  VisibilityTimeout=0)
    private_server.kill()
    private_server.start()
    sqs = sqs_client(private_server.url)
    assert [m["Body"] for m in receive_all(sqs, url, 1)] == ["stays"]
    assert counts(sqs, url) == (0, 0, 0)


def _through_crashes(server: ServerProcess, workers: list[Callable[[], None]],
                     stop: threading.Event, kills: int, every_s: float) -> None:
    """Run the workers in threads while the server is SIGKILLed and restarted `kills`
    times, `every_s` apart; then stop them."""
    threads = [threading.Thread(target=work, daemon=True) for work in workers]
    for thread in threads:
        thread.start()
    try:
        for _ in range(kills):
            time.sleep(every_s)
            server.kill()
            time.sleep(0.2)
            server.start()
        time.sleep(every_s)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)


def _drain(server: ServerProcess, url: str, wanted: set[str] | None = None) -> set[str]:
    """The bodies still to be received, until `wanted` are all seen or the queue stays
    empty for three long polls (each keeps what it got in flight)."""
    client = sqs_client(server.url)
    seen: set[str] = set()
    empty = 0
    while empty < 3 and not (wanted is not None and wanted <= seen):
        msgs = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                      WaitTimeSeconds=1, VisibilityTimeout=600).get(
            "Messages", [])
        empty = 0 if msgs else empty + 1
        seen.update(m["Body"] for m in msgs)
    return seen


@pytest.mark.slow
def test_crash_loses_no_acknowledged_message(private_server: ServerProcess) -> None:
    """Producers send with acknowledgement while the server is SIGKILLed and restarted."""
    url = QueueFactory(sqs_client(private_server.url))()
    acked: set[str] = set()
    lock = threading.Lock()
    stop = threading.Event()

    def produce(worker: int) -> None:
        client = sqs_client(private_server.url, connect_timeout=2, read_timeout=10)
        seq = 0
        while not stop.is_set():
            seq += 1
            try:
                if seq % 3 == 0:
                    bodies = [f"{worker}-{seq}-{i}" for i in range(5)]
                    resp = client.send_message_batch(QueueUrl=url, Entries=[
                        {"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies)])
                    ok = {bodies[int(e["Id"])] for e in resp.get("Successful", [])}
                else:
                    body = f"{worker}-{seq}"
                    client.send_message(QueueUrl=url, MessageBody=body)
                    ok = {body}
            except Exception:  # server down: this send was never acknowledged
                time.sleep(0.05)
                continue
            with lock:
                acked.update(ok)

    _through_crashes(private_server, [partial(produce, w) for w in range(4)], stop,
                     kills=4, every_s=0.8)
    assert len(acked) > 20, "too few acknowledged sends for the test to mean anything"
    missing = acked - _drain(private_server, url, wanted=acked)
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:5]}"


@pytest.mark.slow
def test_crashes_lose_no_acknowledged_send_and_undo_no_acknowledged_delete(
        launch: Launcher) -> None:
    """Producers and consumers (receive, then delete) run while the server is SIGKILLed
    and restarted: every acknowledged message is received at some point, and none whose
    delete was acknowledged comes back. Received messages stay in flight for the whole run
    (so a delete never meets a stale handle, which SQS answers with success); afterwards
    the server's clock moves past their visibility and everything left is drained."""
    private_server = launch("--mode", "relaxed", "--dev-clock")
    url = QueueFactory(sqs_client(private_server.url))(VisibilityTimeout=120)
    acked: set[str] = set()
    received: set[str] = set()
    deleted: set[str] = set()
    lock = threading.Lock()
    stop = threading.Event()

    def produce(worker: int) -> None:
        client = sqs_client(private_server.url, connect_timeout=2, read_timeout=10)
        for seq in itertools.count():
            if stop.is_set():
                return
            bodies = [f"{worker}-{seq}-{i}" for i in range(3)]
            try:
                resp = client.send_message_batch(QueueUrl=url, Entries=[
                    {"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies)])
            except Exception:  # server down: never acknowledged
                time.sleep(0.05)
                continue
            with lock:
                acked.update(bodies[int(e["Id"])] for e in resp.get("Successful", []))

    def consume() -> None:
        client = sqs_client(private_server.url, connect_timeout=2, read_timeout=10)
        while not stop.is_set():
            try:
                msgs = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                              WaitTimeSeconds=1).get("Messages", [])
                with lock:
                    received.update(m["Body"] for m in msgs)
                if msgs:
                    resp = client.delete_message_batch(QueueUrl=url, Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(msgs)])
                    with lock:
                        deleted.update(msgs[int(e["Id"])]["Body"]
                                       for e in resp.get("Successful", []))
            except Exception:  # server down
                time.sleep(0.05)

    _through_crashes(private_server, [partial(produce, 0), partial(produce, 1), consume,
                                      consume], stop, kills=3, every_s=1.0)
    assert len(deleted) > 20, "too few deletes for the test to mean anything"

    advance_clock(private_server.url, 150)  # what is in flight is visible again
    left = _drain(private_server, url)
    private_server.stop()
    missing = acked - received - left
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:5]}"
    undone = deleted & left
    assert not undone, f"{len(undone)} deleted messages came back, e.g. {sorted(undone)[:5]}"


def test_create_is_idempotent_after_restart(private_server: ServerProcess) -> None:
    sqs = sqs_client(private_server.url)
    name = unique()
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    private_server.restart()
    sqs = sqs_client(private_server.url)
    assert sqs.create_queue(QueueName=name)["QueueUrl"] == url
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
