"""Helpers that start real Conveyor processes for tests."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NoReturn

import boto3
import pytest
from botocore.config import Config

POSTGRES_URL = os.environ.get("CONVEYOR_TEST_POSTGRES",
                              "postgresql://postgres@127.0.0.1:5432/test")
STORES = ["sqlite", "postgresql"]
CREATED_SCHEMAS: list[str] = []  # dropped at the end of the session (tests/conftest.py)


def postgres_available() -> bool:
    from urllib.parse import urlsplit

    parts = urlsplit(POSTGRES_URL)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5432), 1):
            return True
    except OSError:
        return False


def require_postgres() -> None:
    """Skip without PostgreSQL on a developer's machine; in CI (CI=true) fail instead."""
    if not postgres_available():
        unavailable(f"PostgreSQL is not reachable at {POSTGRES_URL}")


def unavailable(reason: str) -> NoReturn:
    """Something a test needs is missing: skip on a developer's machine, fail in CI (CI=true),
    which must run everything."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI must not skip)")
    pytest.skip(reason)


MOTO = Path(sys.executable).with_name("moto_server")


@contextmanager
def running_moto(command: Callable[[int], list[str]], log_dir: Path) -> Iterator[str]:
    """A moto server started by `command(port)` on 127.0.0.1 and a free port, yielding its
    URL; stopped at the end. Without moto_server installed the test is skipped, or fails
    in CI."""
    if not MOTO.exists():
        unavailable("moto_server is not installed (pip install 'moto[server]')")
    port = free_port()
    log = open(log_dir / "moto.log", "wb")  # noqa: SIM115 - kept open for the child's lifetime
    proc = subprocess.Popen(command(port), stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/moto-api/", timeout_s=30, proc=proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def isolated(store_args: list[str]) -> list[str]:
    """Give each server started on PostgreSQL its own schema, so suites do not share state."""
    if "--store" not in store_args:
        return list(store_args)
    i = store_args.index("--store")
    url = store_args[i + 1]
    schema = "t_" + os.urandom(6).hex()
    CREATED_SCHEMAS.append(schema)
    joined = f"{url}{'&' if '?' in url else '?'}schema={schema}"
    return [*store_args[:i + 1], joined, *store_args[i + 2:]]


def drop_schemas(schemas: list[str]) -> None:
    """Remove the schemas tests created, so runs do not pile up tables in the database."""
    if not schemas or not postgres_available():
        return
    import asyncio

    import asyncpg

    async def drop() -> None:
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            for schema in schemas:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()

    asyncio.run(drop())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, timeout_s: float = 15.0, proc: subprocess.Popen | None = None,
              cafile: str | None = None) -> None:
    """Wait for `url` to answer 200; `cafile` verifies an https server's certificate."""
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=1, context=context) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout_s}s")


def start_fails(*args: str) -> str:
    """Run `conveyor server ARGS`, expect it to stop at once with an error; return stderr."""
    done = subprocess.run([sys.executable, "-m", "conveyor", "server", *args],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    return done.stderr


class ServerProcess:
    """A `conveyor server` child process on a free loopback port."""

    def __init__(self, data_dir: Path, *args: str, port: int | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.args = list(args)
        self.port = port or free_port()
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.log_path = data_dir / f"server-{self.port}.log"

    @property
    def tls_cert(self) -> str | None:
        """The certificate the server serves HTTPS with (`--tls-cert`), if any."""
        return self.args[self.args.index("--tls-cert") + 1] if "--tls-cert" in self.args else None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls_cert else 'http'}://127.0.0.1:{self.port}"

    def start(self) -> ServerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the child's lifetime
        cmd = [sys.executable, "-m", "conveyor", "server", "--port", str(self.port),
               "--data-dir", str(self.data_dir), *self.args]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        wait_http(self.url + "/health", proc=self.proc, cafile=self.tls_cert)
        return self

    def kill(self) -> None:
        """SIGKILL: no chance to flush or clean up."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self) -> ServerProcess:
        self.stop()
        return self.start()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def sqs_client(endpoint_url: str, region: str = "us-east-1", **config):
    return boto3.client(
        "sqs",
        endpoint_url=endpoint_url,
        region_name=region,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 1}, **config),
    )


# --------------------------------------------------------------------------- long polls

LONGEST_WAIT_S = 20  # SQS's longest WaitTimeSeconds
# How long a test waits for the answer of a poll something should wake. Far from both
# outcomes it tells apart: a woken poll answers within a fraction of a second, one left to
# wait its LONGEST_WAIT_S out answers only after that, so load must slow a wake-up thirtyfold
# before this fails. A bound on a hang, not a timing: no test measures how long a poll took.
ANSWERED_WITHIN_S = 15.0


class LongPoll:
    """A ReceiveMessage parked on a server, on a thread and client of its own: for tests of
    what wakes a long poll, what must not, and what ends its wait. Waits SQS's longest unless
    `receive` says otherwise; constructed once it has had half a second to park."""

    def __init__(self, endpoint_url: str, queue_url: str, **receive: Any) -> None:
        client = sqs_client(endpoint_url, read_timeout=LONGEST_WAIT_S + 30)
        request = {"QueueUrl": queue_url, "WaitTimeSeconds": LONGEST_WAIT_S, **receive}
        pool = ThreadPoolExecutor(1)
        self._answer = pool.submit(client.receive_message, **request)
        pool.shutdown(wait=False)  # the thread ends with the poll
        time.sleep(0.5)  # let it park; if it has not yet, it still answers the same

    def answered(self) -> bool:
        return self._answer.done()

    def bodies(self) -> list[str]:
        """The bodies it answered with; fails if it is still waiting ANSWERED_WITHIN_S
        later (nothing woke it, nor ended its wait: it is sitting its wait out)."""
        try:
            answer = self._answer.result(ANSWERED_WITHIN_S)
        except TimeoutError:
            raise AssertionError(f"the long poll is still waiting {ANSWERED_WITHIN_S} s later: "
                                 f"nothing woke it or ended its wait") from None
        return [m["Body"] for m in answer.get("Messages", [])]


class RecordingApp:
    """An app that answers every request 200 and records the paths and bodies POSTed."""

    def __init__(self, port: int) -> None:
        self.posts: list[tuple[str, bytes]] = []
        app = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                app.posts.append((self.path, body))
                self._answer()

            def do_GET(self) -> None:  # noqa: N802
                self._answer()

            def _answer(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for_post(self, body: bytes, path: str | None = None,
                      timeout_s: float = 60) -> None:
        """Until `body` was POSTed (to `path`, when given)."""
        deadline = time.monotonic() + timeout_s
        while not any(posted == body and path in (None, at) for at, posted in self.posts):
            if time.monotonic() > deadline:
                pytest.fail(f"the app got no POST {path or ''} {body!r}; it got {self.posts}")
            time.sleep(0.05)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
