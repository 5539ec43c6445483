"""What the store tests share: messages made by hand, and a store opened for one scenario."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from conveyor.service import rules
from conveyor.service.messages import Redrive, change_visibility_in, receive_from
from conveyor.store import journal, postgres, sqlite
from conveyor.store.base import Counts, Handle, NewMessage, QueueRecord, StoredMessage
from tests.support import CREATED_SCHEMAS, POSTGRES_URL, require_postgres

# Every store: SQLite alone, SQLite behind the journal (the server's default), PostgreSQL.
KINDS = ["sqlite", "journal", "postgresql"]

# A queue's attributes as the service fills them in (the store reads these three).
ATTRIBUTES = {"MessageRetentionPeriod": "345600", "VisibilityTimeout": "30",
              "DelaySeconds": "0"}


def now_ms() -> int:
    return int(time.time() * 1000)


async def receive(store: Any, queue: QueueRecord, max_messages: int, visibility_ms: int,
                  now_ms: int, redrive: Redrive | None) -> list[StoredMessage]:
    """A receive as the service makes it: the store's claim, the rules' decisions."""
    stored, _ = await receive_from(store, queue, max_messages, visibility_ms, now_ms, redrive,
                                   rules.picking())
    return stored


async def change_visibility(store: Any, queue: QueueRecord, handles: list[Handle],
                            now_ms: int) -> list[str]:
    return await change_visibility_in(store, queue, handles, now_ms)


async def counts(store: Any, queue: QueueRecord, now_ms: int) -> Counts:
    return rules.counts(await store.tally(queue, now_ms, rules.retention_cutoff_ms(queue, now_ms)))


async def expire(store: Any, now_ms: int) -> int:
    """The retention sweep as the service runs it, over every queue."""
    queues = await store.list_queues(None, "")
    return await store.expire({q.id: rules.retention_cutoff_ms(q, now_ms) for q in queues},
                              now_ms)


async def movable(store: Any, queue: QueueRecord, limit: int,
                  now_ms: int) -> list[StoredMessage]:
    return await store.movable(queue, limit, now_ms, rules.retention_cutoff_ms(queue, now_ms))


def message(body: str, sent_ms: int, visible_at_ms: int | None = None,
            group_id: str | None = None) -> NewMessage:
    """A message named by its body, visible when sent unless told otherwise."""
    return NewMessage(message_id=body, body=body, md5_body="", attributes=None,
                      md5_attributes=None, system=None, sent_ms=sent_ms, sender_id="test",
                      visible_at_ms=sent_ms if visible_at_ms is None else visible_at_ms,
                      group_id=group_id)


def run(kind: str, tmp_path: Path, scenario: Callable[[Any], Awaitable[None]]) -> None:
    """Run `scenario` on a fresh store: "sqlite" or "journal" in tmp_path, or "postgresql"
    in a schema of its own (dropped at the end of the session)."""
    async def main() -> None:
        if kind == "sqlite":
            store: Any = sqlite.SqliteStore(tmp_path)
        elif kind == "journal":
            store = journal.JournaledStore(tmp_path)
        else:
            schema = "t_" + os.urandom(6).hex()
            CREATED_SCHEMAS.append(schema)
            store = await postgres.PostgresStore(f"{POSTGRES_URL}?schema={schema}").open()
        try:
            await scenario(store)
        finally:
            await store.close()

    if kind == "postgresql":
        require_postgres()
    asyncio.run(main())
