"""An autoscaled fleet of local worker processes: what `conveyor up --autoscale MIN:MAX`
runs in place of its single in-process worker, and what `conveyor scale run` runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from pathlib import Path

from conveyor.client import SQSClient, endpoint_from_queue_url
from conveyor.scale.actuator import Actuator
from conveyor.scale.local import LocalActuator, free_port
from conveyor.scale.policy import BacklogPolicy, BacklogSettings, Policy, parse_bounds
from conveyor.scale.scaler import Scaler
from conveyor.scale.status import DEFAULT_STATUS_PORT, scale_status_server
from conveyor.worker.config import WorkerConfig
from conveyor.worker.options import OPTIONS

log = logging.getLogger(__name__)

# The actuator gives each worker its own status port; the queue exists already.
_FLEET_OWNS = {"StatusPort", "StatusHost", "CreateQueue"}
# Passed in the environment, not as flags: a command line is visible to every local user.
_SECRETS = {"SigningSecret", "CronSigningKey", "PayloadAccessKey"}


def worker_args(config: WorkerConfig) -> list[str]:
    """The `conveyor worker` flags that reproduce `config` (options left at default are
    left out, so the workers' own CONVEYOR_* environment still applies to them), secrets
    aside (worker_env)."""
    args = ["--no-create-queue"]
    for option in OPTIONS:
        value = getattr(config, option.field)
        if (option.name in _FLEET_OWNS or option.name in _SECRETS or value == option.default
                or value in ("", None)):
            continue
        if option.kind is bool:
            name = option.flag[2:]
            args.append(f"--{name}" if value else f"--no-{name}")
        else:
            args += [option.flag, str(value)]
    return args


def worker_env(config: WorkerConfig) -> dict[str, str]:
    """The CONVEYOR_* variables that carry `config`'s secrets to the workers."""
    return {option.env: getattr(config, option.field) for option in OPTIONS
            if option.name in _SECRETS and getattr(config, option.field)}


class AutoscaledFleet:
    """Runs a Scaler over a LocalActuator; `ready`, `stop()` and `run()` like a Worker."""

    def __init__(self, config: WorkerConfig, policy: Policy, *, log_dir: Path,
                 interval_s: float = 2.0, status_port: int = 0,
                 status_host: str = "127.0.0.1", actuator: Actuator | None = None) -> None:
        self.config = config
        self.policy = policy
        self.actuator = actuator or LocalActuator(worker_args(config), log_dir,
                                                  env=worker_env(config))
        self.interval_s = interval_s
        self.status_port = status_port
        self.status_host = status_host
        self.ready = asyncio.Event()
        self.scaler: Scaler | None = None
        self._stop_requested = False

    @property
    def status_url(self) -> str | None:
        """Where `conveyor scale status --url` finds this scaler (None without a port)."""
        return f"http://{self.status_host}:{self.status_port}" if self.status_port else None

    def stop(self) -> None:
        """Stop scaling; `run()` then drains every worker."""
        self._stop_requested = True
        if self.scaler is not None:
            self.scaler.stop()

    async def run(self) -> None:
        """Scale until stopped, then drain the fleet."""
        queue_url = self.config.worker_queue_url
        endpoint = self.config.endpoint_url or endpoint_from_queue_url(queue_url)
        async with SQSClient(endpoint, region=self.config.region or None) as sqs:
            self.scaler = Scaler(self.policy, sqs, queue_url, self.actuator,
                                 interval_s=self.interval_s,
                                 concurrency=self.config.http_connections,
                                 partitions=self.config.partitions)
            status = None
            if self.status_port:
                status = scale_status_server(self.scaler, self.status_host, self.status_port)
                await status.start()
            try:
                if self._stop_requested:
                    return
                self.ready.set()
                await self.scaler.run()
            finally:
                log.info("scaler stopping: draining %d workers",
                         len(getattr(self.actuator, "workers", {})))
                await self.actuator.close()
                if status is not None:
                    await status.stop()


def default_policy(config: WorkerConfig, bounds: tuple[int, int], *,
                   latency_s: float = 10.0, target: float | None = None) -> BacklogPolicy:
    """Backlog tracking for `conveyor up --autoscale`: scale in after a quiet minute."""
    low, high = bounds
    return BacklogPolicy(BacklogSettings(
        min_workers=low, max_workers=high, target=target,
        latency_s=None if target else latency_s, concurrency=config.http_connections,
        scale_in_cooldown_s=30.0, scale_in_stabilization_s=60.0))


def _status_port(config: WorkerConfig) -> int:
    """The port `conveyor scale status` looks at by default, or a free one if it is taken
    (StatusPort, `--status-port`, chooses one instead)."""
    with contextlib.suppress(OSError), socket.socket() as sock:
        sock.bind((config.status_host, DEFAULT_STATUS_PORT))
        return DEFAULT_STATUS_PORT
    return free_port(config.status_host)


def up_scaling(bounds_text: str, latency_s: float,
               data_dir: Path) -> Callable[[WorkerConfig], AutoscaledFleet]:
    """For `conveyor up --autoscale MIN:MAX`: parse the bounds now (ValueError if bad) and
    return what turns the final worker config into a fleet."""
    bounds = parse_bounds(bounds_text)

    def make(config: WorkerConfig) -> AutoscaledFleet:
        policy = default_policy(config, bounds, latency_s=latency_s)
        return AutoscaledFleet(config, policy, log_dir=data_dir / "workers",
                               status_port=config.status_port or _status_port(config),
                               status_host=config.status_host)

    return make
