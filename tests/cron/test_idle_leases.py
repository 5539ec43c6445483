"""What periodic tasks cost while nothing is due (issue 34 item 6), counted by a real server.

A leader and a follower of one queue run in simulated time: one ManualClock for both
schedulers and the server's dev clock moved with it (by as much, before each lease call),
each scheduler stepped when it asks to be. Calls are what the server counted
(`conveyor_requests_total`), cross-checked with what each scheduler made. Before this
work a leader renewed every TTL/4 (1,440 UpdateLease an hour at the default 10-s TTL) and
a follower campaigned about as often; the budget the issue sets is 60 calls an hour for
a whole idle worker, 30 of them its parked polls (PollMessages of 120 s).

And an endpoint without Conveyor's lease API (moto, standing in for Amazon SQS): the
worker refuses at start, in one line, a cron.yaml whose leases it cannot get, where it
used to ask for the lease every 2.5 s forever.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import subprocess
import sys
import urllib.request
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conveyor.client import SQSClient
from conveyor.clock import ManualClock
from conveyor.cron.clock import CronClock
from conveyor.cron.jobs import send_runs
from conveyor.cron.leader import Scheduler
from conveyor.cron.leases.base import Lease
from conveyor.cron.leases.server import ServerLeases
from conveyor.cron.metrics import CronMetrics
from conveyor.cron.source import CronSource
from conveyor.cron.state import Run
from tests.cron.conftest import advance_server, aligned_minute
from tests.cron.fleet import drain
from tests.cron.test_scheduler import write_cron
from tests.support import ServerProcess, sqs_client
from tests.worker.conftest import run

TTL_S = 10.0  # CronLeaseTtl's default
HOUR_S = 3600.0
LEASE_ACTIONS = ("AcquireLease", "UpdateLease", "ReleaseLease", "GetLease")
_SAMPLE = re.compile(r'^conveyor_requests_total\{action="(\w+)",outcome="(\w+)"\} ([0-9.e+]+)$')


def server_calls(server: ServerProcess) -> Counter:
    """The server's request counts by action (all outcomes)."""
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    counts: Counter = Counter()
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match:
            counts[match.group(1)] += int(float(match.group(3)))
    return counts


class SimTime:
    """The simulated time of one test: a ManualClock for the schedulers, and the server's
    dev clock moved by as much before each lease call (not on every step: most steps
    only look at the file and the clock)."""

    def __init__(self, server: ServerProcess, start_s: float) -> None:
        self.server = server
        self.base = ManualClock(now_ms=int(start_s * 1000))
        self.clock = CronClock(self.base)
        self.elapsed_ms = 0  # whole milliseconds, as the clocks move
        self._unsynced_ms = 0

    @property
    def elapsed_s(self) -> float:
        return self.elapsed_ms / 1000

    def advance_to(self, elapsed_s: float) -> None:
        """Move to `elapsed_s` after the start, rounded up to a whole millisecond."""
        ms = max(0, math.ceil(round(elapsed_s * 1000, 6)) - self.elapsed_ms)
        self.base.advance(ms / 1000)
        self.elapsed_ms += ms
        self._unsynced_ms += ms

    async def sync(self) -> None:
        if self._unsynced_ms > 0:
            ms, self._unsynced_ms = self._unsynced_ms, 0
            await asyncio.to_thread(advance_server, self.server, ms / 1000)


class CountedLeases:
    """The server's lease API for one scheduler: syncs the server's clock first, and
    counts each call it makes (by action)."""

    def __init__(self, sqs: SQSClient, time: SimTime) -> None:
        self._leases = ServerLeases(sqs)
        self._time = time
        self.calls: Counter = Counter()

    async def _call(self, action: str, method: str, *args: Any) -> Any:
        await self._time.sync()
        self.calls[action] += 1
        return await getattr(self._leases, method)(*args)

    async def acquire(self, name: str, holder: str, ttl_s: float) -> Lease:
        return await self._call("AcquireLease", "acquire", name, holder, ttl_s)

    async def update(self, name: str, holder: str, version: int, ttl_s: float,
                     data: str) -> Lease:
        return await self._call("UpdateLease", "update", name, holder, version, ttl_s, data)

    async def release(self, name: str, holder: str) -> None:
        await self._call("ReleaseLease", "release", name, holder)

    async def get(self, name: str) -> Lease | None:
        return await self._call("GetLease", "get", name)

    async def close(self) -> None:
        await self._leases.close()


