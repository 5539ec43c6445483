"""Message groups under load, on loopback servers started here: fair queues and FIFO.

    .venv/bin/python bench/groups.py [--servers conveyor moto fauxqs] [--before SRC]
                                     [--backlog 10000] [--fifo-messages 3000]

fair: a standard queue holds one noisy tenant's backlog (`--backlog` messages), then each
of ten quiet tenants sends one message; one consumer receives 10 at a time (and deletes
them) until it has all ten quiet messages or 60 s have passed. Reported: how many
receives and how long each quiet message waited, with a MessageGroupId per tenant and
without one (the same load as a plain queue). A server that ignores groups delivers
the quiet messages after the backlog either way.

fifo: a FIFO queue gets `--fifo-messages` messages over 1, 10 or 100 groups from one
producer (batches of 10) while four consumers receive 10 at a time and delete what they
got; reported: messages per non-empty receive and end-to-end messages per second (first
send to last delete); then the same number queued first and drained by the four
consumers (the receive side alone).

`--before SRC` runs Conveyor a second time from another source tree (a worktree of
main, say) for a before/after table. Every server listens on 127.0.0.1 and is stopped
by its own PID; each run takes a fresh data directory.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers  # noqa: E402 - after the path set-up above

QUIET_TENANTS = 10
FAIR_TIMEOUT_S = 60.0
FIFO_CONSUMERS = 4
FIFO_TIMEOUT_S = 120.0


def client(endpoint: str) -> Any:
    return boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 0},
                                      max_pool_connections=FIFO_CONSUMERS + 2))


def fair(endpoint: str, backlog: int, grouped: bool) -> dict[str, Any]:
    """The quiet tenants' wait behind a noisy one's backlog."""
    sqs = client(endpoint)
    url = sqs.create_queue(QueueName=f"fair-{int(time.time() * 1000)}")["QueueUrl"]

    def group(name: str) -> dict[str, str]:
        return {"MessageGroupId": name} if grouped else {}

    for start in range(0, backlog, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"noisy-{start + i}", **group("noisy")}
            for i in range(min(10, backlog - start))])
    sent: dict[str, float] = {}
    for tenant in range(QUIET_TENANTS):
        body = f"quiet-{tenant}"
        sent[body] = time.monotonic()
        sqs.send_message(QueueUrl=url, MessageBody=body, **group(f"tenant-{tenant}"))
    waited_s: dict[str, float] = {}
    receives: dict[str, int] = {}
    count = 0
    deadline = time.monotonic() + FAIR_TIMEOUT_S
    while len(waited_s) < QUIET_TENANTS and time.monotonic() < deadline:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                  VisibilityTimeout=600).get("Messages", [])
        count += 1
        now = time.monotonic()
        for m in got:
            if m["Body"] in sent:
                waited_s[m["Body"]] = now - sent[m["Body"]]
                receives[m["Body"]] = count
        if got:
            sqs.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
    sqs.delete_queue(QueueUrl=url)
    missing = QUIET_TENANTS - len(waited_s)
    waits = sorted(waited_s.values())
    return {"grouped": grouped, "quiet_received": len(waited_s), "quiet_missing": missing,
            "receives_to_last_quiet": max(receives.values()) if receives else None,
            "wait_p50_ms": round(statistics.median(waits) * 1000, 1) if waits else None,
            "wait_max_ms": round(waits[-1] * 1000, 1) if waits else None,
            "gave_up_after_s": FAIR_TIMEOUT_S if missing else None}


def fifo(endpoint: str, messages: int, groups: int) -> dict[str, Any]:
    """Messages per receive and end-to-end rate on a FIFO queue with `groups` groups."""
    sqs = client(endpoint)
    url = sqs.create_queue(QueueName=f"fifo-{groups}-{int(time.time() * 1000)}.fifo",
                           Attributes={"FifoQueue": "true"})["QueueUrl"]
    lock = threading.Lock()
    done = {"deleted": 0, "receives": 0, "nonempty": 0, "received": 0}
    started = time.monotonic()
    deadline = started + FIFO_TIMEOUT_S

    def produce() -> None:
        for start in range(0, messages, 10):
            sqs.send_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "MessageBody": f"m-{start + i}",
                 "MessageGroupId": f"g-{(start + i) % groups}",
                 "MessageDeduplicationId": f"d-{start + i}-{time.monotonic_ns()}"}
                for i in range(min(10, messages - start))])

    def consume() -> None:
        own = client(endpoint)
        while time.monotonic() < deadline:
            with lock:
                if done["deleted"] >= messages:
                    return
            got = own.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                      WaitTimeSeconds=1).get("Messages", [])
            if got:
                own.delete_message_batch(QueueUrl=url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(got)])
            with lock:
                done["receives"] += 1
                done["nonempty"] += bool(got)
                done["received"] += len(got)
                done["deleted"] += len(got)

    threads = [threading.Thread(target=produce)]
    threads += [threading.Thread(target=consume) for _ in range(FIFO_CONSUMERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took_s = time.monotonic() - started
    result = {"groups": groups, "messages": messages, "delivered": done["deleted"],
              "per_receive": round(done["received"] / max(1, done["nonempty"]), 2),
              "msgs_per_s": round(done["deleted"] / took_s, 1), "took_s": round(took_s, 2)}
    # The receive side alone: the same messages queued first, then drained.
    produce()
    done.update(deleted=0, receives=0, nonempty=0, received=0)
    started = time.monotonic()
    deadline = started + FIFO_TIMEOUT_S
    threads = [threading.Thread(target=consume) for _ in range(FIFO_CONSUMERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    drain_s = time.monotonic() - started
    sqs.delete_queue(QueueUrl=url)
    result.update(drain_per_receive=round(done["received"] / max(1, done["nonempty"]), 2),
                  drain_msgs_per_s=round(done["deleted"] / drain_s, 1))
    return result


def run_server(name: str, label: str, src: Path | None, args: argparse.Namespace,
               log_dir: Path) -> dict[str, Any]:
    try:
        server = peers.start(name, log_dir, label=label, src=src)
    except peers.PeerUnavailable as exc:
        return {"server": label, "skipped": str(exc)}
    try:
        result: dict[str, Any] = {"server": label, "version": server.version}
        if "fair" in args.scenarios:
            result["fair"] = [fair(server.endpoint, args.backlog, grouped)
                              for grouped in (True, False)]
        if "fifo" in args.scenarios and name == "conveyor":
            result["fifo"] = [fifo(server.endpoint, args.fifo_messages, groups)
                              for groups in (1, 10, 100)]
        return result
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", nargs="+", default=["conveyor", "moto", "fauxqs"])
    parser.add_argument("--before", type=Path, help="also run Conveyor from this source tree")
    parser.add_argument("--backlog", type=int, default=10_000)
    parser.add_argument("--fifo-messages", type=int, default=3_000)
    parser.add_argument("--scenarios", nargs="+", choices=("fair", "fifo"),
                        default=["fair", "fifo"])
    args = parser.parse_args()
    log_dir = Path(tempfile.mkdtemp(prefix="groups-bench-"))
    runs: list[tuple[str, str, Path | None]] = []
    if args.before:
        runs.append(("conveyor", "conveyor-before", args.before))
    runs += [(name, name, None) for name in args.servers]
    for name, label, src in runs:
        print(json.dumps(run_server(name, label, src, args, log_dir)), flush=True)


if __name__ == "__main__":
    main()
