"""The queue server's own CPU per message, without sockets or client processes.

Feeds SigV4-signed requests, shaped as boto3 sends them, straight into the server's HTTP
protocol object and runs the batched pipeline (SendMessageBatch 10, ReceiveMessage 10,
DeleteMessageBatch) or, with --unbatched, SendMessage / ReceiveMessage / DeleteMessage,
one request at a time on a fresh store (the server's: SQLite behind the journal;
`--sqlite-only` for SQLite alone). This is the cost of
Conveyor's own code with warm caches; `run.py` measures it under real load. Use it to
check an optimisation quickly, and with `--profile` to see where the time goes:

    .venv/bin/python bench/inprocess.py [--unbatched] [--messages 20000] [--profile]

Under real load the server costs about twice as much per message as here: it goes idle
after each request and waits for the next one, and waking costs CPU of its own and finds
the caches cold (on a VM, the host runs other work on an idle vCPU's core; the client
processes evict them too). `--idle-ms 1` sleeps that long before each request, counted
as a server's wait is, and brings these figures to run.py's; `--cold-cache KIB` instead
copies that many KiB through memory before each request (not counted). An optimisation
that only pays with warm caches shows its gain here but not there.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import uvloop
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

# This checkout's conveyor/ when no conveyor is installed; an installed one (the compiled
# build's, say: setup.py) comes first.
sys.path.append(str(Path(__file__).resolve().parent.parent))

from conveyor.clock import Clock  # noqa: E402 - after the path set-up above
from conveyor.server.app import App, ServerSettings  # noqa: E402
from conveyor.server.http import HttpServer, _Connection  # noqa: E402
from conveyor.service import RequestContext, Service  # noqa: E402
from conveyor.sqs.limits import STRICT  # noqa: E402
from conveyor.store.journal import JournaledStore  # noqa: E402
from conveyor.store.sqlite import SqliteStore  # noqa: E402

HOST = "127.0.0.1:9324"
QUEUE_URL = f"http://{HOST}/000000000000/bench"
USER_AGENT = "Boto3/1.44.5 md/Botocore#1.44.5 ua/2.1 os/linux lang/python#3.11.7 Botocore/1.44.5"


def signed_request(action: str, payload: dict[str, Any]) -> bytes:
    """Raw HTTP/1.1 bytes of an SQS JSON call, with boto3's headers and a SigV4 header.
    The server runs without access keys, so it reads the signature's scope but does not
    verify it: requests built inside the measured loop reuse one signature, keeping
    botocore's signing cost out of the figure."""
    body = orjson.dumps(payload)
    head = [b"POST / HTTP/1.1", f"Host: {HOST}".encode(),
            f"X-Amz-Target: AmazonSQS.{action}".encode(), *_SIGNED_HEADERS,
            f"Content-Length: {len(body)}".encode()]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def _signed_headers() -> list[bytes]:
    request = AWSRequest("POST", f"http://{HOST}/", data=b"{}", headers={
        "Content-Type": "application/x-amz-json-1.0", "x-amzn-query-mode": "true",
        "User-Agent": USER_AGENT, "amz-sdk-invocation-id": "8f0a0e4c-5a51-4cbb-9b9d-2b4bd1f8",
        "amz-sdk-request": "attempt=1; max=1", "Accept-Encoding": "identity"})
    SigV4Auth(Credentials("bench", "bench"), "sqs", "us-east-1").add_auth(request)
    return [f"{k}: {v}".encode() for k, v in request.headers.items()]


_SIGNED_HEADERS = _signed_headers()


class _CachePolluter:
    """Evicts the CPU caches the way other processes do between two requests."""

    def __init__(self, kib: int) -> None:
        self.source = bytes(range(256)) * (kib * 4)
        self.target = bytearray(len(self.source))
        self.cpu_s = 0.0

    def __call__(self) -> None:
        started = time.process_time()
        self.target[:] = self.source
        self.cpu_s += time.process_time() - started


class _Transport:
    """Collects what the server writes."""

    def __init__(self) -> None:
        self.out: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str) -> object:
        return ("127.0.0.1", 40000) if name == "peername" else None

    def close(self) -> None:
        pass


