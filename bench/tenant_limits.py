"""What a receive pays for tenant limits (a group cap, receive rates), on both stores.

    .venv/bin/python bench/tenant_limits.py [--postgres URL] [--groups 50] [--rounds 10]

One Conveyor server per store (the embedded SQLite store, and PostgreSQL when `--postgres`
answers; `''` skips it), in relaxed mode, on loopback. Four queues each hold `--groups`
message groups of 40 messages: a fair queue with no limits, one with
ConveyorGroupConcurrency, one with ConveyorReceiveRate and ConveyorGroupReceiveRate, one
with all three. The limits are set far above what the run reaches, so none holds a
message back: what is measured is their cost alone (counting each group's messages in
flight, reading and spending the buckets). Rounds of 20 receives of 10 (each followed by
its delete, not timed) turn over the queues, so drift on a shared machine falls on each
alike. Reported: each queue's median receive time and its ratio to the fair queue's.
Each server is stopped by its own PID.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers  # noqa: E402 - after the path set-up above

PER_GROUP = 40
RECEIVES_PER_ROUND = 20
FAR = "100000"  # a limit no run here reaches
VARIANTS = {
    "fair, no limits": {},
    "group cap": {"ConveyorGroupConcurrency": FAR},
    "queue + group rates": {"ConveyorReceiveRate": FAR, "ConveyorReceiveBurst": FAR,
                            "ConveyorGroupReceiveRate": FAR,
                            "ConveyorGroupReceiveBurst": FAR},
    "cap + rates": {"ConveyorGroupConcurrency": FAR, "ConveyorReceiveRate": FAR,
                    "ConveyorReceiveBurst": FAR, "ConveyorGroupReceiveRate": FAR,
                    "ConveyorGroupReceiveBurst": FAR},
}


def client(endpoint: str) -> Any:
    return boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 0}))


def fill(sqs: Any, name: str, attributes: dict[str, str], groups: int) -> str:
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    for group in range(groups):
        for start in range(0, PER_GROUP, 10):
            sqs.send_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "MessageBody": "x", "MessageGroupId": f"g{group:04d}"}
                for i in range(start, start + 10)])
    return url


def measure(endpoint: str, groups: int, rounds: int) -> dict[str, float]:
    """Each variant's median receive time (ms)."""
    sqs = client(endpoint)
    urls = {label: fill(sqs, f"limits-{i}-{uuid.uuid4().hex[:8]}", attrs, groups)
            for i, (label, attrs) in enumerate(VARIANTS.items())}
    times: dict[str, list[float]] = {label: [] for label in VARIANTS}
    for _ in range(rounds):
        for label, url in urls.items():
            for _ in range(RECEIVES_PER_ROUND):
                started = time.perf_counter()
                got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                          VisibilityTimeout=600).get("Messages", [])
                times[label].append((time.perf_counter() - started) * 1000)
                assert len(got) == 10, f"{label}: a limit held a receive back"
                sqs.delete_message_batch(QueueUrl=url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(got)])
    return {label: statistics.median(values) for label, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    needed = args.rounds * RECEIVES_PER_ROUND * 10
    if needed > args.groups * PER_GROUP:
        parser.error(f"--rounds {args.rounds} needs {needed} messages a queue: raise --groups")
    stores = {"sqlite": []}
    if args.postgres:
        schema = "bench_" + uuid.uuid4().hex[:8]
        joined = args.postgres + ("&" if "?" in args.postgres else "?") + f"schema={schema}"
        stores["postgresql"] = ["--store", joined, "--pool-size", "4"]
    log_dir = Path(tempfile.mkdtemp(prefix="limits-bench-"))
    print(f"{args.groups} groups x {PER_GROUP} messages a queue, {args.rounds} rounds of "
          f"{RECEIVES_PER_ROUND} receives of 10")
    print("| store | queue | median receive ms | vs fair |")
    print("| --- | --- | ---: | ---: |")
    for store, extra in stores.items():
        try:
            server = peers.start("conveyor", log_dir, ["--mode", "relaxed", *extra],
                                 label=f"conveyor-limits-{store}")
        except peers.PeerUnavailable as exc:
            print(f"| {store} | unavailable: {exc} | | |")
            continue
        try:
            medians = measure(server.endpoint, args.groups, args.rounds)
        finally:
            server.stop()
        base = medians["fair, no limits"]
        for label, median in medians.items():
            print(f"| {store} | {label} | {median:.2f} | {median / base:.2f}x |")


if __name__ == "__main__":
    main()
