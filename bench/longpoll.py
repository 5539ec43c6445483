"""Long-poll pick-up: how soon a receiver parked on an empty queue gets a new message.

A receiver process long-polls an empty queue and tells the sender (this process)
each time it is about to poll. The sender lets the poll settle on the server, sends
one message and waits for the receiver to report when the message reached it. The
pick-up time runs from just before the send call to the moment ReceiveMessage
returned with the message (both CLOCK_MONOTONIC, which Linux shares between
processes); the time after the send was acknowledged is reported beside it.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from typing import Any

from sqs_client import make_client
from stats import ms, percentile

POLLING = "polling"


@dataclass(frozen=True)
class LongPollConfig:
    """One pick-up measurement against one endpoint."""

    endpoint: str
    samples: int = 200
    wait_time_s: int = 10
    settle_s: float = 0.02  # lets the receiver's request reach the server and park there
    time_limit_s: float = 60.0
    queue_prefix: str = "bench-lp"


@dataclass
class LongPollResult:
    """Pick-up times of the messages that arrived."""

    samples: int
    missed: int
    pickup_p50_ms: float | None
    pickup_p99_ms: float | None
    after_ack_p50_ms: float | None
    after_ack_p99_ms: float | None
    server_cpu_s: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _receiver(endpoint: str, url: str, wait_time_s: int, conn: Connection) -> None:
    """Polls until the sender terminates it."""
    client = make_client(endpoint, read_timeout_s=wait_time_s + 30)
    while True:
        conn.send(POLLING)
        resp = client.receive_message(QueueUrl=url, MaxNumberOfMessages=1,
                                      WaitTimeSeconds=wait_time_s)
        received_at = time.monotonic()
        messages = resp.get("Messages", [])
        conn.send(received_at if messages else None)
        for message in messages:
            client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def _one_sample(client: Any, url: str, cfg: LongPollConfig,
                conn: Connection) -> tuple[float, float] | None:
    """Returns (from send call, from send ack) in seconds, or None when nothing arrived."""
    if not conn.poll(cfg.wait_time_s + 30) or conn.recv() != POLLING:
        return None
    time.sleep(cfg.settle_s)
    before_send = time.monotonic()
    client.send_message(QueueUrl=url, MessageBody="pick-up")
    acked = time.monotonic()
    if not conn.poll(cfg.wait_time_s + 30):
        return None
    received_at = conn.recv()
    if received_at is None:
        return None
    return received_at - before_send, received_at - acked


def run_longpoll(cfg: LongPollConfig, server_cpu_s: Callable[[], float]) -> LongPollResult:
    """Measure cfg.samples pick-ups, within cfg.time_limit_s."""
    client = make_client(cfg.endpoint)
    url = client.create_queue(QueueName=f"{cfg.queue_prefix}-{time.monotonic_ns() % 10**9}")[
        "QueueUrl"]
    parent_end, child_end = mp.get_context("fork").Pipe()
    receiver = mp.get_context("fork").Process(
        target=_receiver, args=(cfg.endpoint, url, cfg.wait_time_s, child_end), daemon=True)
    receiver.start()
    cpu0 = server_cpu_s()
    pickups, after_acks, missed = [], [], 0
    deadline = time.monotonic() + cfg.time_limit_s
    while len(pickups) + missed < cfg.samples and time.monotonic() < deadline:
        sample = _one_sample(client, url, cfg, parent_end)
        if sample is None:
            missed += 1
            continue
        pickups.append(sample[0])
        after_acks.append(sample[1])
    server_cpu = server_cpu_s() - cpu0
    receiver.terminate()  # it is parked in a long poll; no need to wait that out
    receiver.join(5)
    return LongPollResult(
        samples=len(pickups), missed=missed,
        pickup_p50_ms=ms(percentile(pickups, 50)), pickup_p99_ms=ms(percentile(pickups, 99)),
        after_ack_p50_ms=ms(percentile(after_acks, 50)),
        after_ack_p99_ms=ms(percentile(after_acks, 99)),
        server_cpu_s=round(server_cpu, 3),
    )
