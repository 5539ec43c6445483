"""Fixtures for the temporary-queues tests: real server, unique prefixes, responders."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conveyor.tempqueues import Responder, TemporaryQueuesClient
from tests.support import ServerProcess, sqs_client

# Short periods so that heartbeats, idleness and sweeps happen within a test's few seconds.
FAST = {"poll_wait_s": 1, "heartbeat_interval_s": 0.3, "retention_s": 30,
        "sweep_period_s": None, "max_tag_calls_per_s": 20.0}


class CallCounter:
    """Counts the SQS API calls a boto3 client makes, by operation name."""

    def __init__(self, client: Any) -> None:
        self.calls: Counter[str] = Counter()
        self.urls: list[str] = []
        self._lock = threading.Lock()
        client.meta.events.register("before-parameter-build.sqs.*", self._seen)

    def _seen(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        with self._lock:
            self.calls[model.name] += 1
            if "QueueUrl" in params:
                self.urls.append(params["QueueUrl"])

    def snapshot(self) -> Counter[str]:
        """A copy of the counts so far."""
        with self._lock:
            return Counter(self.calls)


@pytest.fixture
def client_factory(server: ServerProcess) -> Callable[[], Any]:
    """New boto3 SQS clients on the shared server, with room for many threads."""
    return lambda: sqs_client(server.url, max_pool_connections=64)


@pytest.fixture
def prefix() -> str:
    """A prefix of its own per test, so one test's sweepers never see another's queues."""
    return f"tq{uuid.uuid4().hex[:10]}_"


@pytest.fixture
def make_temporary(client_factory: Callable[[], Any],
                   prefix: str) -> Iterator[Callable[..., TemporaryQueuesClient]]:
    """Build TemporaryQueuesClients with fast settings; all shut down after the test."""
    made: list[TemporaryQueuesClient] = []

    def _make(**options: Any) -> TemporaryQueuesClient:
        client = TemporaryQueuesClient(client_factory(), **{"prefix": prefix, **FAST, **options})
        made.append(client)
        return client

    yield _make
    for client in made:
        client.shutdown()


class EchoResponders:
    """Threads that answer every request on a queue with its body upper-cased."""

    def __init__(self, sqs: Any, request_url: str, count: int) -> None:
        self.sqs = sqs
        self.request_url = request_url
        self.responder = Responder(sqs)
        self.stop = threading.Event()
        self.served = Counter[str]()
        self.hold = threading.Event()  # while set, requests are received but not answered
        self.threads = [threading.Thread(target=self._serve, args=(f"r{i}",), daemon=True)
                        for i in range(count)]
        for thread in self.threads:
            thread.start()

    def _serve(self, name: str) -> None:
        while not self.stop.is_set():
            messages = self.sqs.receive_message(
                QueueUrl=self.request_url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                MessageAttributeNames=["All"]).get("Messages", [])
            for message in messages:
                while self.hold.is_set() and not self.stop.is_set():
                    self.stop.wait(0.05)
                # Counted before the reply goes: a requester that has its reply may look
                # at the count at once (counted after, the last one raced the test).
                self.served[name] += 1
                self.responder.send_response_message(
                    message, {"MessageBody": message["Body"].upper()})
                self.sqs.delete_message(QueueUrl=self.request_url,
                                        ReceiptHandle=message["ReceiptHandle"])

    def close(self) -> None:
        """Stop and join every responder thread."""
        self.stop.set()
        for thread in self.threads:
            thread.join(5)


@pytest.fixture
def echo(client_factory: Callable[[], Any], queue_name: str) -> Iterator[EchoResponders]:
    """Three echo responders on a fresh request queue."""
    sqs = client_factory()
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    responders = EchoResponders(sqs, url, 3)
    yield responders
    responders.close()
