"""Large payloads by claim check: how fast offloaded bodies go through, producer and
worker, on the Conveyor server's embedded blob store and on moto's S3, beside bodies
small enough to travel inline (issue 24, part 1).

    .venv/bin/python bench/payloads.py                 # ~1 minute on 2 cores, bounded
    .venv/bin/python bench/payloads.py --messages 40 --size-kib 2048

One Conveyor server (strict mode, fresh --data-dir, its embedded store at /_conveyor/s3)
and one moto server, on loopback. For each case, --messages messages are sent (producer
rate: conveyor.payloads.Offloader.send_message through boto3, one at a time), then an
in-process worker (defaults, HttpConnections 50) delivers them to a no-op aiohttp app;
delivery rate = messages / (first receive .. last delete, measured as the time from
worker start until the queue is empty). Cases: `inline` (a 200 KiB body, not offloaded),
`embedded` and `moto` (a --size-kib body, offloaded), `embedded gzip` (the same, gzip'd;
JSON-like text compresses well, so this mostly measures CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))

import boto3  # noqa: E402
from aiohttp import web  # noqa: E402
from botocore.config import Config  # noqa: E402
from worker_bench import free_port, process  # noqa: E402

from conveyor.payloads import BlobSettings, BlobStore, Offloader  # noqa: E402
from conveyor.payloads.pointer import EMBEDDED_BUCKET, EMBEDDED_STORE_PATH  # noqa: E402
from conveyor.worker import Worker, load_config  # noqa: E402

TIMEOUT_S = 120.0  # per case: the benchmark stops by itself


def body_of(size_kib: int) -> str:
    row = json.dumps({"order": 1042, "sku": "A-77", "note": "ünïcode ✓"})
    return json.dumps([row] * (size_kib * 1024 // (len(row) + 4)))


async def deliver(queue_url: str, app_url: str, endpoint: str, expected: int) -> float:
    """Seconds for an in-process worker to empty the queue into the app."""
    config = load_config({"WorkerQueueURL": queue_url, "AppURL": app_url,
                          "PayloadEndpointURL": endpoint, "PayloadAccessKey": "x:x",
                          "PollWaitTime": 1, "ExtendedPollWaitTime": 1, "CreateQueue": "false"})
    worker = Worker(config)
    started = time.perf_counter()
    task = asyncio.create_task(worker.run())
    async with asyncio.timeout(TIMEOUT_S):
        while worker.metrics.value("conveyor_worker_messages_succeeded_total") < expected:
            await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - started
    worker.stop()
    await task
    return elapsed


async def run_case(name: str, sqs, server_url: str, app_url: str, store: tuple[str, str],
                   body: str, messages: int, compress: bool) -> dict:
    url = sqs.create_queue(QueueName=f"bench-{name.replace(' ', '-')}")["QueueUrl"]
    endpoint, bucket = store
    offloader = Offloader(BlobStore(BlobSettings(endpoint, "us-east-1", "x:x", bucket)),
                          compress=compress)
    started = time.perf_counter()
    for _ in range(messages):
        await asyncio.to_thread(offloader.send_message, sqs, QueueUrl=url, MessageBody=body)
    sent_s = time.perf_counter() - started
    delivered_s = await deliver(url, app_url, endpoint, messages)
    mib = messages * len(body.encode()) / 2**20
    return {"case": name, "body_kib": len(body.encode()) // 1024, "messages": messages,
            "send_msg_s": messages / sent_s, "deliver_msg_s": messages / delivered_s,
            "deliver_mib_s": mib / delivered_s}


async def main(args: argparse.Namespace) -> None:
    posted = 0

    async def noop(request: web.Request) -> web.Response:
        nonlocal posted
        await request.read()
        posted += 1
        return web.Response(status=200)

    app = web.Application(client_max_size=256 * 2**20)
    app.router.add_post("/", noop)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    app_port = free_port()
    await web.TCPSite(runner, "127.0.0.1", app_port).start()
    app_url = f"http://127.0.0.1:{app_port}"
    port, moto_port = free_port(), free_port()
    server_url, moto_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{moto_port}"
    moto_server = Path(sys.executable).with_name("moto_server")
    with tempfile.TemporaryDirectory() as data, contextlib.ExitStack() as stack:
        stack.enter_context(process(
            [sys.executable, "-m", "conveyor", "server", "--port", str(port), "--data-dir",
             data], Path(data) / "server.log", server_url + "/health"))
        stack.enter_context(process(
            [str(moto_server), "-H", "127.0.0.1", "-p", str(moto_port)],
            Path(data) / "moto.log", moto_url + "/moto-api/"))
        s3 = boto3.client("s3", endpoint_url=moto_url, region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="x",
                          config=Config(s3={"addressing_style": "path"}))
        s3.create_bucket(Bucket="bench")
        sqs = boto3.client("sqs", endpoint_url=server_url, region_name="us-east-1",
                           aws_access_key_id="x", aws_secret_access_key="x")
        embedded = (server_url + EMBEDDED_STORE_PATH, EMBEDDED_BUCKET)
        large = body_of(args.size_kib)
        cases = [("inline", embedded, body_of(200), False),
                 ("embedded", embedded, large, False),
                 ("moto", (moto_url, "bench"), large, False),
                 ("embedded gzip", embedded, large, True)]
        results = [await run_case(name, sqs, server_url, app_url, store, body,
                                  args.messages, compress)
                   for name, store, body, compress in cases]
    await runner.cleanup()
    print(f"{'case':<14} {'body KiB':>8} {'msgs':>5} {'send msg/s':>11} "
          f"{'deliver msg/s':>14} {'deliver MiB/s':>14}")
    for r in results:
        print(f"{r['case']:<14} {r['body_kib']:>8} {r['messages']:>5} {r['send_msg_s']:>11.1f} "
              f"{r['deliver_msg_s']:>14.1f} {r['deliver_mib_s']:>14.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--size-kib", type=int, default=1536)
    asyncio.run(main(parser.parse_args()))
