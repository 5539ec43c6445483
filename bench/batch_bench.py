"""BatchSize benchmark: the worker's throughput to a no-op app, one message per POST
(Elastic Beanstalk's way) against batches of 1, 10 and 50 (AWS Lambda's SQS event).

    python bench/batch_bench.py                      # 10,000 messages per run
    python bench/batch_bench.py --messages 4000 --sizes 0 10

Everything runs on this machine, each as its own process: a Conveyor server (relaxed, a
fresh temporary data dir), worker_bench.py's no-op app (it counts a batch's records as
arrivals and answers `{"batchItemFailures": []}`), and `conveyor worker` per run. Per run:
N messages are pre-loaded, the worker starts, rate = N / (time from the first message's
arrival at the app to the N-th); SQS API calls per message come from the worker's
/metrics once the queue is empty, app requests per message from the app, and the CPU
the worker (once started) and the server used per 1,000 messages from /proc. After one
warm-up run, the sizes run in turn --rounds times and the fastest run of each is
reported. Every run is bounded by --timeout and stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procstat import tree_cpu_s  # noqa: E402
from worker_bench import (  # noqa: E402 - after the path is set
    PY,
    _create,
    _url,
    fill,
    free_port,
    http_json,
    metric_sum,
    process,
    queue_total,
    throughput,
    wait_count,
)


def run_once(endpoint: str, app: str, size: int, args: argparse.Namespace, tmp: Path,
             queue: str, server_pid: int) -> dict:
    asyncio.run(_create(endpoint, queue))
    url = asyncio.run(_url(endpoint, queue))
    asyncio.run(fill(endpoint, url, args.messages))
    http_json(app + "/reset", "POST")
    status = f"http://127.0.0.1:{free_port()}"
    cmd = [PY, "-m", "conveyor", "worker", "--worker-queue-url", url, "--app-url", app,
           "--status-port", status.rsplit(":", 1)[1], "--http-connections",
           str(args.connections), "--batch-size", str(size), "--cron", "",
           "--log-level", "warning"]
    with process(cmd, tmp / f"worker-{queue}.log", status + "/health") as worker:
        worker_cpu_s, server_cpu_s = tree_cpu_s(worker.pid), tree_cpu_s(server_pid)
        stats = wait_count(app, args.messages, args.timeout)
        deadline = time.monotonic() + args.timeout
        while asyncio.run(queue_total(endpoint, url)) and time.monotonic() < deadline:
            time.sleep(0.2)
        calls = metric_sum(status, "conveyor_worker_api_calls_total")
        worker_cpu_s = tree_cpu_s(worker.pid) - worker_cpu_s
        server_cpu_s = tree_cpu_s(server_pid) - server_cpu_s
    delivered = max(1, stats["count"])
    return {"batch_size": size, "delivered": stats["count"],
            "msgs_per_s": throughput(stats, args.messages),
            "api_calls_per_msg": calls / delivered,
            "posts_per_msg": stats["posts"] / delivered,
            "worker_cpu_ms_per_1k": 1e6 * worker_cpu_s / delivered,
            "server_cpu_ms_per_1k": 1e6 * server_cpu_s / delivered}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=10000)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--sizes", type=int, nargs="+", default=[0, 1, 10, 50],
                        help="BatchSize of each run (0 = one message per POST)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="runs per size, in turn; the fastest is reported (shared CPUs)")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="batch-bench-"))
    app_port, server_port = free_port(), free_port()
    app = f"http://127.0.0.1:{app_port}"
    endpoint = f"http://127.0.0.1:{server_port}"
    server_cmd = [PY, "-m", "conveyor", "server", "--port", str(server_port),
                  "--data-dir", str(tmp / "data"), "--mode", "relaxed"]
    bench = str(Path(__file__).resolve().parent / "worker_bench.py")
    with process([PY, bench, "serve-app", str(app_port)], tmp / "app.log", app + "/stats"), \
            process(server_cmd, tmp / "server.log", endpoint + "/health") as server:
        run_once(endpoint, app, 0, args, tmp, "bench-warm-up", server.pid)  # not reported:
        # the first run on a fresh server is slower whatever it runs
        rounds = [[run_once(endpoint, app, size, args, tmp, f"bench-{size}-{i}", server.pid)
                   for size in args.sizes] for i in range(args.rounds)]
    results = [max(runs, key=lambda r: r["msgs_per_s"]) for runs in zip(*rounds, strict=True)]
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"\nbatch benchmark — {os.cpu_count()} cores (load {load}), {args.messages} "
          f"messages per run, HttpConnections {args.connections}; logs in {tmp}")
    print(f"{'BatchSize':>10} {'msg/s':>8} {'':>6} {'SQS calls/msg':>14} {'POSTs/msg':>10} "
          f"{'worker CPU ms/1k':>17} {'server CPU ms/1k':>17}")
    base = results[0]["msgs_per_s"]
    for r in results:
        label = "off" if r["batch_size"] == 0 else str(r["batch_size"])
        print(f"{label:>10} {r['msgs_per_s']:8.0f} ×{r['msgs_per_s'] / base:<5.2f} "
              f"{r['api_calls_per_msg']:14.3f} {r['posts_per_msg']:10.3f} "
              f"{r['worker_cpu_ms_per_1k']:17.0f} {r['server_cpu_ms_per_1k']:17.0f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
