"""What the cluster tests share."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from tests.support import POSTGRES_URL, ServerProcess, isolated, require_postgres


@contextlib.contextmanager
def keyed_nodes(tmp_path: Path, key: str, secret: str,
                *extra: str) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two nodes on one PostgreSQL schema with the same access key (plus `extra` args)."""
    require_postgres()
    args = [*isolated(["--store", POSTGRES_URL]), "--mode", "relaxed", *extra,
            "--access-key", f"{key}:{secret}"]
    a = ServerProcess(tmp_path / "a", *args).start()
    try:
        b = ServerProcess(tmp_path / "b", *args).start()
        try:
            yield a, b
        finally:
            b.stop()
    finally:
        a.stop()
