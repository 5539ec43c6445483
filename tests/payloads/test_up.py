"""On a laptop, `conveyor up` needs nothing else for large payloads: the server serves its
embedded blob store, `conveyor message send` offloads into it, and the worker resolves
the pointer, so the app gets the whole body and the store is left empty."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.payloads.test_worker import LARGE
from tests.support import RecordingApp, free_port
from tests.up.test_up import ROOT, Up, child_env, conveyor


def test_conveyor_up_carries_a_large_body_to_the_app(tmp_path: Path) -> None:
    port, app_port = free_port(), free_port()
    app = RecordingApp(app_port)
    up = Up(tmp_path, "--app", f"http://127.0.0.1:{app_port}", "--port", str(port),
            "--poll-wait-time", "1")
    try:
        up.wait_for(r"conveyor up: ready")
        sent = subprocess.run(
            conveyor("message", "send", "worker-queue", "-", "--endpoint-url",
                     f"http://127.0.0.1:{port}"),
            input=LARGE, capture_output=True, text=True, timeout=60, cwd=ROOT,
            env={**child_env(), "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"})
        assert sent.returncode == 0, sent.stderr
        app.wait_for_post(LARGE.encode())
        bucket = tmp_path / "conveyor-data" / "payloads" / "conveyor-payloads"
        deadline = time.monotonic() + 60
        while any(bucket.iterdir()):  # the blob goes once the message is deleted
            if time.monotonic() > deadline:
                pytest.fail(f"the blob was not deleted: {list(bucket.iterdir())}")
            time.sleep(0.1)
        assert up.interrupt() == 0, up.output
    finally:
        up.kill()
        app.close()
