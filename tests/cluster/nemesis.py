"""A nemesis that fails a PostgreSQL primary over to its standby, back and forth.

Each failover does what an HA manager (Patroni with `synchronous_mode: true`) does, at
once rather than after its detection delay: the primary dies (`pg_ctl -m immediate`, as
in a crash), the standby is promoted, and, having no standby of its own yet, runs without
a synchronous one; the dead primary is rebuilt from the new one as its standby
(pg_basebackup) and, once it streams, named synchronous again. The next failover waits
for that, so that each promotes a standby that had every acknowledged commit.

Before it dies, the primary's WAL sender is held (SIGSTOP) for `stall_s`, as a slow or
cut link to the standby would: with synchronous replication, commits meanwhile wait and
are in flight when the primary dies (their callers must hear a failure, not an
acknowledgement); with `sync=False` (asynchronous throughout: a commit is acknowledged
once it is on the primary's disk) they are acknowledged and lost, the window measured.
The held sender is killed with the primary, so that what it held back never leaves.

With `switchovers=True` every other failover is a demotion instead of a crash, as an HA
manager's switchover or fencing does: the primary stays up but turns read-only (its
sessions too: `default_transaction_read_only`), so the nodes' connections to it fail
their writes while no host takes writes; then the standby is promoted and the old primary
shut down and rebuilt.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import dataclass, field

import asyncpg

from tests.pg_instance import PostgresInstance

SYNC_WITHIN_S = 60.0  # a bound on a hang: a rebuilt standby streams within seconds


@dataclass
class Failover:
    """When one failover's steps happened (monotonic seconds)."""

    kind: str  # "crash" | "demote"
    died: float  # the primary was killed, or turned read-only
    promoted: float
    rebuilt: float
    # WAL the standby had not flushed when the primary died (bytes).
    lag_bytes: int


@dataclass
class Nemesis:
    primary: PostgresInstance
    standby: PostgresInstance
    sync: bool = True
    stall_s: float = 0.3
    switchovers: bool = True
    failovers: list[Failover] = field(default_factory=list)

    def setup(self) -> None:
        """Replication as configured: synchronous (every commit waits for the standby's
        flush) or asynchronous; returns once the standby streams."""
        self._name_standby()

    def fail_over(self) -> Failover:
        """Crash (or demote) the primary, promote the standby, rebuild the old primary as its
        standby."""
        demote = self.switchovers and len(self.failovers) % 2 == 1
        lag, died = self._demote() if demote else self._crash()
        self.standby.promote()
        if demote:
            self.primary.stop()
        promoted = time.monotonic()
        old, self.primary = self.primary, self.standby
        if self.sync:  # Patroni's non-strict synchronous mode: no standby, no waiting for one
            _sql(self.primary, "ALTER SYSTEM SET synchronous_standby_names = ''",
                 "SELECT pg_reload_conf()")
        self.standby = old.rebuild_as_standby_of(self.primary)
        self._name_standby()
        done = Failover("demote" if demote else "crash", died, promoted, time.monotonic(),
                        int(lag or 0))
        self.failovers.append(done)
        return done

    def _crash(self) -> tuple[int, float]:
        """Hold the WAL sender, then kill the primary (as `pg_ctl -m immediate` does: SIGQUIT
        to the postmaster) and the held sender with it. What the standby had not flushed
        (bytes), and when the primary was killed."""
        sender = _sql(self.primary, "SELECT pid FROM pg_stat_replication")
        assert isinstance(sender, int)
        os.kill(sender, signal.SIGSTOP)
        time.sleep(self.stall_s)
        lag = _sql(self.primary, "SELECT (pg_current_wal_lsn() - flush_lsn)::bigint"
                                 " FROM pg_stat_replication")
        postmaster = int((self.primary.data / "postmaster.pid").read_text().split()[0])
        died = time.monotonic()
        os.kill(postmaster, signal.SIGQUIT)
        os.kill(sender, signal.SIGKILL)
        deadline = time.monotonic() + SYNC_WITHIN_S
        while (self.primary.data / "postmaster.pid").exists():  # removed as it exits
            assert time.monotonic() < deadline, "the primary did not die"
            time.sleep(0.01)
        return int(lag or 0), died

    def _demote(self) -> tuple[int, float]:
        """Turn the primary read-only, sessions and all, and leave it so for `stall_s`."""
        died = time.monotonic()
        _sql(self.primary, "ALTER SYSTEM SET default_transaction_read_only = on",
             "SELECT pg_reload_conf()")
        time.sleep(self.stall_s)
        return 0, died

    def _name_standby(self) -> None:
        names = "'*'" if self.sync else "''"
        _sql(self.primary, f"ALTER SYSTEM SET synchronous_standby_names = {names}",
             "ALTER SYSTEM SET synchronous_commit = 'on'", "SELECT pg_reload_conf()")
        wanted = "sync" if self.sync else "async"
        deadline = time.monotonic() + SYNC_WITHIN_S
        while _sql(self.primary, "SELECT sync_state FROM pg_stat_replication"
                                 " WHERE state = 'streaming'") != wanted:
            assert time.monotonic() < deadline, "the rebuilt standby never streamed"
            time.sleep(0.05)
        # A commit that waited for the standby: everything before it is on the standby too.
        _sql(self.primary, "SELECT txid_current()")


def _sql(instance: PostgresInstance, *statements: str) -> object:
    """Run `statements` on `instance` (each its own transaction); the last one's value."""
    async def run() -> object:
        conn = await asyncpg.connect(instance.url, timeout=10)
        try:
            value = None
            for statement in statements:
                value = await conn.fetchval(statement)
            return value
        finally:
            await conn.close()
    return asyncio.run(run())
