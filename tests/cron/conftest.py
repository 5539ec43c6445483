"""Fixtures for the periodic-task tests: a dev-clock server, a moto DynamoDB server."""

from __future__ import annotations

import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import ServerProcess, running_moto

SERIAL_MOTO = Path(__file__).with_name("moto_serial.py")


@pytest.fixture(scope="module")
def clock_server(tmp_path_factory) -> Iterator[ServerProcess]:
    """A relaxed server whose clock tests move (POST /_conveyor/clock?advance=S)."""
    proc = ServerProcess(tmp_path_factory.mktemp("cron-server"), "--mode", "relaxed",
                         "--dev-clock").start()
    yield proc
    proc.stop()


def advance_server(server: ServerProcess, seconds: float) -> None:
    """Move the server's clock (lease expiry, visibility) forward."""
    request = urllib.request.Request(f"{server.url}/_conveyor/clock?advance={seconds}",
                                     data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=5) as resp:
        assert resp.status == 200


@pytest.fixture(scope="session")
def moto_url(tmp_path_factory) -> Iterator[str]:
    """moto's server (DynamoDB-compatible, one request at a time) on a free port."""
    with running_moto(lambda port: [sys.executable, str(SERIAL_MOTO), "127.0.0.1", str(port)],
                      tmp_path_factory.mktemp("moto")) as url:
        yield url


def dynamodb_client(url: str):
    """A botocore DynamoDB client for moto (fake keys, no retries to wait out)."""
    import botocore.session
    from botocore.config import Config

    return botocore.session.get_session().create_client(
        "dynamodb", region_name="us-east-1", endpoint_url=url, aws_access_key_id="test",
        aws_secret_access_key="test", config=Config(retries={"max_attempts": 2}))


def aligned_minute(offset_s: float = 0.0) -> float:
    """A whole minute well in the future of any real clock, plus `offset_s`."""
    return (int(time.time()) // 60 + 10_000) * 60 + offset_s
