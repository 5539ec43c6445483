"""Wire-level helpers for the server conformance suite.

Everything here talks to a server over a socket, the way a real client does: boto3, raw
JSON 1.0 requests, raw Query requests, MD5 digests computed the way AWS SDKs verify them.
Nothing imports the server.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import struct
import time
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.cookies import Morsel, SimpleCookie
from typing import Any, BinaryIO, TypeVar
from urllib.parse import urlencode, urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

ACCOUNT_ID = "000000000000"
QUERY_NS = "http://queue.amazonaws.com/doc/2012-11-05/"
JSON_CONTENT_TYPE = "application/x-amz-json-1.0"

T = TypeVar("T")


def unique(prefix: str = "q") -> str:
    """A queue name no other test uses (SQS names: 1-80 of [A-Za-z0-9_-])."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def queue_name_of(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[1]


def arn(name: str, region: str = "us-east-1") -> str:
    return f"arn:aws:sqs:{region}:{ACCOUNT_ID}:{name}"


# --------------------------------------------------------------------------- errors


@contextmanager
def raises_sqs(code: str | set[str] | None,
               status: int | set[int] | None = 400) -> Iterator[list]:
    """Expect a ClientError whose Query-era code (botocore's Error.Code) is `code`.

    None for code or status accepts any. Yields a list that holds the ClientError afterwards,
    for further checks.
    """
    codes = {code} if isinstance(code, str) else code
    statuses = {status} if isinstance(status, int) else status
    caught: list[ClientError] = []
    with pytest.raises(ClientError) as info:
        yield caught
    err = info.value
    caught.append(err)
    got_code = err.response["Error"]["Code"]
    got_status = err.response["ResponseMetadata"]["HTTPStatusCode"]
    assert codes is None or got_code in codes, (
        f"expected {codes}, got {got_code!r}: {err.response['Error']}")
    if statuses is not None:
        assert got_status in statuses, f"expected HTTP {statuses}, got {got_status} ({got_code})"


# --------------------------------------------------------------------------- MD5s


def md5_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.md5(data).hexdigest()


