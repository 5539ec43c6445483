"""Blob stores for the claim-check tests: the Conveyor server's embedded one and moto's
S3, both real servers on loopback; and the Amazon SQS Extended Client (PyPI
`amazon-sqs-extended-client`) set up against them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from conveyor.payloads.pointer import EMBEDDED_BUCKET, EMBEDDED_STORE_PATH
from tests.server.test_http_limits import certificate  # noqa: F401 - the TLS test's fixture
from tests.support import MOTO, running_moto, sqs_client

MOTO_BUCKET = "claim-checks"


@dataclass(frozen=True)
class BlobTarget:
    """An S3-compatible endpoint and a bucket in it."""

    name: str
    endpoint_url: str
    bucket: str

    def s3(self) -> Any:
        """A plain boto3 S3 client for it (path-style, as for any non-Amazon endpoint)."""
        return s3_client(self.endpoint_url)

    def exists(self, key: str) -> bool:
        try:
            self.s3().head_object(Bucket=self.bucket, Key=key)
        except self.s3().exceptions.ClientError as exc:
            if exc.response["Error"]["Code"] in ("404", "NoSuchKey"):
                return False
            raise
        return True


def s3_client(endpoint_url: str, key: str = "test", secret: str = "test") -> Any:
    return boto3.client("s3", endpoint_url=endpoint_url, region_name="us-east-1",
                        aws_access_key_id=key, aws_secret_access_key=secret,
                        config=Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                                      retries={"max_attempts": 1}))


@pytest.fixture(scope="session")
def moto_s3(tmp_path_factory) -> Iterator[BlobTarget]:
    """moto's server (S3 among its services) with one bucket."""
    log_dir = tmp_path_factory.mktemp("moto-s3")
    with running_moto(lambda port: [str(MOTO), "-H", "127.0.0.1", "-p", str(port)],
                      log_dir) as url:
        target = BlobTarget("moto", url, MOTO_BUCKET)
        target.s3().create_bucket(Bucket=MOTO_BUCKET)
        yield target


def embedded_store(server: Any) -> BlobTarget:
    """The Conveyor server's own blob store and the bucket it creates at start."""
    return BlobTarget("embedded", server.url + EMBEDDED_STORE_PATH, EMBEDDED_BUCKET)


@pytest.fixture(params=["embedded", "moto"])
def blobs(request, strict_server) -> BlobTarget:
    """Each claim-check test runs on both stores."""
    if request.param == "moto":
        return request.getfixturevalue("moto_s3")
    return embedded_store(strict_server)


@pytest.fixture
def strict_sqs(strict_server) -> Any:
    """boto3 on a strict server: SQS's real default MaximumMessageSize, 1 MiB (botocore's
    SQS model: "Default: 1,048,576 bytes (1 MiB)")."""
    return sqs_client(strict_server.url)


def extended_session_class() -> Any:
    """SQSExtendedClientSession, without the package's import-time patching of
    boto3.Session (its __init__ replaces boto3's default Session class process-wide)."""
    saved = (boto3.Session, boto3.session.Session, boto3.DEFAULT_SESSION)
    try:
        from sqs_extended_client.client import SQSExtendedClientSession
    finally:
        boto3.Session, boto3.session.Session, boto3.DEFAULT_SESSION = saved
    return SQSExtendedClientSession


def extended_client(sqs_endpoint: str, blobs: BlobTarget, *, delete_payloads: bool) -> Any:
    """The Extended Client's SQS client on `sqs_endpoint`, offloading into `blobs`."""
    session = extended_session_class()(aws_access_key_id="test", aws_secret_access_key="test",
                                       region_name="us-east-1")
    sqs = session.client("sqs", endpoint_url=sqs_endpoint,
                         config=Config(retries={"max_attempts": 1}))
    sqs.s3_client = blobs.s3()
    sqs.large_payload_support = blobs.bucket
    sqs.delete_payload_from_s3 = delete_payloads
    return sqs


def conveyor_cli(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> Any:
    """`python -m conveyor ARGS` as a child process; its CompletedProcess."""
    import os
    import subprocess

    return subprocess.run([sys.executable, "-m", "conveyor", *args], input=stdin,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "AWS_ACCESS_KEY_ID": "test",
                               "AWS_SECRET_ACCESS_KEY": "test", **(env or {})},
                          cwd=Path(__file__).resolve().parents[2])
