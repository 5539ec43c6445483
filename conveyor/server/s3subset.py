"""The embedded blob store: a small, honest subset of the Amazon S3 REST API over a local
directory, so the claim check works on a laptop with `conveyor up` alone, through the very
botocore S3 client (and the SQS Extended Client) that talks to Amazon S3.

Served under PREFIX on the server's port, path-style: `PUT|GET|HEAD|DELETE
PREFIX/<bucket>/<key>` (PutObject, GetObject, HeadObject, DeleteObject) and `PUT|HEAD
PREFIX/<bucket>` (CreateBucket, HeadBucket). Anything else answers NotImplemented.
Requests are checked with the server's SigV4 verifier and access keys (scope service
`s3`), as the SQS API is; without keys, nothing is checked.

Keys are opaque text: an object is stored under the SHA-256 of its key, never under a path
built from it, so no key (`../x`, `/etc/passwd`, NUL) reaches outside its bucket's
directory. Bucket names follow S3's naming rules, which admit no separator. Writes go to a
temporary file renamed into place: a reader sees the old object or the new one, whole.

Errors are S3's (Amazon S3 API Reference, "Error responses": code, HTTP status, message):
an XML `<Error><Code/><Message/>...<RequestId/></Error>` document, and no body for HEAD.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import os
import re
import tempfile
import uuid
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path
from urllib.parse import unquote
from xml.sax.saxutils import escape

from conveyor.payloads.pointer import EMBEDDED_BUCKET, EMBEDDED_STORE_PATH
from conveyor.server import sigv4
from conveyor.server.access import AccessKey
from conveyor.server.http import Request, Response
from conveyor.sqs.errors import SqsError

log = logging.getLogger("conveyor.server.s3")

PREFIX = EMBEDDED_STORE_PATH
DEFAULT_BUCKET = EMBEDDED_BUCKET
# S3 caps a single PutObject at 5 GiB; a laptop store that holds bodies in memory, lower.
DEFAULT_MAX_OBJECT_BYTES = 64 * 1024 * 1024
MAX_KEY_BYTES = 1024  # S3: "The name for a key ... up to 1,024 bytes long" (UTF-8)
# S3's bucket naming rules: 3-63 of [a-z0-9.-], starting and ending with a letter or digit.
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_XML = b"application/xml"


@dataclass(frozen=True, slots=True)
class S3Error(Exception):
    """One of S3's error answers."""

    code: str
    status: int
    message: str
    resource: str = ""


def _no_such_bucket(bucket: str) -> S3Error:
    return S3Error("NoSuchBucket", 404, "The specified bucket does not exist", bucket)


