"""Partitioned FIFO queue: worker throughput with 1, 2, 4 partitions under a per-queue
call quota, and an idle worker's calls per hour.

    python bench/partitions_bench.py                      # defaults: 1500 messages, 20 calls/s
    python bench/partitions_bench.py --quota 30 --messages 3000

Amazon SQS limits each FIFO queue without high throughput to 300 calls per second per
action (SendMessage, ReceiveMessage, DeleteMessage, each batch counting as one call); that
limit, not the worker, is what a partitioned queue gets past. Nothing on this machine has
it, so the benchmark puts a small proxy between worker and `conveyor server` that gives
every (queue, action) pair `--quota` calls per second (a token bucket; a call over it
waits for its token, as a client that backs off on ThrottlingException would), scaled down
from 300 so that 2 shared cores are not the limit instead. Loopback only, bounded counts.

Phases, per partition count N:
1. `conveyor queue create-partitioned` makes bench-N.fifo's N partitions; --messages are
   sent straight to the server (not through the proxy) over 64 MessageGroupIds, each to
   its group's partition;
2. `conveyor worker --partitions N` reads them through the proxy and POSTs them to a
   no-op app (bench/worker_bench.py's); rate = messages / (first POST to last);
3. idle: with the queue empty, the worker's ReceiveMessage calls over --idle-seconds at
   PollWaitTime 1 s, per hour (one long poll at a time whatever N is: 3600 / PollWaitTime).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import aiohttp
import orjson
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.worker_bench import (  # noqa: E402
    free_port,
    http_json,
    metric_sum,
    process,
    throughput,
    wait_count,
)
from conveyor.client import SQSClient  # noqa: E402
from conveyor.client.partitions import PartitionedQueue  # noqa: E402

PY = sys.executable
GROUPS = 64


class QuotaProxy:
    """Forwards SQS JSON calls to `upstream`, at most `quota` calls/s per (queue, action)."""

    def __init__(self, upstream: str, quota: float) -> None:
        self.upstream = upstream
        self.quota = quota
        self._next_s: dict[tuple[str, str], float] = {}
        self._session: aiohttp.ClientSession | None = None

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        action = request.headers.get("X-Amz-Target", "").rpartition(".")[2]
        try:
            queue = str(orjson.loads(body).get("QueueUrl", "")) if body else ""
        except orjson.JSONDecodeError:
            queue = ""
        if queue:
            await self._token((queue.rsplit("/", 1)[-1], action))
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
        async with self._session.post(self.upstream + request.path_qs, data=body,
                                      headers=headers) as resp:
            return web.Response(status=resp.status, body=await resp.read(),
                                headers={"Content-Type": resp.headers.get(
                                    "Content-Type", "application/x-amz-json-1.0")})

    async def _token(self, key: tuple[str, str]) -> None:
        """A call's turn: calls of one key are spaced 1/quota s apart."""
        now = time.monotonic()
        due = max(now, self._next_s.get(key, now))
        self._next_s[key] = due + 1 / self.quota
        if due > now:
            await asyncio.sleep(due - now)

    def serve(self, port: int, ready: threading.Event) -> None:
        async def main() -> None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
            app = web.Application(client_max_size=2**20)
            app.router.add_route("POST", "/{tail:.*}", self.handle)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            ready.set()
            await asyncio.Event().wait()
        asyncio.run(main())


def conveyor(*args: str) -> None:
    subprocess.run([PY, "-m", "conveyor", *args], check=True, capture_output=True, timeout=60)


async def fill(endpoint: str, queue: PartitionedQueue, count: int) -> None:
    """`count` messages over GROUPS groups, each batch to one group's partition."""
    async with SQSClient(endpoint) as sqs:
        async def send(start: int) -> None:
            group = f"g{start // 10 % GROUPS}"
            await sqs.send_message_batch(queue.url_for(group_id=group), [
                {"Id": str(i), "MessageBody": f"m{start + i}", "MessageGroupId": group,
                 "MessageDeduplicationId": f"m{start + i}"}
                for i in range(min(10, count - start))])
        for first in range(0, count, 80):
            await asyncio.gather(*(send(s) for s in range(first, min(count, first + 80), 10)))


def bench_partitions(n: int, endpoint: str, proxy: str, app: str, args: argparse.Namespace,
                     tmp: Path) -> dict:
    name = f"bench-{n}.fifo"
    conveyor("queue", "create-partitioned", name, "--partitions", str(n),
             "--endpoint-url", endpoint)
    queue = PartitionedQueue(f"{proxy}/000000000000/{name}", n)
    direct = PartitionedQueue(f"{endpoint}/000000000000/{name}", n)
    asyncio.run(fill(endpoint, direct, args.messages))
    http_json(app + "/reset", "POST")
    status_port = free_port()
    status = f"http://127.0.0.1:{status_port}"
    cmd = [PY, "-m", "conveyor", "worker", "--worker-queue-url", queue.url, "--app-url", app,
           "--partitions", str(n), "--no-create-queue", "--poll-wait-time", "1",
           "--status-port", str(status_port), "--cron", "", "--log-level", "warning"]
    with process(cmd, tmp / f"worker-{n}.log", status + "/health"):
        stats = wait_count(app, args.messages, args.timeout)
        rate = throughput(stats, args.messages)
        time.sleep(3)  # the last deletes, then the pollers' rounds come back empty
        before = metric_sum(status, 'conveyor_worker_api_calls_total{action="ReceiveMessage"')
        time.sleep(args.idle_seconds)
        idle = metric_sum(status, 'conveyor_worker_api_calls_total{action="ReceiveMessage"')
    return {"partitions": n, "delivered": stats["count"], "msgs_per_s": rate,
            "idle_receives_per_hour": (idle - before) * 3600 / args.idle_seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1500)
    parser.add_argument("--quota", type=float, default=20.0,
                        help="calls/s per queue and action (SQS FIFO: 300)")
    parser.add_argument("--partitions", default="1,2,4")
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="partitions-bench-"))
    app_port, server_port, proxy_port = free_port(), free_port(), free_port()
    app = f"http://127.0.0.1:{app_port}"
    endpoint = f"http://127.0.0.1:{server_port}"
    proxy = f"http://127.0.0.1:{proxy_port}"
    ready = threading.Event()
    threading.Thread(target=QuotaProxy(endpoint, args.quota).serve, args=(proxy_port, ready),
                     daemon=True).start()
    ready.wait(10)
    server = [PY, "-m", "conveyor", "server", "--port", str(server_port), "--data-dir",
              str(tmp / "data"), "--mode", "relaxed"]
    results = []
    app_cmd = [PY, str(ROOT / "bench" / "worker_bench.py"), "serve-app", str(app_port)]
    with process(app_cmd, tmp / "app.log", app + "/stats"), \
            process(server, tmp / "server.log", endpoint + "/health"):
        for n in (int(x) for x in args.partitions.split(",")):
            results.append(bench_partitions(n, endpoint, proxy, app, args, tmp))
    base = results[0]["msgs_per_s"]
    print(f"\npartitioned FIFO queue — {os.cpu_count()} cores, {args.messages} messages over "
          f"{GROUPS} groups, quota {args.quota:g} calls/s per queue and action; logs in {tmp}")
    print(f"{'partitions':>10} {'msg/s':>8} {'x 1 partition':>14} {'idle receives/h':>16}")
    for r in results:
        print(f"{r['partitions']:>10} {r['msgs_per_s']:>8.0f} {r['msgs_per_s'] / base:>14.2f} "
              f"{r['idle_receives_per_hour']:>16.0f}")


if __name__ == "__main__":
    main()