class Daemon:
    """One scheduler of the queue, with its own counted lease client; `sent` notes the
    simulated time each run was handed to SendMessage."""

    def __init__(self, name: str, sqs: SQSClient, time: SimTime, queue_url: str,
                 cron_file: Path) -> None:
        self.name, self.time = name, time
        self.leases = CountedLeases(sqs, time)
        self.sent: list[tuple[Run, float]] = []
        self.wake_s = 0.0
        self.scheduler = Scheduler(
            leases=self.leases, sqs=sqs, queue_url=queue_url, queue_name="idle",
            lease_name="conveyor-cron:" + queue_url.rsplit("/", 1)[-1], holder=name,
            source=CronSource(cron_file, clock=time.clock, reload_every_s=0),
            clock=time.clock, metrics=CronMetrics("idle-" + name), ttl_s=TTL_S,
            sender=self._send)

    async def _send(self, sqs: SQSClient, url: str, runs: Sequence[Run]) -> list[Run]:
        sent = await send_runs(sqs, url, runs)
        self.sent += [(run, self.time.clock.now_ms() / 1000) for run in sent]
        return sent


async def simulate(daemons: list[Daemon], until_s: float) -> None:
    """Step each daemon when it asked to be, until `until_s` of simulated time."""
    time = daemons[0].time
    while True:
        wake_s = min(d.wake_s for d in daemons)
        if wake_s > until_s:
            time.advance_to(until_s)
            return
        time.advance_to(wake_s)
        for daemon in daemons:
            if daemon.wake_s <= time.elapsed_s + 1e-6:  # (the clock moves in whole ms)
                daemon.wake_s = time.elapsed_s + await daemon.scheduler.step()


def _cron(tmp_path: Path, schedule: str) -> Path:
    return write_cron(tmp_path / "cron.yaml", {"report": schedule})


def _hour_of(epoch_s: float) -> int:
    return datetime.fromtimestamp(epoch_s, UTC).hour


def test_an_idle_leader_and_follower_make_a_few_lease_calls_an_hour(clock_server, tmp_path):
    start = aligned_minute(5)
    # one run a day, twelve hours away: nothing is due in the simulated hours
    cron_file = _cron(tmp_path, f"0 {(_hour_of(start) + 12) % 24} * * *")

    async def scenario() -> None:
        async with SQSClient(clock_server.url) as sqs:
            queue_url = await sqs.create_queue("idle-" + uuid.uuid4().hex[:8])
            time = SimTime(clock_server, start)
            leader = Daemon("leader", sqs, time, queue_url, cron_file)
            follower = Daemon("follower", sqs, time, queue_url, cron_file)
            follower.wake_s = 1.0  # the leader campaigns first
            await simulate([leader, follower], 60)
            assert leader.scheduler.leader and not follower.scheduler.leader
            await time.sync()
            before = server_calls(clock_server)
            made = {d.name: Counter(d.leases.calls) for d in (leader, follower)}
            await simulate([leader, follower], 60 + 2 * HOUR_S)
            await time.sync()
            after = server_calls(clock_server)
            by_server = sum(after[a] - before[a] for a in LEASE_ACTIONS)
            per_hour = {d.name: sum((d.leases.calls - made[d.name]).values()) / 2
                        for d in (leader, follower)}
            print(f"idle lease calls an hour: {per_hour}; server counted {by_server} in 2 h")
            assert by_server == sum(per_hour.values()) * 2  # the server saw each one
            # The leader holds its lease 30 minutes at a time (MAX_HOLD_S) and renews it
            # then: 2 an hour; the follower reads it when it ends: 2 an hour. Before: 1,440
            # and about 1,600.
            assert per_hour["leader"] <= 3, leader.leases.calls
            assert per_hour["follower"] <= 3, follower.leases.calls
            assert leader.scheduler.leader and not follower.scheduler.leader
            assert not leader.sent and not follower.sent

    run(scenario(), timeout_s=120)


