"""An S3-compatible blob store reached with botocore, which does the signing.

Amazon S3, moto, MinIO and the Conveyor server's embedded store (s3subset.py) all answer
the same four calls used here. botocore's client is blocking, so the async side runs each
call in a thread: a payload is fetched once per delivery, not per poll.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from conveyor.client._signing import resolve_credentials

# Blob calls in flight at once per store: each holds a thread while botocore blocks; the
# worker's HttpConnections (up to 100) would otherwise queue on asyncio's small default pool.
MAX_THREADS = 32
# S3's "object not there" answers: GetObject's NoSuchKey / NoSuchBucket, HeadObject's 404.
_MISSING = ("NoSuchKey", "NoSuchBucket", "404", "NotFound")


@dataclass(frozen=True, slots=True)
class BlobSettings:
    """Where the blobs live. An empty endpoint means Amazon S3 (or AWS_ENDPOINT_URL_S3)."""

    endpoint_url: str = ""
    region: str = ""
    access_key: str = ""  # "KEY:SECRET"; "" = botocore's usual chain
    bucket: str = ""  # where producers store; for readers, the only bucket allowed ("" = any)


class BlobError(Exception):
    """A blob could not be read, written or deleted; says which and why."""

    def __init__(self, bucket: str, key: str, reason: str) -> None:
        super().__init__(f"s3://{bucket}/{key}: {reason}")
        self.bucket = bucket
        self.key = key
        self.reason = reason


class BlobMissing(BlobError):
    """The bucket or the key does not exist (deleted, expired, or never written)."""


class BlobStore:
    """get / put / delete of whole objects, blocking and async."""

    def __init__(self, settings: BlobSettings) -> None:
        self.settings = settings
        # One client for every thread: botocore's low-level clients are thread-safe (boto3's
        # guide, "Multithreading"), and making one costs ~0.1 s of CPU.
        self._client_made: Any = None
        self._lock = threading.Lock()
        self._threads: ThreadPoolExecutor | None = None

    def _client(self) -> Any:
        with self._lock:
            if self._client_made is None:
                self._client_made = _make_client(self.settings)
            return self._client_made

    def get(self, bucket: str, key: str) -> bytes:
        """The object's bytes; BlobMissing or BlobError when they cannot be had."""
        with _translated(bucket, key):
            return bytes(self._client().get_object(Bucket=bucket, Key=key)["Body"].read())

    def put(self, bucket: str, key: str, data: bytes, content_type: str = "") -> None:
        """Store `data` under `key`."""
        extra = {"ContentType": content_type} if content_type else {}
        with _translated(bucket, key):
            self._client().put_object(Bucket=bucket, Key=key, Body=data, **extra)

    def delete(self, bucket: str, key: str) -> None:
        """Remove the object (S3 answers 204 whether or not it existed)."""
        with _translated(bucket, key):
            self._client().delete_object(Bucket=bucket, Key=key)

    async def aget(self, bucket: str, key: str) -> bytes:
        return await self._in_thread(self.get, bucket, key)

    async def adelete(self, bucket: str, key: str) -> None:
        await self._in_thread(self.delete, bucket, key)

    async def _in_thread(self, call: Any, *args: Any) -> Any:
        if self._threads is None:
            self._threads = ThreadPoolExecutor(MAX_THREADS, thread_name_prefix="blobs")
        return await asyncio.get_running_loop().run_in_executor(self._threads, call, *args)

    def close(self) -> None:
        """Let the threads go (calls under way finish first)."""
        if self._threads is not None:
            self._threads.shutdown(wait=False)
            self._threads = None


def _make_client(settings: BlobSettings) -> Any:
    key_id, _, secret = settings.access_key.partition(":")
    credentials = resolve_credentials(key_id or None, secret or None, None,
                                      settings.endpoint_url or "amazonaws.com")
    frozen = credentials.get_frozen_credentials()
    # Path-style for every endpoint but Amazon's own: MinIO, moto and the embedded store
    # have no per-bucket host names.
    style = "path" if settings.endpoint_url else "auto"
    config = Config(s3={"addressing_style": style}, retries={"mode": "standard"},
                    max_pool_connections=MAX_THREADS)
    return boto3.session.Session().client(
        "s3", endpoint_url=settings.endpoint_url or None,
        region_name=settings.region or "us-east-1", aws_access_key_id=frozen.access_key,
        aws_secret_access_key=frozen.secret_key, aws_session_token=frozen.token,
        config=config)


class _translated:
    """botocore's errors become BlobMissing / BlobError where they enter."""

    def __init__(self, bucket: str, key: str) -> None:
        self._bucket, self._key = bucket, key

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: Any) -> bool:
        if isinstance(exc, ClientError):
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            reason = f"{code}: {error.get('Message', '')}".rstrip(": ")
            kind = BlobMissing if code in _MISSING else BlobError
            raise kind(self._bucket, self._key, reason) from exc
        if isinstance(exc, (BotoCoreError, OSError)):
            raise BlobError(self._bucket, self._key, str(exc) or type(exc).__name__) from exc
        return False
