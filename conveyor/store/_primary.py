"""Reaching the primary among the servers a multi-host DSN names, one host at a time.

asyncpg tries a multi-host DSN's hosts in order within one timeout for them all: a host
that drops packets instead of refusing them (its machine died, a network partition) uses
the whole timeout up, and the hosts after it are never tried, so a node would never reach
the standby promoted in its place. libpq gives each host its own `connect_timeout`; so
does this, and it tries the host that took the last connection first, so that a dead host
early in the list costs the first connection after a failover, not every one.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

# Errors after which the next host is tried (libpq moves on after any failure to connect).
_CONNECT_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError,
                   asyncpg.InternalClientError)


class Primary:
    """Connections to whichever of `dsn`'s hosts accepts one on its terms (with
    `target_session_attrs=read-write` in the DSN: the one that takes writes)."""

    def __init__(self, dsn: str, host_timeout_s: float) -> None:
        self.hosts = split_hosts(dsn)
        self.host_timeout_s = host_timeout_s
        self._last = 0  # index of the host that took the last connection

    async def connect(self, *_dsn: object, **kwargs: Any) -> asyncpg.Connection:
        """A new connection, `asyncpg.connect`'s keyword arguments but `timeout` (given
        per host here). Also the pool's `connect` callback, which passes the DSN first."""
        kwargs.pop("timeout", None)
        error: BaseException | None = None
        for n in [*range(self._last, len(self.hosts)), *range(self._last)]:
            try:
                conn = await asyncpg.connect(self.hosts[n], timeout=self.host_timeout_s,
                                             **kwargs)
            except _CONNECT_ERRORS as exc:
                error = exc
                continue
            self._last = n
            return conn
        assert error is not None
        raise error


def split_hosts(dsn: str) -> list[str]:
    """`postgresql://u@h1:1,h2:2/db?x` -> one URL per host, in order, the rest kept."""
    parts = urlsplit(dsn)
    user, at, hosts = parts.netloc.rpartition("@")
    return [urlunsplit(parts._replace(netloc=f"{user}{at}{host}"))
            for host in hosts.split(",")]
