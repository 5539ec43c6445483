"""`conveyor shards`: where each queue lives among the shards, and moving one elsewhere.

The operator's tool for a sharded store (store/shards.py): it opens the shards as a node
does, from the server's config file (`shards:`) or --shard options, while the nodes keep
serving. `move` loses nothing (store/_relocate.py); one cut short is finished by running
it again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from conveyor import logs
from conveyor.server.cli import shard_settings
from conveyor.server.config import ConfigError, load
from conveyor.store._relocate import relocate
from conveyor.store.base import StoreError
from conveyor.store.postgres import PostgresStore
from conveyor.store.shards import ShardedStore

T = TypeVar("T")
_POOL = 2  # connections per shard: the tool makes one call at a time


def _shard_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option("--shard", "shards", multiple=True, metavar="NAME=postgresql://...",
                           envvar="CONVEYOR_SHARDS",
                           help="The shards, as the server is given them (repeatable).")(command)
    return click.option("--config", "config_path", envvar="CONVEYOR_CONFIG",
                        type=click.Path(exists=True, dir_okay=False, path_type=Path),
                        help="The server's config file, for its `shards`.")(command)


def _on_shards(config_path: Path | None, given: tuple[str, ...],
               work: Callable[[ShardedStore], Awaitable[T]]) -> T:
    try:
        shards = shard_settings((load(config_path) if config_path else {}).get("shards") or {},
                         given)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    if not shards:
        raise click.UsageError("give the shards: --config FILE or --shard NAME=URL ...")

    async def run() -> T:
        store = ShardedStore({n: PostgresStore(url, _POOL) for n, url in shards.items()})
        await store.open()
        try:
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None


@click.group("shards")
def shards_group() -> None:
    """Queues on several PostgreSQL primaries: list where each lives, move one."""


@shards_group.command("list")
@_shard_options
def list_command(config_path: Path | None, shards: tuple[str, ...]) -> None:
    """Each queue with its region and the shard that serves it."""
    async def work(store: ShardedStore) -> None:
        for queue in await store.list_queues(None, ""):
            placement = await store.placement_of(queue.id)
            where = placement.shard if placement else "?"
            moving = f" (moving from {placement.moving_from})" if placement and \
                placement.moving_from else ""
            click.echo(f"{queue.region}\t{queue.name}\t{where}{moving}")

    _on_shards(config_path, shards, work)


@shards_group.command("move")
@click.argument("queue")
@click.option("--to", "to", required=True, metavar="SHARD", help="The shard to move it to.")
@click.option("--region", default="us-east-1", show_default=True)
@_shard_options
def move_command(queue: str, to: str, region: str, config_path: Path | None,
                 shards: tuple[str, ...]) -> None:
    """Move QUEUE (its name) to another shard while nodes serve it, losing nothing."""
    logs.setup("info")
    moved = _on_shards(config_path, shards,
                       lambda store: relocate(store, region, queue, to, int(time.time())))
    click.echo(f"{queue} is on shard {to} ({moved} message(s) copied)")
