"""An idle worker: API calls per hour, and how soon a message sent at a random moment
reaches the app (issue 22).

    .venv/bin/python bench/idle_worker.py                    # ~45 minutes, bounded
    .venv/bin/python bench/idle_worker.py --idle-seconds 130 --sends 30 --max-gap 3  # a look
    .venv/bin/python bench/idle_worker.py --before-src /tmp/conveyor-4f6775b  # + an older worker
    .venv/bin/python bench/idle_worker.py --partitions 1,4,8 --idle-seconds 250 --sends 30 \
        --max-gap 20                                             # partitioned, ~13 minutes
    .venv/bin/python bench/idle_worker.py --cron --idle-seconds 610 --sends 30 --max-gap 20 \
        --before-src /tmp/conveyor-ad7face          # with a cron.yaml, leader and follower

Targets, each with its own queue server, its own no-op app (worker_bench.py serve-app,
which records when each POST arrives) and its own `conveyor worker` process (defaults,
no cron.yaml), all on loopback:

- `conveyor`: a Conveyor server; the worker polls with ConveyorWorkers.PollMessages
  (ExtendedPollWaitTime 120 s) and announces itself in those polls;
- `conveyor, no extension`: the same with ExtendedPollWaitTime 0: ReceiveMessage of 20 s,
  announcements by AnnounceWorker;
- `moto`: moto's server, standing in for Amazon SQS's 20-s long-poll limit (it refuses
  PollMessages and AnnounceWorker, once each);
- `before` (with --before-src): the worker of another source tree on a Conveyor server.

With --partitions N,M,...: instead, per N a partitioned worker (`--partitions N`) on a
Conveyor server, idle with one PollMessages parked on all N partitions (`N=.. one poll`),
and the same with ExtendedPollWaitTime 0 (`N=.. rotating`): one ReceiveMessage of
PollWaitTime (20 s) at a time on each partition in turn, as before QueueUrls and as on
Amazon SQS. Each send goes to a partition drawn at random.

With --cron: instead, a worker without cron.yaml (`conveyor`) and two workers of one
queue with the same cron.yaml (`cron`: one daily task, twelve hours away, so none is due
while measured); one wins the cron lease (`cron leader`), the other follows
(`cron follower`), each counted on its own. With --before-src, the same pair of that tree.
Pick-up is measured per target (either worker of a pair may take a message).

1. idle: the workers start together on empty queues; once each has made its first
   receive, its calls are counted over --idle-seconds of real time (from the moment a
   receive completes) and extrapolated to an hour: every call the worker made
   (conveyor_worker_api_calls_total, refused ones included), and on a Conveyor server
   what the server counted by action (conveyor_requests_total).
2. pick-up: --sends messages per target, one at a time at random moments (gaps uniform in
   [0, --max-gap] s: 40 by default, so that many sends come after a whole long poll came
   back empty, as they do to an idle worker), each body carrying time.time() taken just
   before its SendMessage; pick-up = the app's arrival time − that. The targets run side
   by side. p50/p99 are nearest-rank (of 100, p99 is the second largest).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))

import peers  # noqa: E402
from worker_bench import free_port, http_json, process  # noqa: E402

from conveyor.client import SQSClient  # noqa: E402
from conveyor.client.partitions import partition_name  # noqa: E402

PY = sys.executable
_SAMPLE = re.compile(r'^(\w+)\{([^}]*)\} ([0-9.e+-]+)$')


@dataclass
class Target:
    label: str
    server: str  # a peers.LAUNCHERS name
    worker_args: list[str] = field(default_factory=list)
    src: Path | None = None  # run the worker from this source tree
    endpoint: str = ""
    app: str = ""
    status: str = ""
    queue_url: str = ""
    partitions: int = 0  # a partitioned worker's N (its queue URL is then the logical one)
    partition_urls: list[str] = field(default_factory=list)
    cron: bool = False  # two workers of the queue with a cron.yaml: leader and follower
    statuses: list[str] = field(default_factory=list)  # every worker's status URL
    result: dict = field(default_factory=dict)


def pct(values: list[float], q: float) -> float:
    """The nearest-rank percentile: of 100 values, p99 is the second largest."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else float("nan")


def scrape(url: str, metric: str, key: str) -> dict[str, float]:
    """`metric`'s samples from a Prometheus text page, summed by the label `key`."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    sums: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match or match.group(1) != metric:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
        name = labels.get(key, "")
        sums[name] = sums.get(name, 0.0) + float(match.group(3))
    return sums


def worker_calls(target: Target, status: str | None = None) -> dict[str, float]:
    return scrape((status or target.status) + "/metrics", "conveyor_worker_api_calls_total",
                  "action")


def leads(status: str) -> bool:
    """True when the worker at `status` holds its queue's cron lease."""
    return sum(scrape(status + "/metrics", "conveyor_worker_cron_leader", "queue").values()) > 0


