"""Fixtures for the server conformance suite.

Every test here talks to a real `conveyor server` process over a socket, so the same suite
can run against any store. The store is chosen by one fixture, `store_args`: the command-line
arguments that select it. To run the suite on another store, parametrize that fixture, e.g.

    @pytest.fixture(scope="session", params=[[], ["--store", "postgresql://..."]])
    def store_args(request): return request.param

and every server below (shared, strict, private, authenticated) starts with those arguments.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.server.helpers import RawClient, unique
from tests.support import (
    POSTGRES_URL,
    STORES,
    ServerProcess,
    isolated,
    require_postgres,
    sqs_client,
)

Launcher = Callable[..., ServerProcess]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: waits out a real SQS minimum (over 30 s)")


@pytest.fixture(scope="session", params=STORES)
def store_args(request: pytest.FixtureRequest) -> list[str]:
    """Command-line arguments that select the store under test: the whole suite runs once
    on the embedded SQLite store and once on PostgreSQL (skipped locally without one)."""
    if request.param == "sqlite":
        return []
    require_postgres()
    return ["--store", POSTGRES_URL]


@contextlib.contextmanager
def _launcher(tmp_path_factory: pytest.TempPathFactory, store_args: list[str],
              prefix: str) -> Iterator[Launcher]:
    """Starts server processes with the store under test plus `args`; stops them all when
    the block ends."""
    started: list[ServerProcess] = []
    serial = itertools.count()

    def _launch(*args: str, env: dict[str, str] | None = None) -> ServerProcess:
        data_dir = tmp_path_factory.mktemp(f"{prefix}{next(serial)}")
        proc = ServerProcess(data_dir, *isolated(store_args), *args, env=env)
        started.append(proc)
        return proc.start()

    try:
        yield _launch
    finally:
        for proc in started:
            proc.stop()


@pytest.fixture(scope="session")
def shared_launch(tmp_path_factory: pytest.TempPathFactory,
                  store_args: list[str]) -> Iterator[Launcher]:
    """For the servers every module shares; stopped at the session's end."""
    with _launcher(tmp_path_factory, store_args, "srv") as launch:
        yield launch


@pytest.fixture(scope="module")
def launch(tmp_path_factory: pytest.TempPathFactory,
           store_args: list[str]) -> Iterator[Launcher]:
    """For a module's own servers (its fixtures' and its tests'); stopped when the module
    ends, so that a whole run never holds every server it started (on PostgreSQL, each
    holds connections: a run of them all went past the database's 100)."""
    with _launcher(tmp_path_factory, store_args, "mod") as launch:
        yield launch


@pytest.fixture(scope="session")
def server(shared_launch: Launcher) -> ServerProcess:
    """The shared relaxed-mode server (overrides tests/conftest.py to use `store_args`)."""
    return shared_launch("--mode", "relaxed")


@pytest.fixture(scope="session")
def strict_server(shared_launch: Launcher) -> ServerProcess:
    """The shared strict-mode (default mode) server: SQS's own limits and cool-downs."""
    return shared_launch()


@pytest.fixture(scope="session")
def clock_server(shared_launch: Launcher) -> ServerProcess:
    """A relaxed server whose clock tests move forward (see helpers.advance_clock)."""
    return shared_launch("--mode", "relaxed", "--dev-clock")


@pytest.fixture
def strict_sqs(strict_server: ServerProcess) -> Any:
    return sqs_client(strict_server.url)


class QueueFactory:
    """Creates uniquely named queues through one client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __call__(self, fifo: bool = False, prefix: str = "q", tags: dict[str, str] | None = None,
                 **attributes: Any) -> str:
        name = unique(prefix) + (".fifo" if fifo else "")
        attrs = {k: str(v).lower() if isinstance(v, bool) else str(v)
                 for k, v in attributes.items()}
        if fifo:
            attrs["FifoQueue"] = "true"
        kwargs: dict[str, Any] = {"QueueName": name, "Attributes": attrs}
        if tags:
            kwargs["tags"] = tags
        return self.client.create_queue(**kwargs)["QueueUrl"]

    def arn_of(self, url: str) -> str:
        return self.client.get_queue_attributes(
            QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


@pytest.fixture
def make_queue(sqs: Any) -> QueueFactory:
    return QueueFactory(sqs)


@pytest.fixture
def make_strict_queue(strict_sqs: Any) -> QueueFactory:
    return QueueFactory(strict_sqs)


@pytest.fixture
def raw(server: ServerProcess) -> RawClient:
    return RawClient(server.url)


@pytest.fixture
def strict_raw(strict_server: ServerProcess) -> RawClient:
    return RawClient(strict_server.url)


@pytest.fixture
def private_server(launch: Launcher) -> Iterator[ServerProcess]:
    """A relaxed server of the test's own, free to be restarted or killed."""
    proc = launch("--mode", "relaxed")
    yield proc
    proc.stop()
