"""Bounded SQS load generator: the three scenarios against one endpoint.

    python bench/sqs_load.py --endpoint http://127.0.0.1:9324 --server-pid 1234

runs the batched and unbatched pipelines and the long-poll pick-up test and prints
the results as JSON. Only loopback endpoints are accepted. bench/run.py uses the
same functions to measure several servers side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import procstat
from longpoll import LongPollConfig, run_longpoll
from pipeline import PipelineConfig, run_pipeline

SCENARIOS = ("batched", "unbatched", "longpoll")
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


@dataclass(frozen=True)
class LoadSettings:
    """The knobs shared by every scenario."""

    clients: int = 2
    duration_s: float = 5.0
    samples: int = 200
    shared_queue: bool = False
    # Messages sent but not yet deleted that a queue may hold before its producer waits:
    # enough to keep producer and consumer busy, few enough that latency is the pipeline's
    # (by Little's law a deeper backlog only adds backlog / throughput to every message).
    backlog_batched: int = 50
    backlog_unbatched: int = 5

    def pipeline(self, endpoint: str, batched: bool) -> PipelineConfig:
        return PipelineConfig(
            endpoint=endpoint, batched=batched, clients=self.clients,
            duration_s=self.duration_s, shared_queue=self.shared_queue,
            backlog=self.backlog_batched if batched else self.backlog_unbatched,
        )


def require_loopback(endpoint: str) -> None:
    """The benchmark only ever sends traffic to this machine."""
    host = urlsplit(endpoint).hostname or ""
    if host not in LOOPBACK_HOSTS and not host.startswith("127."):
        raise SystemExit(f"refusing to load {endpoint}: only loopback endpoints are allowed")


def run_scenario(scenario: str, endpoint: str, settings: LoadSettings,
                 server_cpu_s: Callable[[], float]) -> dict[str, Any]:
    """Run one scenario; the result as a plain dict."""
    require_loopback(endpoint)
    if scenario == "longpoll":
        cfg = LongPollConfig(endpoint=endpoint, samples=settings.samples)
        return run_longpoll(cfg, server_cpu_s).as_dict()
    cfg = settings.pipeline(endpoint, batched=scenario == "batched")
    return run_pipeline(cfg, server_cpu_s).as_dict()


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = LoadSettings()
    parser.add_argument("--clients", type=int, default=defaults.clients,
                        help="producer processes, and as many consumers (default %(default)s)")
    parser.add_argument("--duration", type=float, default=defaults.duration_s,
                        help="seconds of sending per pipeline (default %(default)s)")
    parser.add_argument("--samples", type=int, default=defaults.samples,
                        help="long-poll pick-up samples (default %(default)s)")
    parser.add_argument("--shared-queue", action="store_true",
                        help="all clients on one queue instead of a queue per pair")
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))


def settings_from(args: argparse.Namespace) -> LoadSettings:
    return LoadSettings(clients=args.clients, duration_s=args.duration, samples=args.samples,
                        shared_queue=args.shared_queue)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", required=True, help="e.g. http://127.0.0.1:9324")
    parser.add_argument("--server-pid", type=int,
                        help="the server's PID, to measure its CPU seconds from /proc")
    add_load_arguments(parser)
    args = parser.parse_args(argv)
    require_loopback(args.endpoint)
    pid = args.server_pid

    def server_cpu_s() -> float:
        return procstat.tree_cpu_s(pid) if pid else 0.0

    settings = settings_from(args)
    results = {s: run_scenario(s, args.endpoint, settings, server_cpu_s) for s in args.scenarios}
    json.dump(results, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