def cron_file(tmp: Path) -> Path:
    """One daily task, twelve hours from now: none is due while the bench runs."""
    hour = (time.gmtime().tm_hour + 12) % 24
    path = tmp / "cron.yaml"
    path.write_text(f'version: 1\ncron:\n - name: report\n   url: /report\n'
                    f'   schedule: "0 {hour} * * *"\n')
    return path


def server_calls(target: Target) -> dict[str, float]:
    if target.server != "conveyor":
        return {}
    return scrape(target.endpoint + "/metrics", "conveyor_requests_total", "action")


def receives(calls: dict[str, float]) -> float:
    return calls.get("ReceiveMessage", 0) + calls.get("PollMessages", 0)


@contextlib.contextmanager
def running(target: Target, tmp: Path) -> Iterator[None]:
    """Server, app and worker of one target, stopped (by PID) on exit."""
    server = peers.start(target.server, tmp / "logs", ["--mode", "relaxed"]
                         if target.server == "conveyor" else [], label=target.label)
    try:
        target.endpoint = server.endpoint
        app_port = free_port()
        target.app = f"http://127.0.0.1:{app_port}"
        target.statuses = [f"http://127.0.0.1:{free_port()}"
                           for _ in range(2 if target.cron else 1)]
        target.status = target.statuses[0]
        queue = re.sub(r"[^a-z0-9]+", "-", target.label).strip("-")
        account = "000000000000" if target.server == "conveyor" else "123456789012"
        cron = ["--cron", str(cron_file(tmp))] if target.cron else []
        cmd = [PY, "-m", "conveyor", "worker", "--worker-queue-url",
               f"{target.endpoint}/{account}/{queue}", "--app-url", target.app,
               "--cron", "", "--log-level", "warning",
               *(["--partitions", str(target.partitions)] if target.partitions else []),
               *cron, *target.worker_args]
        app_cmd = [PY, str(BENCH_DIR / "worker_bench.py"), "serve-app", str(app_port)]
        with process(app_cmd, tmp / f"app-{queue}.log", target.app + "/stats"), \
                contextlib.ExitStack() as workers:
            for i, status in enumerate(target.statuses):
                workers.enter_context(_worker(
                    [*cmd, "--status-port", status.rsplit(":", 1)[1]], target.src,
                    tmp / f"worker-{queue}-{i}.log", status))
            if target.partitions:  # the worker made them; sends go to a random one
                target.partition_urls = [asyncio.run(_queue_url(
                    target.endpoint, partition_name(queue, i)))
                    for i in range(target.partitions)]
            else:
                target.queue_url = asyncio.run(_queue_url(target.endpoint, queue))
            yield
    finally:
        server.stop()


@contextlib.contextmanager
def _worker(cmd: list[str], src: Path | None, log: Path, status: str) -> Iterator[None]:
    env = {**os.environ, **({"PYTHONPATH": str(src)} if src else {})}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                cwd=src or BENCH_DIR.parent)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                http_json(status + "/health")
                break
            except OSError as exc:
                if proc.poll() is not None or time.monotonic() > deadline:
                    msg = f"worker did not start: {log.read_text()[-2000:]}"
                    raise RuntimeError(msg) from exc
                time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _queue_url(endpoint: str, name: str) -> str:
    async with SQSClient(endpoint) as sqs:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(Exception):
                return await sqs.get_queue_url(name)
            if time.monotonic() > deadline:
                raise RuntimeError(f"queue {name} was not created")
            await asyncio.sleep(0.2)


async def measure_idle(target: Target, window_s: float) -> None:
    """Wait for a receive of each worker to complete, then count calls over `window_s`."""
    for status in target.statuses:
        base = receives(worker_calls(target, status))
        while receives(worker_calls(target, status)) == base:  # the first poll is under way
            await asyncio.sleep(0.2)
    starts, start_server = [worker_calls(target, s) for s in target.statuses], \
        server_calls(target)
    await asyncio.sleep(window_s)
    ends, end_server = [worker_calls(target, s) for s in target.statuses], server_calls(target)
    per_hour = 3600 / window_s
    server = {a: end_server[a] - start_server.get(a, 0) for a in end_server}
    target.result["idle_window_s"] = window_s
    target.result["idle_server_calls"] = {a: n for a, n in server.items() if n}
    target.result["workers"] = []
    for status, start, end in zip(target.statuses, starts, ends, strict=True):
        worker = {a: end[a] - start.get(a, 0) for a in end}
        target.result["workers"].append({
            "role": ("cron leader" if leads(status) else "cron follower") if target.cron
            else "", "idle_worker_calls": {a: n for a, n in worker.items() if n},
            "idle_calls_per_hour": round(sum(worker.values()) * per_hour, 1)})
    first = target.result["workers"][0]
    target.result["idle_worker_calls"] = first["idle_worker_calls"]
    target.result["idle_calls_per_hour"] = first["idle_calls_per_hour"]