class S3Subset:
    """Answers the embedded store's requests (those whose path starts with PREFIX)."""

    def __init__(self, root: Path, access_keys: dict[str, AccessKey], *,
                 max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES) -> None:
        self.root = root
        self.max_object_bytes = max_object_bytes
        self._keys = access_keys
        (root / DEFAULT_BUCKET).mkdir(parents=True, exist_ok=True)

    @staticmethod
    def owns(path: str) -> bool:
        """True for a request this store answers."""
        return path == PREFIX or path.startswith(PREFIX + "/")

    async def handle(self, req: Request) -> Response:
        request_id = uuid.uuid4().hex[:16].upper()
        try:
            if req.body_too_large:  # dropped unread: there is nothing to check a signature on
                raise S3Error("EntityTooLarge", 400, "Your proposed upload exceeds the "
                              "maximum allowed object size.")
            self._authenticate(req)
            bucket, key = _split(req.path)
            # File I/O of up to max_object_bytes: off the loop that answers SQS calls.
            return await asyncio.to_thread(self._dispatch, req, bucket, key)
        except S3Error as error:
            log.info("S3 %s %s failed: %s", req.method, req.path, error.code)
            return _error_response(error, req.method, request_id)
        except OSError as exc:  # the directory itself failed us: disk full, permissions
            log.error("S3 %s %s failed in the store: %s", req.method, req.path, exc)
            error = S3Error("InternalError", 500, "We encountered an internal error. "
                            "Please try again.")
            return _error_response(error, req.method, request_id)

    # --- routing ----------------------------------------------------------------------------

    def _dispatch(self, req: Request, bucket: str, key: str) -> Response:
        if not bucket:
            raise S3Error("NotImplemented", 501, "ListBuckets is not implemented by the "
                          "embedded store.")
        if not _BUCKET_NAME.fullmatch(bucket) or ".." in bucket:
            raise S3Error("InvalidBucketName", 400, "The specified bucket is not valid.",
                          bucket)
        if not key:
            return self._bucket_call(req, bucket)
        if len(key.encode("utf-8", "surrogateescape")) > MAX_KEY_BYTES:
            raise S3Error("KeyTooLongError", 400, "Your key is too long", key[:64])
        if req.method == "PUT":
            return self._put(req, bucket, key)
        if req.method in ("GET", "HEAD"):
            return self._get(bucket, key, head=req.method == "HEAD")
        if req.method == "DELETE":
            return self._delete(bucket, key)
        raise S3Error("MethodNotAllowed", 405,
                      "The specified method is not allowed against this resource.", key)

    def _bucket_call(self, req: Request, bucket: str) -> Response:
        path = self.root / bucket
        if req.method == "PUT":  # CreateBucket; us-east-1 answers 200 to its owner again
            path.mkdir(exist_ok=True)
            return Response(200, b"", _XML, [(b"location", f"/{bucket}".encode())])
        if req.method == "HEAD":
            if not path.is_dir():
                raise _no_such_bucket(bucket)
            return Response(200, b"", _XML)
        raise S3Error("NotImplemented", 501, f"{req.method} on a bucket is not implemented "
                      "by the embedded store.", bucket)

    # --- objects ----------------------------------------------------------------------------

    def _put(self, req: Request, bucket: str, key: str) -> Response:
        body = _object_bytes(req, key)
        directory = self._bucket_dir(bucket)
        etag = hashlib.md5(body, usedforsecurity=False).hexdigest()
        meta = {"key": key, "etag": etag,
                "content_type": req.headers.get("content-type") or "binary/octet-stream",
                "modified": datetime.now(UTC).timestamp()}
        name = _object_name(key)
        _write_atomically(directory / name, body)
        _write_atomically(directory / (name + ".json"), json.dumps(meta).encode())
        return Response(200, b"", _XML, [(b"etag", f'"{etag}"'.encode())])

    def _get(self, bucket: str, key: str, *, head: bool) -> Response:
        directory = self._bucket_dir(bucket)
        name = _object_name(key)
        try:
            meta = json.loads((directory / (name + ".json")).read_bytes())
            if head:
                data, size = b"", (directory / name).stat().st_size
            else:
                data = (directory / name).read_bytes()
                size = len(data)
        except FileNotFoundError:
            raise S3Error("NoSuchKey", 404, "The specified key does not exist.", key) from None
        modified = format_datetime(datetime.fromtimestamp(meta["modified"], UTC), usegmt=True)
        headers = [(b"etag", f'"{meta["etag"]}"'.encode()), (b"last-modified", modified.encode())]
        return Response(200, data, meta["content_type"].encode("latin-1"), headers,
                        content_length=size)

    def _delete(self, bucket: str, key: str) -> Response:
        directory = self._bucket_dir(bucket)
        name = _object_name(key)
        for path in (directory / (name + ".json"), directory / name):
            path.unlink(missing_ok=True)  # S3 answers 204 for a key that was not there
        return Response(204, b"", _XML)

    def _bucket_dir(self, bucket: str) -> Path:
        directory = self.root / bucket
        if not directory.is_dir():
            raise _no_such_bucket(bucket)
        return directory

    # --- authentication ---------------------------------------------------------------------

    def _authenticate(self, req: Request) -> None:
        if not self._keys:
            return
        query = req.query_string.decode("latin-1")
        try:
            claim = sigv4.read(query, req.headers)
            sigv4.verify(claim, self._keys, req.method, req.path, query, req.headers, req.body,
                         datetime.now(UTC), service=sigv4.S3_SERVICE)
        except SqsError as exc:
            code = {"InvalidClientTokenId": "InvalidAccessKeyId",
                    "MissingAuthenticationToken": "AccessDenied"}.get(exc.query_code,
                                                                      exc.query_code)
            raise S3Error(code, 403, exc.message) from None
        assert claim is not None
        action = {"PUT": "PutObject", "GET": "GetObject", "HEAD": "GetObject",
                  "DELETE": "DeleteObject"}.get(req.method, req.method)
        if not self._keys[claim.access_key].allows(f"s3:{action}"):
            raise S3Error("AccessDenied", 403, "Access Denied")


