"""Real processes: three `conveyor cron run` schedulers on one queue with a sped-up clock;
the leader is SIGKILLed just before and just after due times, over and over."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path

from conveyor.client import SQSClient
from conveyor.cron.leases.server import ServerLeases
from conveyor.cron.ledger import RunLedger
from tests.cron.fleet import drain
from tests.cron.test_scheduler import write_cron
from tests.support import ServerProcess, sqs_client
from tests.worker.conftest import run

SPEED = 60.0  # one cron minute per real second
TRIALS = 8


def _lease_holder(endpoint: str, name: str) -> str:
    """Who holds the lease now (unexpired), asked through the lease API."""
    async def get() -> str:
        async with SQSClient(endpoint) as sqs:
            lease = await ServerLeases(sqs).get(name)
        return lease.holder if lease and lease.expires_ms > time.time() * 1000 else ""
    return run(get())


def test_sigkill_the_leader_around_due_times(tmp_path: Path, server: ServerProcess) -> None:
    queue = "cron-kill-" + uuid.uuid4().hex[:8]
    url = sqs_client(server.url).create_queue(QueueName=queue)["QueueUrl"]
    cron_file = write_cron(tmp_path / "cron.yaml", {"tick": "* * * * *", "even": "*/2 * * * *"})
    since = time.time() + 0.5
    epoch = (int(since) // 60 + 1000) * 60  # cron time starts on a whole minute
    env = {**os.environ, "CONVEYOR_CRON_CLOCK": f"{epoch},{since},{SPEED}"}
    procs: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        log = open(tmp_path / f"sched-{len(procs)}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "conveyor", "cron", "run", "--worker-queue-url", url,
             "--cron", str(cron_file), "--cron-lease-ttl", "0.8",
             "--cron-grace-period", "3600"], env=env, stdout=log, stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    def leader() -> subprocess.Popen | None:
        holder = _lease_holder(server.url, f"conveyor-cron:{queue}")
        pid = int(holder.split(":")[1]) if holder else 0
        return next((p for p in procs if p.pid == pid and p.poll() is None), None)

    rng = random.Random(11)
    killed = 0
    try:
        for _ in range(3):
            start()
        deadline = time.monotonic() + 60
        while killed < TRIALS and time.monotonic() < deadline:
            victim = leader()
            if victim is None:
                time.sleep(0.05)
                continue
            # the next due time (a whole cron minute = a whole real second after `since`),
            # then kill within 150 ms either side of it
            real_due = since + (int(time.time() - since) + 1)
            time.sleep(max(0.0, real_due + rng.uniform(-0.15, 0.15) - time.time()))
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            killed += 1
            start()
            time.sleep(rng.uniform(0.2, 1.0))
        time.sleep(2)  # a few more runs under the last leader
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    assert killed == TRIALS

    async def check() -> None:
        async with SQSClient(server.url) as sqs:
            got = await drain(sqs, url)
            ledger = RunLedger(ServerLeases(sqs), f"conveyor-cron:{queue}", "receiver")
            admitted = Counter()
            for task, at, message_id in got:
                admitted[(task, at)] += await ledger.admit(task, at, message_id)
        ticks = sorted({at for task, at, _ in got if task == "tick"})
        assert len(ticks) >= TRIALS
        stamps = [datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in ticks]
        gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
        assert set(gaps) == {60.0}, f"missed runs: {gaps}"  # no minute missing
        evens = sorted({at for task, at, _ in got if task == "even"})
        assert evens and all(int(at[14:16]) % 2 == 0 for at in evens)
        assert set(admitted.values()) == {1}, admitted  # each run reaches the app once
        copies = Counter((task, at) for task, at, _ in got)
        print(f"{TRIALS} SIGKILLs: {len(copies)} runs, "
              f"{sum(n > 1 for n in copies.values())} enqueued twice (in doubt), "
              f"all admitted once")

    run(check())
