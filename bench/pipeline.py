"""Producer/consumer pipelines: send, long-poll receive, delete — batched or one by one.

`clients` producer processes and as many consumer processes run for `duration_s`,
each pair on its own queue (or all on one shared queue). A producer stops sending
while its queue holds `backlog` messages that are sent but not yet deleted, so the
latency measured is the pipeline's, not that of an ever-growing queue. It waits on a
semaphore, not in a polling loop: a throttled producer must not spend the CPU that the
server and the consumers share with it (the slower the server, the longer it waits).
Consumers stop once every producer of their queue is done and all it sent is deleted,
or at a hard deadline. Every loop is bounded in time.

Against several nodes of one cluster (`endpoints`), pair i sends through node i % n
and receives through node (i + consumer_shift) % n; without them every process uses
`endpoint`.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from array import array
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import procstat
from sqs_client import make_client, sent_at, stamped_body
from stats import ms, percentile

BATCH_SIZE = 10  # SQS's maximum entries per batch and messages per receive
ERROR_PAUSE_S = 0.01
START_TIMEOUT_S = 60.0  # spawning processes and importing boto3 on a busy 2-core machine


@dataclass(frozen=True)
class PipelineConfig:
    """One pipeline run against one endpoint (or several nodes sharing their queues)."""

    endpoint: str
    batched: bool
    clients: int = 2
    duration_s: float = 5.0
    shared_queue: bool = False
    backlog: int = 200
    body_bytes: int = 256
    wait_time_s: int = 1
    drain_timeout_s: float = 10.0
    queue_prefix: str = "bench"
    endpoints: tuple[str, ...] = ()  # nodes of one cluster; queues are created on the first
    consumer_shift: int = 0

    @property
    def queues(self) -> int:
        return 1 if self.shared_queue else self.clients

    @property
    def producers_per_queue(self) -> int:
        return self.clients if self.shared_queue else 1

    def client_endpoint(self, pair: int, consumer: bool) -> str:
        """The node that pair's producer (or consumer) talks to."""
        nodes = self.endpoints or (self.endpoint,)
        return nodes[(pair + (self.consumer_shift if consumer else 0)) % len(nodes)]


@dataclass
class PipelineResult:
    """What one pipeline run measured."""

    messages_sent: int
    messages_received: int
    errors: int
    elapsed_s: float
    messages_per_s: float
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    server_cpu_s: float
    messages_per_server_cpu_s: float | None
    client_cpu_s: float
    other_cpu_s: float  # busy CPU on the machine that was neither server nor clients
    receive_calls: int
    messages_per_receive: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Shared:
    """Counters the processes share, one slot per queue."""

    sent: Any
    deleted: Any
    room: list[Any]  # per queue, a semaphore: messages that may still be sent
    producers_done: Any
    barrier: Any
    results: Any


def _cpu_now() -> float:
    times = os.times()
    return times.user + times.system


def _take(room: Any, count: int, deadline: float) -> bool:
    """Block until `count` messages fit in the backlog; False once the deadline passes."""
    for taken in range(count):
        if not room.acquire(timeout=max(0.0, deadline - time.monotonic())):
            _give(room, taken)
            return False
    return True


def _give(room: Any, count: int) -> None:
    for _ in range(count):
        room.release()


def _add(counter: Any, index: int, amount: int) -> None:
    with counter.get_lock():
        counter[index] += amount


def _send_once(client: Any, url: str, cfg: PipelineConfig) -> tuple[int, int]:
    """One send call; returns (messages accepted, errors)."""
    if not cfg.batched:
        client.send_message(QueueUrl=url, MessageBody=stamped_body(cfg.body_bytes))
        return 1, 0
    entries = [{"Id": str(i), "MessageBody": stamped_body(cfg.body_bytes)}
               for i in range(BATCH_SIZE)]
    resp = client.send_message_batch(QueueUrl=url, Entries=entries)
    return len(resp.get("Successful", [])), len(resp.get("Failed", []))


def _producer(cfg: PipelineConfig, endpoint: str, url: str, q: int, shared: _Shared) -> None:
    client = make_client(endpoint)
    errors = 0
    shared.barrier.wait(START_TIMEOUT_S)
    start, cpu0 = time.monotonic(), _cpu_now()
    deadline = start + cfg.duration_s
    per_call = BATCH_SIZE if cfg.batched else 1
    room = shared.room[q]
    while time.monotonic() < deadline and _take(room, per_call, deadline):
        try:
            accepted, failed = _send_once(client, url, cfg)
        except Exception:  # noqa: BLE001 - any client error is counted, the load goes on
            accepted, failed = 0, 1
            time.sleep(ERROR_PAUSE_S)
        errors += failed
        _give(room, per_call - accepted)
        _add(shared.sent, q, accepted)
    _add(shared.producers_done, q, 1)
    shared.results.put({"role": "producer", "start": start, "errors": errors,
                        "cpu_s": _cpu_now() - cpu0})


def _receive_and_delete(client: Any, url: str, cfg: PipelineConfig,
                        latencies: array) -> tuple[int, int]:
    """One long-poll receive and its deletes; returns (messages deleted, errors)."""
    count = BATCH_SIZE if cfg.batched else 1
    resp = client.receive_message(QueueUrl=url, MaxNumberOfMessages=count,
                                  WaitTimeSeconds=cfg.wait_time_s)
    received_at = time.monotonic()
    messages = resp.get("Messages", [])
    latencies.extend(received_at - sent_at(m["Body"]) for m in messages)
    if not messages:
        return 0, 0
    if not cfg.batched:
        for message in messages:
            client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        return len(messages), 0
    entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
               for i, m in enumerate(messages)]
    resp = client.delete_message_batch(QueueUrl=url, Entries=entries)
    return len(resp.get("Successful", [])), len(resp.get("Failed", []))


