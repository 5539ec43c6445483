"""Adaptive concurrency against an app of limited capacity (issue 24, part 5).

    python bench/adaptive_bench.py                       # 800 messages a run, about a minute
    python bench/adaptive_bench.py --messages 2000 --capacity 8 --service-ms 150

The app (its own process) works on `--capacity` requests at once, each for `--service-ms`
(±20 %), and queues the rest, as a thread pool or a pre-fork server behind its listen
backlog does; a request the worker abandoned is still worked on (the app cannot know).
The same N pre-loaded messages go through a `conveyor worker` with HttpConnections 50 and
InactivityTimeout `--timeout-s`, once with the fixed limit (Elastic Beanstalk's) and once
with AdaptiveConcurrency. Per run: messages/s (N ÷ time from the first request to the N-th
answered one), the app's latency per request (arrival to answer: its queue plus its work)
p50 / p99, the worker's timeouts (requests abandoned after InactivityTimeout, whose work
the app did for nothing) and the worker's limit at the end. Loopback only; each run stops
after `--run-timeout` seconds at most.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))

from worker_bench import fill, free_port, http_json, metric_sum, pct, process  # noqa: E402

from conveyor.client import SQSClient  # noqa: E402

PY = sys.executable
CONNECTIONS = 50


# -- the app (its own process: `adaptive_bench.py serve-app PORT CAPACITY SERVICE_MS`) -----

def serve_app(port: int, capacity: int, service_ms: float) -> None:
    from aiohttp import web

    rng = random.Random(1)
    slots = asyncio.Semaphore(capacity)
    stats: dict[str, list[float]] = {"first": [], "answered": [], "latency": [], "abandoned": []}

    async def work(request: web.Request) -> web.Response:
        arrived = time.monotonic()
        await request.read()
        stats["first"] = stats["first"] or [arrived]
        async with slots:  # beyond capacity, requests wait here: the app's queue
            await asyncio.sleep(service_ms / 1000 * rng.uniform(0.8, 1.2))
        done = time.monotonic()
        if request.transport is None or request.transport.is_closing():
            stats["abandoned"].append(done)
        else:
            stats["answered"].append(done)
            stats["latency"].append(done - arrived)
        return web.Response(text="ok")

    async def get_stats(_request: web.Request) -> web.Response:
        return web.json_response(stats)

    async def reset(_request: web.Request) -> web.Response:
        for values in stats.values():
            values.clear()
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/", work)
    app.router.add_get("/stats", get_stats)
    app.router.add_post("/reset", reset)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None,
                handle_signals=True)


# -- one run ---------------------------------------------------------------------------------

def run_worker(endpoint: str, app: str, queue: str, args: argparse.Namespace, tmp: Path,
               adaptive: bool) -> dict:
    label = "adaptive" if adaptive else f"fixed {CONNECTIONS}"
    url = asyncio.run(_fresh_queue(endpoint, queue))
    asyncio.run(fill(endpoint, url, args.messages))
    http_json(app + "/reset", "POST")
    port = free_port()
    status = f"http://127.0.0.1:{port}"
    cmd = [PY, "-m", "conveyor", "worker", "--worker-queue-url", url, "--app-url", app,
           "--http-connections", str(CONNECTIONS), "--inactivity-timeout", str(args.timeout_s),
           "--error-visibility-timeout", "0", "--max-retries", "100", "--status-port",
           str(port), "--poll-wait-time", "1", "--drain-timeout", "1",
           "--adaptive-concurrency" if adaptive else "--no-adaptive-concurrency"]
    limits = []
    with process(cmd, tmp / f"worker-{queue}.log", status + "/health"):
        deadline = time.monotonic() + args.run_timeout
        while time.monotonic() < deadline:
            done = metric_sum(status, "conveyor_worker_messages_succeeded_total")
            limits.append(http_json(status + "/health")["concurrency_limit"])
            if done >= args.messages:
                break
            time.sleep(0.25)
        timeouts = metric_sum(status, 'conveyor_worker_messages_failed_total{queue="'
                              f'{queue}",status="inactivity-timeout"}}')
        stats = http_json(app + "/stats")
    answered = sorted(stats["answered"])
    finished = len(answered) >= args.messages
    elapsed = (answered[args.messages - 1] if finished else max(answered, default=0)) - (
        stats["first"][0] if stats["first"] else 0)
    return {"label": label, "finished": finished,
            "msgs_per_s": min(len(answered), args.messages) / elapsed if elapsed > 0 else 0,
            "p50_ms": 1000 * pct(stats["latency"], 0.5),
            "p99_ms": 1000 * pct(stats["latency"], 0.99),
            "timeouts": int(timeouts), "wasted": len(stats["abandoned"]),
            "limit_median": pct(limits, 0.5), "limit_end": limits[-1] if limits else None}


async def _fresh_queue(endpoint: str, queue: str) -> str:
    async with SQSClient(endpoint) as sqs:
        return await sqs.create_queue(queue)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=800)
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--service-ms", type=float, default=150)
    parser.add_argument("--timeout-s", type=int, default=1, help="InactivityTimeout")
    parser.add_argument("--run-timeout", type=float, default=120)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="adaptive-bench-"))
    app_port, server_port = free_port(), free_port()
    app = f"http://127.0.0.1:{app_port}"
    endpoint = f"http://127.0.0.1:{server_port}"
    server_cmd = [PY, "-m", "conveyor", "server", "--port", str(server_port),
                  "--data-dir", str(tmp / "data"), "--mode", "relaxed"]
    app_cmd = [PY, __file__, "serve-app", str(app_port), str(args.capacity),
               str(args.service_ms)]
    with process(app_cmd, tmp / "app.log", app + "/stats"), \
            process(server_cmd, tmp / "server.log", endpoint + "/health"):
        results = [run_worker(endpoint, app, "bench-fixed", args, tmp, adaptive=False),
                   run_worker(endpoint, app, "bench-adaptive", args, tmp, adaptive=True)]
    report(results, args, tmp)


def report(results: list[dict], args: argparse.Namespace, tmp: Path) -> None:
    capacity_rate = args.capacity / (args.service_ms / 1000)
    print(f"\nadaptive concurrency — {os.cpu_count()} cores, {args.messages} messages, app "
          f"capacity {args.capacity} × {args.service_ms:g} ms (at most {capacity_rate:.0f} "
          f"msg/s), InactivityTimeout {args.timeout_s}s; logs in {tmp}")
    print(f"{'':10} {'msg/s':>7} {'p50':>8} {'p99':>8} {'timeouts':>9} {'wasted':>7} "
          f"{'limit':>6}")
    for r in results:
        done = "" if r["finished"] else "  (not finished in time)"
        print(f"{r['label']:10} {r['msgs_per_s']:7.1f} {r['p50_ms']:6.0f}ms {r['p99_ms']:6.0f}ms "
              f"{r['timeouts']:9d} {r['wasted']:7d} {r['limit_median']:6.0f}{done}")
    fixed, adaptive = results
    if fixed["p50_ms"] and adaptive["p50_ms"] and fixed["msgs_per_s"]:
        print(f"adaptive / fixed: throughput {adaptive['msgs_per_s'] / fixed['msgs_per_s']:.2f}×,"
              f" p50 latency {adaptive['p50_ms'] / fixed['p50_ms']:.2f}×, p99 latency "
              f"{adaptive['p99_ms'] / fixed['p99_ms']:.2f}×")
    print(json.dumps(results))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "serve-app":
        serve_app(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    else:
        main()
