"""/health, /metrics, and `conveyor up --demo` end to end."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from tests.support import free_port
from tests.worker.conftest import aio, make_queue, recording_app, run, running_worker, wait_until


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_health_and_metrics(sqs, queue_name):
    url = make_queue(sqs, queue_name)
    port = free_port()

    async def scenario() -> None:
        async with recording_app() as app, running_worker(url, app.url, StatusPort=port):
            await aio(sqs.send_message, QueueUrl=url, MessageBody="x")
            await wait_until(lambda: app.requests, what="the POST")
            status, body = await aio(_get, f"http://127.0.0.1:{port}/health")
            assert status == 200
            assert json.loads(body)["status"] == "ok"

            def metrics_show_success() -> bool:
                text = _get(f"http://127.0.0.1:{port}/metrics")[1]
                sample = f'conveyor_worker_messages_succeeded_total{{queue="{queue_name}"}} 1.0'
                return sample in text

            await wait_until(lambda: aio(metrics_show_success), what="metrics")
            text = (await aio(_get, f"http://127.0.0.1:{port}/metrics"))[1]
            for name in ("messages_received_total", "in_flight", "processing_seconds_bucket",
                         "api_calls_total"):
                assert f"conveyor_worker_{name}" in text

    run(scenario())


def test_up_demo_shows_jobs_flowing_and_stops_on_ctrl_c(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "conveyor", "up", "--demo", "--port", str(port),
         "--data-dir", str(tmp_path / "data"), "--poll-wait-time", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 60
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "demo settled" in line:
                break
        output = "".join(lines)
        assert "demo settled — 6 jobs done, 1 in the dead-letter queue" in output, output
        assert "✓ resize-image" in output
        assert "moves to the dead-letter queue" in output  # the worker's failure log line
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, output + rest
        assert "conveyor up: stopped." in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
