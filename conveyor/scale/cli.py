"""`conveyor scale run | status | simulate`, registered on the top-level `conveyor` group."""

from __future__ import annotations

import contextlib
import json
import logging
import urllib.request
from pathlib import Path
from typing import Any

import click

from conveyor import logs
from conveyor._click import HTTP_URL
from conveyor.client.partitions import MAX_PARTITIONS
from conveyor.scale.policy import (
    BacklogPolicy,
    BacklogSettings,
    CpuSettings,
    CpuStepPolicy,
    Policy,
    StaticPolicy,
    parse_bounds,
)
from conveyor.scale.status import DEFAULT_STATUS_PORT, DEFAULT_STATUS_URL

log = logging.getLogger(__name__)


def _bounds(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[int, int]:
    try:
        return parse_bounds(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.group("scale")
def scale_group() -> None:
    """Autoscale the worker fleet on backlog per instance (visible messages ÷ workers).

    \b
    conveyor scale run --queue-url URL --app-url URL --workers 0:8 --latency 10
    conveyor scale status                     the running scaler's last decision
    conveyor scale simulate --plot-dir out/   compare policies on bundled traces
    """


@scale_group.command("run")
@click.option("--queue-url", required=True, type=HTTP_URL, help="The worker queue to watch.")
@click.option("--partitions", type=click.IntRange(0, MAX_PARTITIONS), default=0, show_default=True,
              envvar="CONVEYOR_PARTITIONS",
              help="The queue is a logical queue of this many partitions (the workers' "
              "Partitions): the backlog is theirs added up; 0 = a plain queue.")
@click.option("--app-url", default="http://localhost:80", show_default=True, type=HTTP_URL,
              help="AppURL of the local workers (local actuator).")
@click.option("--workers", "bounds", default="0:4", show_default=True, callback=_bounds,
              metavar="MIN:MAX", help="Fleet bounds; MIN may be 0.")
@click.option("--policy", "policy_name", type=click.Choice(["backlog", "cpu", "static"]),
              default="backlog", show_default=True)
@click.option("--target", type=float, help="Backlog per instance to keep (messages).")
@click.option("--latency", "latency_s", type=float, default=10.0, show_default=True,
              help="Acceptable latency (s); target = latency × concurrency ÷ processing time.")
@click.option("--concurrency", type=int, default=1, show_default=True,
              help="Jobs one worker runs at once (its --http-connections).")
@click.option("--processing-time", "processing_s", type=float, default=1.0,
              show_default=True, help="Assumed processing time until workers report one.")
@click.option("--tolerance", type=float, default=0.1, show_default=True)
@click.option("--scale-out-cooldown", type=float, default=0.0, show_default=True)
@click.option("--scale-in-cooldown", type=float, default=30.0, show_default=True)
@click.option("--stabilization", type=float, default=60.0, show_default=True,
              help="Scale-in stabilization window (s).")
@click.option("--count-in-flight/--no-count-in-flight", default=False, show_default=True)
@click.option("--count-delayed/--no-count-delayed", default=False, show_default=True)
@click.option("--interval", "interval_s", type=float, default=2.0, show_default=True,
              help="Seconds between decisions.")
@click.option("--actuator", type=click.Choice(["local", "kubernetes"]), default="local",
              show_default=True)
@click.option("--deployment", help="Deployment to scale (kubernetes actuator).")
@click.option("--namespace", help="Its namespace (default: the pod's own).")
@click.option("--worker-status-port", type=int,
              help="The worker pods' --status-port: read each pod's /health so busy pods "
              "are protected on scale-in (kubernetes actuator).")
@click.option("--log-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("conveyor-data/workers"), show_default=True)
@click.option("--status-port", type=int, default=DEFAULT_STATUS_PORT, show_default=True,
              help="Port of /metrics and /status (0 = off).")
@click.option("--status-host", default="127.0.0.1", show_default=True)
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False))
@click.argument("worker_args", nargs=-1, type=click.UNPROCESSED)
def run_command(queue_url: str, app_url: str, bounds: tuple[int, int], policy_name: str,
                worker_args: tuple[str, ...], log_level: str, **options: Any) -> None:
    """Run the scaler. Arguments after `--` go to each local `conveyor worker`."""
    from conveyor.runtime.loop import run_loop
    from conveyor.scale.runner import run_scaler

    policy = build_policy(policy_name, bounds, options)
    logs.setup(log_level)
    if options["actuator"] == "kubernetes" and not options["deployment"]:
        raise click.UsageError("--actuator kubernetes needs --deployment NAME")
    with contextlib.suppress(KeyboardInterrupt):
        run_loop(lambda: run_scaler(policy, queue_url, app_url, worker_args, options))


def build_policy(name: str, bounds: tuple[int, int], options: dict[str, Any]) -> Policy:
    """The policy `conveyor scale run` asked for."""
    low, high = bounds
    if name == "static":
        return StaticPolicy(high)
    if name == "cpu":
        return CpuStepPolicy(CpuSettings(min_workers=max(1, low), max_workers=high))
    try:
        return BacklogPolicy(BacklogSettings(
            min_workers=low, max_workers=high, target=options["target"],
            latency_s=None if options["target"] else options["latency_s"],
            concurrency=options["concurrency"], default_processing_s=options["processing_s"],
            tolerance=options["tolerance"], scale_out_cooldown_s=options["scale_out_cooldown"],
            scale_in_cooldown_s=options["scale_in_cooldown"],
            scale_in_stabilization_s=options["stabilization"],
            count_in_flight=options["count_in_flight"],
            count_delayed=options["count_delayed"]))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


@scale_group.command("status")
@click.option("--url", default=DEFAULT_STATUS_URL, show_default=True, type=HTTP_URL,
              help="The scaler's status address (conveyor scale run --status-port).")
@click.option("--json", "as_json", is_flag=True, help="Print the raw JSON.")
def status_command(url: str, as_json: bool) -> None:
    """Show the running scaler's last decision and its workers."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/status", timeout=5) as resp:
            report = json.load(resp)
    except OSError as exc:
        msg = f"no scaler answers at {url}: {exc}"
        raise click.ClickException(msg) from None
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(format_status(report))


def format_status(report: dict[str, Any]) -> str:
    """Human-readable lines of a /status report."""
    lines = [f"queue {report['queue']}  policy {report['policy']}"]
    if "desired" in report:
        lines.append(
            f"  depth {report['visible']} visible, {report['in_flight']} in flight, "
            f"{report['delayed']} delayed → backlog {report['backlog']}")
        lines.append(
            f"  workers {report['in_service']} in service, {report['pending']} starting, "
            f"{report['busy']} busy; metric {report['metric']} per instance, "
            f"target {report['target']}")
        lines.append(f"  desired {report['desired']} (was {report['current']}): "
                     f"{report['reason']}")
    for worker in report.get("workers", []):
        avg = worker.get("processing_avg_s")
        avg_text = f"{avg:.3f}s avg" if avg is not None else "no jobs yet"
        lines.append(f"  - {worker['id']:<6} {worker['state']:<9} "
                     f"{'busy' if worker['busy'] else 'idle':<5} {worker['processed']} done, "
                     f"{avg_text}")
    return "\n".join(lines)


def register(main: click.Group) -> None:
    """Add `scale` to the top-level `conveyor` command."""
    from conveyor.scale.simulate_cli import simulate_command

    scale_group.add_command(simulate_command)
    main.add_command(scale_group)
