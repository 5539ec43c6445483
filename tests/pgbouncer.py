"""A PgBouncer of a test's own (Debian's pgbouncer), in transaction pooling mode.

Its own ini in a temporary directory, a free port, started in the foreground as a child
process (never the system's service) and stopped by its PID. As root it runs as the
`postgres` user: PgBouncer refuses to run as root.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from tests.pg_instance import as_postgres, own_as_postgres, require_own_postgres
from tests.support import free_port, unavailable

READY_WITHIN_S = 15.0
# Debian installs it in /usr/sbin, which a user's PATH may not hold.
PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def require_pgbouncer() -> None:
    """Skip without pgbouncer on a developer's machine; fail in CI."""
    if not os.access(PGBOUNCER, os.X_OK):
        unavailable("pgbouncer not found (apt-get install pgbouncer)")
    require_own_postgres()  # the postgres user to run it as, when we are root


class PgBouncer:
    """PgBouncer on 127.0.0.1:`port` in front of `target` (a postgresql:// URL), its
    database `name` being the target's, each server session's `search_path` set to
    `schema` if given (PgBouncer's connect_query: the way to give a schema behind it).
    `url` reaches the target through it; `settings` go to its ini's [pgbouncer] too."""

    def __init__(self, target: str, schema: str | None = None, pool_size: int = 4,
                 **settings: str) -> None:
        parts = urlsplit(target)
        self.name = parts.path.lstrip("/") or "postgres"
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="conveyor-pgbouncer-"))
        self.url = f"postgresql://{parts.username or 'postgres'}@127.0.0.1:{self.port}/{self.name}"
        entry = (f"host={parts.hostname or '127.0.0.1'} port={parts.port or 5432}"
                 f" dbname={self.name} user={parts.username or 'postgres'}")
        if schema:
            entry += f" connect_query='SET search_path={schema}'"
        # auth_type any: the server's own (trust) authentication is the one that counts.
        (self.root / "pgbouncer.ini").write_text(f"""\
[databases]
{self.name} = {entry}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 500
logfile = {self.root}/pgbouncer.log
""" + "".join(f"{k} = {v}\n" for k, v in settings.items()))
        self._proc: subprocess.Popen | None = None

    def start(self) -> PgBouncer:
        own_as_postgres(self.root)
        self._proc = subprocess.Popen([PGBOUNCER, str(self.root / "pgbouncer.ini")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                      **as_postgres())
        deadline = time.monotonic() + READY_WITHIN_S
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited with {self._proc.returncode}: {self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"pgbouncer did not listen: {self.log()}") from None
                time.sleep(0.05)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def log(self) -> str:
        path = self.root / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)
