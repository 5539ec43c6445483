"""`conveyor cron list | check | run`, registered on the top-level `conveyor` command."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from conveyor import logs
from conveyor._click import HTTP_URL, OneLineError
from conveyor.cron.cronfile import CronFileError, Task, load_cron_file
from conveyor.cron.jobs import iso

_FILE = click.argument("cron_file", required=False, default="cron.yaml",
                       type=click.Path(dir_okay=False, path_type=Path))


@click.group("cron")
def cron_group() -> None:
    """Periodic tasks (cron.yaml in Elastic Beanstalk's format, times in UTC)."""


@cron_group.command("check")
@_FILE
def check_command(cron_file: Path) -> None:
    """Validate CRON_FILE; print the problem and its line, exit 1 if it is invalid."""
    tasks = _load(cron_file)
    click.echo(f"{cron_file}: ok, {len(tasks)} task{'s' if len(tasks) != 1 else ''}")


@cron_group.command("list")
@_FILE
@click.option("--count", "-n", type=click.IntRange(1, 100), default=3, show_default=True,
              help="Next runs to show per task.")
@click.option("--after", metavar="ISO-TIME", help="Start from this UTC time instead of now, "
              "e.g. 2028-02-28T23:59.")
def list_command(cron_file: Path, count: int, after: str | None) -> None:
    """Show each task of CRON_FILE with its next runs (UTC)."""
    tasks = _load(cron_file)
    start = _parse_time(after) if after else datetime.now(UTC)
    if not tasks:
        click.echo(f"{cron_file}: no tasks")
    for task in tasks:
        click.echo(f"{task.name}  POST {task.url}  schedule {task.schedule.text!r}")
        for moment in _next_runs(task, start, count):
            click.echo(f"    {iso(moment)}  {moment:%a}")


@cron_group.command("run")
@click.option("--worker-queue-url", required=True, envvar="CONVEYOR_WORKER_QUEUE_URL",
              type=HTTP_URL,
              help="The worker queue the runs are enqueued to.")
@click.option("--cron", "cron_file", default="cron.yaml", show_default=True,
              envvar="CONVEYOR_CRON", help="cron.yaml, reloaded when it changes.")
@click.option("--cron-lease", default="server", show_default=True, envvar="CONVEYOR_CRON_LEASE",
              help="server or dynamodb:TABLE.")
@click.option("--cron-grace-period", type=click.IntRange(0, 86400), default=300,
              show_default=True, envvar="CONVEYOR_CRON_GRACE_PERIOD")
@click.option("--cron-lease-ttl", type=click.FloatRange(0.2, 600), default=10.0,
              show_default=True, envvar="CONVEYOR_CRON_LEASE_TTL")
@click.option("--cron-signing-key", default="", envvar="CONVEYOR_CRON_SIGNING_KEY",
              metavar="SECRET", help="Sign each scheduled-job message; the worker daemons "
              "of the queue need the same CronSigningKey.")
@click.option("--endpoint-url", envvar="CONVEYOR_ENDPOINT_URL", type=HTTP_URL,
              help="SQS endpoint (default: the queue URL's).")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False))
def run_command(worker_queue_url: str, cron_file: str, cron_lease: str,
                cron_grace_period: int, cron_lease_ttl: float, cron_signing_key: str,
                endpoint_url: str | None, log_level: str) -> None:
    """Run only the scheduler: campaign for the queue's cron lease and enqueue due runs.

    For deployments whose workers run without periodic tasks; `conveyor worker` runs the
    same scheduler itself.
    """
    from conveyor.cron.service import CronConfigError, check_cron_settings
    from conveyor.cron.standalone import run_scheduler
    from conveyor.runtime.loop import run_loop

    logs.setup(log_level)
    try:
        check_cron_settings(cron_file, cron_lease, worker_queue_url)
        run_loop(lambda: run_scheduler(
            worker_queue_url, cron_file=cron_file, lease_spec=cron_lease,
            grace_s=cron_grace_period, ttl_s=cron_lease_ttl, endpoint_url=endpoint_url,
            signing_key=cron_signing_key))
    except CronConfigError as exc:  # a bad cron file, or a lease backend it cannot use
        raise OneLineError(str(exc)) from None


def register(main: click.Group) -> None:
    """Add `cron` to the top-level `conveyor` command."""
    main.add_command(cron_group)


def _load(path: Path) -> tuple[Task, ...]:
    try:
        return load_cron_file(path)
    except CronFileError as exc:
        raise click.ClickException(str(exc)) from None


def _next_runs(task: Task, start: datetime, count: int) -> list[datetime]:
    runs, moment = [], start
    for _ in range(count):
        moment = task.schedule.next_after(moment)
        runs.append(moment)
    return runs


def _parse_time(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"not an ISO 8601 time: {text!r}", param_hint="--after") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