async def measure_pickup(target: Target, sends: int, max_gap_s: float, seed: int) -> None:
    rng = random.Random(f"{seed}:{target.label}")
    http_json(target.app + "/reset", "POST")
    async with SQSClient(target.endpoint) as sqs:
        for _ in range(sends):
            await asyncio.sleep(rng.uniform(0, max_gap_s))
            url = rng.choice(target.partition_urls) if target.partitions else target.queue_url
            await sqs.send_message(url, f"t={time.time()!r}")
    # A rotating worker may reach a partition only after N long polls of 20 s elsewhere.
    deadline = time.monotonic() + 30 + 20 * target.partitions
    while (stats := http_json(target.app + "/stats"))["count"] < sends:
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    latencies = [1000 * s for s in stats["latencies"]]
    target.result.update(
        sends=sends, arrived=len(latencies), pickup_p50_ms=round(pct(latencies, 0.5), 2),
        pickup_p99_ms=round(pct(latencies, 0.99), 2),
        pickup_max_ms=round(max(latencies, default=float("nan")), 2),
        pickup_over_50ms=sum(1 for ms in latencies if ms > 50))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--idle-seconds", type=float, default=610,
                        help="idle window in real seconds (610: five 120-s polls, thirty "
                             "20-s polls, whatever the phase)")
    parser.add_argument("--sends", type=int, default=100)
    parser.add_argument("--max-gap", type=float, default=40.0,
                        help="longest gap between sends: past 20 s, so that sends find the "
                             "workers idle as well as between polls")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--partitions", default="",
                        help="comma-separated N: partitioned workers instead (see above)")
    parser.add_argument("--cron", action="store_true",
                        help="workers with a cron.yaml, leader and follower (see above)")
    parser.add_argument("--before-src", type=Path, default=None,
                        help="also run the worker of this source tree (e.g. an older commit)")
    args = parser.parse_args()

    targets = [Target("conveyor", "conveyor"),
               Target("conveyor, no extension", "conveyor",
                      ["--extended-poll-wait-time", "0"]),
               Target("moto", "moto")]
    if args.partitions:
        targets = [target for n in map(int, args.partitions.split(",")) for target in (
            Target(f"N={n} rotating", "conveyor", ["--extended-poll-wait-time", "0"],
                   partitions=n),
            Target(f"N={n} one poll", "conveyor", partitions=n))]
    if args.cron:
        targets = [Target("conveyor", "conveyor"), Target("cron", "conveyor", cron=True)]
    if args.before_src is not None:
        targets.append(Target(f"before ({_commit(args.before_src)})", "conveyor",
                              src=args.before_src, cron=args.cron))
    tmp = Path(tempfile.mkdtemp(prefix="idle-worker-"))
    with contextlib.ExitStack() as stack:
        for target in targets:
            stack.enter_context(running(target, tmp))
        asyncio.run(_all(measure_idle(t, args.idle_seconds) for t in targets))
        asyncio.run(_all(measure_pickup(t, args.sends, args.max_gap, args.seed)
                         for t in targets))
    report(targets, args)
    shutil.rmtree(tmp, ignore_errors=True)


async def _all(coros) -> None:
    await asyncio.gather(*coros)


def _commit(src: Path) -> str:
    marker = src / "COMMIT"
    return marker.read_text().strip()[:7] if marker.exists() else src.name


def report(targets: list[Target], args: argparse.Namespace) -> None:
    print(f"\nidle worker — {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; idle window "
          f"{args.idle_seconds:g} s (real time, extrapolated to an hour), {args.sends} sends "
          f"at random gaps in [0, {args.max_gap:g}] s")
    print(f"{'target':28} {'calls/h':>8} {'pick-up p50':>12} {'p99':>9} {'max':>9} "
          f"{'>50ms':>6}  calls in the window (worker side / server side)")
    for t in targets:
        r = t.result
        for w in r["workers"]:
            label = f"{t.label}, {w['role']}" if w["role"] else t.label
            print(f"{label:28} {w['idle_calls_per_hour']:8.0f} {r['pickup_p50_ms']:10.1f}ms "
                  f"{r['pickup_p99_ms']:7.1f}ms {r['pickup_max_ms']:7.1f}ms "
                  f"{r['pickup_over_50ms']:6d}  {w['idle_worker_calls']} / "
                  f"{r['idle_server_calls'] or '-'}")
        if r["arrived"] != r["sends"]:
            print(f"  !! {r['sends'] - r['arrived']} of {r['sends']} messages did not arrive")
    print(json.dumps({t.label: t.result for t in targets}))


if __name__ == "__main__":
    main()
