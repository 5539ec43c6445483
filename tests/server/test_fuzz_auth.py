"""Seeded random breakage of signed requests: the authentication layer and every parser of
a URL, header, number or date the server reads before the service sees a request.

Each request starts as a correctly signed call (header-signed or presigned) and has one
to three parts replaced: the Authorization header or one of its fields, X-Amz-Date, the
payload hash, the session token, Host, the path, a presigned URL's parameters, the
QueueUrl. Whatever arrives, the answer is a success or an error in SQS's shape — never a
5xx, never a traceback on the wire or in the server's log — and the server keeps
answering. The open (unsigned) server gets the same URLs and hosts.

The default run sends a few thousand requests; set CONVEYOR_FUZZ_REQUESTS for a long run:

    CONVEYOR_FUZZ_REQUESTS=100000 .venv/bin/python -m pytest -q \
        tests/server/test_fuzz_auth.py -k sqlite
"""

from __future__ import annotations

import http.client
import json
import os
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import boto3
import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.server.conftest import Launcher
from tests.server.helpers import JSON_CONTENT_TYPE, unique
from tests.support import ServerProcess

KEY, SECRET, TOKEN_KEY, TOKEN_SECRET, TOKEN = "AKIDFUZZ", "fuzz", "ASIAFUZZ", "t", "tok"
REQUESTS = int(os.environ.get("CONVEYOR_FUZZ_REQUESTS", "3000"))

# Text that breaks parsers: empty, huge, non-ASCII, control bytes, numbers out of range,
# dates that are not dates, URLs that do not parse.
NASTY = ["", " ", "x" * 5000, "é", "\u00ff" * 100, "\x00", "\x7f", "/", "//", "=", ",", ";",
         "%", "%zz", "%ff", "-1", "0", "1e9", "99999999999999999999", "NaN", "inf", "1.5",
         "20261124T250000Z", "00000000T000000Z", "99991231T235959Z", "20261124", "2026-11-24",
         "AWS4-HMAC-SHA256", "aws4_request", "sqs", "UNSIGNED-PAYLOAD", "http://[",
         "http://[::1", "http://host:99999999/000000000000/q", "http://h/000000000000/%00",
         "[", "]:80", "a" * 300 + ".example", "0" * 64, "f" * 65]
AUTH_FIELDS = ["Credential", "SignedHeaders", "Signature"]
PRESIGN_PARAMS = ["X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
                  "X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token"]