async def measure(messages: int, unbatched: bool, profile: bool, cold_cache_kib: int,
                  idle_s: float, sqlite_only: bool) -> float:
    kind = SqliteStore if sqlite_only else JournaledStore
    store = kind(tempfile.mkdtemp(prefix="conveyor-bench-"))
    service = Service(store, STRICT, Clock())
    http = HttpServer(App(service, ServerSettings()).handle, STRICT.max_request_bytes)
    await service.create_queue(RequestContext("us-east-1", "000000000000", f"http://{HOST}"),
                               {"QueueName": "bench"})
    connection, transport = _Connection(http), _Transport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    send = signed_request("SendMessageBatch", {"QueueUrl": QUEUE_URL, "Entries": [
        {"Id": str(i), "MessageBody": "x" * 256} for i in range(10)]})
    receive = signed_request("ReceiveMessage", {"QueueUrl": QUEUE_URL,
                                                "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1})
    send_one = signed_request("SendMessage", {"QueueUrl": QUEUE_URL, "MessageBody": "x" * 256})
    receive_one = signed_request("ReceiveMessage", {"QueueUrl": QUEUE_URL, "WaitTimeSeconds": 1})

    pollute = _CachePolluter(cold_cache_kib) if cold_cache_kib else None

    async def answer(raw: bytes) -> bytes:
        if pollute:
            pollute()
        if idle_s:
            time.sleep(idle_s)  # blocks the loop, as a server idles between requests
        transport.out.clear()
        connection.data_received(raw)
        while not transport.out:
            await asyncio.sleep(0)
        return transport.out[-1].partition(b"\r\n\r\n")[2]

    async def pipeline_unbatched(n: int) -> None:
        for _ in range(n):
            await answer(send_one)
            message = orjson.loads(await answer(receive_one))["Messages"][0]
            await answer(signed_request("DeleteMessage", {
                "QueueUrl": QUEUE_URL, "ReceiptHandle": message["ReceiptHandle"]}))

    async def pipeline_batched(n: int) -> None:
        for _ in range(n // 10):
            await answer(send)
            messages = orjson.loads(await answer(receive))["Messages"]
            await answer(signed_request("DeleteMessageBatch", {"QueueUrl": QUEUE_URL, "Entries": [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in enumerate(messages)]}))

    pipeline = pipeline_unbatched if unbatched else pipeline_batched
    await pipeline(2000)  # warm up
    profiler = cProfile.Profile() if profile else None
    if pollute:
        pollute.cpu_s = 0.0
    started = time.process_time()
    if profiler:
        profiler.enable()
    await pipeline(messages)
    if profiler:
        profiler.disable()
    cpu_s = time.process_time() - started - (pollute.cpu_s if pollute else 0.0)
    await store.close()
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    return messages / cpu_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--unbatched", action="store_true",
                        help="SendMessage, ReceiveMessage 1, DeleteMessage instead of batches")
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary")
    parser.add_argument("--cold-cache", type=int, default=0, metavar="KIB",
                        help="evict the CPU caches before each request by copying KIB KiB")
    parser.add_argument("--idle-ms", type=float, default=0.0, metavar="MS",
                        help="sleep MS before each request, as a server waits for the next "
                             "one under load (the sleep's own CPU is counted)")
    parser.add_argument("--sqlite-only", action="store_true",
                        help="the SQLite store without the journal in front")
    args = parser.parse_args()
    rate = uvloop.run(measure(args.messages, args.unbatched, args.profile, args.cold_cache,
                              args.idle_ms / 1000, args.sqlite_only))
    kind = "unbatched" if args.unbatched else "batched"
    conditions = f", caches evicted with {args.cold_cache} KiB" if args.cold_cache else ""
    if args.idle_ms:
        conditions += f", idle {args.idle_ms:g} ms before each request"
    if args.sqlite_only:
        conditions += ", SQLite store alone"
    print(f"{rate:,.0f} messages per CPU-second (in-process, {kind} pipeline{conditions}, "
          "including building the delete requests from each receive)")


if __name__ == "__main__":
    main()