def test_due_runs_go_at_their_time_and_a_silent_leader_is_replaced_a_ttl_later(
        clock_server, tmp_path):
    start = aligned_minute(5)
    cron_file = _cron(tmp_path, "0 * * * *")  # hourly
    first_due = (int(start) // 3600 + 1) * 3600

    async def scenario() -> None:
        async with SQSClient(clock_server.url) as sqs:
            queue_url = await sqs.create_queue("due-" + uuid.uuid4().hex[:8])
            time = SimTime(clock_server, start)
            leader = Daemon("leader", sqs, time, queue_url, cron_file)
            follower = Daemon("follower", sqs, time, queue_url, cron_file)
            follower.wake_s = 1.0
            # past the first due run, to 5 s before the second
            await simulate([leader, follower], first_due + 3595 - start)
            assert [(run.at_ms / 1000, at - run.at_ms / 1000) for run, at in leader.sent] \
                == [(first_due, pytest.approx(0, abs=0.01))]  # at its time, as before
            assert not follower.sent and leader.scheduler.leader
            # up to two hours: 3 calls to take the lease and write its state, 2 for the run
            # (claim, confirm), a renewal every 30 minutes (and one shortly before the run
            # when a 30-minute hold ends just before it); the follower reads the lease when
            # it ends or a run is due
            assert sum(leader.leases.calls.values()) <= 10, leader.leases.calls
            assert set(follower.leases.calls) == {"GetLease"}, follower.leases.calls
            assert follower.leases.calls["GetLease"] <= 6, follower.leases.calls
            # the leader is killed (no release) 5 s before its next run: the follower
            # enqueues that run once its lease ends, TTL after the due time
            await simulate([follower], first_due + 3600 + 2 * TTL_S - start)
            second_due = first_due + 3600
            assert [run.at_ms / 1000 for run, _ in follower.sent] == [second_due]
            late_s = follower.sent[0][1] - second_due
            # (the server's dev clock also runs in real time: a lease ends a little early)
            assert TTL_S * 0.5 <= late_s <= TTL_S * 1.25 + 0.01, late_s
            assert follower.scheduler.leader
            got = await drain(sqs, queue_url)
            assert Counter(at for _, at, _ in got) == {
                datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"): 1
                for t in (first_due, second_due)}

    run(scenario(), timeout_s=120)


# -- an endpoint without the lease API ---------------------------------------------------------

def _moto_queue(moto_url: str) -> str:
    name = "cron-" + uuid.uuid4().hex[:8]
    return sqs_client(moto_url).create_queue(QueueName=name)["QueueUrl"]


def _conveyor(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_DEFAULT_REGION": "us-east-1"}
    return subprocess.run([sys.executable, "-m", "conveyor", *args], capture_output=True,
                          text=True, timeout=timeout_s, env=env)


@pytest.mark.parametrize("command", ["worker", "cron run"])
def test_a_cron_yaml_on_an_endpoint_without_leases_is_refused_at_start(moto_url, tmp_path,
                                                                        command):
    queue_url = _moto_queue(moto_url)
    cron_file = _cron(tmp_path, "0 3 * * *")
    extra = ["--app-url", "http://127.0.0.1:9"] \
        if command == "worker" else []
    try:
        done = _conveyor(*command.split(), "--worker-queue-url", queue_url,
                         "--cron", str(cron_file), *extra)
    except subprocess.TimeoutExpired as exc:  # the old way: asking for the lease forever
        pytest.fail(f"`conveyor {command}` did not refuse its cron.yaml: {exc}")
    assert done.returncode != 0, done.stderr
    # one line says it all (besides start-up INFO logs: botocore finding credentials)
    lines = [line for line in done.stderr.splitlines() if line.strip() and " INFO " not in line]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: ")
    assert str(cron_file) in lines[0] and "defines 1 periodic task" in lines[0]
    assert "does not serve Conveyor's lease API" in lines[0]
    assert "dynamodb:TABLE" in lines[0] and "--cron ''" in lines[0]


def test_without_a_cron_yaml_the_worker_starts_on_such_an_endpoint(moto_url, tmp_path):
    """The refusal is about the tasks: no file (or an empty one) starts as ever."""
    from conveyor.cron.service import check_cron_endpoint

    queue_url = _moto_queue(moto_url)
    empty = tmp_path / "empty.yaml"
    empty.write_text("version: 1\ncron: []\n")
    for cron_file in ("", str(tmp_path / "missing.yaml"), str(empty)):
        run(check_cron_endpoint(cron_file, "server", queue_url))


def test_a_refused_lease_api_is_asked_again_hourly_not_every_few_seconds(moto_url, tmp_path):
    """A scheduler that finds out only later (the endpoint did not answer at start)."""
    queue_url = _moto_queue(moto_url)
    cron_file = _cron(tmp_path, "* * * * *")

    async def scenario() -> None:
        async with SQSClient(moto_url, access_key="test", secret_key="test") as sqs:
            clock = CronClock(ManualClock(now_ms=int(aligned_minute(5) * 1000)))
            leases = ServerLeases(sqs)
            calls: Counter = Counter()
            original = sqs.call

            async def counted(action: str, *args: Any, **kwargs: Any) -> Any:
                calls[action] += 1
                return await original(action, *args, **kwargs)

            sqs.call = counted  # type: ignore[method-assign]
            scheduler = Scheduler(
                leases=leases, sqs=sqs, queue_url=queue_url, queue_name="moto",
                lease_name="conveyor-cron:moto", holder="h",
                source=CronSource(cron_file, clock=clock, reload_every_s=0), clock=clock,
                metrics=CronMetrics("moto"), ttl_s=TTL_S)
            elapsed = 0.0
            while elapsed < 2 * HOUR_S - 60:
                wait_s = await scheduler.step()
                clock.advance(wait_s)
                elapsed += wait_s
            assert not scheduler.leader
            # the first look and one an hour after it; before: 1,620 an hour
            assert sum(calls.values()) == 2, calls

    run(scenario(), timeout_s=60)


def test_a_leader_that_hands_over_is_replaced_at_the_next_due_run(clock_server, tmp_path):
    """SIGTERM: the lease is released; the follower, asleep until its next due run, takes
    it then and enqueues that run a quarter TTL late at most."""
    start = aligned_minute(5)
    cron_file = _cron(tmp_path, "*/10 * * * *")
    first_due = (int(start) // 600 + 1) * 600

    async def scenario() -> None:
        async with SQSClient(clock_server.url) as sqs:
            queue_url = await sqs.create_queue("handover-" + uuid.uuid4().hex[:8])
            time = SimTime(clock_server, start)
            leader = Daemon("leader", sqs, time, queue_url, cron_file)
            follower = Daemon("follower", sqs, time, queue_url, cron_file)
            follower.wake_s = 1.0
            await simulate([leader, follower], first_due - 60 - start)
            await time.sync()
            await leader.scheduler.resign()
            await simulate([follower], first_due + 2 * TTL_S - start)
            assert not leader.sent and follower.scheduler.leader
            assert [run.at_ms / 1000 for run, _ in follower.sent] == [first_due]
            assert 0 <= follower.sent[0][1] - first_due <= TTL_S / 4 + 0.01

    run(scenario(), timeout_s=120)
