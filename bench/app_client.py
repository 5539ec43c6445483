"""The worker's HTTP client to the app: conveyor's own (http1.py) against aiohttp's.

    python bench/app_client.py                              # ~15 s, 3 rounds
    python bench/app_client.py --requests 5000 --rounds 1   # a quick look

A no-op app (bench/worker_bench.py's raw asyncio HTTP/1.1 server, its own process, so the
app is not the bottleneck) answers 200 with Content-Length 0 on loopback. This process runs
each client on uvloop, as the worker does, with a 256-byte body and the sqsd headers:

- throughput: `--requests` POSTs with `--connections` in flight (the worker's HttpConnections
  default, 50): requests/s, and this process's CPU per request (the app's is not counted);
- latency: `--samples` POSTs one at a time on a kept-alive connection; p50/p99 per request.
  *Added* = the client's latency minus the floor's.

The floor is no client at all: pre-built request bytes written to a socket and the fixed
answer recognised by its length, i.e. what the loop and the round trip cost by themselves.
Clients run in interleaved rounds (the machine is shared); the report gives medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from worker_bench import free_port, pct, process  # noqa: E402

from conveyor.clock import Clock  # noqa: E402
from conveyor.worker.http1 import AppClient  # noqa: E402

PY = sys.executable
BODY = b'{"job": "resize", "id": 12345, "pad": "' + b"x" * 209 + b'"}'  # 256 bytes
HEADERS = {
    "Content-Type": "application/json",
    "User-Agent": "aws-sqsd/3.0.4 (conveyor/bench)",
    "X-Aws-Sqsd-Msgid": "0f3c1a4e-7b2d-4c1e-9a5f-3d2b1c0e9f8a",
    "X-Aws-Sqsd-Queue": "bench",
    "X-Aws-Sqsd-Receive-Count": "1",
    "X-Aws-Sqsd-First-Received-At": "2026-11-21T12:00:00Z",
}
TIMEOUT_S = 30.0



class Client:
    """One client under test: `post()` sends the job and returns the status."""

    name = ""

    async def open(self, host: str, port: int) -> None: ...
    async def post(self) -> int: ...
    async def close(self) -> None: ...


class Conveyor(Client):
    name = "conveyor http1"

    async def open(self, host: str, port: int) -> None:
        self.client = AppClient(f"http://{host}:{port}", connect_timeout_s=5, clock=Clock())

    async def post(self) -> int:
        return (await self.client.post("/", HEADERS, BODY, TIMEOUT_S)).status

    async def close(self) -> None:
        self.client.close()


class Aiohttp(Client):
    """aiohttp's client set up as lean as it goes: no cookies, no decompression, no
    default headers; the body is read (drained) as the worker must."""

    name = "aiohttp"

    async def open(self, host: str, port: int) -> None:
        self.url = f"http://{host}:{port}/"
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=1.5),
            cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False,
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding"),
            timeout=aiohttp.ClientTimeout(total=TIMEOUT_S))

    async def post(self) -> int:
        async with self.session.post(self.url, data=BODY, headers=HEADERS) as resp:
            await resp.read()
            return resp.status

    async def close(self) -> None:
        await self.session.close()


class _FloorConn(asyncio.Protocol):
    ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.got = 0
        self.waiter: asyncio.Future[int] | None = None

    def data_received(self, data: bytes) -> None:
        self.got += len(data)
        if self.got >= len(self.ANSWER) and self.waiter is not None:
            self.got = 0
            self.waiter.set_result(200)


class Floor(Client):
    """No HTTP client: pre-built bytes out, the known answer's length in."""

    name = "floor (no client)"

    async def open(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.request = (b"POST / HTTP/1.1\r\nHost: %s:%d\r\nContent-Length: %d\r\n"
                        % (host.encode(), port, len(BODY))
                        + b"".join(b"%s: %s\r\n" % (k.encode(), v.encode())
                                   for k, v in HEADERS.items()) + b"\r\n" + BODY)
        self.idle: list[_FloorConn] = []

    async def post(self) -> int:
        if self.idle:
            conn = self.idle.pop()
        else:
            _t, conn = await asyncio.get_running_loop().create_connection(
                _FloorConn, self.host, self.port)
        conn.waiter = asyncio.get_running_loop().create_future()
        conn.transport.write(self.request)
        status = await conn.waiter
        self.idle.append(conn)
        return status

    async def close(self) -> None:
        for conn in self.idle:
            conn.transport.close()


async def throughput(client: Client, requests: int, connections: int) -> dict[str, float]:
    left = requests
    failures = 0

    async def loop() -> None:
        nonlocal left, failures
        while left > 0:
            left -= 1
            if await client.post() != 200:
                failures += 1

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(connections)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert failures == 0, f"{client.name}: {failures} answers were not 200"
    return {"req_per_s": requests / wall, "cpu_us_per_req": 1e6 * cpu / requests}


async def latency(client: Client, samples: int) -> dict[str, float]:
    await client.post()  # open the connection first
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        await client.post()
        times.append(time.perf_counter() - start)
    return {"p50_us": 1e6 * pct(times, 0.5), "p99_us": 1e6 * pct(times, 0.99)}


async def one_round(kind: type[Client], port: int, args: argparse.Namespace) -> dict[str, float]:
    client = kind()
    await client.open("127.0.0.1", port)
    try:
        async with asyncio.timeout(args.timeout):
            await throughput(client, min(1000, args.requests), args.connections)  # warm up
            result = await throughput(client, args.requests, args.connections)
            result |= await latency(client, args.samples)
    finally:
        await client.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120, help="per client and round")
    args = parser.parse_args()

    kinds: list[type[Client]] = [Floor, Conveyor, Aiohttp]
    runs: dict[str, list[dict[str, float]]] = {kind.name: [] for kind in kinds}
    tmp = Path(tempfile.mkdtemp(prefix="app-client-bench-"))
    port = free_port()
    app_cmd = [PY, str(ROOT / "bench" / "worker_bench.py"), "serve-app", str(port)]
    with process(app_cmd, tmp / "app.log", f"http://127.0.0.1:{port}/stats"):
        for _ in range(args.rounds):
            for kind in kinds:
                # A fresh loop per run: no client inherits another's connections or garbage.
                runs[kind.name].append(uvloop.run(one_round(kind, port, args)))
                # Every POST reached the app (no client counts a request it did not make),
                # then the app's list of arrivals is emptied for the next run.
                expected = min(1000, args.requests) + args.requests + args.samples + 1
                arrived = uvloop.run(_arrivals_then_reset(port))
                assert arrived == expected, f"{kind.name}: {arrived} POSTs, not {expected}"
    report(runs, args)


