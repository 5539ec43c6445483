"""Start `conveyor server` as a child process for `conveyor up`, and stop it again."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from pathlib import Path

import aiohttp

from conveyor._child import conveyor_command, conveyor_env


class ServerStartError(RuntimeError):
    """The queue server did not come up; the message says why and where its log is."""


class ChildServer:
    """`conveyor server --port P --data-dir D` (conveyor._child) in its own session, so that the
    terminal's Ctrl-C reaches only `conveyor up`, which stops the server after draining."""

    def __init__(self, port: int, data_dir: Path, extra_args: tuple[str, ...] = ()) -> None:
        self.port = port
        self.data_dir = data_dir
        self.extra_args = extra_args
        self.log_path = data_dir / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The server's endpoint URL."""
        return f"http://127.0.0.1:{self.port}"

    async def start(self, timeout_s: float = 30.0) -> None:
        """Spawn the server and wait for GET /health to answer 200."""
        if await _healthy(self.url):
            msg = f"something already answers on port {self.port}; pick another with --port"
            raise ServerStartError(msg)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = conveyor_command("server", "--port", str(self.port),
                               "--data-dir", str(self.data_dir), *self.extra_args)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         env=conveyor_env())
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                msg = (f"the queue server exited with code {self.proc.returncode}; "
                       f"see {self.log_path}:\n{self.log_tail()}")
                raise ServerStartError(msg)
            if await _healthy(self.url):
                return
            await asyncio.sleep(0.1)
        self.stop()
        msg = (f"the queue server did not answer /health within {timeout_s:.0f}s; "
               f"see {self.log_path}")
        raise ServerStartError(msg)

    def running(self) -> bool:
        """True while the child is alive."""
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        if not self.running():
            return
        assert self.proc is not None
        self.proc.terminate()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout_s)

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of the server's log."""
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""


async def _healthy(url: str) -> bool:
    try:
        async with aiohttp.ClientSession() as session, session.get(
                url + "/health", timeout=aiohttp.ClientTimeout(total=1)) as resp:
            return resp.status == 200
    except (aiohttp.ClientError, OSError, TimeoutError):
        return False