def _drained(cfg: PipelineConfig, q: int, shared: _Shared) -> bool:
    return (shared.producers_done[q] >= cfg.producers_per_queue
            and shared.deleted[q] >= shared.sent[q])


def _consumer(cfg: PipelineConfig, endpoint: str, url: str, q: int, shared: _Shared) -> None:
    client = make_client(endpoint, read_timeout_s=cfg.wait_time_s + 30)
    latencies: array = array("d")
    errors = receives = 0
    last_delete = None
    shared.barrier.wait(START_TIMEOUT_S)
    start, cpu0 = time.monotonic(), _cpu_now()
    hard_deadline = start + cfg.duration_s + cfg.drain_timeout_s
    while time.monotonic() < hard_deadline and not _drained(cfg, q, shared):
        receives += 1
        try:
            deleted, failed = _receive_and_delete(client, url, cfg, latencies)
        except Exception:  # noqa: BLE001 - any client error is counted, the load goes on
            errors += 1
            time.sleep(ERROR_PAUSE_S)
            continue
        errors += failed
        if deleted:
            _add(shared.deleted, q, deleted)
            _give(shared.room[q], deleted)
            last_delete = time.monotonic()
    shared.results.put({"role": "consumer", "start": start, "errors": errors,
                        "last_delete": last_delete, "latencies": latencies,
                        "receives": receives,
                        "cpu_s": _cpu_now() - cpu0})


def _create_queues(cfg: PipelineConfig) -> list[str]:
    client = make_client(cfg.client_endpoint(0, consumer=False))
    stamp = f"{os.getpid()}-{time.monotonic_ns() % 10**9}"
    return [client.create_queue(QueueName=f"{cfg.queue_prefix}-{stamp}-{i}")["QueueUrl"]
            for i in range(cfg.queues)]


def _collect(results: Any, expected: int, timeout_s: float) -> list[dict[str, Any]]:
    collected = []
    deadline = time.monotonic() + timeout_s
    while len(collected) < expected and time.monotonic() < deadline:
        try:
            collected.append(results.get(timeout=max(0.1, deadline - time.monotonic())))
        except Exception:  # noqa: BLE001 - queue.Empty: a process died; report what we have
            break
    return collected


def run_pipeline(cfg: PipelineConfig, server_cpu_s: Callable[[], float]) -> PipelineResult:
    """Run one bounded pipeline; server_cpu_s reads the server's CPU seconds so far."""
    ctx = mp.get_context("fork")
    urls = _create_queues(cfg)
    shared = _Shared(ctx.Array("q", cfg.queues), ctx.Array("q", cfg.queues),
                     [ctx.Semaphore(cfg.backlog) for _ in range(cfg.queues)],
                     ctx.Array("i", cfg.queues), ctx.Barrier(2 * cfg.clients + 1),
                     ctx.Queue())
    procs = []
    for i in range(cfg.clients):
        q = 0 if cfg.shared_queue else i
        for role, consumer in ((_producer, False), (_consumer, True)):
            endpoint = cfg.client_endpoint(i, consumer)
            procs.append(ctx.Process(target=role, args=(cfg, endpoint, urls[q], q, shared),
                                     daemon=True))
    for proc in procs:
        proc.start()
    cpu0, busy0 = server_cpu_s(), procstat.machine_busy_s()
    shared.barrier.wait(START_TIMEOUT_S)
    reports = _collect(shared.results, len(procs), cfg.duration_s + cfg.drain_timeout_s + 30)
    for proc in procs:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
    server_cpu = server_cpu_s() - cpu0
    busy = procstat.machine_busy_s() - busy0
    return _summarise(cfg, shared, reports, server_cpu, busy)


def _summarise(cfg: PipelineConfig, shared: _Shared, reports: list[dict[str, Any]],
               server_cpu: float, machine_busy: float) -> PipelineResult:
    start = min(r["start"] for r in reports)
    ends = [r["last_delete"] for r in reports if r.get("last_delete")]
    elapsed = (max(ends) - start) if ends else cfg.duration_s
    latencies = array("d")
    for report in reports:
        latencies.extend(report.get("latencies", ()))
    deleted = sum(shared.deleted)
    receives = sum(r.get("receives", 0) for r in reports)
    client_cpu = sum(r["cpu_s"] for r in reports)
    return PipelineResult(
        messages_sent=sum(shared.sent),
        messages_received=deleted,
        errors=sum(r["errors"] for r in reports),
        elapsed_s=round(elapsed, 3),
        messages_per_s=round(deleted / elapsed, 1) if elapsed > 0 else 0.0,
        latency_p50_ms=ms(percentile(latencies, 50)),
        latency_p99_ms=ms(percentile(latencies, 99)),
        server_cpu_s=round(server_cpu, 3),
        messages_per_server_cpu_s=round(deleted / server_cpu, 1) if server_cpu > 0 else None,
        client_cpu_s=round(client_cpu, 3),
        other_cpu_s=round(max(0.0, machine_busy - server_cpu - client_cpu), 3),
        receive_calls=receives,
        messages_per_receive=round(len(latencies) / receives, 2) if receives else 0.0,
    )
