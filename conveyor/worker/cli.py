"""`conveyor worker`, registered on the top-level `conveyor` group, and the hooks every
worker it runs gets."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from conveyor import logs
from conveyor._click import OneLineError
from conveyor.client import SQSError
from conveyor.cron.service import (
    CronConfigError,
    CronService,
    check_cron_config,
    check_cron_endpoint,
)
from conveyor.runtime.loop import install_signal_handlers, run_loop
from conveyor.worker.config import ConfigError, WorkerConfig, load_config
from conveyor.worker.daemon import HookFactory, Worker
from conveyor.worker.options import OPTIONS, Option

_LOG_LEVELS = click.Choice(["debug", "info", "warning", "error"], case_sensitive=False)
# What plugs into every worker Conveyor runs (here and in `conveyor up`): periodic tasks.
WORKER_HOOKS: tuple[HookFactory, ...] = (CronService.from_config,)


def click_option(option: Option) -> Any:
    """One click option per worker option; values stay raw so config.py validates them all."""
    default = "" if option.default is None else option.default
    if option.low is not None:
        detail = f"{option.help} [{option.range_text()}, default {default}; {option.env}]"
    else:
        detail = f"{option.help} [default {default!r}; {option.env}]"
    if option.kind is bool:
        name = option.flag[2:]
        return click.option(f"--{name}/--no-{name}", option.name, default=None, help=detail)
    return click.option(option.flag, option.name, default=None, help=detail, metavar="VALUE")


def worker_options(func: Any) -> Any:
    """Apply every worker option to a click command."""
    for option in reversed(OPTIONS):
        func = click_option(option)(func)
    return func


@click.command("worker")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False,
              path_type=Path), help="YAML/JSON file of options under their EB names.")
@click.option("--log-level", default="info", type=_LOG_LEVELS, show_default=True)
@worker_options
def worker_command(config_file: Path | None, log_level: str, **values: Any) -> None:
    """Run the worker daemon: POST each message of WorkerQueueURL to the app.

    Options use Elastic Beanstalk's names (aws:elasticbeanstalk:sqsd) in the config
    file; each has a flag and a CONVEYOR_* variable. Precedence: flag > variable > file.

    \b
    When the app is down (connection refused, request dropped, 502/503/504, or a
    failing --health-check-path), the worker stops receiving and holds what it has,
    extending its visibility, however long the outage; nothing is released, so no
    receive is spent. Once the app answers, the held messages go to it in order.
    A refused connection never counts towards MaxRetries; stopping the worker during
    an outage hands its messages back (one receive each).
    """
    try:
        config = load_config(values, os.environ, config_file)
        check_cron_config(config)
    except (ConfigError, CronConfigError) as exc:
        raise OneLineError(str(exc)) from None
    logs.setup(log_level)
    try:
        run_loop(lambda: serve(config))
    except SQSError as exc:  # not retryable: wrong queue URL, access denied, ...
        msg = f"cannot use queue {config.worker_queue_url}: {exc}"
        raise click.ClickException(msg) from None
    except CronConfigError as exc:  # a cron.yaml the endpoint cannot serve
        raise OneLineError(str(exc)) from None


async def serve(config: WorkerConfig) -> None:
    """Run one worker until a signal stops it."""
    await check_cron_endpoint(config.cron_file, config.cron_lease, config.worker_queue_url,
                              endpoint_url=config.endpoint_url, region=config.region)
    worker = Worker(config, hooks=WORKER_HOOKS)
    install_signal_handlers(worker.stop)
    await worker.run()


def register(main: click.Group) -> None:
    """Add `worker` to the top-level `conveyor` command."""
    main.add_command(worker_command)
