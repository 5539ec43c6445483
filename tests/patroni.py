"""etcd and three Patroni-managed PostgreSQL members of a test's own (Debian's etcd-server
and patroni), from the recipe in deploy/patroni/patroni.yml.

Each member is the recipe with only what this machine needs changed: its name, loopback
addresses on free ports, a data directory in a temporary one, trust authentication on
127.0.0.1 (no passwords to keep). Patroni runs as the `postgres` user (PostgreSQL refuses
root), each a child process of the test; `kill` ends a member as its machine's death
would: Patroni and its postmaster SIGKILLed by PID, so that nothing renews the leader key
and its connections are cut.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.pg_instance import (
    as_postgres,
    multi_host_url,
    own_as_postgres,
    postgres_bin_dir,
    require_own_postgres,
)
from tests.support import free_port, unavailable

RECIPE = Path(__file__).parents[1] / "deploy" / "patroni" / "patroni.yml"
READY_WITHIN_S = 120.0  # three members bootstrapped and streaming, on a busy machine


def require_patroni() -> None:
    """Skip without patroni, etcd or PostgreSQL's server on a developer's machine; fail
    in CI."""
    for tool, package in (("patroni", "patroni"), ("etcd", "etcd-server")):
        if shutil.which(tool) is None:
            unavailable(f"{tool} not found (apt-get install {package})")
    require_own_postgres()


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, wait_s: float = 30) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


class Etcd:
    """A one-member etcd on free loopback ports."""

    def __init__(self, root: Path) -> None:
        self.port, peer = free_port(), free_port()
        self.root = root
        self._proc = subprocess.Popen(
            ["etcd", "--name", "e1", "--data-dir", str(root / "etcd"),
             "--listen-client-urls", f"http://127.0.0.1:{self.port}",
             "--advertise-client-urls", f"http://127.0.0.1:{self.port}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"e1=http://127.0.0.1:{peer}"],
            stdout=(root / "etcd.log").open("ab"), stderr=subprocess.STDOUT)
        _wait_for(lambda: _get(f"http://127.0.0.1:{self.port}/health")["health"] == "true",
                  "etcd to be healthy", 30, self._proc)

    def stop(self) -> None:
        _stop(self._proc)


class Member:
    """One Patroni member: PostgreSQL on `port`, Patroni's REST API on `api_port`."""

    def __init__(self, root: Path, name: str, etcd_port: int) -> None:
        self.name, self.root = name, root
        self.port, self.api_port = free_port(), free_port()
        self.data = root / name
        config = yaml.safe_load(RECIPE.read_text())
        config["name"] = name
        config["restapi"] = {"listen": f"127.0.0.1:{self.api_port}",
                             "connect_address": f"127.0.0.1:{self.api_port}"}
        config["etcd3"] = {"hosts": [f"127.0.0.1:{etcd_port}"]}
        config["bootstrap"]["pg_hba"] = ["local all all trust",
                                         "host replication postgres 127.0.0.1/32 trust",
                                         "host all all 127.0.0.1/32 trust"]
        pg = config["postgresql"]
        pg.update(listen=f"127.0.0.1:{self.port}", connect_address=f"127.0.0.1:{self.port}",
                  data_dir=str(self.data), bin_dir=str(postgres_bin_dir()),
                  pgpass=str(root / f"{name}.pgpass"),
                  authentication={"superuser": {"username": "postgres"},
                                  "replication": {"username": "postgres"}})
        pg["parameters"]["unix_socket_directories"] = str(root)
        pg["parameters"]["fsync"] = "off"  # a member killed is its processes, not the disk
        self.config = root / f"{name}.yml"
        self.config.write_text(yaml.safe_dump(config))
        self._proc: subprocess.Popen | None = None

    def start(self) -> Member:
        self._proc = subprocess.Popen(["patroni", str(self.config)],
                                      stdout=(self.root / f"{self.name}.log").open("ab"),
                                      stderr=subprocess.STDOUT, **as_postgres())
        return self

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def kill(self) -> float:
        """The member's machine dies: Patroni first (nothing restarts PostgreSQL or renews
        the leader key), then the postmaster; its backends exit as it does. When the
        postmaster was killed (monotonic): till then it still served."""
        assert self._proc is not None
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        self._proc.kill()
        self._proc.wait(10)
        died = time.monotonic()
        os.kill(postmaster, signal.SIGKILL)
        _wait_for(lambda: not _running(postmaster), "the postmaster to die", 30)
        return died

    def stop(self) -> None:
        """Patroni's own shutdown, which stops its PostgreSQL too."""
        if self._proc is not None:
            _stop(self._proc, wait_s=60)
        postmaster = self.data / "postmaster.pid"
        if postmaster.exists():  # Patroni did not get to it: stop what is left
            with contextlib.suppress(ValueError, OSError):
                os.kill(int(postmaster.read_text().split()[0]), signal.SIGKILL)


class Cluster:
    """etcd and three members; `members()` as Patroni's REST API reports them."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="conveyor-patroni-"))
        own_as_postgres(self.root)
        self.etcd = Etcd(self.root)
        self.nodes = [Member(self.root, f"db{n}", self.etcd.port) for n in (1, 2, 3)]

    def start(self) -> Cluster:
        self.nodes[0].start()  # bootstraps first (initdb), so that it is the first leader
        self.wait_until(lambda m: any(x["role"] == "leader" and _up(x) for x in m),
                        "a leader")
        for node in self.nodes[1:]:
            node.start()
        self.wait_until(lambda m: len([x for x in m if _up(x)]) == 3 and any(
            x["role"] == "sync_standby" for x in m), "three members, one a sync standby")
        return self

    def members(self) -> list[dict[str, Any]]:
        """The cluster as any live member's API sees it ([] if none answers)."""
        for node in self.nodes:
            if node.alive():
                with contextlib.suppress(OSError, ValueError):
                    return _get(f"{node.api}/cluster")["members"]
        return []

    def leader(self) -> Member:
        name = next(x["name"] for x in self.members() if x["role"] == "leader")
        return next(node for node in self.nodes if node.name == name)

    def wait_until(self, ok: Any, what: str, within_s: float = READY_WITHIN_S) -> None:
        _wait_for(lambda: ok(self.members()), what, within_s)

    def url(self, **params: str) -> str:
        """One libpq URL naming every member."""
        return multi_host_url(*self.nodes, **params)

    def logs(self) -> str:
        return "\n".join(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
                         for path in sorted(self.root.glob("*.log")))

    def destroy(self) -> None:
        for node in self.nodes:
            node.stop()
        self.etcd.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def patroni_cluster() -> Iterator[Cluster]:
    require_patroni()
    cluster = Cluster()
    try:
        yield cluster.start()
    except BaseException:
        print(cluster.logs())  # why it would not form, or what it did meanwhile
        raise
    finally:
        cluster.destroy()


def _up(member: dict[str, Any]) -> bool:
    return member.get("state") in ("running", "streaming")


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=2) as resp:
        return json.loads(resp.read())


def _running(pid: int) -> bool:
    """Whether `pid` lives (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _wait_for(ok: Any, what: str, within_s: float,
              proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + within_s
    while True:
        with contextlib.suppress(OSError, ValueError, KeyError):
            if ok():
                return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode} while waiting for {what}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {within_s:.0f} s for {what}")
        time.sleep(0.2)
