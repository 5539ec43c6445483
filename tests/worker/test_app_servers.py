"""The worker against real app servers, as users run them (issue 22).

Each server runs the same app (tests/worker/apps/): it records every POST it gets, then
answers by the message's `mode` attribute — 200 with Content-Length, chunked, or ended by
the close, a 1 MiB body, and the failures 500, 503 + Retry-After, a 200 cut off by a reset,
and an answer slower than InactivityTimeout. Every job the app answered 200 must be
deleted after exactly one POST; every failure is POSTed again (and then answered 200).
A server that is not installed skips here, and fails in CI (CI=true), which installs them.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import free_port, unavailable
from tests.worker.conftest import aio, queue_total, run, running_worker, wait_until

APPS = Path(__file__).parent / "apps"
BIN = Path(sys.executable).parent

SUCCESSES = ("length", "chunked", "close", "big")
# Each failure mode and the status the worker logs and counts it under.
FAILURES = {"fail500": "500", "fail503": "503", "reset": "connection-error",
            "slow": "inactivity-timeout"}
REPEATS = {"length": 3, "chunked": 3, "close": 3}  # several: kept-alive connections get reused
WORKER = {"HttpConnections": 3, "InactivityTimeout": 2}  # below python_apps.SLOW_S


@dataclass(frozen=True)
class AppServer:
    """One app server kind: how to start it on a port and what it can answer."""

    name: str
    command: Callable[[int], list[str]]
    modes: tuple[str, ...]
    needs: str  # a program on PATH, or `python:<module>`
    behind_nginx: bool = False

    def check(self) -> None:
        kind, _, what = self.needs.rpartition(":")
        if kind == "python":
            if importlib.util.find_spec(what) is None:
                unavailable(f"{self.name}: Python package {what} is not installed "
                            "(pip install -e '.[dev]')")
        elif _program(what) is None:
            unavailable(f"{self.name}: {what} is not installed (.ci/run installs it)")


def _program(name: str) -> str | None:
    """A program's path; nginx lives in /usr/sbin, which a user's PATH may leave out."""
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))


def _stdlib(version: str) -> Callable[[int], list[str]]:
    return lambda port: [sys.executable, str(APPS / "python_apps.py"), str(port), version]


ALL = (*SUCCESSES, *FAILURES)
NO_CLOSE = tuple(mode for mode in ALL if mode != "close")  # these servers never close-delimit
SERVERS = [
    AppServer("http.server HTTP/1.0", _stdlib("1.0"), tuple(m for m in ALL if m != "chunked"),
              "python:http.server"),
    AppServer("http.server HTTP/1.1", _stdlib("1.1"), ALL, "python:http.server"),
    AppServer("gunicorn sync", lambda port: [
        str(BIN / "gunicorn"), "--worker-class", "sync", "--workers", "4", "--bind",
        f"127.0.0.1:{port}", "--log-level", "critical", "python_apps:wsgi"],
        NO_CLOSE, "python:gunicorn"),
    AppServer("uvicorn httptools", lambda port: [
        str(BIN / "uvicorn"), "--port", str(port), "--http", "httptools", "--log-level",
        "critical", "--no-access-log", "python_apps:asgi"], NO_CLOSE, "python:uvicorn"),
    AppServer("uvicorn h11", lambda port: [
        str(BIN / "uvicorn"), "--port", str(port), "--http", "h11", "--log-level", "critical",
        "--no-access-log", "python_apps:asgi"], NO_CLOSE, "python:uvicorn"),
    AppServer("waitress", lambda port: [
        str(BIN / "waitress-serve"), f"--listen=127.0.0.1:{port}", "--threads=4",
        "python_apps:wsgi"], NO_CLOSE, "python:waitress"),
    AppServer("node http", lambda port: [str(_program("node")), str(APPS / "node_app.js"),
                                         str(port)], ALL, "node"),
    AppServer("nginx → http.server HTTP/1.1", _stdlib("1.1"), ALL, "nginx",
              behind_nginx=True),
]


@pytest.mark.parametrize("app_server", SERVERS, ids=[s.name for s in SERVERS])
def test_each_200_is_deleted_after_exactly_one_post(app_server, sqs, queue_name, tmp_path):
    app_server.check()
    record = tmp_path / "posts.txt"
    modes = [mode for mode in app_server.modes for _ in range(REPEATS.get(mode, 1))]

    async def scenario() -> dict[str, float]:
        configured = sqs.meta.endpoint_url + "/000000000000/" + queue_name
        with serving(app_server, tmp_path, record) as app_url:
            async with running_worker(configured, app_url, **WORKER) as worker:
                url, dlq_url = worker.queue_url, worker.queues.dead_letter_url
                ids = await aio(_send, sqs, url, modes)
                posts = len(modes) + sum(mode in FAILURES for mode in modes)
                await wait_until(lambda: queue_total(sqs, url) == 0
                                 and len(_posts(record)) >= posts, timeout_s=60,
                                 what="every job done")
                failed = {status: worker.metrics.value(
                    "conveyor_worker_messages_failed_total", status=status)
                    for status in (*FAILURES.values(), "502")}
                succeeded = worker.metrics.value("conveyor_worker_messages_succeeded_total")
            dead_letters = queue_total(sqs, dlq_url)
        counts = collections.Counter(_posts(record))
        expected = {msgid: 1 if mode in SUCCESSES else 2 for msgid, mode in ids.items()}
        assert dict(counts) == expected, _explain(counts, expected, ids)
        assert succeeded == len(modes)
        assert dead_letters == 0
        return failed

    failed = {status: n for status, n in run(scenario()).items() if n}
    expected_failed = {FAILURES[mode]: 1.0 for mode in app_server.modes if mode in FAILURES}
    if app_server.behind_nginx:
        # nginx may answer a cut-off upstream answer with its own 502 instead of cutting its
        # own answer off, depending on how much it had passed on: either is a failure.
        failed["connection-error"] = failed.get("connection-error", 0) + failed.pop("502", 0)
    assert failed == expected_failed


def _send(sqs, url: str, modes: list[str]) -> dict[str, str]:
    """Send one message per mode (the `mode` attribute says how the app answers)."""
    ids: dict[str, str] = {}
    for start in range(0, len(modes), 10):
        entries = [{"Id": str(i), "MessageBody": f"job {i}", "MessageAttributes": {
            "mode": {"DataType": "String", "StringValue": mode}}}
            for i, mode in enumerate(modes[start:start + 10], start)]
        answer = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert not answer.get("Failed"), answer
        ids |= {ok["MessageId"]: modes[int(ok["Id"])] for ok in answer["Successful"]}
    return ids


def _posts(record: Path) -> list[str]:
    """The message id of every POST the app recorded, in order."""
    if not record.exists():
        return []
    return [line.split()[0] for line in record.read_text().splitlines() if line]


def _explain(counts: collections.Counter, expected: dict[str, int], ids: dict[str, str]) -> str:
    wrong = [f"{ids.get(msgid, '?')}: {counts[msgid]} POSTs, expected {want}"
             for msgid, want in expected.items() if counts[msgid] != want]
    return "; ".join(wrong)


# -- starting the servers --------------------------------------------------------------------

@contextlib.contextmanager
def serving(app_server: AppServer, tmp: Path, record: Path) -> Iterator[str]:
    """Run the app server (and nginx in front of it) on free loopback ports; yield its URL."""
    env = {**os.environ, "CONVEYOR_TEST_RECORD": str(record), "PYTHONPATH": str(APPS)}
    port = free_port()
    with _process(app_server.command(port), port, tmp / "app.log", env, cwd=APPS):
        if not app_server.behind_nginx:
            yield f"http://127.0.0.1:{port}"
            return
        front = free_port()
        config = _nginx_config(tmp / "nginx", front, port)
        with _process([str(_program("nginx")), "-p", str(tmp / "nginx"), "-c", str(config), "-e",
                       str(tmp / "nginx" / "error.log")], front, tmp / "nginx.log", env):
            yield f"http://127.0.0.1:{front}"


@contextlib.contextmanager
def _process(cmd: list[str], port: int, log: Path, env: dict[str, str],
             cwd: Path | None = None) -> Iterator[None]:
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    try:
        _wait_port(port, proc, log)
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _wait_port(port: int, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{proc.args[0]} exited with {proc.returncode}: {log.read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    pytest.fail(f"{proc.args[0]} did not listen on {port}: {log.read_text()}")


def _nginx_config(prefix: Path, port: int, upstream: int) -> Path:
    """nginx as a reverse proxy, as one process of this user in `prefix` (no daemon, no
    master); answers of mode `close` go through a location that may not chunk, so nginx
    ends their body by closing the connection."""
    prefix.mkdir()
    temp = "\n".join(f"  {kind}_temp_path {prefix / kind};"
                     for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    proxy = (f"proxy_pass http://127.0.0.1:{upstream}; proxy_http_version 1.1; "
             "proxy_set_header Connection \"\";")
    config = prefix / "nginx.conf"
    config.write_text(f"""
daemon off;
master_process off;
worker_processes 1;
pid {prefix / "nginx.pid"};
error_log {prefix / "error.log"} warn;
events {{ worker_connections 64; }}
http {{
  access_log off;
{temp}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      if ($http_x_aws_sqsd_attr_mode = close) {{ rewrite ^ /close-delimited last; }}
      {proxy}
    }}
    location /close-delimited {{
      internal;
      chunked_transfer_encoding off;
      {proxy}
    }}
  }}
}}
""")
    return config
