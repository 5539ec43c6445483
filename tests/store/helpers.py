"""What the store tests share: messages made by hand, and a store opened for one scenario."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from conveyor.store import journal, postgres, sqlite
from conveyor.store.base import NewMessage
from tests.support import CREATED_SCHEMAS, POSTGRES_URL, require_postgres

# Every store: SQLite alone, SQLite behind the journal (the server's default), PostgreSQL.
KINDS = ["sqlite", "journal", "postgresql"]

# A queue's attributes as the service fills them in (the store reads these three).
ATTRIBUTES = {"MessageRetentionPeriod": "345600", "VisibilityTimeout": "30",
              "DelaySeconds": "0"}


def now_ms() -> int:
    return int(time.time() * 1000)


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
