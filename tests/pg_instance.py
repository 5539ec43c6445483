"""A throw-away PostgreSQL server of a test's own, to stop and restart at will.

Never the shared one on 127.0.0.1:5432: this one lives in a temporary directory, on a
free port, with trust authentication, and is removed afterwards. As root, PostgreSQL's
tools run as the `postgres` user (PostgreSQL refuses to run as root).

For failovers: `standby_of` makes a streaming standby of a running instance with
pg_basebackup, `crash` stops an instance the way a power cut would (`-m immediate`: no
shutdown checkpoint, clients cut off), `promote` makes a standby the primary, and
`rebuild_as_standby_of` turns a crashed old primary into the new primary's standby.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests.netns import Namespace
from tests.support import free_port


def postgres_bin_dir() -> Path | None:
    """The directory of initdb / pg_ctl: on PATH, else Debian's versioned directory."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


def _unavailable() -> str | None:
    """Why an instance cannot be made here, or None."""
    if postgres_bin_dir() is None:
        return "initdb not found (install PostgreSQL's server package)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` user to run PostgreSQL as"
        if shutil.which("runuser") is None:
            return "running as root and runuser is missing"
    return None


def as_postgres() -> dict[str, Any]:
    """Popen's arguments that run a child as the `postgres` user when we are root (as
    PostgreSQL, PgBouncer and Patroni must be: they refuse root), else none. The child
    itself drops to it, so that its PID is the server's own."""
    if os.geteuid() != 0:
        return {}
    entry = pwd.getpwnam("postgres")
    return {"user": entry.pw_uid, "group": entry.pw_gid,
            "env": {**os.environ, "HOME": entry.pw_dir}}


def own_as_postgres(path: Path) -> None:
    """Give `path` to the `postgres` user when we are root, for a child run as_postgres()."""
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        os.chown(path, entry.pw_uid, entry.pw_gid)


def require_own_postgres() -> None:
    """Skip without PostgreSQL's server tools on a developer's machine; fail in CI."""
    reason = _unavailable()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"cannot start a PostgreSQL instance: {reason} (CI must not skip)")
    pytest.skip(f"cannot start a PostgreSQL instance: {reason}")


class PostgresInstance:
    """initdb + pg_ctl on a temporary directory; `url` names its `postgres` database.
    With `netns` it runs inside that network namespace, listening on all of its addresses
    (its links' ends: multi_host_url's `via`); `url` then goes through its Unix socket,
    which the namespace does not fence off."""

    def __init__(self, settings: dict[str, str] | None = None,
                 netns: Namespace | None = None) -> None:
        bin_dir = postgres_bin_dir()
        assert bin_dir is not None, "call require_own_postgres() first"
        self.bin_dir = bin_dir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="conveyor-pg-"))
        self.data = self.root / "data"
        self.netns = netns
        self.url = (f"postgresql://postgres@/postgres?host={self.root}&port={self.port}"
                    if netns else f"postgresql://postgres@127.0.0.1:{self.port}/postgres")
        # Server settings given on its command line (`-c name=value`), beyond the defaults.
        self.settings = dict(settings or {})
        self._as_postgres = os.geteuid() == 0
        own_as_postgres(self.root)

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bin_dir / tool), *args]
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        if self.netns:
            cmd = [*self.netns.prefix(), *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} failed: {done.stdout}{done.stderr}")

    def create(self) -> PostgresInstance:
        # --no-sync and fsync=off: the tests stop it cleanly (a checkpoint), never crash it.
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust",
                  "--no-sync", "-E", "UTF8")
        if self.netns:  # nodes connect over the namespace's links, not loopback
            with (self.data / "pg_hba.conf").open("a") as hba:
                hba.write("host all all 0.0.0.0/0 trust\n")
        return self.start()

    def start(self) -> PostgresInstance:
        # fsync=off even for the crash tests: `-m immediate` kills the server's processes,
        # not the machine, so what they wrote is in the kernel's cache all the same.
        listen = "'*'" if self.netns else "127.0.0.1"
        options = (f"-p {self.port} -k {self.root} -c listen_addresses={listen}"
                   " -c fsync=off" + "".join(f" -c {k}={v}" for k, v in self.settings.items()))
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
                  "-o", options, "-w", "-t", "30", "start")
        return self

    def stop(self) -> None:
        """Fast shutdown: clients are disconnected, committed work is kept."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "stop")

    def crash(self) -> None:
        """Immediate shutdown: every process killed at once, no checkpoint, as in a crash."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop")

    def standby_of(self, primary: PostgresInstance) -> PostgresInstance:
        """Make this (new, empty) instance a streaming standby of `primary`, and start it.
        pg_basebackup copies the primary's data directory as of now and, with -R, writes
        standby.signal and the connection back to the primary (primary_conninfo)."""
        self._run("pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
                  "-D", str(self.data), "-R", "-X", "stream", "-c", "fast", "--no-sync")
        return self.start()

    def rebuild_as_standby_of(self, primary: PostgresInstance) -> PostgresInstance:
        """A stopped (or crashed) former primary, copied afresh from the new one: whatever it
        had that the new primary has not is thrown away, as pg_rewind would."""
        shutil.rmtree(self.data)
        return self.standby_of(primary)

    def promote(self) -> None:
        """End recovery: the standby becomes a primary and accepts writes (-w: waits)."""
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "30", "promote")

    def destroy(self) -> None:
        if (self.data / "postmaster.pid").exists():
            try:
                self.stop()
            except RuntimeError:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def own_pair(settings: dict[str, str] | None = None, netns: Namespace | None = None
             ) -> Iterator[tuple[PostgresInstance, PostgresInstance]]:
    """A primary and its streaming standby, both with `settings` (so that either keeps
    them as the primary after a failover), in `netns` if given, for the block."""
    require_own_postgres()
    primary, standby = PostgresInstance(settings, netns), PostgresInstance(settings, netns)
    try:
        primary.create()
        standby.standby_of(primary)
        yield primary, standby
    finally:
        standby.destroy()
        primary.destroy()


class Listening(Protocol):
    port: int  # PostgreSQL's, on the address given as `via`


def multi_host_url(*instances: Listening, via: str = "127.0.0.1", **params: str) -> str:
    """One libpq URL naming every instance (`postgresql://u@h1:p1,h2:p2/db?...`), reached
    at address `via` (in a namespace: one of its links' ends)."""
    hosts = ",".join(f"{via}:{i.port}" for i in instances)
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"postgresql://postgres@{hosts}/postgres" + (f"?{query}" if query else "")


@contextlib.contextmanager
def own_postgres() -> Iterator[PostgresInstance]:
    """A fresh instance for the block (skipped or failed first if none can be made)."""
    require_own_postgres()
    instance = PostgresInstance()
    try:
        yield instance.create()
    finally:
        instance.destroy()
