"""Random sequences of valid operations, checked against a model of what was sent: nothing
is lost (every message ends deleted or dead-lettered) and a FIFO group is never delivered
out of order. The server's clock is moved instead of slept on; seeds are fixed, so a
failure replays."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from tests.server.helpers import advance_clock, unique
from tests.support import ServerProcess, sqs_client

STEPS = 300
MAX_RECEIVES = 4  # the redrive policy's maxReceiveCount


class Scenario:
    """One source queue with a dead-letter queue, and what the test has seen of them."""

    def __init__(self, server: ServerProcess, fifo: bool, seed: int) -> None:
        self.server, self.fifo, self.rnd = server, fifo, random.Random(seed)
        self.sqs = sqs_client(server.url)
        suffix = ".fifo" if fifo else ""
        kind = {"FifoQueue": "true"} if fifo else {}
        self.dlq = self.sqs.create_queue(QueueName=unique("dlq") + suffix,
                                         Attributes=kind)["QueueUrl"]
        dlq_arn = self.sqs.get_queue_attributes(
            QueueUrl=self.dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVES}
        self.queue = self.sqs.create_queue(QueueName=unique("src") + suffix, Attributes={
            **kind, "VisibilityTimeout": "5", "RedrivePolicy": json.dumps(redrive)})["QueueUrl"]
        self.sent: list[str] = []  # bodies, in send order
        self.group: dict[str, str] = {}
        self.deleted: set[str] = set()  # a delete succeeded (or the message had moved on)
        self.handles: dict[str, str] = {}  # body -> latest receipt handle
        self.jumps: list[tuple[str, list[str]]] = []  # received while earlier ones waited

    def advance(self, seconds: float) -> None:
        advance_clock(self.server.url, seconds)

    def send(self) -> None:
        entries = []
        for _ in range(self.rnd.randint(1, 10)):
            body = f"m{len(self.sent) + len(entries)}"
            entry: dict[str, Any] = {"Id": body, "MessageBody": body}
            if self.fifo:
                self.group[body] = f"g{self.rnd.randint(0, 3)}"
                entry |= {"MessageGroupId": self.group[body], "MessageDeduplicationId": body}
            elif self.rnd.random() < 0.2:
                entry["DelaySeconds"] = self.rnd.randint(0, 3)
            entries.append(entry)
        result = self.sqs.send_message_batch(QueueUrl=self.queue, Entries=entries)
        assert not result.get("Failed")
        self.sent += [e["Id"] for e in entries]

    def receive(self) -> None:
        batch: list[str] = []
        for m in self.sqs.receive_message(
                QueueUrl=self.queue, MaxNumberOfMessages=self.rnd.randint(1, 10),
                VisibilityTimeout=self.rnd.choice([0, 1, 3, 5, 30])).get("Messages", []):
            body = m["Body"]
            assert body not in self.deleted, f"{body} delivered after its delete"
            self.handles[body] = m["ReceiptHandle"]
            if self.fifo:
                waiting = [x for x in self.sent[:self.sent.index(body)]
                           if self.group[x] == self.group[body]
                           and x not in self.deleted and x not in batch]
                if waiting:  # only right if those went to the dead-letter queue meanwhile
                    self.jumps.append((body, waiting))
            batch.append(body)

    def some_handles(self) -> list[str]:
        return self.rnd.sample(sorted(self.handles), min(len(self.handles),
                                                         self.rnd.randint(1, 10)))

    def delete(self) -> None:
        bodies = self.some_handles()
        result = self.sqs.delete_message_batch(QueueUrl=self.queue, Entries=[
            {"Id": str(i), "ReceiptHandle": self.handles.pop(b)} for i, b in enumerate(bodies)])
        self.deleted |= {bodies[int(s["Id"])] for s in result.get("Successful", [])}

    def hide(self) -> None:
        self.sqs.change_message_visibility_batch(QueueUrl=self.queue, Entries=[
            {"Id": str(i), "ReceiptHandle": self.handles[b],
             "VisibilityTimeout": self.rnd.choice([0, 2, 10])}
            for i, b in enumerate(self.some_handles())])

    def drain(self, url: str) -> set[str]:
        """Everything still in `url`, once every visibility timeout has run out."""
        found: set[str] = set()
        for _ in range(len(self.sent)):  # ten a receive: more than enough rounds
            self.advance(61)
            messages = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                                VisibilityTimeout=60).get("Messages", [])
            if not messages:
                return found
            for m in messages:
                found.add(m["Body"])
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        raise AssertionError(f"{url} did not drain")


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("fifo", [True, False], ids=["fifo", "standard"])
def test_random_operations_lose_nothing_and_keep_group_order(
        clock_server: ServerProcess, fifo: bool, seed: int) -> None:
    run = Scenario(clock_server, fifo, seed)
    for _ in range(STEPS):
        choice = run.rnd.random()
        if choice < 0.35:
            run.send()
        elif choice < 0.65:
            run.receive()
        elif choice < 0.85 and run.handles:
            run.delete()
        elif choice < 0.92 and run.handles:
            run.hide()
        else:
            run.advance(run.rnd.choice([0.5, 1, 3, 6]))
    delivered_late = run.drain(run.queue)
    dead_letters = run.drain(run.dlq)
    assert set(run.sent) <= run.deleted | delivered_late | dead_letters, "messages lost"
    for body, waiting in run.jumps:
        assert set(waiting) <= dead_letters, f"{body} delivered before {waiting} of its group"
    assert len(run.sent) > 300 and run.deleted, "the scenario did too little to prove anything"
