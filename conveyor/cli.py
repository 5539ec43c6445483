"""The one `conveyor` command. Each subcommand lives beside the part it runs."""

from __future__ import annotations

import os

import click

from conveyor import __version__, build, logs
from conveyor.admin import register as register_admin_commands
from conveyor.cron.cli import register as register_cron_commands
from conveyor.scale.cli import register as register_scale_commands
from conveyor.server.cli import server_command
from conveyor.server.shards_cli import shards_group
from conveyor.up.cli import up_command
from conveyor.worker.cli import register as register_worker_commands
from conveyor.worker.partitions_cli import register as register_partition_commands


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="conveyor",
                      message=f"%(prog)s %(version)s ({build.name()})")
@click.option("--log-format", type=click.Choice(logs.FORMATS), envvar=logs.ENV, default="text",
              show_default=True, help="Log lines as plain text or one JSON object each "
              "(also CONVEYOR_LOG_FORMAT; processes started by this one inherit it).")
def main(log_format: str) -> None:
    """Conveyor: an SQS-compatible queue server and worker tier.

    \b
    conveyor up        server + worker queue + worker daemon in one command
    conveyor server    run the queue server (SQLite in --data-dir, or PostgreSQL)
    conveyor worker    run the worker daemon that POSTs each message to your app
    conveyor cron      periodic tasks from cron.yaml: list, check, run
    conveyor scale     autoscale the worker fleet: run, status, simulate
    conveyor queue     list, create (also partitioned), show, purge, delete, redrive
    conveyor message   send and receive messages
    conveyor shards    queues on several PostgreSQL primaries: list, move
    """
    os.environ[logs.ENV] = log_format  # for logs.setup, here and in child processes


main.add_command(up_command)
main.add_command(server_command)
main.add_command(shards_group)
register_worker_commands(main)
register_scale_commands(main)
register_cron_commands(main)
register_admin_commands(main)
register_partition_commands()
