"""Benchmark: request-response through virtual queues vs. one real queue per request.

Usage: python -m tests.tempqueues.bench_roundtrip [--requests N] [--concurrency C ...]

Starts its own relaxed-mode `conveyor server`, three echo responders, then for each
concurrency runs both ways side by side and prints round trips per second, latency
p50/p99 and SQS API calls per round trip, as a Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from conveyor.tempqueues import Requester, TemporaryQueuesClient
from conveyor.tempqueues.core import with_response_queue
from tests.support import ServerProcess, sqs_client

from .conftest import CallCounter, EchoResponders


def real_queue_round_trip(sqs: Any, request_url: str, body: str, timeout_s: float) -> str:
    """The naive way: create a queue for the response, wait on it, delete it."""
    url = sqs.create_queue(QueueName=f"rr-{uuid.uuid4().hex}")["QueueUrl"]
    try:
        sqs.send_message(**with_response_queue({"QueueUrl": request_url, "MessageBody": body},
                                               url))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            messages = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", [])
            if messages:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=messages[0]["ReceiptHandle"])
                return messages[0]["Body"]
        raise TimeoutError(body)
    finally:
        sqs.delete_queue(QueueUrl=url)


def measure(call: Callable[[str], str], requests: int, concurrency: int) -> dict[str, float]:
    latencies: list[float] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        start = time.perf_counter()
        assert call(f"b{i}") == f"B{i}"
        with lock:
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(one, range(requests)))
    elapsed = time.perf_counter() - start
    cuts = statistics.quantiles(latencies, n=100)
    return {"rps": requests / elapsed, "p50_ms": cuts[49] * 1000, "p99_ms": cuts[98] * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        server = ServerProcess(Path(data_dir), "--mode", "relaxed").start()
        try:
            run(server.url, args.requests, args.concurrency)
        finally:
            server.stop()


def run(endpoint: str, requests: int, concurrencies: list[int]) -> None:
    responder_sqs = sqs_client(endpoint, max_pool_connections=64)
    request_url = responder_sqs.create_queue(QueueName="bench-requests")["QueueUrl"]
    echo = EchoResponders(responder_sqs, request_url, 3)
    virtual_sqs = sqs_client(endpoint, max_pool_connections=64)
    real_sqs = sqs_client(endpoint, max_pool_connections=64)
    temporary = TemporaryQueuesClient(virtual_sqs, prefix="bench_", poll_wait_s=20,
                                      sweep_period_s=None)
    requester = Requester(None, temporary=temporary)
    virtual_calls, real_calls = CallCounter(virtual_sqs), CallCounter(real_sqs)

    def virtual(body: str) -> str:
        return requester.send_message_and_get_response(
            {"QueueUrl": request_url, "MessageBody": body}, 30)["Body"]

    def real(body: str) -> str:
        return real_queue_round_trip(real_sqs, request_url, body, 30)

    print("| way | concurrency | round trips/s | p50 ms | p99 ms | SQS calls per round trip |")
    print("|---|---:|---:|---:|---:|---:|")
    try:
        virtual("warm-up")
        for concurrency in concurrencies:
            for name, call, counter in (("virtual queues", virtual, virtual_calls),
                                        ("real queue per request", real, real_calls)):
                before = sum(counter.snapshot().values())
                result = measure(call, requests, concurrency)
                per_trip = (sum(counter.snapshot().values()) - before) / requests
                print(f"| {name} | {concurrency} | {result['rps']:.0f} | "
                      f"{result['p50_ms']:.1f} | {result['p99_ms']:.1f} | {per_trip:.1f} |")
    finally:
        temporary.shutdown()
        echo.close()


if __name__ == "__main__":
    main()