def _length_prefixed(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def md5_of_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> str:
    """MD5OfMessageAttributes as the AWS SDKs compute it (sorted names, length-prefixed)."""
    buf = b""
    for name in sorted(attributes):
        value = attributes[name]
        data_type = value["DataType"]
        buf += _length_prefixed(name.encode()) + _length_prefixed(data_type.encode())
        if data_type.startswith("Binary"):
            raw = value["BinaryValue"]
            if isinstance(raw, str):
                raw = raw.encode()
            buf += b"\x02" + _length_prefixed(raw)
        else:
            buf += b"\x01" + _length_prefixed(value["StringValue"].encode())
    return hashlib.md5(buf).hexdigest()


# --------------------------------------------------------------------------- polling


def wait_for(fn: Callable[[], T], timeout_s: float = 10.0, interval_s: float = 0.1,
             what: str = "condition") -> T:
    """Call fn until it returns something truthy; fail after timeout_s (a bound, not a timing)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = fn()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s}s (last: {result!r})")
        time.sleep(interval_s)


def receive_all(sqs: Any, url: str, expected: int, timeout_s: float = 10.0,
                delete: bool = True, **kwargs: Any) -> list[dict]:
    """Receive until `expected` messages arrived (or timeout); optionally delete them."""
    got: list[dict] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < expected and time.monotonic() < deadline:
        resp = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                   **kwargs)
        msgs = resp.get("Messages", [])
        got.extend(msgs)
        if delete and msgs:
            sqs.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)])
    return got


def advance_clock(server_url: str, seconds: float) -> None:
    """Move a `--dev-clock` server's time forward (visibility, delays, retention)."""
    request = urllib.request.Request(f"{server_url}/_conveyor/clock?advance={seconds}",
                                     method="POST")
    urllib.request.urlopen(request, timeout=10).read()


def counts(sqs: Any, url: str) -> tuple[int, int, int]:
    """(visible, not visible, delayed) from GetQueueAttributes."""
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed"])["Attributes"]
    return (int(attrs["ApproximateNumberOfMessages"]),
            int(attrs["ApproximateNumberOfMessagesNotVisible"]),
            int(attrs["ApproximateNumberOfMessagesDelayed"]))


# --------------------------------------------------------------------------- raw HTTP


def read_response(stream: BinaryIO) -> tuple[int, bytes]:
    """Read one response off a keep-alive connection (a socket's makefile("rb")): its
    status and its body."""
    status = int(stream.readline().split()[1])
    length = 0
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return status, stream.read(length)


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def xml(self) -> ET.Element:
        return ET.fromstring(self.body)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass
class RawClient:
    """Hand-built HTTP requests to one server, optionally SigV4-signed like an SDK would."""

    base_url: str
    region: str = "us-east-1"
    access_key: str = "test"
    secret_key: str = "test"
    timeout_s: float = 30.0
    extra_headers: dict[str, str] = field(default_factory=dict)

    def request(self, method: str, path: str, body: bytes = b"",
                headers: Mapping[str, str] | None = None, sign: bool = True) -> RawResponse:
        parts = urlsplit(self.base_url)
        hdrs = {**self.extra_headers, **(headers or {})}
        if sign:
            aws = AWSRequest(method=method, url=self.base_url.rstrip("/") + path, data=body,
                             headers=hdrs)
            SigV4Auth(Credentials(self.access_key, self.secret_key), "sqs",
                      self.region).add_auth(aws)
            hdrs = dict(aws.headers.items())
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=self.timeout_s)
        try:
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
            return RawResponse(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
        finally:
            conn.close()

    def json_call(self, action: str | None, payload: Any = None, raw_body: bytes | None = None,
                  content_type: str = JSON_CONTENT_TYPE, sign: bool = True) -> RawResponse:
        body = raw_body if raw_body is not None else json.dumps(payload or {}).encode()
        headers = {"Content-Type": content_type}
        if action is not None:
            headers["X-Amz-Target"] = f"AmazonSQS.{action}"
        return self.request("POST", "/", body, headers, sign=sign)

    def query(self, params: Mapping[str, str] | list[tuple[str, str]], path: str = "/",
              sign: bool = True) -> RawResponse:
        items = list(params.items()) if isinstance(params, Mapping) else list(params)
        if not any(k == "Version" for k, _ in items):
            items.append(("Version", "2012-11-05"))
        body = urlencode(items, errors="surrogatepass").encode()  # lets tests send bad UTF-8
        headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
        return self.request("POST", path, body, headers, sign=sign)


def assert_json_error(resp: RawResponse, code: str | set[str] | None = None,
                      status: int | set[int] = 400) -> dict:
    """A JSON-protocol error: right status, JSON body with __type and a message, no trace."""
    statuses = {status} if isinstance(status, int) else status
    assert resp.status in statuses, f"HTTP {resp.status}: {resp.body[:500]!r}"
    assert b"Traceback" not in resp.body
    body = resp.json()
    assert isinstance(body, dict) and "__type" in body, body
    assert isinstance(body.get("message", body.get("Message")), str), body
    if code is not None:
        codes = {code} if isinstance(code, str) else code
        query_header = resp.header("x-amzn-query-error") or ""
        query_code = query_header.split(";")[0]
        shape = body["__type"].rsplit("#", 1)[-1]
        assert query_code in codes or shape in codes, (body, query_header)
    return body


def strip_ns(elem: ET.Element) -> ET.Element:
    """Drop XML namespaces in place so tests can use plain tag names."""
    for node in elem.iter():
        if isinstance(node.tag, str) and "}" in node.tag:
            node.tag = node.tag.split("}", 1)[1]
    return elem


def assert_query_error(resp: RawResponse, code: str | set[str] | None = None,
                       status: int | set[int] = 400) -> ET.Element:
    """A Query-protocol error: <ErrorResponse><Error><Type/><Code/><Message/></Error>."""
    statuses = {status} if isinstance(status, int) else status
    assert resp.status in statuses, f"HTTP {resp.status}: {resp.body[:500]!r}"
    assert b"Traceback" not in resp.body
    root = strip_ns(resp.xml())
    assert root.tag == "ErrorResponse", resp.body[:500]
    error = root.find("Error")
    assert error is not None
    assert error.findtext("Type") in {"Sender", "Receiver"}
    assert error.findtext("Message") is not None
    if code is not None:
        codes = {code} if isinstance(code, str) else code
        assert error.findtext("Code") in codes, resp.body[:500]
    return error


# --------------------------------------------------------------------------- the console


@dataclass
class BrowserResponse:
    status: int
    headers: list[tuple[str, str]]  # every header, in order (Set-Cookie may repeat)
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode()

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def set_cookies(self) -> dict[str, Morsel]:
        """The cookies this response sets, parsed by the standard library's cookie parser."""
        jar: SimpleCookie = SimpleCookie()
        for name, value in self.headers:
            if name.lower() == "set-cookie":
                jar.load(value)
        return dict(jar)

    def form_token(self) -> str:
        """The CSRF token a form on this page carries (its hidden `csrf` field)."""
        found = re.search(r'name="csrf" value="([^"]*)"', self.text)
        assert found, self.text[:500]
        return found.group(1)


@dataclass
class Browser:
    """Talks to the console the way a browser does, without one: keeps the cookies the
    server sets (and forgets the ones it expires), sends Origin on POSTs, follows no
    redirects so tests see each one."""

    base_url: str
    cookies: dict[str, str] = field(default_factory=dict)
    source: str | None = None  # connect from this loopback address (127.0.0.0/8), not 127.0.0.1

    def request(self, method: str, path: str, body: bytes = b"",
                headers: Mapping[str, str] | None = None) -> BrowserResponse:
        parts = urlsplit(self.base_url)
        sent = dict(headers or {})
        if self.cookies and "Cookie" not in sent:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30,
                                          source_address=(self.source, 0) if self.source else None)
        try:
            conn.request(method, path, body=body, headers=sent)
            resp = conn.getresponse()
            answer = BrowserResponse(resp.status, resp.getheaders(), resp.read())
        finally:
            conn.close()
        for name, morsel in answer.set_cookies().items():
            if morsel["max-age"] == "0":
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = morsel.value
        return answer

    def get(self, path: str) -> BrowserResponse:
        return self.request("GET", path)

    def post(self, path: str, fields: Mapping[str, str] | bytes,
             headers: Mapping[str, str] | None = None) -> BrowserResponse:
        body = fields if isinstance(fields, bytes) else urlencode(fields).encode()
        sent = {"Content-Type": "application/x-www-form-urlencoded",
                "Origin": self.base_url, **(headers or {})}
        return self.request("POST", path, body, sent)

    def sign_in(self, key: str, secret: str) -> BrowserResponse:
        """Fill in and send the sign-in form."""
        token = self.get("/console/sign-in").form_token()
        return self.post("/console/sign-in", {"csrf": token, "access_key_id": key,
                                              "secret_access_key": secret})
