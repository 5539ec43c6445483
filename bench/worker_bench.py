"""Worker daemon benchmark: messages/s delivered to a no-op app, and the latency it adds.

    python bench/worker_bench.py                 # conveyor worker on conveyor server
    python bench/worker_bench.py --messages 5000 --moto   # also against moto's server

Everything runs on this machine: the queue server, a no-op HTTP app (raw asyncio, so the
app is not the bottleneck) and the worker, each as its own process. Phases, all bounded:

1. throughput: N messages are pre-loaded, then the worker starts; rate = N / (time from the
   first POST to the N-th at the app). API calls per 1,000 messages come from /metrics.
2. latency: messages sent at a steady rate carry their send time; the app records arrival.
   "added" = worker end-to-end minus a bare receive loop's end-to-end (same client, same
   queue server), i.e. what the POST hop and the daemon's bookkeeping cost.
3. idle: SQS API calls the worker makes while the queue is empty, per hour (counted over
   a window that starts once the pollers' last long polls have come back empty).
4. the naive sqsd loop (receive 10 → POST each in turn → delete batch), as sqsd clones do,
   for a side-by-side ratio. The npm package `sqsd` is not in the npm registry and PyPI's
   `pysqsd` is Python 2 only, so no published re-implementation can run here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from procstat import tree_cpu_s  # noqa: E402

from conveyor.client import SQSClient  # noqa: E402

PY = sys.executable


# -- the no-op app (runs as its own process: `worker_bench.py serve-app PORT`) -------------

class _NoopHTTP(asyncio.Protocol):
    """Minimal HTTP/1.1 keep-alive server: 200 to every POST, GET /stats for the bench."""

    arrivals: list[float] = []
    latencies: list[float] = []
    posts = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end]
            match = re.search(rb"(?i)content-length:\s*(\d+)", head)
            length = int(match.group(1)) if match else 0
            if len(self.buffer) < head_end + 4 + length:
                return
            body = self.buffer[head_end + 4: head_end + 4 + length]
            self.buffer = self.buffer[head_end + 4 + length:]
            self._answer(head, body)

    def _answer(self, head: bytes, body: bytes) -> None:
        now = time.time()
        if head.startswith(b"GET /stats"):
            payload = json.dumps({"count": len(self.arrivals), "arrivals": self.arrivals,
                                  "latencies": self.latencies, "posts": _NoopHTTP.posts}).encode()
        elif head.startswith(b"POST /reset"):
            _NoopHTTP.arrivals, _NoopHTTP.latencies, _NoopHTTP.posts = [], [], 0
            payload = b""
        elif body.startswith(b'{"Records":'):  # BatchSize: one arrival per message
            self.arrivals.extend([now] * body.count(b'"messageId":'))
            _NoopHTTP.posts += 1
            payload = b'{"batchItemFailures":[]}'
        else:
            self.arrivals.append(now)
            _NoopHTTP.posts += 1
            if body.startswith(b"t="):
                self.latencies.append(now - float(body[2:]))
            payload = b""
        self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload)
                             + payload)


def serve_app(port: int) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_NoopHTTP, "127.0.0.1", port)
        await server.serve_forever()
    asyncio.run(main())


# -- process helpers -----------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_json(url: str, method: str = "GET") -> dict:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=10) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else {}


def wait_http(url: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError as exc:
            if getattr(exc, "code", None):  # an HTTP error answer: it is up
                return
            time.sleep(0.1)
    raise TimeoutError(url)


@contextlib.contextmanager
def process(cmd: list[str], log: Path,
            ready_url: str | None = None) -> Iterator[subprocess.Popen]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        if ready_url:
            wait_http(ready_url)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def metric_sum(status_url: str, prefix: str) -> float:
    """Sum the samples named `prefix`; API calls count SQS calls only, not the worker's
    announcements to a Conveyor server's console (conveyor/runtime/presence.py)."""
    with urllib.request.urlopen(status_url + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(prefix) and 'action="AnnounceWorker"' not in line)


