"""1,000,000 messages scheduled up to a day ahead: what they cost until due, the restart
with them stored, and how late they come once due (issue 32).

    .venv/bin/python bench/scheduled.py [--messages 1000000] [--receives 10000]

1. Fill: one queue with ConveyorMaxDelaySeconds of a day gets `--messages` messages with
   DelaySeconds spread evenly from 1 minute to 24 hours, sent in process through the
   service and the server's own store (SQLite behind the journal) in batches of 10, as
   bench/inprocess.py does without the HTTP parsing; the store is closed as a server
   closes it. The fill runs on a clock FILL_AHEAD_S ahead, so that nothing is due
   before the receives below are measured, however long the fill and the restart take.
   Among them, PROBES messages at each of PROBE_DELAYS_S carry a MessageGroupId.
2. Restart: `conveyor server --dev-clock` on that data directory, timed from the
   process's start to its first 200 on /ready; and on an empty data directory.
3. Cost until due: the server process's CPU (/proc) over `--receives` ReceiveMessage
   calls (WaitTimeSeconds 0, nothing due) on the full queue and on an empty queue,
   alternating rounds; reported per receive and as a ratio.
4. Lateness: for each probe time, the dev clock is moved to 2 s before it; every message
   due earlier is a backlog by then, so receives (10, VisibilityTimeout 12 h) run in a loop
   and the probes, dealt first as their own group (fair queues), are read as they come:
   each one's ApproximateFirstReceiveTimestamp minus its time (SentTimestamp +
   DelaySeconds). The server stays a separate process on loopback, stopped by its PID.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import uvloop
from botocore.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import procstat  # noqa: E402 - after the path set-up above
from peers import free_port  # noqa: E402

from conveyor.clock import Clock  # noqa: E402
from conveyor.service import RequestContext, Service  # noqa: E402
from conveyor.sqs.limits import RELAXED  # noqa: E402
from conveyor.store.journal import JournaledStore  # noqa: E402

DAY_S = 24 * 3600
FIRST_S = 60
FILL_AHEAD_S = 900  # the fill's clock is this far ahead (see step 1)
PROBE_DELAYS_S = (3600, 6 * 3600, 12 * 3600, 23 * 3600)
PROBES = 5  # messages at each probe time
ROUND = 500  # receives on one queue before the other's
LEAD_S = 2.0  # the clock is moved to this long before a probe time
CTX = RequestContext("us-east-1", "000000000000", "http://127.0.0.1")
FULL, EMPTY = "scheduled", "nothing-scheduled"


def delays(messages: int) -> list[int]:
    """Each message's DelaySeconds, evenly from FIRST_S to a day."""
    step = (DAY_S - FIRST_S) / max(messages - 1, 1)
    return [FIRST_S + round(i * step) for i in range(messages)]


async def fill(data_dir: Path, messages: int) -> tuple[float, int]:
    """Send `messages` scheduled messages in process: (seconds taken, the fill clock's
    epoch ms as the probes, its last batches, were sent)."""
    clock = Clock(FILL_AHEAD_S)
    store = JournaledStore(str(data_dir))
    service = Service(store, RELAXED, clock)
    url = (await service.create_queue(CTX, {"QueueName": FULL, "Attributes": {
        "ConveyorMaxDelaySeconds": str(DAY_S)}}))["QueueUrl"]
    await service.create_queue(CTX, {"QueueName": EMPTY})
    entries = [{"Id": str(i), "MessageBody": str(d), "DelaySeconds": d}
               for i, d in enumerate(delays(messages - len(PROBE_DELAYS_S) * PROBES))]
    entries += [{"Id": f"p{d}-{i}", "MessageBody": f"probe {d}", "DelaySeconds": d,
                 "MessageGroupId": "probe"} for d in PROBE_DELAYS_S for i in range(PROBES)]
    started = time.perf_counter()
    probes_sent_ms = 0
    for start in range(0, len(entries), 10):
        if start == len(entries) - len(PROBE_DELAYS_S) * PROBES:
            probes_sent_ms = clock.now_ms()
        batch = [{**e, "Id": str(n)} for n, e in enumerate(entries[start:start + 10])]
        answer = await service.send_message_batch(CTX, {"QueueUrl": url, "Entries": batch})
        assert not answer.get("Failed"), answer
    took = time.perf_counter() - started
    await store.close()
    return took, probes_sent_ms