@pytest.fixture(scope="module")
def secured(launch: Launcher, tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    config = tmp_path_factory.mktemp("fuzz") / "conveyor.yaml"
    config.write_text(f"access_keys:\n  {KEY}: {SECRET}\n"
                      f"  {TOKEN_KEY}: {{secret: {TOKEN_SECRET}, session_token: {TOKEN}}}\n")
    return launch("--mode", "relaxed", "--config", str(config))


class Connection:
    """One keep-alive connection, reopened whenever the server closes it."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.conn: http.client.HTTPConnection | None = None

    def send(self, method: str, path: str, headers: dict[str, bytes],
             body: bytes) -> tuple[int, bytes]:
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            try:
                self.conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
                for name, value in headers.items():
                    self.conn.putheader(name, value)
                self.conn.putheader("Content-Length", str(len(body)))
                self.conn.endheaders(body)
                response = self.conn.getresponse()
                data = response.read()
                if response.will_close:
                    self.close()
                return response.status, data
            except (ConnectionError, http.client.HTTPException):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _nasty(rnd: random.Random) -> str:
    return rnd.choice(NASTY)


def _signed(server: ServerProcess, rnd: random.Random, queue_url: str) -> dict[str, Any]:
    """A correctly signed request: JSON or Query, header-signed or presigned."""
    presign, token = rnd.random() < 0.25, rnd.random() < 0.2
    credentials = Credentials(TOKEN_KEY, TOKEN_SECRET, TOKEN) if token else Credentials(
        KEY, SECRET)
    if presign:
        query = urlencode({"Action": "SendMessage", "QueueUrl": queue_url, "MessageBody": "p",
                           "Version": "2012-11-05"})
        request = AWSRequest(method="GET", url=f"{server.url}/?{query}")
        SigV4QueryAuth(credentials, "sqs", "us-east-1", expires=300).add_auth(request)
    elif rnd.random() < 0.5:
        body = json.dumps({"QueueUrl": queue_url, "MessageBody": "j"}).encode()
        request = AWSRequest(method="POST", url=server.url + "/", data=body, headers={
            "Content-Type": JSON_CONTENT_TYPE, "X-Amz-Target": "AmazonSQS.SendMessage"})
        SigV4Auth(credentials, "sqs", "us-east-1").add_auth(request)
    else:
        body = urlencode({"Action": "GetQueueUrl", "QueueName": queue_url.rsplit("/", 1)[1],
                          "Version": "2012-11-05"}).encode()
        request = AWSRequest(method="POST", url=server.url + "/", data=body, headers={
            "Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
        SigV4Auth(credentials, "sqs", "us-east-1").add_auth(request)
    parts = urlsplit(request.url)
    headers = {k.lower(): str(v).encode("utf-8") for k, v in request.headers.items()}
    headers["host"] = parts.netloc.encode()
    return {"method": request.method, "path": parts.path + ("?" + parts.query if parts.query
                                                              else ""),
            "headers": headers, "body": request.body or b""}


def _break(rnd: random.Random, request: dict[str, Any]) -> None:
    """Replace one part of a signed request, in place."""
    headers: dict[str, bytes] = request["headers"]
    nasty = _nasty(rnd).encode("utf-8")
    roll = rnd.random()
    if roll < 0.3 and headers.get("authorization"):
        auth = headers["authorization"]
        if rnd.random() < 0.5:  # one field's value
            field = rnd.choice(AUTH_FIELDS).encode()
            start = auth.find(field + b"=")
            end = auth.find(b",", start)
            end = len(auth) if end < 0 else end
            headers["authorization"] = auth[:start + len(field) + 1] + nasty + auth[end:]
        else:  # cut, a byte swapped, or repeated
            i = rnd.randrange(len(auth))
            headers["authorization"] = rnd.choice([auth[:i], auth[:i] + b"\xff" + auth[i + 1:],
                                                   auth + b", " + auth])
    elif roll < 0.45:
        headers[rnd.choice(["x-amz-date", "x-amz-content-sha256", "x-amz-security-token",
                            "host"])] = nasty
    elif roll < 0.6 and "?" in request["path"]:
        path, _, query = request["path"].partition("?")
        params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
        params[rnd.choice(PRESIGN_PARAMS)] = quote(nasty, safe="")
        request["path"] = path + "?" + "&".join(f"{k}={v}" for k, v in params.items())
    elif roll < 0.7:
        request["path"] = rnd.choice(["/%zz", "/%ff%fe", "//", "/..", "/000000000000/%00",
                                      "/000000000000/" + "q" * 5000, "/?X-Amz-Algorithm=",
                                      "/?X-Amz-Signature=" + "0" * 64])
    elif roll < 0.85:
        body = request["body"]
        if body.startswith(b"{"):
            request["body"] = json.dumps({"QueueUrl": _nasty(rnd),
                                          "MessageBody": "u"}).encode()
        else:
            request["body"] = body + b"&QueueUrl=" + quote(_nasty(rnd), safe="").encode()
    elif headers:
        headers.pop(rnd.choice(list(headers)))


def _requests(server: ServerProcess, seed: int, queue_url: str) -> Iterator[dict[str, Any]]:
    rnd = random.Random(seed)
    for _ in range(REQUESTS):
        request = _signed(server, rnd, queue_url)
        if rnd.random() < 0.9:  # a tenth go through untouched: they must still pass
            for _ in range(rnd.randint(1, 3)):
                _break(rnd, request)
        yield request


def _fuzz(server: ServerProcess, seed: int, queue_url: str) -> Counter[int]:
    log_start = server.log_path.stat().st_size
    connection = Connection(server.url)
    answered: Counter[int] = Counter()
    try:
        for n, request in enumerate(_requests(server, seed, queue_url)):
            status, body = connection.send(request["method"], request["path"],
                                           request["headers"], request["body"])
            what = f"#{n} {request['method']} {request['path'][:200]} {request['headers']}"
            assert status < 500, f"{what}: HTTP {status} {body[:300]!r}"
            assert b"Traceback" not in body, what
            # SQS's error shape, or the HTTP layer's refusal of bytes HTTP forbids (RFC 9110
            # 5.5: no control characters in a field value; RFC 9112 3.2: one Host header),
            # or SQS's bare 404 to a request without an action
            # (test_aws_recorded.test_get_without_action).
            http_layer = body in (b'{"message":"Malformed HTTP request."}',
                                  b'{"message":"A request must carry one Host header."}')
            no_action = (status, body) == (404, b"<UnknownOperationException/>")
            if (status >= 400 and status not in (408, 413, 414, 431) and not http_layer
                    and not no_action):
                assert b"__type" in body or b"<Code>" in body, f"{what}: {body[:300]!r}"
            answered[status] += 1
    finally:
        connection.close()
    status, _ = Connection(server.url).send("GET", "/health", {"host": b"localhost"}, b"")
    assert status == 200
    with server.log_path.open("rb") as log:
        log.seek(log_start)
        written = log.read()
    assert b"Traceback" not in written and b"unexpectedly" not in written, written[-2000:]
    return answered


def test_broken_signed_requests_get_clean_refusals(secured: ServerProcess) -> None:
    sqs = boto3.client("sqs", endpoint_url=secured.url, region_name="us-east-1",
                       aws_access_key_id=KEY, aws_secret_access_key=SECRET)
    queue_url = sqs.create_queue(QueueName=unique("fz"))["QueueUrl"]
    answered = _fuzz(secured, 20261124, queue_url)
    assert answered[200] > REQUESTS // 20, answered  # the untouched ones, and harmless breaks
    assert answered[403] > REQUESTS // 10 and answered[400] > REQUESTS // 20, answered


def test_broken_urls_and_hosts_on_an_open_server(server: ServerProcess, sqs: Any) -> None:
    """Without keys signatures are not checked, but every URL, host and date is still read."""
    queue_url = sqs.create_queue(QueueName=unique("fz"))["QueueUrl"]
    answered = _fuzz(server, 20261125, queue_url)
    assert answered[200] > REQUESTS // 10 and answered[400] > REQUESTS // 20, answered
