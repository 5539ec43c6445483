"""The local actuator: `conveyor worker` child processes on this machine (the embedded
default, used by `conveyor up --autoscale` and `conveyor scale run --actuator local`).

Each worker gets its own status port; the actuator reads its /health to know whether it
is in service, busy (holding a message) and how long its jobs take. Scale-in sends
SIGTERM to idle workers only: the daemon stops receiving, lets open requests finish (up
to DrainTimeout), releases the rest with visibility 0 and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from conveyor._child import conveyor_command, conveyor_env
from conveyor.scale.actuator import IN_SERVICE, ScaleResult
from conveyor.scale.observe import worker_health
from conveyor.scale.protection import WorkerView, choose_to_stop

log = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass(slots=True)
class LocalWorker:
    """One child process and what was last read from its /health."""

    worker_id: str
    proc: subprocess.Popen[bytes]
    status_url: str
    log_path: Path
    started_s: float
    stopping: bool = False
    view: WorkerView | None = None


@dataclass(slots=True)
class LocalActuator:
    """Starts and drains `conveyor worker` processes (conveyor._child) with `worker_args`."""

    worker_args: Sequence[str]
    log_dir: Path
    env: dict[str, str] | None = None
    host: str = "127.0.0.1"
    workers: dict[str, LocalWorker] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _session: aiohttp.ClientSession | None = None

    async def refresh(self) -> list[WorkerView]:
        """Reap exited workers and read every live one's /health."""
        if self._session is None:
            self._session = aiohttp.ClientSession()
        for worker in list(self.workers.values()):
            code = worker.proc.poll()
            if code is not None:
                del self.workers[worker.worker_id]
                level = logging.INFO if worker.stopping and code == 0 else logging.WARNING
                log.log(level, "worker exited: worker=%s code=%s stopping=%s log=%s",
                        worker.worker_id, code, worker.stopping, worker.log_path)
        live = list(self.workers.values())
        reports = await asyncio.gather(*(worker_health(self._session, w.status_url)
                                         for w in live))
        for worker, report in zip(live, reports, strict=True):
            if report is not None and report.get("pid") != worker.proc.pid:
                report = None  # another process answers on its port: ours has not started
            worker.view = _view(worker, report)
        return [w.view for w in live if w.view is not None]

    async def scale_to(self, desired: int, views: Sequence[WorkerView]) -> ScaleResult:
        """Start workers up to `desired`, or drain idle ones down to it."""
        current = sum(v.state in ("starting", "running") for v in views)
        if desired > current:
            started = [self._start() for _ in range(desired - current)]
            return ScaleResult(started=len(started))
        if desired < current:
            victims = choose_to_stop(views, current - desired)
            for view in victims:
                self._stop(self.workers[view.worker_id])
            return ScaleResult(stopped=len(victims), protected=current - desired - len(victims))
        return ScaleResult()

    def _start(self) -> str:
        worker_id = f"w{next(self._ids)}"
        taken = {w.status_url for w in self.workers.values()}
        port = free_port(self.host)
        while f"http://{self.host}:{port}" in taken:  # the kernel may hand a port out twice
            port = free_port(self.host)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"worker-{worker_id}.log"
        cmd = conveyor_command("worker", "--status-port", str(port), "--status-host", self.host,
                               *self.worker_args)
        with open(log_path, "ab") as out:
            # Own session: a terminal's Ctrl-C reaches the scaler, which drains the fleet.
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    env=conveyor_env(self.env))
        self.workers[worker_id] = LocalWorker(worker_id, proc, f"http://{self.host}:{port}",
                                              log_path, time.monotonic())
        log.info("worker started: worker=%s pid=%d status=%s", worker_id, proc.pid,
                 self.workers[worker_id].status_url)
        return worker_id

    def _stop(self, worker: LocalWorker) -> None:
        worker.stopping = True
        with contextlib.suppress(ProcessLookupError):
            worker.proc.send_signal(signal.SIGTERM)
        log.info("worker draining: worker=%s pid=%d", worker.worker_id, worker.proc.pid)

    async def close(self, timeout_s: float = 60.0) -> None:
        """Drain every worker (SIGTERM), wait for them, SIGKILL stragglers."""
        for worker in self.workers.values():
            if not worker.stopping:
                self._stop(worker)
        deadline = time.monotonic() + timeout_s
        while any(w.proc.poll() is None for w in self.workers.values()):
            if time.monotonic() > deadline:
                for worker in self.workers.values():
                    if worker.proc.poll() is None:
                        log.warning("worker did not drain in time, killing: worker=%s",
                                    worker.worker_id)
                        worker.proc.kill()
                break
            await asyncio.sleep(0.1)
        await self.refresh()
        if self._session is not None:
            await self._session.close()
            self._session = None


def _view(worker: LocalWorker, report: dict | None) -> WorkerView:
    if worker.stopping:
        state = "stopping"
    elif report is not None and report.get("status") in IN_SERVICE:
        state = "running"
    elif report is not None and report.get("status") in ("draining", "stopped"):
        state = "stopping"
    else:
        state = "starting"
    report = report or {}
    return WorkerView(worker.worker_id, state, busy=int(report.get("holding", 0)) > 0,
                      started_s=worker.started_s, in_flight=int(report.get("in_flight", 0)),
                      processing_avg_s=report.get("processing_avg_s"),
                      processed=int(report.get("processed", 0)))
