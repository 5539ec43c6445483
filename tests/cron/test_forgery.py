"""Scheduled-job messages cannot be forged: a `conveyor worker` process POSTs the runs its
leader enqueued, once each, and deletes unposted what anyone else sends in their shape."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conveyor.cron.clock import ENV as CLOCK_ENV
from conveyor.cron.jobs import ATTR_PATH, ATTR_TASK, ATTR_TIME, BODY, iso
from conveyor.cron.signing import ATTR_SIGNATURE, run_signature
from tests.cron.test_scheduler import write_cron
from tests.support import free_port
from tests.worker.conftest import (
    RecordingApp,
    aio,
    make_queue,
    queue_total,
    recording_app,
    run,
    wait_until,
)

TASKS = {"minutely": "* * * * *", "nightly": "0 3 * * *"}
KEY = "s3cret-shared-by-the-fleet"


def _cron_clock() -> tuple[str, float]:
    """A cron clock running 6x (a run of "* * * * *" every 10 s) from 30 s before a whole
    minute, and that minute (epoch seconds). A leader's first run is the first minute after
    it starts: it does not back-fill."""
    minute = (int(time.time()) // 60 + 10_000) * 60
    return f"{minute - 30},{time.time()},6", minute


def _job(task: str, path: str, at: str, signature: str | None = None) -> dict:
    values = [(ATTR_PATH, path), (ATTR_TASK, task), (ATTR_TIME, at)]
    if signature is not None:
        values.append((ATTR_SIGNATURE, signature))
    return {name: {"DataType": "String", "StringValue": value} for name, value in values}


def _rejected(port: int, queue: str) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    pattern = (r'conveyor_worker_cron_jobs_rejected_total\{queue="' + re.escape(queue)
               + r'",reason="([a-z-]+)"\} ([0-9.]+)')
    return {reason: float(value) for reason, value in re.findall(pattern, text)}


async def _scenario(sqs, url: str, queue_name: str, app: RecordingApp,
                    forged: list[tuple[str, dict]], expected: dict[str, float],
                    status_port: int) -> None:
    for body, attributes in forged:
        await aio(sqs.send_message, QueueUrl=url, MessageBody=body,
                  MessageAttributes=attributes)
    await wait_until(lambda: app.requests, timeout_s=60, what="the first real run's POST")

    async def all_rejected() -> bool:
        try:
            counts = await aio(_rejected, status_port, queue_name)
        except OSError:
            return False
        return counts == expected

    await wait_until(all_rejected, timeout_s=60, what=f"rejections {expected}")

    async def queue_empty() -> bool:
        return await aio(queue_total, sqs, url) == 0

    await wait_until(queue_empty, timeout_s=60, what="an empty queue")


async def _forgeries_dropped(sqs, url: str, queue_name: str, tmp_path: Path,
                             forged: list[tuple[str, dict]], expected: dict[str, float],
                             key_args: list[str], clock: str) -> None:
    cron_file = write_cron(tmp_path / "cron.yaml", TASKS)
    status_port = free_port()
    async with recording_app() as app:
        log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - closed below
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "conveyor", "worker", "--worker-queue-url", url,
            "--app-url", app.url, "--cron", str(cron_file), "--cron-lease-ttl", "1",
            "--status-port", str(status_port), "--poll-wait-time", "1", *key_args,
            env={**os.environ, CLOCK_ENV: clock}, stdout=log, stderr=log)
        try:
            await _scenario(sqs, url, queue_name, app, forged, expected, status_port)
        except pytest.fail.Exception as exc:
            tail = (tmp_path / "worker.log").read_text()[-3000:]
            pytest.fail(f"{exc}\n--- worker log ---\n{tail}")
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)
            log.close()
        log_text = (tmp_path / "worker.log").read_text()
        paths = [r.path for r in app.requests]
        assert set(paths) == {"/minutely"}, paths  # no forged job reached the app
        times = [r.headers["X-Aws-Sqsd-Scheduled-At"] for r in app.requests]
        assert len(times) == len(set(times)), times  # each real run exactly once
        assert all(at.endswith(":00Z") for at in times), times
        for reason in expected:
            assert f"reason={reason}" in log_text, log_text
        assert "scheduled job rejected, deleted unposted" in log_text


def test_without_a_key_unscheduled_unknown_and_misdirected_jobs_are_not_posted(
        sqs, queue_name, tmp_path) -> None:
    url = make_queue(sqs, queue_name)
    clock, minute = _cron_clock()
    now = datetime.fromtimestamp(minute, UTC)
    yesterday_4am = (now - timedelta(days=1)).replace(hour=4, minute=0, second=0)
    forged = [
        # a real task name at a time its schedule ("0 3 * * *") does not fire
        (BODY, _job("nightly", "/nightly", iso(yesterday_4am))),
        # a real task at a real time, sent to another path
        (BODY, _job("minutely", "/admin/drop-tables", iso(now - timedelta(minutes=3)))),
        # a task that is not in cron.yaml
        (BODY, _job("transfer-funds", "/transfer-funds", iso(now - timedelta(minutes=2)))),
        # the next runs, ahead of time (the genuine ones would then be dropped as duplicates)
        (BODY, _job("minutely", "/minutely", iso(now + timedelta(hours=1)))),
        # not a time the leader writes
        (BODY, _job("minutely", "/minutely", "2020-01-01T00:00:30Z")),
        # older than RetentionPeriod + grace: no genuine message can be
        (BODY, _job("nightly", "/nightly", iso((now - timedelta(days=30)).replace(
            hour=3, minute=0, second=0)))),
    ]
    expected = {"unscheduled-time": 1.0, "wrong-path": 1.0, "unknown-task": 1.0,
                "future-time": 1.0, "bad-time": 1.0, "too-old": 1.0}
    run(_forgeries_dropped(sqs, url, queue_name, tmp_path, forged, expected, [], clock),
        timeout_s=200)


def test_with_a_key_unsigned_and_wrongly_signed_jobs_are_not_posted(
        sqs, queue_name, tmp_path) -> None:
    url = make_queue(sqs, queue_name)
    clock, minute = _cron_clock()
    now = datetime.fromtimestamp(minute, UTC)
    earlier = iso(now - timedelta(minutes=2))  # a time "* * * * *" fires: only the key tells
    forged = [
        (BODY, _job("minutely", "/minutely", earlier)),  # unsigned
        (BODY, _job("minutely", "/minutely", earlier, "v1=" + "0" * 64)),
        # signed with another key
        (BODY, _job("minutely", "/minutely", earlier,
                    run_signature("guessed", queue_name, "minutely", "/minutely", earlier,
                                  BODY))),
        # a genuine signature, moved to another path
        (BODY, _job("minutely", "/admin", earlier,
                    run_signature(KEY, queue_name, "minutely", "/minutely", earlier, BODY))),
        # a genuine signature for another queue sharing the key
        (BODY, _job("minutely", "/minutely", earlier,
                    run_signature(KEY, "other-queue", "minutely", "/minutely", earlier,
                                  BODY))),
    ]
    expected = {"unsigned": 1.0, "bad-signature": 4.0}
    run(_forgeries_dropped(sqs, url, queue_name, tmp_path, forged, expected,
                           ["--cron-signing-key", KEY], clock), timeout_s=200)


def test_autoscaled_workers_get_the_key_in_their_environment_not_their_command_line() -> None:
    from conveyor.scale.fleet import worker_args, worker_env
    from conveyor.worker import load_config

    config = load_config({"WorkerQueueURL": "http://127.0.0.1:9324/000000000000/jobs",
                          "CronSigningKey": KEY, "MaxRetries": 3})
    assert KEY not in " ".join(worker_args(config))
    assert "--max-retries" in worker_args(config)
    assert worker_env(config) == {"CONVEYOR_CRON_SIGNING_KEY": KEY}
