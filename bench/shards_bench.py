"""Several PostgreSQL primaries (shards): a node's CPU per message on one, two and three
shards, and a healthy shard's throughput while another is down.

    .venv/bin/python bench/shards_bench.py                 # about 2 minutes on 2 cores
    .venv/bin/python bench/shards_bench.py --duration 5 --rounds 1

Starts three PostgreSQL instances of its own (initdb on free loopback ports, as the tests
do: tests/pg_instance.py) and, per configuration, one `conveyor server` node:

- `store`: `--store` on one instance (no sharding: the baseline);
- `shards=N`: `--shard` on N instances (N = 1, 2, 3).

Load: --clients threads, each on a queue of its own (six queues, placed by the rule over
the shards), each looping SendMessageBatch (10) -> ReceiveMessage (10) -> DeleteMessageBatch
for --duration seconds after a warm-up. CPU per message is the node's own (from /proc)
over the messages received and deleted; PostgreSQL's is not counted.

Down: on two shards, the same load on the queues of shard a only, first with shard b up,
then with b's postmaster and its processes killed (SIGKILL by PID): the ratio of the two
rates is what b's outage costs a's queues. Rounds alternate the configurations, so other
load on the machine hits all alike; figures are medians over --rounds.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import boto3
from botocore.config import Config

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import procstat  # noqa: E402
from conveyor.store._placement import shard_for  # noqa: E402
from tests.pg_instance import PostgresInstance, require_own_postgres  # noqa: E402
from tests.support import ServerProcess  # noqa: E402

QUEUES = 6


def client(url: str):  # noqa: ANN201 - boto3's generated type
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="x", aws_secret_access_key="x",
                        config=Config(retries={"max_attempts": 3, "mode": "standard"}))


def load(url: str, queues: list[str], duration_s: float, clients: int) -> int:
    """Messages sent, received and deleted by `clients` threads in `duration_s`."""
    done = [0] * clients
    stop = time.monotonic() + duration_s

    def run(n: int) -> None:
        sqs = client(url)
        queue_url = sqs.get_queue_url(QueueName=queues[n % len(queues)])["QueueUrl"]
        entries = [{"Id": str(i), "MessageBody": "x" * 100} for i in range(10)]
        while time.monotonic() < stop:
            sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
            got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get(
                "Messages", [])
            if got:
                sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(got)])
                done[n] += len(got)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done)


def node_for(args: list[str], tmp: Path, label: str) -> ServerProcess:
    return ServerProcess(tmp / label, *args, "--mode", "relaxed").start()


def shard_args(instances: list[PostgresInstance], n: int, schema: str) -> list[str]:
    return [a for i, inst in enumerate(instances[:n])
            for a in ("--shard", f"s{i}={inst.url}?schema={schema}")]


def cpu_per_message(args: list[str], tmp: Path, label: str, opts: argparse.Namespace
                    ) -> tuple[float, float]:
    """(node CPU microseconds per message, messages per second) of one configuration."""
    node = node_for(args, tmp, label)
    try:
        sqs = client(node.url)
        names = [f"q{i}" for i in range(QUEUES)]
        for name in names:
            sqs.create_queue(QueueName=name)
        load(node.url, names, opts.warmup, opts.clients)
        before = procstat.tree_cpu_s(node.proc.pid)
        messages = load(node.url, names, opts.duration, opts.clients)
        cpu_s = procstat.tree_cpu_s(node.proc.pid) - before
    finally:
        node.stop()
    return cpu_s / max(messages, 1) * 1e6, messages / opts.duration


def kill_postmaster(instance: PostgresInstance) -> None:
    pid = int((instance.data / "postmaster.pid").read_text().split()[0])
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    os.kill(pid, signal.SIGKILL)
    for child in children.stdout.split():
        try:
            os.kill(int(child), signal.SIGKILL)
        except ProcessLookupError:
            continue
    time.sleep(1.0)


def healthy_while_down(instances: list[PostgresInstance], tmp: Path, label: str,
                       opts: argparse.Namespace) -> tuple[float, float]:
    """(msg/s on shard s0's queues with s1 up, the same with s1 killed)."""
    node = node_for(shard_args(instances, 2, label), tmp, label)
    try:
        sqs = client(node.url)
        names = [n for n in (f"h{i}" for i in range(100))
                 if shard_for("us-east-1", n, ["s0", "s1"]) == "s0"][:QUEUES]
        others = [n for n in (f"o{i}" for i in range(100))
                  if shard_for("us-east-1", n, ["s0", "s1"]) == "s1"][:QUEUES]
        for name in names + others:
            sqs.create_queue(QueueName=name)
        load(node.url, names, opts.warmup, opts.clients)
        up = load(node.url, names, opts.duration, opts.clients) / opts.duration
        kill_postmaster(instances[1])
        try:
            down = load(node.url, names, opts.duration, opts.clients) / opts.duration
        finally:
            instances[1].start()
    finally:
        node.stop()
    return up, down


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    require_own_postgres()
    instances = [PostgresInstance() for _ in range(3)]
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"shards-bench-{os.getpid()}"
    figures: dict[str, list[tuple[float, float]]] = {}
    healthy: list[tuple[float, float]] = []
    try:
        for instance in instances:
            instance.create()
        for r in range(opts.rounds):
            configs = {"store": ["--store", f"{instances[0].url}?schema=b{r}"]}
            configs |= {f"shards={n}": shard_args(instances, n, f"b{r}n{n}") for n in (1, 2, 3)}
            for label, args in configs.items():
                figures.setdefault(label, []).append(
                    cpu_per_message(args, tmp, f"{label}-{r}", opts))
                print(f"[shards] round {r} {label}: {figures[label][-1]}", file=sys.stderr)
            healthy.append(healthy_while_down(instances, tmp, f"down{r}", opts))
            print(f"[shards] round {r} down: {healthy[-1]}", file=sys.stderr)
    finally:
        for instance in instances:
            instance.destroy()
    base = statistics.median(us for us, _ in figures["store"])
    print("| configuration | node CPU µs/msg | vs --store | msg/s |")
    print("| --- | ---: | ---: | ---: |")
    for label, runs in figures.items():
        us = statistics.median(u for u, _ in runs)
        rate = statistics.median(m for _, m in runs)
        print(f"| {label} | {us:.0f} | {us / base:.2f}× | {rate:.0f} |")
    up = statistics.median(u for u, _ in healthy)
    down = statistics.median(d for _, d in healthy)
    print(f"\nhealthy shard: {up:.0f} msg/s with the other up, {down:.0f} msg/s with it "
          f"down ({down / up:.2f}×)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
