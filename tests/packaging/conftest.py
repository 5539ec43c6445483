"""Build Conveyor's wheel once and install it into a fresh venv outside the clone."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
import time
import venv
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Installed:
    """A wheel and the venv it was installed into, both in a temporary directory."""

    wheel: Path
    sdist: Path
    venv: Path
    home: Path  # an empty working directory far from the clone

    @property
    def conveyor(self) -> str:
        return str(self.venv / "bin" / "conveyor")

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    def env(self, **extra: str) -> dict[str, str]:
        """The environment a user's shell would have: nothing pointing into the clone."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return {**env, **extra}

    def run(self, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=self.home, env=self.env(), capture_output=True,
                              text=True, timeout=timeout_s, check=False)


def require_module(name: str):
    """Import a dev tool (pyproject's dev extras); without it skip locally, fail in CI."""
    try:
        return __import__(name)
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is not installed (CI must not skip): pip install -e '.[dev]'")
        pytest.skip(f"{name} is not installed: pip install -c constraints.txt -e '.[dev]'",
                    allow_module_level=True)


def missing(what: str) -> None:
    """A container tool is absent: skip locally, fail in CI (which sets it up)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} (CI runs .ci/container-setup first: the container test must run)")
    pytest.skip(f"{what}; run .ci/container-setup (root, Debian) to set it up")


def _run(cmd: list[str], cwd: Path, timeout_s: float) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout_s,
                          check=False)
    if done.returncode:
        pytest.fail(f"{' '.join(cmd)} exited {done.returncode}\n{done.stdout}\n{done.stderr}")


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Installed:
    """`python -m build` (sdist, then the wheel from the sdist), then `pip install` the wheel
    into a new venv with the project's pinned versions (constraints.txt)."""
    require_module("build.env")  # not a bare `build`: a build/ folder imports as one
    tmp = tmp_path_factory.mktemp("packaging")
    dist = tmp / "dist"
    # No build isolation: the build backend pinned in the dev extras builds offline.
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)],
         cwd=tmp, timeout_s=120)
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=True)
    _run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q",
          "-c", str(ROOT / "constraints.txt"), str(wheel)], cwd=tmp, timeout_s=300)
    home = tmp / "home"
    home.mkdir()
    return Installed(wheel, sdist, env_dir, home)


@dataclass
class SampleApp:
    """A job endpoint: records each POST (path, headers, body) and answers 200; a body
    `slow:N` takes N seconds first. `finished` lists the bodies answered."""

    url: str
    posts: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    finished: list[bytes] = field(default_factory=list)


@pytest.fixture
def sample_app() -> Iterator[SampleApp]:
    app = SampleApp("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            app.posts.append((self.path, dict(self.headers), body))
            if body.startswith(b"slow:"):
                time.sleep(float(body[5:]))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
            app.finished.append(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    app.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield app
    httpd.shutdown()
    httpd.server_close()


def parse_conveyor_args(args: list[str], env: dict[str, str]) -> None:
    """Parse a deployed `conveyor ...` command line as the CLI would, with its environment:
    an unknown option or a bad value fails the test."""
    from conveyor.cli import main

    rest = list(args)
    command: click.Command = main
    while isinstance(command, click.Group) and rest and rest[0] in command.commands:
        command = command.commands[rest.pop(0)]
    assert not isinstance(command, click.Group), f"no subcommand in {args}"
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        try:
            command.make_context(shlex.join(args), rest)
        except click.UsageError as exc:
            if "does not exist" not in str(exc):  # CONVEYOR_CONFIG: a file only a pod has
                raise
