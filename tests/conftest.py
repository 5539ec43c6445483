from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support import CREATED_SCHEMAS, ServerProcess, drop_schemas, sqs_client


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    drop_schemas(CREATED_SCHEMAS)


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> Iterator[ServerProcess]:
    """One relaxed-mode server shared by the tests that do not restart it."""
    proc = ServerProcess(tmp_path_factory.mktemp("server"), "--mode", "relaxed").start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def strict_server(tmp_path_factory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("strict")).start()
    yield proc
    proc.stop()


@pytest.fixture
def sqs(server):
    return sqs_client(server.url)


@pytest.fixture
def queue_name() -> str:
    return "q-" + uuid.uuid4().hex[:12]
