"""The README's "Try it" examples, run top to bottom as written, on a fresh server.

The code blocks are read from README.md itself, so the README and this test cannot drift.
Shell blocks run in one bash session, as a reader pasting them into one terminal would
(exports and background jobs carry over); Python blocks run with this interpreter. Only
ports change: 9324 (the queue server) and 8000 (the reader's app) become free ports, in
the blocks' text and, where the blocks rely on a default, through CONVEYOR_PORT and
CONVEYOR_ENDPOINT_URL. `.venv/bin/conveyor` runs this checkout's code (with `python -P`,
so the working directory is never imported from). A block announced by a comment that
names this file runs until it prints the line quoted there, is used, then gets Ctrl-C.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import RecordingApp, free_port, sqs_client

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Try it with the AWS CLI and boto3"
_BLOCK = re.compile(r"(?:<!-- (?P<note>[^\n]*?) -->\n)?```(?P<lang>\w+)\n(?P<code>.*?)```",
                    re.DOTALL)
_UNTIL = re.compile(r'runs this until it prints "(?P<line>[^"]+)", then presses Ctrl-C')
_DONE = "__README_BLOCK_DONE__"


@dataclass
class Block:
    lang: str
    code: str
    until: str | None  # a long-running block: the line that says it is ready


def readme_blocks() -> list[Block]:
    """The code blocks of the "Try it" section, in order."""
    text = (ROOT / "README.md").read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start:end if end != -1 else len(text)]
    blocks = []
    for match in _BLOCK.finditer(section):
        until = _UNTIL.search(match["note"] or "")
        blocks.append(Block(match["lang"], match["code"], until["line"] if until else None))
    return blocks


class Shell:
    """One bash session fed block after block, like a terminal."""

    def __init__(self, cwd: Path, env: dict[str, str], log: Path) -> None:
        self.log = log
        self._err = open(log, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(["bash"], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._err, text=True,
                                     start_new_session=True)

    def run(self, code: str, timeout_s: float = 120) -> str:
        """Run `code` with `set -e`; return its standard output."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"set -e\n{code}\nset +e\necho {_DONE}\n")
        self.proc.stdin.flush()
        out: list[str] = []
        deadline = time.monotonic() + timeout_s
        for line in self.proc.stdout:
            if line.strip() == _DONE:
                return "".join(out)
            out.append(line)
            if time.monotonic() > deadline:
                break
        pytest.fail(f"README block failed:\n{code}\n--- output ---\n{''.join(out)}"
                    f"--- errors ---\n{self.log.read_text()[-3000:]}")

    def close(self) -> None:
        """End the session and everything it started in the background."""
        _stop_group(self.proc)
        self._err.close()


def _stop_group(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _wait_closed(port: int, timeout_s: float = 30) -> None:
    import socket

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) != 0:
                return
        time.sleep(0.1)
    pytest.fail(f"port {port} still in use")


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], int, RecordingApp]]:
    """A fresh directory with `.venv/bin/conveyor`, the environment, the server port and
    the reader's app."""
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    shim = bin_dir / "conveyor"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -P -m conveyor "$@"\n')
    shim.chmod(0o755)
    port, app_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CONVEYOR_PORT": str(port),
           "CONVEYOR_ENDPOINT_URL": f"http://127.0.0.1:{port}",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        env.pop(name, None)
    app = RecordingApp(app_port)
    try:
        yield tmp_path, env, port, app
    finally:
        app.server.shutdown()


def _ports(code: str, port: int, app_port: int) -> str:
    return code.replace("9324", str(port)).replace("localhost:8000", f"localhost:{app_port}")


def test_readme_examples_run_top_to_bottom(reader) -> None:
    cwd, env, port, app = reader
    app_port = app.server.server_address[1]
    blocks = readme_blocks()
    assert [b.lang for b in blocks].count("bash") >= 3 and any(b.until for b in blocks)
    shell = Shell(cwd, env, cwd / "shell.log")
    try:
        for block in blocks:
            code = _ports(block.code, port, app_port)
            if block.until:
                shell.close()  # "stop the one started above first"
                _wait_closed(port)
                _run_until_ready(code, block.until, cwd, env, port, app)
            elif block.lang == "bash":
                shell.run(code)
                if "conveyor server &" in code:
                    _wait_ready(port)
            elif block.lang == "python":
                done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env,
                                      capture_output=True, text=True, timeout=120)
                assert done.returncode == 0, f"{code}\n{done.stdout}\n{done.stderr}"
            else:
                pytest.fail(f"a {block.lang} block in the Try-it section: run it here too")
            if "--http-path /tasks" in code:  # the worker on its own POSTs to the app
                app.wait_for_post(b'{"resize": 7}', "/tasks")
    finally:
        shell.close()


def _wait_ready(port: int, timeout_s: float = 30) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"no server answers on port {port}")


def _run_until_ready(code: str, ready: str, cwd: Path, env: dict[str, str], port: int,
                     app: RecordingApp) -> None:
    """Run a long-running block, use what it started, then Ctrl-C it."""
    proc = subprocess.Popen(["bash", "-c", code], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        for line in proc.stdout:  # up to the banner's worker queue line, after `ready`
            lines.append(line)
            output = "".join(lines)
            queue_url = re.search(r"worker queue\s+(\S+)", output)
            if (ready in output and queue_url) or time.monotonic() > deadline:
                break
        assert ready in output and queue_url, output
        sqs_client(f"http://127.0.0.1:{port}").send_message(
            QueueUrl=queue_url[1], MessageBody=json.dumps({"from": "readme"}))
        app.wait_for_post(b'{"from": "readme"}', "/")
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, output + rest
        assert "conveyor up: stopped." in rest, output + rest
    finally:
        if proc.poll() is None:  # Ctrl-C, so that `conveyor up` stops its server too
            _stop_group(proc, signal.SIGINT)
