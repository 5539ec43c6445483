"""Periodic tasks inside the worker daemon: the POST to the task url, duplicates dropped,
`conveyor up` end to end, and the FIFO refusal."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import urllib.request
import uuid
from pathlib import Path

from click.testing import CliRunner

from conveyor.cli import main
from conveyor.cron.clock import ENV as CLOCK_ENV
from conveyor.cron.jobs import BODY
from tests.cron.test_scheduler import write_cron
from tests.support import ServerProcess, free_port
from tests.worker.conftest import aio, make_queue, recording_app, run, running_worker, wait_until


def _clock_one_second_before_a_minute(speed: float = 1.0) -> str:
    epoch = (int(time.time()) // 60 + 10_000) * 60 - speed
    return f"{epoch},{time.time()},{speed}"


def test_worker_leads_enqueues_and_posts_the_scheduled_job(sqs, queue_name, tmp_path,
                                                           monkeypatch) -> None:
    url = make_queue(sqs, queue_name)
    cron_file = write_cron(tmp_path / "cron.yaml", {"backup-job": "* * * * *"})
    monkeypatch.setenv(CLOCK_ENV, _clock_one_second_before_a_minute())

    async def scenario() -> None:
        async with recording_app() as app, running_worker(
                url, app.url + "/app", CronFile=str(cron_file), CronLeaseTtl=1) as worker:
            await wait_until(lambda: app.requests, what="the scheduled POST")
            posted = app.requests[0]
            assert (posted.method, posted.path, posted.body) == ("POST", "/app/backup-job", b"")
            headers = posted.headers
            assert headers["X-Aws-Sqsd-Taskname"] == "backup-job"
            assert headers["X-Aws-Sqsd-Scheduled-At"].endswith(":00Z")
            assert headers["X-Aws-Sqsd-Sender-Id"]
            assert headers["X-Aws-Sqsd-Queue"] == queue_name and headers["X-Aws-Sqsd-Msgid"]
            assert headers["User-Agent"].startswith("aws-sqsd/")
            assert not any(h.lower().startswith("x-aws-sqsd-attr-") for h in headers)
            # a second message for the same run (a leader died mid-send) is not POSTed
            await aio(sqs.send_message, QueueUrl=url, MessageBody=BODY, MessageAttributes={
                name: {"DataType": "String", "StringValue": value} for name, value in (
                    ("beanstalk.sqsd.path", "/backup-job"),
                    ("beanstalk.sqsd.task_name", "backup-job"),
                    ("beanstalk.sqsd.scheduled_time", headers["X-Aws-Sqsd-Scheduled-At"]))})
            metrics = worker.metrics
            await wait_until(lambda: metrics.value(
                "conveyor_worker_cron_duplicates_dropped_total", task="backup-job") == 1,
                what="the duplicate to be dropped")
            assert metrics.value("conveyor_worker_cron_leader") == 1
            assert metrics.value("conveyor_worker_cron_runs_enqueued_total",
                                 task="backup-job") >= 1
            exposition = metrics.exposition().decode()
            assert "conveyor_worker_cron_runs_late_total" in exposition or \
                "conveyor_worker_cron_runs_enqueued_total" in exposition
            times = [r.headers["X-Aws-Sqsd-Scheduled-At"] for r in app.requests]
            assert len(times) == len(set(times))

    run(scenario(), timeout_s=60)


def test_conveyor_up_with_a_cron_yaml_reaches_the_app(tmp_path: Path) -> None:
    cron_file = write_cron(tmp_path / "cron.yaml", {"audit": "* * * * *"})
    port = free_port()

    async def scenario() -> None:
        async with recording_app() as app:
            # 20x: a cron minute every 3 s, however long the server takes to start
            env = {**os.environ, CLOCK_ENV: _clock_one_second_before_a_minute(20)}
            with open(tmp_path / "up.log", "wb") as log:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "conveyor", "up", "--app", app.url, "--port",
                    str(port), "--data-dir", str(tmp_path / "data"), "--cron", str(cron_file),
                    "--cron-lease-ttl", "1", env=env, stdout=log, stderr=log)
            try:
                # (`conveyor up` GETs the app first, to see that it answers)
                await wait_until(lambda: [r for r in app.requests if r.method == "POST"],
                                 timeout_s=40, what="the periodic POST")
            finally:
                proc.send_signal(signal.SIGINT)
                await asyncio.wait_for(proc.wait(), 30)
            posted = next(r for r in app.requests if r.method == "POST")
            assert (posted.path, posted.body) == ("/audit", b"")
            assert posted.headers["X-Aws-Sqsd-Taskname"] == "audit"
            assert posted.headers["X-Aws-Sqsd-Scheduled-At"].endswith(":00Z")

    run(scenario(), timeout_s=90)


def test_worker_refuses_periodic_tasks_on_a_fifo_queue(tmp_path: Path,
                                                       server: ServerProcess) -> None:
    cron_file = write_cron(tmp_path / "cron.yaml", {"audit": "0 23 * * *"})
    queue_url = f"{server.url}/queue/jobs-{uuid.uuid4().hex[:6]}.fifo"
    result = CliRunner().invoke(main, ["worker", "--worker-queue-url", queue_url,
                                       "--cron", str(cron_file)])
    assert result.exit_code == 2
    assert "periodic tasks are not supported on a FIFO worker queue" in result.output
    result = CliRunner().invoke(main, ["worker", "--worker-queue-url", queue_url,
                                       "--cron-lease", "etcd"])
    assert result.exit_code == 2 and "dynamodb:TABLE" in result.output


def test_a_reload_that_breaks_the_cron_file_keeps_the_schedule_and_says_so_in_health(
        sqs, queue_name, tmp_path) -> None:
    """Issue 33: a cron.yaml broken while the worker runs keeps the last good schedule,
    and /health names the file, the line and the problem until it is mended."""
    url = make_queue(sqs, queue_name)
    cron_file = write_cron(tmp_path / "cron.yaml", {"backup-job": "0 3 * * *"})
    port = free_port()

    def cron_health() -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as resp:
            return json.loads(resp.read())["cron"]

    async def scenario() -> None:
        async with recording_app() as app, running_worker(
                url, app.url, CronFile=str(cron_file), StatusPort=port):
            assert await aio(cron_health) == {"file": str(cron_file), "tasks": 1,
                                              "error": None}
            cron_file.write_text("version: 1\ncron:\n - name: backup-job\n   url: /b\n"
                                 "   schedule: '0 3 * *'\n")
            await wait_until(lambda: aio(lambda: cron_health()["error"] is not None),
                             what="the broken reload in /health")
            broken = await aio(cron_health)
            assert broken["tasks"] == 1  # the last good schedule, still in force
            assert "line 5" in broken["error"] and "backup-job" in broken["error"]
            write_cron(cron_file, {"backup-job": "0 3 * * *", "audit": "0 4 * * *"})
            await wait_until(lambda: aio(lambda: cron_health() == {
                "file": str(cron_file), "tasks": 2, "error": None}), what="the mended file")

    run(scenario(), timeout_s=60)