def _split(path: str) -> tuple[str, str]:
    """(bucket, key) of a path-style URL under PREFIX; the key percent-decoded, as S3 does."""
    rest = path[len(PREFIX):].lstrip("/")
    bucket, _, key = rest.partition("/")
    return unquote(bucket), unquote(key, errors="surrogateescape")


def _object_bytes(req: Request, key: str) -> bytes:
    """The object a PUT carries: its body, or an aws-chunked body decoded (botocore sends
    PutObject over TLS so: `STREAMING-UNSIGNED-PAYLOAD-TRAILER`, each chunk `<hex
    size>\r\n<bytes>\r\n`, then `0\r\n`, the trailer `x-amz-checksum-*:<b64>\r\n`
    and `\r\n`; Amazon S3 User Guide, "Checking object integrity"). Chunk signatures
    (STREAMING-AWS4-HMAC-SHA256-PAYLOAD) are not taken."""
    if "aws-chunked" not in req.headers.get("content-encoding", ""):
        return req.body
    if req.headers.get("x-amz-content-sha256") != sigv4.STREAMING_UNSIGNED_TRAILER:
        raise S3Error("NotImplemented", 501, "Only unsigned aws-chunked uploads (STREAMING-"
                      "UNSIGNED-PAYLOAD-TRAILER) are implemented by the embedded store.", key)
    chunks, trailer = _unchunk(req.body, key)
    data = b"".join(chunks)
    declared = req.headers.get("x-amz-decoded-content-length")
    if declared is not None and declared != str(len(data)):
        raise S3Error("IncompleteBody", 400, "You did not provide the number of bytes "
                      "specified by the Content-Length HTTP header.", key)
    crc = trailer.get("x-amz-checksum-crc32")
    if crc is not None and crc != base64.b64encode(
            zlib.crc32(data).to_bytes(4, "big")).decode():
        raise S3Error("BadDigest", 400, "The CRC32 you specified did not match the "
                      "calculated checksum.", key)
    return data


def _unchunk(body: bytes, key: str) -> tuple[list[bytes], dict[str, str]]:
    chunks: list[bytes] = []
    at = 0
    while True:
        line_end = body.find(b"\r\n", at)
        try:
            size = int(body[at:line_end].split(b";", 1)[0], 16) if line_end > at else -1
        except ValueError:
            size = -1
        if size < 0 or line_end + 2 + size > len(body):
            raise S3Error("IncompleteBody", 400, "The aws-chunked body is malformed.", key)
        if size == 0:
            break
        chunks.append(body[line_end + 2:line_end + 2 + size])
        at = line_end + 2 + size + 2  # the chunk's own CRLF
    trailer = {}
    for line in body[line_end + 2:].split(b"\r\n"):
        name, sep, value = line.decode("latin-1").partition(":")
        if sep:
            trailer[name.strip().lower()] = value.strip()
    return chunks, trailer


def _object_name(key: str) -> str:
    """The file an object lives in: a digest, so a key never becomes a path."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def _write_atomically(path: Path, data: bytes) -> None:
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".put-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _error_response(error: S3Error, method: str, request_id: str) -> Response:
    headers = [(b"x-amz-request-id", request_id.encode())]
    if method == "HEAD":  # S3 answers HEAD errors with the status alone
        return Response(error.status, b"", _XML, headers)
    element = {"NoSuchKey": "Key", "KeyTooLongError": "Key", "EntityTooLarge": "Key",
               "NoSuchBucket": "BucketName", "InvalidBucketName": "BucketName"}.get(error.code)
    extra = f"<{element}>{escape(error.resource)}</{element}>" if element and error.resource else ""
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{error.code}</Code>'
            f"<Message>{escape(error.message)}</Message>{extra}"
            f"<RequestId>{request_id}</RequestId></Error>")
    return Response(error.status, body.encode("utf-8", "surrogateescape"), _XML, headers)
