"""Load under faults: boto3 producers and consumers, a pair per server node, recording
every operation in a History (history.py) for the checker to judge afterwards."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable

from tests.cluster.history import History
from tests.support import ServerProcess, sqs_client

READ_TIMEOUT_S = 30  # above the store's statement bound (20 s): it answers first


def client(node: ServerProcess):
    return sqs_client(node.url, read_timeout=READ_TIMEOUT_S, connect_timeout=5)


def guarded(history: History, work: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except Exception as exc:  # a thread's failure must reach the test
            history.failures.append(repr(exc))
    return threading.Thread(target=run)


def produce(history: History, n: int, node: ServerProcess, url: str,
            stop: threading.Event) -> None:
    sqs = client(node)
    count = 0
    while not stop.is_set():
        entries = [{"Id": str(i), "MessageBody": f"{n}-{count + i}"} for i in range(10)]
        count += 10
        answer = history.call("send", n, _sent, sqs.send_message_batch, QueueUrl=url,
                              Entries=entries)
        if answer is None:
            time.sleep(0.05)
        elif answer.get("Failed"):
            history.failures.append(f"send entries failed: {answer['Failed']}")


def produce_fifo(history: History, n: int, node: ServerProcess, url: str,
                 stop: threading.Event) -> None:
    """Group `g{n}`, bodies `g{n}:seq` in order (history.py), ten a call; a call that
    failed is sent again as it was, deduplication ids and all, until acknowledged."""
    sqs = client(node)
    seq = 0
    while not stop.is_set():
        entries = [{"Id": str(i), "MessageBody": f"g{n}:{seq + i}", "MessageGroupId": f"g{n}",
                    "MessageDeduplicationId": f"g{n}:{seq + i}"} for i in range(10)]
        while not stop.is_set():
            answer = history.call("send", n, _sent, sqs.send_message_batch, QueueUrl=url,
                                  Entries=entries)
            if answer is not None:
                break
            time.sleep(0.05)
        else:
            return
        if answer.get("Failed"):
            history.failures.append(f"send entries failed: {answer['Failed']}")
        seq += 10


def consume(history: History, n: int, node: ServerProcess, url: str,
            stop: threading.Event, fifo: bool = False) -> None:
    sqs = client(node)
    while not stop.is_set():
        answer = history.call("receive", n, _got, sqs.receive_message, QueueUrl=url,
                              bodies=_bodies if fifo else None,
                              MaxNumberOfMessages=10, WaitTimeSeconds=1,
                              VisibilityTimeout=int(history.visibility_timeout_s))
        if answer is None:
            time.sleep(0.05)
            continue
        messages = answer.get("Messages", [])
        if not messages:
            continue
        ids = {str(i): m["MessageId"] for i, m in enumerate(messages)}
        answer = history.call(
            "delete", n, lambda a, ids=ids: [ids[e["Id"]] for e in a.get("Successful", [])],
            sqs.delete_message_batch, QueueUrl=url, Entries=[
                {"Id": i, "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in zip(ids, messages, strict=True)])
        # An entry refused: not deleted. Recorded as "Code: reason", so that a receipt gone
        # stale while its delete waited (refused on a FIFO queue, as SQS does) shows as such.
        history.errors += [(n, f"{e['Code']}: {e.get('Message', '').rpartition('Reason: ')[2]}")
                           for e in (answer or {}).get("Failed", [])]


def _sent(answer: dict) -> list[str]:
    return [e["MessageId"] for e in answer.get("Successful", [])]


def _got(answer: dict) -> list[str]:
    return [m["MessageId"] for m in answer.get("Messages", [])]


def _bodies(answer: dict) -> list[str]:
    return [m["Body"] for m in answer.get("Messages", [])]


class Load:
    """A producer and a consumer on each node, on queue `url` (and on FIFO queue
    `fifo_url` if given: a group per node), from `start` to `finish`."""

    def __init__(self, history: History, nodes: list[ServerProcess], url: str,
                 fifo_url: str | None = None) -> None:
        self.history, self.url = history, url
        self._producing, self._consuming = threading.Event(), threading.Event()
        self._producers = [guarded(history, lambda n=n, node=node: produce(
            history, n, node, url, self._producing)) for n, node in enumerate(nodes)]
        self._consumers = [guarded(history, lambda n=n, node=node: consume(
            history, n, node, url, self._consuming)) for n, node in enumerate(nodes)]
        if fifo_url:
            self._producers += [guarded(history, lambda n=n, node=node: produce_fifo(
                history, n, node, fifo_url, self._producing)) for n, node in enumerate(nodes)]
            self._consumers += [guarded(history, lambda n=n, node=node: consume(
                history, n, node, fifo_url, self._consuming, fifo=True))
                for n, node in enumerate(nodes)]

    def start(self) -> Load:
        for thread in self._producers + self._consumers:
            thread.start()
        return self

    def finish(self, drain_s: float) -> None:
        """Stop sending; let the consumers take what was acknowledged (for `drain_s` at
        most); stop them."""
        self._producing.set()
        for thread in self._producers:
            thread.join(60)
        acked = {i for op in self.history.of("send") for i in op.ids}
        deadline = time.monotonic() + drain_s
        while time.monotonic() < deadline and not acked <= {
                i for op in self.history.of("receive") for i in op.ids}:
            time.sleep(0.2)
        self._consuming.set()
        for thread in self._consumers:
            thread.join(60)


def queued(node: ServerProcess, url: str) -> set[str]:
    """Whatever is still in the queue at the end (received and kept out of the way)."""
    sqs = client(node)
    left: set[str] = set()
    empty = 0
    while empty < 3:  # three empty receives in a row: nothing visible is left
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                  VisibilityTimeout=600).get("Messages", [])
        empty = 0 if got else empty + 1
        left |= {m["MessageId"] for m in got}
    return left


def recovery_s(history: History, since: float, node: int) -> float:
    """From `since` to the node's first acknowledged send begun after it (a send must
    reach the primary; an empty receive may not need to)."""
    after = [op.end for op in history.of("send") if op.node == node and op.start >= since]
    return min(after, default=float("inf")) - since


def write_report(variable: str, report: dict) -> None:
    """Print a run's figures; append them as a JSON line to the file the environment
    variable `variable` names, if set (for bench/reporting_tests.py)."""
    path = os.environ.get(variable)
    if path:
        with open(path, "a") as out:
            out.write(json.dumps(report) + "\n")
    print(json.dumps(report))
