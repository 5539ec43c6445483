"""Schedulers sharing one queue, in simulated time: each run enqueued once, none missed,
through kills and crashes at the exact points between claim, send and confirm."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conveyor.client import SQSClient
from conveyor.clock import ManualClock
from conveyor.cron.ledger import RunLedger
from tests.cron.conftest import aligned_minute
from tests.cron.fleet import Fleet, drain, expected_runs
from tests.cron.leasekit import BACKENDS, open_kit
from tests.worker.conftest import run

TASKS = {"every-minute": "* * * * *", "every-7": "*/7 * * * *", "hourly": "0 * * * *"}
STEP_S = 4.0


def write_cron(path: Path, tasks: dict[str, str]) -> Path:
    lines = ["version: 1", "cron:"]
    for name, schedule in tasks.items():
        lines += [f" - name: {name}", f"   url: /{name}", f"   schedule: \"{schedule}\""]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(params=BACKENDS)
def kind(request) -> str:
    return request.param


@pytest.fixture
def env(kind, request, tmp_path):
    server = request.getfixturevalue("clock_server")
    moto = request.getfixturevalue("moto_url") if kind == "dynamodb" else None
    return server, moto, write_cron(tmp_path / "cron.yaml", TASKS)


def _clock(start_s: float) -> ManualClock:
    return ManualClock(now_ms=int(start_s * 1000))


async def _queue(sqs: SQSClient) -> str:
    return await sqs.create_queue("cron-" + uuid.uuid4().hex[:10])


# Every backend runs with crashes; the crash-free run is on the server backend only
# (moto's DynamoDB is slow, and the crash run exercises the steady path as well).
@pytest.mark.parametrize(("kind", "crashes"), [("server", False), ("server", True),
                                               ("dynamodb", True)],
                         ids=["server-steady", "server-crashes", "dynamodb-crashes"])
def test_each_due_run_enqueued_once_across_kills_and_crashes(env, kind, crashes) -> None:
    server, moto, cron_file = env
    minutes = 30 if kind == "server" else 15
    rng = random.Random(7 if crashes else 3)
    start = aligned_minute(5)

    async def scenario() -> None:
        async with SQSClient(server.url) as sqs, open_kit(kind, server, moto) as kit:
            queue_url = await _queue(sqs)
            fleet = Fleet(kit, sqs, queue_url, cron_file, _clock(start))
            for _ in range(3):
                fleet.spawn()
            kills: Counter = Counter()
            for step in range(int(minutes * 60 / STEP_S)):
                await fleet.advance(STEP_S)
                if step == 0:
                    first_step = fleet.clock.now_ms() / 1000
                await fleet.step(rng)
                leader = fleet.leader()
                if crashes and leader is not None and step % 12 == 11:
                    mode = ("kill", "claimed", "sent")[(step // 12) % 3]
                    kills[mode] += 1
                    if mode == "kill":
                        fleet.kill(leader)
                    else:
                        fleet.crash_next_send[leader] = mode
                while len(fleet.alive) < 3 and rng.random() < 0.3:
                    fleet.spawn()
            for _ in range(12):  # let a leader settle everything
                if not fleet.alive:
                    fleet.spawn()
                await fleet.advance(STEP_S)
                await fleet.step(rng)
            end = fleet.clock.now_ms() / 1000
            got = await drain(sqs, queue_url)
            copies = Counter((task, at) for task, at, _ in got)
            want = expected_runs(TASKS, datetime.fromtimestamp(first_step, UTC),
                                 datetime.fromtimestamp(end, UTC))
            assert set(copies) == set(want), (set(want) - set(copies), set(copies) - set(want))
            doubled = {run for run, n in copies.items() if n > 1}
            in_doubt = {(r.task, r.at.strftime("%Y-%m-%dT%H:%M:%SZ")) for r in fleet.in_doubt}
            assert doubled <= in_doubt, doubled - in_doubt  # only after a death mid-send
            assert max(copies.values()) <= 2
            # the receiving side: exactly one message per run is admitted
            ledger = RunLedger(kit.leases, fleet.lease_name, "receiver")
            admitted = Counter()
            for task, at, message_id in got:
                admitted[(task, at)] += await ledger.admit(task, at, message_id)
            assert set(admitted.values()) == {1}
            if crashes:
                assert min(kills.values()) >= 2 and fleet.in_doubt, kills
                assert fleet.metrics.value("conveyor_worker_cron_runs_resent_total",
                                           task="every-minute") >= 1
            print(f"{kind} crashes={crashes}: {len(want)} runs, kills {dict(kills)}, "
                  f"{len(doubled)} enqueued twice (in doubt), all admitted once")

    run(scenario(), timeout_s=120)


def test_runs_missed_while_nobody_led_are_enqueued_within_the_grace_period(env, kind) -> None:
    server, moto, cron_file = env
    start = aligned_minute(5)

    async def scenario() -> None:
        async with SQSClient(server.url) as sqs, open_kit(kind, server, moto) as kit:
            queue_url = await _queue(sqs)
            fleet = Fleet(kit, sqs, queue_url, cron_file, _clock(start), grace_s=300)
            first = fleet.spawn()
            await fleet.advance(1)
            await fleet.step(random.Random(1))
            assert fleet.leader() == first
            fleet.kill(first)
            await fleet.advance(12 * 60)  # 12 minutes without a leader
            fleet.spawn()
            await fleet.step(random.Random(1))
            got = await drain(sqs, queue_url)
            minutes = sorted(at for task, at, _ in got if task == "every-minute")
            # 12 runs were due; the 7 older than 5 minutes are skipped, the last 5 caught up
            assert len(minutes) == 5 and len(set(minutes)) == 5
            assert fleet.metrics.value("conveyor_worker_cron_runs_skipped_total",
                                       task="every-minute") == 7
            assert fleet.metrics.value("conveyor_worker_cron_runs_late_total",
                                       task="every-minute") == 4  # > 60 s late

    run(scenario(), timeout_s=60)


def test_a_bad_reload_keeps_the_schedule_and_a_fifo_queue_is_refused(env, kind, tmp_path,
                                                                     caplog) -> None:
    server, moto, cron_file = env
    start = aligned_minute(5)

    async def scenario() -> None:
        async with SQSClient(server.url) as sqs, open_kit(kind, server, moto) as kit:
            queue_url = await _queue(sqs)
            fleet = Fleet(kit, sqs, queue_url, cron_file, _clock(start))
            fleet.spawn()
            await fleet.advance(1)
            await fleet.step(random.Random(1))
            cron_file.write_text("version: 1\ncron:\n - name: x\n")  # broken
            for _ in range(20):
                await fleet.advance(STEP_S)
                await fleet.step(random.Random(1))
            got = await drain(sqs, queue_url)
            assert sum(task == "every-minute" for task, _, _ in got) == 1
            assert "invalid cron file, keeping the last good schedule (3 tasks)" in caplog.text

            fifo_url = await sqs.create_queue("cron-" + uuid.uuid4().hex[:8] + ".fifo",
                                              {"FifoQueue": "true"})
            write_cron(cron_file, TASKS)
            refused = Fleet(kit, sqs, fifo_url, cron_file, _clock(start))
            ident = refused.spawn()
            refused.alive[ident]._fifo = True
            for _ in range(25):
                await refused.advance(STEP_S)
                await refused.step(random.Random(1))
            assert refused.leader() is None
            assert "not supported on a FIFO worker queue" in caplog.text

    run(scenario(), timeout_s=60)
