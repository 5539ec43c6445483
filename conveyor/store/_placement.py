"""Where each queue lives among a sharded store's shards: the catalog and the rule.

The catalog is one table on the first shard (the catalog shard): a row per queue naming
its id and its shard. Queue ids are handed out by the catalog shard's queue-id sequence
for every shard, so an id names one queue wherever it lives, and stays its own when the
queue moves (the move tool, _relocate.py). Every shard also records its own name, so
that a configuration that gives a database another shard's name is refused at start
rather than mixing two shards' queues.

The rule for a new queue: CRC-32 of "region/name" modulo the number of shards, over the
shards sorted by name. A hash, not "the shard with the fewest queues": every node works out the
same shard without counting anything (two nodes creating the same queue at once agree),
a queue deleted and created again comes back to its shard, and a partitioned logical
queue's partitions (client/partitions.py: NAME-p0 … NAME-p{N-1}) take consecutive shards
from their logical name's hash, so N partitions spread over the shards evenly. Load is
not weighed: the move tool moves a busy queue by hand.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import asyncpg

from conveyor.client.partitions import split_partition_name
from conveyor.store.base import StoreError

# The catalog, on the catalog shard; a shard's own name, on each shard. Created by the
# sharded store itself (idempotent), under an advisory lock: nodes start together.
_SCHEMA = """
-- Which shard holds each queue. A row may outlive its queue's creation by a crash (it is
-- written first), never the other way: a queue on a shard with no row here is adopted.
CREATE TABLE IF NOT EXISTS conveyor_placements (
    queue_id   BIGINT PRIMARY KEY,
    region     TEXT NOT NULL,
    name       TEXT NOT NULL,
    shard      TEXT NOT NULL,   -- the shard that serves the queue
    moving_from TEXT,           -- set while the move tool moves it here from that shard
    UNIQUE (region, name)
);
"""
_IDENTITY = """
-- This database's shard name (one row), and whether it holds the catalog.
CREATE TABLE IF NOT EXISTS conveyor_shard (name TEXT NOT NULL, catalog BOOLEAN NOT NULL);
"""
_SETUP_LOCK = 0x73686172  # advisory lock key: one node sets a shard up at a time

# What each table holds, by service/identity.py's record kinds (as the stores' TABLE_KINDS).
TABLE_KINDS = {"conveyor_placements": "queue", "conveyor_shard": "meta"}


@dataclass(frozen=True, slots=True)
class Placement:
    queue_id: int
    region: str
    name: str
    shard: str
    moving_from: str | None = None  # the shard the move tool is moving it away from


def shard_for(region: str, name: str, shards: list[str]) -> str:
    """The shard a new queue goes to (the module's docstring says why so)."""
    order = sorted(shards)
    split = split_partition_name(name)
    if split is not None:
        base, index = split
        return order[(zlib.crc32(f"{region}/{base}".encode()) + index) % len(order)]
    return order[zlib.crc32(f"{region}/{name}".encode()) % len(order)]


async def set_up_shard(db: asyncpg.Connection, name: str, catalog: bool) -> None:
    """Record the shard's name in its database (and the catalog's table on the catalog
    shard), or refuse a database that is another shard, or the catalog where none is."""
    await db.execute("SELECT pg_advisory_xact_lock($1)", _SETUP_LOCK)
    await db.execute(_IDENTITY)
    if catalog:
        await db.execute(_SCHEMA)
    row = await db.fetchrow("SELECT name, catalog FROM conveyor_shard")
    if row is None:
        await db.execute("INSERT INTO conveyor_shard VALUES ($1, $2)", name, catalog)
    elif row["name"] != name:
        raise StoreError(f"shard {name}: its database is shard {row['name']}; give each "
                         "shard the name it was first given")
    elif row["catalog"] != catalog:
        first = "is" if row["catalog"] else "is not"
        raise StoreError(f"shard {name}: its database {first} the catalog shard; list the "
                         "catalog shard first, and it alone")


class Catalog:
    """The placements, read and written on the catalog shard's connection `db`."""

    @staticmethod
    async def all(db: asyncpg.Connection) -> list[Placement]:
        return [Placement(*r) for r in await db.fetch(
            "SELECT queue_id, region, name, shard, moving_from FROM conveyor_placements")]

    @staticmethod
    async def by_name(db: asyncpg.Connection, region: str, name: str) -> Placement | None:
        row = await db.fetchrow("SELECT queue_id, region, name, shard, moving_from FROM"
                                " conveyor_placements WHERE region=$1 AND name=$2", region, name)
        return Placement(*row) if row else None

    @staticmethod
    async def by_id(db: asyncpg.Connection, queue_id: int) -> Placement | None:
        row = await db.fetchrow("SELECT queue_id, region, name, shard, moving_from FROM"
                                " conveyor_placements WHERE queue_id=$1", queue_id)
        return Placement(*row) if row else None

    @staticmethod
    async def place(db: asyncpg.Connection, placement: Placement) -> Placement:
        """Record the placement unless the name has one; the one it has now."""
        await db.execute("INSERT INTO conveyor_placements VALUES ($1, $2, $3, $4) ON CONFLICT"
                         " DO NOTHING", placement.queue_id, placement.region, placement.name,
                         placement.shard)
        found = await Catalog.by_name(db, placement.region, placement.name)
        assert found is not None  # no one deletes a placement but the queue's deletion
        return found

    @staticmethod
    async def renumber(db: asyncpg.Connection, region: str, name: str, queue_id: int) -> None:
        """The queue of the name has this id (its shard's row says so)."""
        await db.execute("UPDATE conveyor_placements SET queue_id=$3 WHERE region=$1 AND"
                         " name=$2", region, name, queue_id)

    @staticmethod
    async def adopt(db: asyncpg.Connection, placements: list[Placement]) -> list[Placement]:
        """Record queues found on a shard without a placement; those whose id another
        queue has (a shard that held queues before it joined) are returned, not recorded.
        The id sequence is moved past every id adopted."""
        clashes = []
        for p in placements:
            taken = await Catalog.by_id(db, p.queue_id)
            if taken is not None and (taken.region, taken.name) != (p.region, p.name):
                clashes.append(p)
                continue
            await db.execute("INSERT INTO conveyor_placements VALUES ($1, $2, $3, $4)"
                             " ON CONFLICT DO NOTHING", p.queue_id, p.region, p.name, p.shard)
        if placements:
            await db.execute("SELECT setval('conveyor_queues_id_seq', GREATEST($1, last_value))"
                             " FROM conveyor_queues_id_seq", max(p.queue_id for p in placements))
        return clashes

    @staticmethod
    async def serve_from(db: asyncpg.Connection, queue_id: int, shard: str,
                         moving_from: str | None) -> None:
        """The queue is served by `shard` from now on; `moving_from`: the shard its
        messages are still being moved away from (None once they all are)."""
        await db.execute("UPDATE conveyor_placements SET shard=$2, moving_from=$3"
                         " WHERE queue_id=$1", queue_id, shard, moving_from)

    @staticmethod
    async def remove(db: asyncpg.Connection, queue_id: int) -> None:
        await db.execute("DELETE FROM conveyor_placements WHERE queue_id=$1", queue_id)