class Server:
    """`conveyor server --dev-clock` on a data directory, started and stopped by PID."""

    def __init__(self, data_dir: Path, log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        started = time.perf_counter()
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "conveyor", "server", "--port", str(self.port),
                 "--data-dir", str(data_dir), "--mode", "relaxed", "--dev-clock"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.advanced_s = 0.0
        while not self._ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited: see {log_path}")
            time.sleep(0.02)
        self.start_s = time.perf_counter() - started

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/ready", timeout=1) as resp:
                return resp.status == 200
        except OSError:
            return False

    def cpu_s(self) -> float:
        return procstat.tree_cpu_s(self.proc.pid)

    def advance_to(self, when_ms: int) -> None:
        """Move the dev clock on to `when_ms` (epoch ms), as tests/server/helpers.py does."""
        seconds = (when_ms - time.time() * 1000) / 1000 - self.advanced_s
        request = urllib.request.Request(f"{self.url}/_conveyor/clock?advance={seconds}",
                                         method="POST")
        urllib.request.urlopen(request, timeout=10).read()
        self.advanced_s += seconds

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def client(url: str) -> Any:
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="bench", aws_secret_access_key="bench",
                        config=Config(retries={"max_attempts": 0}))


def receive_cost(server: Server, receives: int) -> dict[str, float]:
    """Server CPU µs per empty receive on each queue, alternating rounds of ROUND (a CPU
    tick is 10 ms: a round spans many)."""
    sqs = client(server.url)
    urls = {name: sqs.get_queue_url(QueueName=name)["QueueUrl"] for name in (FULL, EMPTY)}
    cpu = dict.fromkeys(urls, 0.0)
    for _ in range(receives // ROUND):
        for name, url in urls.items():
            before = server.cpu_s()
            for _ in range(ROUND):
                got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
                assert "Messages" not in got, f"{name}: a message came before its time"
            cpu[name] += server.cpu_s() - before
    done = receives // ROUND * ROUND
    return {name: spent / done * 1e6 for name, spent in cpu.items()}


def lateness(server: Server, probe_s: int, sent_ms: int) -> list[float]:
    """Seconds each probe due `probe_s` after `sent_ms` came after its time."""
    sqs = client(server.url)
    url = sqs.get_queue_url(QueueName=FULL)["QueueUrl"]
    server.advance_to(sent_ms + probe_s * 1000 - int(LEAD_S * 1000))
    late: list[float] = []
    deadline = time.monotonic() + LEAD_S + 30
    while len(late) < PROBES and time.monotonic() < deadline:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=43200,
                                  AttributeNames=["All"]).get("Messages", [])
        for m in got:
            if m["Body"] == f"probe {probe_s}":
                attrs = m["Attributes"]
                due_ms = int(attrs["SentTimestamp"]) + probe_s * 1000
                late.append((int(attrs["ApproximateFirstReceiveTimestamp"]) - due_ms) / 1000)
    assert len(late) == PROBES, f"probes at {probe_s}s: {len(late)} of {PROBES} came"
    return late


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--receives", type=int, default=10_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="scheduled-bench-"))
    data_dir, empty_dir, log = work / "data", work / "empty", work / "servers.log"
    fill_s, sent_ms = uvloop.run(fill(data_dir, args.messages))
    print(f"filled {args.messages:,} scheduled messages in {fill_s:.0f} s "
          f"({args.messages / fill_s:,.0f}/s in process)")
    empty = Server(empty_dir, log)
    empty.stop()
    server = Server(data_dir, log)
    try:
        print(f"| restart to /ready | {empty.start_s:.2f} s empty | "
              f"{server.start_s:.2f} s with {args.messages:,} stored | "
              f"{server.start_s / empty.start_s:.2f}x |")
        costs = receive_cost(server, args.receives)
        print(f"| server CPU per empty receive | {costs[EMPTY]:.0f} µs empty queue | "
              f"{costs[FULL]:.0f} µs with {args.messages:,} scheduled | "
              f"{costs[FULL] / costs[EMPTY]:.2f}x |")
        sqs = client(server.url)
        url = sqs.get_queue_url(QueueName=FULL)["QueueUrl"]
        delayed = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
            "ApproximateNumberOfMessagesDelayed"])["Attributes"]
        print(f"delayed after the restart: {delayed['ApproximateNumberOfMessagesDelayed']}")
        for probe_s in PROBE_DELAYS_S:
            late = lateness(server, probe_s, sent_ms)
            print(f"| due {probe_s / 3600:g} h after sending | {PROBES} probes | late by "
                  f"{min(late):.3f} to {max(late):.3f} s (median {statistics.median(late):.3f}) |")
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(empty_dir, ignore_errors=True)
    print(f"(the servers' log: {log})")


if __name__ == "__main__":
    main()