def _wait_totals(status_url: str) -> tuple[float, float]:
    """(sum, count) of the worker's receipt-to-POST wait histogram."""
    return (metric_sum(status_url, "conveyor_worker_wait_seconds_sum"),
            metric_sum(status_url, "conveyor_worker_wait_seconds_count"))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# -- queue helpers -------------------------------------------------------------------------

async def fill(endpoint: str, url: str, count: int, concurrency: int = 8) -> None:
    async with SQSClient(endpoint) as sqs:
        batches = [[{"Id": str(i), "MessageBody": f"job-{start + i}"}
                    for i in range(min(10, count - start))] for start in range(0, count, 10)]
        sem = asyncio.Semaphore(concurrency)

        async def send(entries: list[dict]) -> None:
            async with sem:
                await sqs.send_message_batch(url, entries)
        await asyncio.gather(*(send(b) for b in batches))


async def queue_total(endpoint: str, url: str) -> int:
    async with SQSClient(endpoint) as sqs:
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        attributes = await sqs.get_queue_attributes(url, names)
    return sum(int(attributes.get(n, 0)) for n in names)


async def paced_send(endpoint: str, url: str, rate: float, seconds: float) -> int:
    """Send `rate` messages/s for `seconds`, each body `t=<send time>`."""
    sent = 0
    async with SQSClient(endpoint) as sqs:
        start = time.monotonic()
        tasks = []
        while (elapsed := time.monotonic() - start) < seconds:
            due = int(elapsed * rate) - sent
            for _ in range(due):
                tasks.append(asyncio.create_task(sqs.send_message(url, f"t={time.time()!r}")))
                sent += 1
            await asyncio.sleep(0.002)
        await asyncio.gather(*tasks)
    return sent


async def bare_receiver_latency(endpoint: str, url: str, rate: float,
                                seconds: float) -> list[float]:
    """End-to-end latency of a bare receive loop (no POST): the reference for 'added'."""
    latencies: list[float] = []
    stop = asyncio.Event()
    async with SQSClient(endpoint) as sqs:
        async def loop() -> None:
            while not stop.is_set():
                messages = await sqs.receive_messages(url, max_messages=10, wait_time_s=1,
                                                      system_attributes=(),
                                                      message_attributes=())
                now = time.time()
                latencies.extend(now - float(m.body[2:]) for m in messages)
                if messages:
                    await sqs.delete_message_batch(
                        url, [(str(i), m.receipt_handle) for i, m in enumerate(messages)])
        pollers = [asyncio.create_task(loop()) for _ in range(2)]
        await paced_send(endpoint, url, rate, seconds)
        await asyncio.sleep(1.5)
        stop.set()
        await asyncio.gather(*pollers)
    return latencies


# -- the naive sqsd loop (what sqsd clones do), run in threads -----------------------------

