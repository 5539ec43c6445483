"""`conveyor server`: options, config file, and the uvicorn process."""

from __future__ import annotations

import ipaddress
import logging
import sys
from pathlib import Path
from typing import Any

import click

from conveyor.server.config import ConfigError, declare_queues, load, queue_declarations
from conveyor.sqs.limits import MODES

DEFAULT_PORT = 9324  # ElasticMQ's port: existing local-SQS setups point here already


@click.command("server")
@click.option("--host", envvar="CONVEYOR_HOST", help="Address to listen on  [default: 127.0.0.1]")
@click.option("--port", type=int, envvar="CONVEYOR_PORT", help=f"[default: {DEFAULT_PORT}]")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              envvar="CONVEYOR_DATA_DIR", help="Where the SQLite store lives  "
              "[default: ./conveyor-data]")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False,
              path_type=Path), envvar="CONVEYOR_CONFIG",
              help="YAML file with these settings and queues to create at start.")
@click.option("--mode", type=click.Choice(sorted(MODES)), envvar="CONVEYOR_MODE",
              help="strict: Amazon's limits and cool-downs; relaxed: for test suites "
              "[default: strict]")
@click.option("--account-id", envvar="CONVEYOR_ACCOUNT_ID", help="[default: 000000000000]")
@click.option("--region", envvar="CONVEYOR_REGION",
              help="Region for unsigned requests  [default: us-east-1]")
@click.option("--access-key", "access_keys", multiple=True, metavar="KEY:SECRET",
              help="Accept SigV4 requests signed with this key (repeatable). "
              "Without any, requests are not authenticated.")
@click.option("--allow-open", is_flag=True, default=None,
              help="Listen on a non-loopback address without access keys.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              envvar="CONVEYOR_LOG_LEVEL", help="[default: info]")
@click.option("--dev-clock", is_flag=True, hidden=True,
              help="Tests only: POST /_conveyor/clock?advance=SECONDS moves server time.")
def server_command(config_path: Path | None, **options: Any) -> None:
    """Run the SQS-compatible queue server on a durable SQLite store."""
    try:
        settings = _settings(config_path, options)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    run(settings)


def _settings(config_path: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    file = load(config_path) if config_path else {}
    merged = {"host": "127.0.0.1", "port": DEFAULT_PORT, "data_dir": "conveyor-data",
              "mode": "strict", "account_id": "000000000000", "region": "us-east-1",
              "log_level": "info", "allow_open": False, **file}
    for key, value in options.items():
        if value not in (None, ()):
            merged[key] = value
    keys = dict(file.get("access_keys") or {})
    for pair in options.get("access_keys") or ():
        key, sep, secret = pair.partition(":")
        if not sep or not key or not secret:
            raise ConfigError(f"--access-key {pair!r}: expected KEY:SECRET")
        keys[key] = secret
    merged["access_keys"] = keys
    merged["queues"] = queue_declarations(file.get("queues"))
    if merged["mode"] not in MODES:
        raise ConfigError(f"mode: expected one of {sorted(MODES)}")
    if not keys and not merged["allow_open"] and not _is_loopback(merged["host"]):
        raise ConfigError(
            f"refusing to listen on {merged['host']} without access keys: anyone who can reach "
            "it could read and delete messages. Pass --access-key KEY:SECRET, or --allow-open "
            "if the network is trusted.")
    return merged


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(settings: dict[str, Any]) -> None:
    import uvicorn

    from conveyor.clock import Clock
    from conveyor.server.app import App, ServerSettings
    from conveyor.service import Service
    from conveyor.store.base import StoreError
    from conveyor.store.sqlite import SqliteStore

    logging.basicConfig(level=settings["log_level"].upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        store = SqliteStore(settings["data_dir"])
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    service = Service(store, MODES[settings["mode"]], Clock(), settings["account_id"])
    server_settings = ServerSettings(settings["account_id"], settings["region"],
                                     settings["access_keys"], settings.get("dev_clock") or False)

    async def startup() -> None:
        await declare_queues(service, settings["queues"], settings["account_id"],
                             settings["region"])

    app = App(service, server_settings, on_startup=startup)
    logging.getLogger("conveyor.server").info(
        "Conveyor listening on http://%s:%s (store: %s, mode: %s)", settings["host"],
        settings["port"], Path(settings["data_dir"]).resolve(), settings["mode"])
    config = uvicorn.Config(app, host=settings["host"], port=settings["port"],
                            loop="uvloop" if sys.platform != "win32" else "asyncio",
                            http="httptools", lifespan="on", access_log=False,
                            log_level="warning", timeout_keep_alive=75,
                            h11_max_incomplete_event_size=64 * 1024)
    server = uvicorn.Server(config)
    server.run()
    if not server.started:  # startup failed (port taken, bad queue declaration): say so
        sys.exit(1)
