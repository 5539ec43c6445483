"""A worker killed with SIGKILL in the middle of deliveries loses nothing.

The worker runs as its own process (`conveyor worker`) against a real server and a real
app. It is killed while the app holds requests open; the messages it had received come
back after their visibility timeout, no longer extended by its heartbeats, and a second
worker delivers them. Every message sent ends up answered 200 by the app, and the
queue and its dead-letter queue end up empty.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.support import ServerProcess
from tests.worker.conftest import Recorded, aio, queue_total, recording_app, run, wait_until

MESSAGES = 40


def _start_worker(queue_url: str, app_url: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "conveyor", "worker", "--worker-queue-url", queue_url,
         "--app-url", app_url, "--visibility-timeout", "2", "--http-connections", "8",
         "--max-retries", "5", "--poll-wait-time", "1", "--log-level", "debug"],
        stdout=log.open("ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def test_a_killed_worker_loses_no_message(server: ServerProcess, sqs: Any, queue_name: str,
                                          tmp_path: Path) -> None:
    done: set[str] = set()

    async def slow(request: Recorded) -> web.StreamResponse:
        await asyncio.sleep(0.5)
        done.add(request.body.decode())
        return web.Response(text="ok")

    async def scenario() -> None:
        async with recording_app(slow) as app:
            first = second = None
            try:
                dlq = await aio(sqs.create_queue, QueueName=queue_name + "-dlq")
                dlq_arn = (await aio(sqs.get_queue_attributes, QueueUrl=dlq["QueueUrl"],
                                     AttributeNames=["QueueArn"]))["Attributes"]["QueueArn"]
                url = (await aio(sqs.create_queue, QueueName=queue_name, Attributes={
                    "RedrivePolicy": f'{{"deadLetterTargetArn":"{dlq_arn}",'
                                     '"maxReceiveCount":"5"}'}))["QueueUrl"]
                for i in range(MESSAGES):
                    await aio(sqs.send_message, QueueUrl=url, MessageBody=f"job-{i}")

                first = _start_worker(url, app.url, tmp_path / "first.log")
                await wait_until(lambda: app.active >= 4 and len(done) >= 4, 60,
                                 "the first worker delivering")
                os.kill(first.pid, signal.SIGKILL)  # requests are open at the app right now
                first.wait(10)
                killed_mid_delivery = app.active > 0 or len(done) < len(app.requests)
                assert killed_mid_delivery
                delivered_before = len(done)
                assert delivered_before < MESSAGES

                second = _start_worker(url, app.url, tmp_path / "second.log")
                await wait_until(lambda: len(done) == MESSAGES, 90,
                                 "every message answered 200")
                await wait_until(lambda: queue_total(sqs, url) == 0, 30, "an empty queue")
                assert queue_total(sqs, dlq["QueueUrl"]) == 0
                assert {r.body.decode() for r in app.requests} == {
                    f"job-{i}" for i in range(MESSAGES)}
            finally:
                for proc in (first, second):
                    if proc is not None and proc.poll() is None:
                        proc.terminate()
                        try:
                            proc.wait(15)
                        except subprocess.TimeoutExpired:
                            proc.kill()

    run(scenario(), timeout_s=180)