def naive_sqsd(endpoint: str, url: str, app_url: str, stop: threading.Event,
               threads: int = 4) -> None:
    import boto3

    def loop() -> None:
        sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                           aws_access_key_id="x", aws_secret_access_key="x")
        while not stop.is_set():
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                           WaitTimeSeconds=1).get("Messages", [])
            done = []
            for m in messages:
                request = urllib.request.Request(app_url, data=m["Body"].encode(),
                                                 headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=30) as resp:
                    if resp.status == 200:
                        done.append({"Id": m["MessageId"], "ReceiptHandle": m["ReceiptHandle"]})
            if done:
                sqs.delete_message_batch(QueueUrl=url, Entries=done)
    workers = [threading.Thread(target=loop, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    stop.wait()
    for worker in workers:
        worker.join(10)


# -- phases --------------------------------------------------------------------------------

def wait_count(app: str, count: int, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        stats = http_json(app + "/stats")
        if stats["count"] >= count or time.monotonic() > deadline:
            return stats
        time.sleep(0.2)


def throughput(stats: dict, count: int) -> float:
    arrivals = sorted(stats["arrivals"])[:count]
    span = arrivals[-1] - arrivals[0]
    return (len(arrivals) - 1) / span if span > 0 else float("nan")


def bench_conveyor_worker(endpoint: str, app: str, queue: str, args: argparse.Namespace,
                          tmp: Path, label: str) -> dict:
    asyncio.run(_create(endpoint, queue))
    url = asyncio.run(_url(endpoint, queue))
    asyncio.run(fill(endpoint, url, args.messages))
    http_json(app + "/reset", "POST")
    status_port = free_port()
    status = f"http://127.0.0.1:{status_port}"
    cmd = [PY, "-m", "conveyor", "worker", "--worker-queue-url", url, "--app-url", app,
           "--status-port", str(status_port), "--http-connections", str(args.connections),
           "--log-level", "warning"]
    result: dict = {"label": label}
    with process(cmd, tmp / f"worker-{label}.log", status + "/health") as worker:
        cpu_s = tree_cpu_s(worker.pid)
        stats = wait_count(app, args.messages, args.timeout)
        # The worker's CPU per message: steadier than msg/s on a machine shared with others.
        result["cpu_us_per_msg"] = 1e6 * (tree_cpu_s(worker.pid) - cpu_s) / max(1, stats["count"])
        result["delivered"] = stats["count"]
        result["msgs_per_s"] = throughput(stats, args.messages)
        deadline = time.monotonic() + args.timeout
        while asyncio.run(queue_total(endpoint, url)) and time.monotonic() < deadline:
            time.sleep(0.2)
        calls = metric_sum(status, "conveyor_worker_api_calls_total")
        result["api_calls_per_1000"] = 1000 * calls / max(1, stats["count"])
        http_json(app + "/reset", "POST")
        wait_before = _wait_totals(status)
        asyncio.run(paced_send(endpoint, url, args.rate, args.latency_seconds))
        time.sleep(1.5)
        wait_after = _wait_totals(status)
        latencies = http_json(app + "/stats")["latencies"]
        result["e2e_p50_ms"] = 1000 * pct(latencies, 0.5)
        result["e2e_p99_ms"] = 1000 * pct(latencies, 0.99)
        waited = wait_after[1] - wait_before[1]
        result["wait_mean_us"] = 1e6 * (wait_after[0] - wait_before[0]) / max(1, waited)
        if args.idle_seconds:
            time.sleep(22)  # let the pollers' last long polls (20 s) come back empty first
            before = metric_sum(status, "conveyor_worker_api_calls_total")
            time.sleep(args.idle_seconds)
            idle_calls = metric_sum(status, "conveyor_worker_api_calls_total") - before
            result["idle_calls_per_hour"] = idle_calls * 3600 / args.idle_seconds
    return result


def bench_naive(endpoint: str, app: str, queue: str, args: argparse.Namespace) -> dict:
    asyncio.run(_create(endpoint, queue))
    url = asyncio.run(_url(endpoint, queue))
    count = args.messages // 4  # it is slow; keep the run bounded
    asyncio.run(fill(endpoint, url, count))
    http_json(app + "/reset", "POST")
    stop = threading.Event()
    thread = threading.Thread(target=naive_sqsd, args=(endpoint, url, app + "/", stop))
    thread.start()
    try:
        stats = wait_count(app, count, args.timeout)
        result = {"label": "naive sqsd loop (4 threads)", "delivered": stats["count"],
                  "msgs_per_s": throughput(stats, count)}
        http_json(app + "/reset", "POST")
        asyncio.run(paced_send(endpoint, url, args.rate, args.latency_seconds))
        time.sleep(1.5)
        latencies = http_json(app + "/stats")["latencies"]
        result["e2e_p50_ms"] = 1000 * pct(latencies, 0.5)
        result["e2e_p99_ms"] = 1000 * pct(latencies, 0.99)
    finally:
        stop.set()
        thread.join()
    return result


async def _create(endpoint: str, queue: str) -> None:
    async with SQSClient(endpoint) as sqs:
        await sqs.create_queue(queue)


async def _url(endpoint: str, queue: str) -> str:
    async with SQSClient(endpoint) as sqs:
        return await sqs.get_queue_url(queue)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--rate", type=float, default=200, help="latency phase msgs/s")
    parser.add_argument("--latency-seconds", type=float, default=5)
    parser.add_argument("--idle-seconds", type=float, default=60,
                        help="idle window (after a 22 s settle); 0 skips the idle phase")
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--moto", action="store_true", help="also run against moto_server")
    parser.add_argument("--no-naive", action="store_true")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="worker-bench-"))
    app_port, server_port = free_port(), free_port()
    app = f"http://127.0.0.1:{app_port}"
    endpoint = f"http://127.0.0.1:{server_port}"
    results = []
    server_cmd = [PY, "-m", "conveyor", "server", "--port", str(server_port),
                  "--data-dir", str(tmp / "data"), "--mode", "relaxed"]
    with process([PY, __file__, "serve-app", str(app_port)], tmp / "app.log", app + "/stats"), \
            process(server_cmd, tmp / "server.log", endpoint + "/health"):
        results.append(bench_conveyor_worker(endpoint, app, "bench-worker", args, tmp,
                                             "conveyor worker"))
        base = asyncio.run(_bare(endpoint, args))
        results.append({"label": "bare receive loop (reference, no POST)",
                        "e2e_p50_ms": 1000 * pct(base, 0.5),
                        "e2e_p99_ms": 1000 * pct(base, 0.99)})
        if not args.no_naive:
            results.append(bench_naive(endpoint, app, "bench-naive", args))
    if args.moto:
        moto_port = free_port()
        moto = f"http://127.0.0.1:{moto_port}"
        moto_bin = shutil.which("moto_server") or str(Path(PY).parent / "moto_server")
        small = argparse.Namespace(**{**vars(args), "messages": min(args.messages, 2000),
                                      "idle_seconds": 0})
        with process([PY, __file__, "serve-app", str(app_port)], tmp / "app2.log",
                     app + "/stats"), \
                process([moto_bin, "-p", str(moto_port)], tmp / "moto.log", moto + "/"):
            results.append(bench_conveyor_worker(moto, app, "bench-moto", small, tmp,
                                                 "conveyor worker on moto_server"))
    report(results, args, tmp)


async def _bare(endpoint: str, args: argparse.Namespace) -> list[float]:
    async with SQSClient(endpoint) as sqs:
        url = await sqs.create_queue("bench-bare")
    return await bare_receiver_latency(endpoint, url, args.rate, args.latency_seconds)


def report(results: list[dict], args: argparse.Namespace, tmp: Path) -> None:
    print(f"\nworker benchmark — {os.cpu_count()} cores, {args.messages} messages, "
          f"{args.connections} connections, latency at {args.rate:g} msg/s; logs in {tmp}")
    print(f"{'':42} {'msg/s':>8} {'calls/1k':>9} {'e2e p50':>9} {'e2e p99':>9} {'idle/h':>7}")
    nan = float("nan")
    for r in results:
        print(f"{r['label']:42} {r.get('msgs_per_s', nan):8.0f} "
              f"{r.get('api_calls_per_1000', nan):9.0f} "
              f"{r.get('e2e_p50_ms', nan):8.2f}ms {r.get('e2e_p99_ms', nan):8.2f}ms "
              f"{r.get('idle_calls_per_hour', nan):7.0f}")
    worker, bare = results[0], results[1]
    print(f"added latency (worker − bare receive loop): p50 "
          f"{worker['e2e_p50_ms'] - bare['e2e_p50_ms']:.2f} ms, p99 "
          f"{worker['e2e_p99_ms'] - bare['e2e_p99_ms']:.2f} ms")
    print(f"mean wait from receipt to POST inside the worker: {worker['wait_mean_us']:.0f} µs")
    print(f"worker CPU per message (throughput phase): {worker['cpu_us_per_msg']:.0f} µs")
    naive = next((r for r in results if r["label"].startswith("naive")), None)
    if naive and naive.get("msgs_per_s"):
        print(f"throughput ratio conveyor worker / naive sqsd loop: "
              f"{worker['msgs_per_s'] / naive['msgs_per_s']:.1f}×")
    print(json.dumps(results))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve-app":
        serve_app(int(sys.argv[2]))
    else:
        main()