async def _arrivals_then_reset(port: int) -> int:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/stats") as resp:
            count = json.loads(await resp.read())["count"]
        async with session.post(f"http://127.0.0.1:{port}/reset") as resp:
            await resp.read()
    return count


def report(runs: dict[str, list[dict[str, float]]], args: argparse.Namespace) -> None:
    medians = {name: {key: statistics.median(r[key] for r in results) for key in results[0]}
               for name, results in runs.items()}
    floor = medians[Floor.name]
    print(f"\nworker → app client — {os.cpu_count()} cores, uvloop, {args.requests} POSTs × "
          f"{args.connections} connections, {args.samples} sequential samples, median of "
          f"{args.rounds} interleaved rounds")
    print(f"{'':20} {'req/s':>8} {'CPU µs/req':>11} {'p50 µs':>8} {'p99 µs':>8} "
          f"{'added p50':>10} {'added p99':>10}")
    for name, m in medians.items():
        print(f"{name:20} {m['req_per_s']:8.0f} {m['cpu_us_per_req']:11.0f} "
              f"{m['p50_us']:8.0f} {m['p99_us']:8.0f} {m['p50_us'] - floor['p50_us']:10.0f} "
              f"{m['p99_us'] - floor['p99_us']:10.0f}")
    conveyor, aio = medians[Conveyor.name], medians[Aiohttp.name]
    print(f"conveyor / aiohttp: {conveyor['req_per_s'] / aio['req_per_s']:.2f}× requests/s, "
          f"{aio['cpu_us_per_req'] / conveyor['cpu_us_per_req']:.2f}× less CPU per request")
    print(json.dumps({"medians": medians, "runs": runs}))


if __name__ == "__main__":
    main()
