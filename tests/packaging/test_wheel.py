"""The wheel, installed into a fresh venv outside the clone, is a working Conveyor.

Slow (a build and a pip install, about a minute with a warm pip cache): `-m "not packaging"`
leaves it out locally; CI runs it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.packaging.conftest import ROOT, Installed, SampleApp
from tests.support import free_port, sqs_client, wait_http

pytestmark = pytest.mark.packaging


def _tracked_package_files() -> list[str]:
    """Every file under conveyor/ that a checkout has (git's list when there is one)."""
    try:
        out = subprocess.run(["git", "ls-files", "conveyor"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = [str(p.relative_to(ROOT)) for p in (ROOT / "conveyor").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts]
    return sorted(out)


def test_wheel_holds_every_package_file(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    missing = [f for f in _tracked_package_files() if f not in names]
    assert not missing, f"files under conveyor/ left out of the wheel: {missing}"
    assert not [n for n in names if n.startswith("tests/")]


def test_metadata_ranges_and_name(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as whl:
        (meta,) = [n for n in whl.namelist() if n.endswith(".dist-info/METADATA")]
        text = whl.read(meta).decode()
    assert "Name: conveyor-sqs" in text
    requires = [line for line in text.splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert requires, text
    assert not [r for r in requires if "==" in r], "runtime dependencies must be ranges"


def test_command_and_version_come_from_the_venv(installed: Installed) -> None:
    done = installed.run(installed.python, "-c",
                         "import conveyor, importlib.metadata as m;"
                         "print(conveyor.__file__); print(m.version('conveyor-sqs'))")
    assert done.returncode == 0, done.stderr
    module_file, dist_version = done.stdout.split()
    assert Path(module_file).is_relative_to(installed.venv), module_file
    version = installed.run(installed.conveyor, "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"conveyor {dist_version} (pure Python)"  # conveyor/build.py
    assert installed.run(installed.python, "-m", "conveyor", "--help").returncode == 0


def _spawn(installed: Installed, *args: str) -> subprocess.Popen:
    log = open(installed.home / f"{args[0]}.log", "ab")  # noqa: SIM115 - the child's lifetime
    return subprocess.Popen([installed.conveyor, *args], cwd=installed.home,
                            env=installed.env(), stdout=log, stderr=subprocess.STDOUT)


def _stop(proc: subprocess.Popen, timeout_s: float = 20) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def test_server_console_and_worker_through_the_wheel(installed: Installed,
                                                     sample_app: SampleApp) -> None:
    app_url, posts = sample_app.url, sample_app.posts
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = _spawn(installed, "server", "--port", str(port), "--data-dir", "data")
    worker = None
    try:
        wait_http(url + "/health", proc=server)
        admin = ("--endpoint-url", url)

        # send + receive through the installed CLI
        assert installed.run(installed.conveyor, "queue", "create", "jobs", *admin).returncode == 0
        sent = installed.run(installed.conveyor, "message", "send", "jobs", '{"resize": 42}',
                             *admin)
        assert sent.returncode == 0, sent.stderr
        got = installed.run(installed.conveyor, "message", "receive", "jobs", "--wait", "5",
                            "--delete", "--json", *admin)
        assert got.returncode == 0, got.stderr
        assert json.loads(got.stdout.splitlines()[0])["Body"] == '{"resize": 42}'

        # the console page, rendered by the installed package
        with urllib.request.urlopen(url + "/console", timeout=5) as resp:
            page = resp.read().decode()
        assert resp.status == 200 and "jobs" in page

        # a worker POSTs a message to the sample app and deletes it on 200
        sqs = sqs_client(url)
        queue_url = sqs.create_queue(QueueName="work")["QueueUrl"]
        sqs.send_message(QueueUrl=queue_url, MessageBody="hello worker")
        worker = _spawn(installed, "worker", "--worker-queue-url", queue_url,
                        "--app-url", app_url, "--http-path", "/tasks", "--cron", "")
        deadline = time.monotonic() + 20
        while not posts and time.monotonic() < deadline and worker.poll() is None:
            time.sleep(0.05)
        assert posts, (installed.home / "worker.log").read_text()
        path, headers, body = posts[0]
        assert (path, body) == ("/tasks", b"hello worker")
        assert headers.get("X-Aws-Sqsd-Msgid")
        assert _stop(worker) == 0, (installed.home / "worker.log").read_text()
        attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])
        assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "0"
        assert attrs["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "0"
    finally:
        if worker is not None:
            _stop(worker)
        assert _stop(server) == 0, (installed.home / "server.log").read_text()
