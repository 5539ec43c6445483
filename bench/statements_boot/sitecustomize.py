"""Counting a server's PostgreSQL statements, switched on from outside (bench/pg_statements.py).

Python imports this module at start-up when bench/statements_boot is on PYTHONPATH. With
BENCH_STATEMENTS_OUT set, every statement the server sends through asyncpg (parameterised
ones and plain `execute` strings alike, the pool's own included) is counted by its text,
and SIGUSR1 writes the counts so far as JSON to that path. Without the variable it does
nothing.
"""

from __future__ import annotations

import collections
import json
import os
import signal
from types import FrameType
from typing import Any

OUT_PATH = os.environ.get("BENCH_STATEMENTS_OUT")


def _arm(out_path: str) -> None:
    import asyncpg.connection

    counts: collections.Counter[str] = collections.Counter()
    connection = asyncpg.connection.Connection
    execute_with_args, execute = connection._execute, connection.execute

    async def _counted_with_args(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        counts[query] += 1
        return await execute_with_args(self, query, *args, **kwargs)

    async def _counted(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        if not args:  # with arguments, execute() goes through _execute: counted there
            counts[query] += 1
        return await execute(self, query, *args, **kwargs)

    def _dump(_signum: int, _frame: FrameType | None) -> None:
        tmp = f"{out_path}.tmp"
        with open(tmp, "w") as out:
            json.dump(dict(counts), out)
        os.replace(tmp, out_path)

    connection._execute = _counted_with_args
    connection.execute = _counted
    signal.signal(signal.SIGUSR1, _dump)


if OUT_PATH:
    _arm(OUT_PATH)
