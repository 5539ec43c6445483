"""Instructions per message on the server's hot path, counted by valgrind's callgrind.

CPU time on these shared 2-core VMs moves by 25 % between identical runs; an instruction
count repeats within about 0.1 %. This counts, per message and per action, the
instructions Conveyor's code runs, and puts CPU-seconds and the top functions beside them:

    .venv/bin/python bench/callgrind.py [--messages 200] [--parts inprocess server]

- **inprocess**: one process under callgrind feeds boto3-shaped requests straight into the
  server's HTTP protocol object (as `inprocess.py` does: HTTP parsing, the protocol, the
  service and the store, no sockets) on a fresh durable store, action by action: N
  SendMessage, N ReceiveMessage of 1, N DeleteMessage, N/10 SendMessageBatch of 10, N/10
  ReceiveMessage of 10, N/10 DeleteMessageBatch. A whole warm-up cycle runs first, and
  every action is counted on its own (the process calls `getppid()` as a marker and
  callgrind dumps its counts there: `--dump-before=getppid`), so the figures are of a
  steady state and leave out start-up and the requests' building. Beside each: CPU µs
  per message of the same cycles without valgrind, the C functions with the most
  instructions of their own and the Python functions with the most time under
  cProfile, shown as that share of the action's instructions.
- **server**: each of `--servers` (Conveyor, and python-floor, the benchmark's yardstick)
  runs as its own process under callgrind; one boto3 client drives a fixed load (a
  warm-up, then N messages batched, then N unbatched, each message sent, received and
  deleted) and has callgrind dump between the phases (`callgrind_control -d`, through
  vgdb), then once more after 10 s idle. So a figure covers the whole server: the event
  loop, the sockets' system calls (their instructions in user space only); what its
  timers ran meanwhile is left out at the idle rate (under valgrind a phase lasts long
  enough for the move tick to fire a hundred times). Beside it:
  the server's CPU µs per message of the same load without valgrind (`/proc`), and the
  ratio to python-floor's count.

Under valgrind Python runs about 50x slower, so N stays small (a few hundred messages);
the in-process part takes about a minute and each server about two. Needs valgrind.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import peers
from inprocess import QUEUE_URL, _Transport, signed_request
from sqs_client import make_client

BENCH_DIR = Path(__file__).resolve().parent
ACTIONS = ("send", "receive", "delete", "send batch", "receive 10", "delete batch")
TOP_C = 6
TOP_PY = 8
START_TIMEOUT_S = 180.0  # python and conveyor's imports under valgrind


def valgrind(out_file: Path, *extra: str) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--quiet", "--compress-strings=no",
            f"--callgrind-out-file={out_file}",
            *extra]


def totals(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith("totals:") or line.startswith("summary:"):
            return int(line.split()[1])
    raise ValueError(f"no totals in {path}")


def top_c_functions(path: Path, top: int = TOP_C) -> list[tuple[float, str]]:
    """The functions with the most instructions of their own: (share %, name). Read from
    the file itself: callgrind_annotate 3.19 counts a partial dump's callers as if the
    calls were their own."""
    own: dict[str, int] = {}
    function, skip_next = "", False
    for line in path.read_text().splitlines():
        if line.startswith("fn="):
            function = line[3:]
        elif line.startswith("calls="):
            skip_next = True  # the next cost line is the call's inclusive cost
        elif line[:1].isdigit() or line[:1] in "+-*":
            if skip_next:
                skip_next = False
            else:
                cost = line.split()
                if len(cost) > 1:
                    own[function] = own.get(function, 0) + int(cost[1])
    total = sum(own.values()) or 1
    ranked = sorted(own.items(), key=lambda item: -item[1])[:top]
    return [(100 * cost / total, name) for name, cost in ranked]


# --- in process ------------------------------------------------------------------------


class Cycle:
    """One protocol object on a fresh store and the six actions, each a coroutine."""

    def __init__(self) -> None:
        from conveyor.clock import Clock
        from conveyor.server.app import App, ServerSettings
        from conveyor.server.http import HttpServer, _Connection
        from conveyor.service import RequestContext, Service
        from conveyor.sqs.limits import STRICT
        from conveyor.store.journal import JournaledStore

        self.data_dir = tempfile.mkdtemp(prefix="conveyor-callgrind-store-")
        self.store = JournaledStore(self.data_dir)
        self.service = Service(self.store, STRICT, Clock())
        self.context = RequestContext("us-east-1", "000000000000", "http://127.0.0.1:9324")
        http = HttpServer(App(self.service, ServerSettings()).handle, STRICT.max_request_bytes)
        self.transport = _Transport()
        self.connection = _Connection(http)
        self.connection.connection_made(self.transport)  # type: ignore[arg-type]
        self.send_one = signed_request("SendMessage", {"QueueUrl": QUEUE_URL,
                                                       "MessageBody": "x" * 256})
        self.send_ten = signed_request("SendMessageBatch", {"QueueUrl": QUEUE_URL, "Entries": [
            {"Id": str(i), "MessageBody": "x" * 256} for i in range(10)]})
        self.receive_one = signed_request("ReceiveMessage", {"QueueUrl": QUEUE_URL,
                                                             "WaitTimeSeconds": 1})
        self.receive_ten = signed_request("ReceiveMessage", {
            "QueueUrl": QUEUE_URL, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1})

    async def close(self) -> None:
        await self.store.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    async def create(self) -> None:
        await self.service.create_queue(self.context, {"QueueName": "bench"})

    async def answer(self, raw: bytes) -> bytes:
        self.transport.out.clear()
        self.connection.data_received(raw)
        while not self.transport.out:
            await asyncio.sleep(0)
        return self.transport.out[-1].partition(b"\r\n\r\n")[2]

    async def run(self, n: int, around: Callable[[str, Callable[[], Awaitable[None]]],
                                                  Awaitable[None]]) -> None:
        """The six actions on n messages, each inside `around(name, action)`; building
        the next action's requests happens outside."""
        handles: list[str] = []

        async def send() -> None:
            for _ in range(n):
                await self.answer(self.send_one)

        async def receive() -> None:
            for _ in range(n):
                body = orjson.loads(await self.answer(self.receive_one))
                handles.extend(m["ReceiptHandle"] for m in body["Messages"])

        await around("send", send)
        await around("receive", receive)
        deletes = [signed_request("DeleteMessage", {"QueueUrl": QUEUE_URL, "ReceiptHandle": h})
                   for h in handles]

        async def delete() -> None:
            for raw in deletes:
                await self.answer(raw)

        async def send_batch() -> None:
            for _ in range(n // 10):
                await self.answer(self.send_ten)

        batches: list[list[str]] = []

        async def receive_ten() -> None:
            for _ in range(n // 10):
                body = orjson.loads(await self.answer(self.receive_ten))
                batches.append([m["ReceiptHandle"] for m in body["Messages"]])

        await around("delete", delete)
        handles.clear()
        await around("send batch", send_batch)
        await around("receive 10", receive_ten)
        delete_batches = [signed_request("DeleteMessageBatch", {"QueueUrl": QUEUE_URL, "Entries": [
            {"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(batch)]})
            for batch in batches]

        async def delete_batch() -> None:
            for raw in delete_batches:
                await self.answer(raw)

        await around("delete batch", delete_batch)
        if sum(map(len, batches)) != n:
            raise RuntimeError("a receive of 10 found fewer messages than were sent")


async def _counted(n: int, warmup: int) -> list[str]:
    """Under callgrind: a warm-up cycle, then each action between two markers."""
    cycle = Cycle()
    await cycle.create()
    await cycle.run(warmup, lambda _name, action: action())
    labels: list[str] = []  # what each dump holds, in order

    async def around(name: str, action: Callable[[], Awaitable[None]]) -> None:
        labels.append("between" if labels else "setup and warm-up")
        os.getppid()  # callgrind dumps what came before: the marker's own cost is nil
        await action()
        labels.append(name)
        os.getppid()

    await cycle.run(n, around)
    labels.append("shutdown")
    await cycle.close()
    return labels


async def _timed(n: int, warmup: int, cycles: int, profile: bool) -> dict[str, Any]:
    """Without valgrind: CPU seconds per action over `cycles` cycles of n, or cProfile's
    functions per action."""
    cycle = Cycle()
    await cycle.create()
    await cycle.run(warmup, lambda _name, action: action())
    cpu: dict[str, float] = dict.fromkeys(ACTIONS, 0.0)
    profiles: dict[str, cProfile.Profile] = {}

    async def around(name: str, action: Callable[[], Awaitable[None]]) -> None:
        profiler = profiles.setdefault(name, cProfile.Profile()) if profile else None
        started = time.process_time()
        if profiler:
            profiler.enable()
        await action()
        if profiler:
            profiler.disable()
        cpu[name] += time.process_time() - started

    for _ in range(cycles):
        await cycle.run(n, around)
    await cycle.close()
    if not profile:
        return {name: s / (n * cycles) for name, s in cpu.items()}
    return {name: _python_top(p) for name, p in profiles.items()}


def _python_top(profiler: cProfile.Profile) -> dict[str, list[tuple[float, str]]]:
    """cProfile's own time by function and by file (builtins under their caller's name
    'builtins'), as shares of the action's total."""
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in stats.values()) or 1.0
    functions = sorted(((row[2] / total * 100, _function_name(key))
                        for key, row in stats.items()), reverse=True)
    files: dict[str, float] = {}
    for key, row in stats.items():
        name = _function_name(key)
        where = name.split(":", 1)[0] if ":" in name else "builtins"
        files[where] = files.get(where, 0.0) + row[2] / total * 100
    by_file = sorted(((share, where) for where, share in files.items()), reverse=True)
    return {"functions": functions[:TOP_PY], "files": by_file[:TOP_PY]}


def _function_name(key: tuple[str, int, str]) -> str:
    path, line, name = key
    if path == "~":
        return name  # a builtin: "<method 'encode' of 'str' objects>"
    short = path.split("/conveyor/", 1)[-1] if "/conveyor/" in path else Path(path).name
    return f"{short}:{line}({name})"


def inprocess_part(n: int, warmup: int, work: Path) -> list[str]:
    out = work / "inprocess.cg"
    labels_file = work / "labels.json"
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    subprocess.run([*valgrind(out, "--dump-before=getppid"), sys.executable, __file__,
                    "--_counted", str(n), "--warmup", str(warmup), "--_labels", str(labels_file)],
                   check=True, env=env)
    labels = orjson.loads(labels_file.read_bytes())
    # callgrind writes part k (k >= 1) of the dumps to out.k and the rest to out itself
    parts = {label: work / f"inprocess.cg.{k + 1}" for k, label in enumerate(labels[:-1])}
    import uvloop
    cycles = 10
    cpu = uvloop.run(_timed(n, warmup, cycles, profile=False))
    python = uvloop.run(_timed(n, warmup, cycles, profile=True))
    per_batch = {"send batch", "receive 10", "delete batch"}
    lines = [f"In process (protocol object, service, durable store), {n} messages per action "
             f"after a warm-up cycle of {warmup}; CPU from {cycles} cycles without valgrind:", "",
             "| action | instructions per message | CPU µs per message |", "|---|---:|---:|"]
    counts = {}
    for name in ACTIONS:
        counts[name] = totals(parts[name]) / n
        lines.append(f"| {name} | {counts[name]:,.0f} | {cpu[name] * 1e6:.1f} |")
    unbatched = counts["send"] + counts["receive"] + counts["delete"]
    batched = counts["send batch"] + counts["receive 10"] + counts["delete batch"]
    lines += [f"| **a message's life, unbatched** | **{unbatched:,.0f}** | "
              f"**{(cpu['send'] + cpu['receive'] + cpu['delete']) * 1e6:.1f}** |",
              f"| **a message's life, batched** | **{batched:,.0f}** | "
              f"**{sum(cpu[a] for a in per_batch) * 1e6:.1f}** |", ""]
    for name in ACTIONS:
        lines.append(f"{name}: {counts[name]:,.0f} instructions per message")
        lines.append("  C functions, own instructions:")
        lines += [f"    {share:5.1f}%  {fn}" for share, fn in top_c_functions(parts[name])]
        for kind in ("functions", "files"):
            lines.append(f"  Python {kind}, own time (cProfile), as instructions per message:")
            lines += [f"    {share:5.1f}%  {share / 100 * counts[name]:>9,.0f}  {fn}"
                      for share, fn in python[name][kind]]
    return lines


# --- whole server ----------------------------------------------------------------------


def drive(endpoint: str, n: int, batched: bool) -> None:
    """Send n messages, receive them and delete them, one call at a time."""
    client = make_client(endpoint, read_timeout_s=300.0)
    url = client.create_queue(QueueName="callgrind-" + ("b" if batched else "u"))["QueueUrl"]
    body = "x" * 256
    moved = 0
    while moved < n:
        if batched:
            client.send_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "MessageBody": body} for i in range(10)])
            want = 10
        else:
            client.send_message(QueueUrl=url, MessageBody=body)
            want = 1
        got: list[dict[str, Any]] = []
        while len(got) < want:
            got += client.receive_message(QueueUrl=url, MaxNumberOfMessages=want - len(got),
                                          WaitTimeSeconds=1).get("Messages", [])
        if batched:
            client.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
        else:
            client.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
        moved += want


def server_part(names: list[str], n: int, warmup: int, cpu_messages: int,
                work: Path) -> list[str]:
    counted: dict[str, dict[str, float]] = {}
    cpu: dict[str, dict[str, float]] = {}
    tops: dict[str, list[tuple[float, str]]] = {}
    for name in names:
        out = work / f"{name}.cg"
        env = {"PYTHONHASHSEED": "0"}
        server = peers.start(name, work, env=env, wrap=valgrind(out),
                             start_timeout_s=START_TIMEOUT_S)
        try:
            drive(server.endpoint, warmup, batched=True)
            drive(server.endpoint, warmup, batched=False)
            spent: dict[str, float] = {}
            for label, batched in (("batched", True), ("unbatched", False)):
                _dump(server.pid)
                started = time.monotonic()
                drive(server.endpoint, n, batched)
                spent[label] = time.monotonic() - started
            _dump(server.pid)
            idle_started = time.monotonic()
            time.sleep(10)
            _dump(server.pid)
            idle_s = time.monotonic() - idle_started
        finally:
            server.stop()
        # The server's timers (sweeps, the move tick) run by the clock, and under valgrind
        # a phase takes 50 times as long: what they ran meanwhile is left out, at the rate
        # counted while idle.
        idle_rate = totals(Path(f"{out}.4")) / idle_s
        counted[name] = {label: (totals(Path(f"{out}.{k}")) - idle_rate * spent[label]) / n
                         for k, label in ((2, "batched"), (3, "unbatched"))}
        counted[name]["idle per s"] = idle_rate
        tops[name] = top_c_functions(Path(f"{out}.2"))
        server = peers.start(name, work, env=env)
        try:
            drive(server.endpoint, warmup * 5, batched=True)
            drive(server.endpoint, warmup * 5, batched=False)
            cpu[name] = {}
            for label, batched in (("batched", True), ("unbatched", False)):
                before = server.cpu_s()
                drive(server.endpoint, cpu_messages, batched)
                cpu[name][label] = (server.cpu_s() - before) / cpu_messages
        finally:
            server.stop()
    lines = [f"Whole server under one boto3 client, one call at a time: {n} messages per "
             f"pipeline after {warmup} of each (instructions), {cpu_messages} (CPU, no "
             "valgrind):", "",
             "| server | batched instructions per message | unbatched | batched CPU µs per "
             "message | unbatched | idle instructions per second |",
             "|---|---:|---:|---:|---:|---:|"]
    for name in names:
        c, t = counted[name], cpu[name]
        lines.append(f"| {name} | {c['batched']:,.0f} | {c['unbatched']:,.0f} | "
                     f"{t['batched'] * 1e6:.1f} | {t['unbatched'] * 1e6:.1f} | "
                     f"{c['idle per s']:,.0f} |")
    if "python-floor" in names:
        floor = counted["python-floor"]
        for name in names:
            if name != "python-floor":
                lines.append(f"\n{name} ÷ python-floor, instructions per message: batched "
                             f"{counted[name]['batched'] / floor['batched']:.2f}x, unbatched "
                             f"{counted[name]['unbatched'] / floor['unbatched']:.2f}x "
                             "(the floor's messages per CPU-second ÷ "
                             f"{name}'s would be the inverse)")
    for name in names:
        lines.append(f"\n{name}, batched: C functions, own instructions:")
        lines += [f"    {share:5.1f}%  {fn}" for share, fn in tops[name]]
    return lines


def _dump(pid: int) -> None:
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True,
                   timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200,
                        help="messages per action (a multiple of 10)")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--cpu-messages", type=int, default=3000,
                        help="messages per pipeline for the server's CPU without valgrind")
    parser.add_argument("--parts", nargs="+", default=["inprocess", "server"],
                        choices=["inprocess", "server"])
    parser.add_argument("--servers", nargs="+", default=["conveyor", "python-floor"],
                        choices=["conveyor", "conveyor-compiled", "python-floor"])
    parser.add_argument("--_counted", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--_labels", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._counted:
        import uvloop
        labels = uvloop.run(_counted(args._counted, args.warmup))
        Path(args._labels).write_bytes(orjson.dumps(labels))
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed")
    if args.messages % 10:
        sys.exit("--messages must be a multiple of 10")
    work = Path(tempfile.mkdtemp(prefix="conveyor-callgrind-"))
    lines: list[str] = []
    if "inprocess" in args.parts:
        lines += inprocess_part(args.messages, args.warmup, work)
    if "server" in args.parts:
        lines += ["", *server_part(args.servers, args.messages, args.warmup,
                                   args.cpu_messages, work)]
    print("\n".join(lines))
    print(f"\ncallgrind's files are in {work}")


if __name__ == "__main__":
    main()
