"""The server's HTTP/1.1 layer over a raw socket: what SDKs and proxies send besides one
plain request per connection (pipelining, chunked bodies, 100-continue, split writes,
closing), each answered correctly and in order."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import BinaryIO

import pytest

from tests.server.helpers import unique
from tests.support import ServerProcess

TARGET = "AmazonSQS."
JSON = "application/x-amz-json-1.0"


def _request(action: str, payload: dict, extra: str = "", body: bytes | None = None) -> bytes:
    data = json.dumps(payload).encode() if body is None else body
    head = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {JSON}\r\n"
            f"X-Amz-Target: {TARGET}{action}\r\n{extra}")
    if "Transfer-Encoding" not in extra:
        head += f"Content-Length: {len(data)}\r\n"
    return head.encode() + b"\r\n" + data


def _response(stream: BinaryIO) -> tuple[int, dict[str, str], bytes]:
    status_line = stream.readline()
    assert status_line.startswith(b"HTTP/1.1 "), status_line
    headers = {}
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body = stream.read(int(headers.get("content-length", "0")))
    return int(status_line.split()[1]), headers, body


@pytest.fixture
def connection(server: ServerProcess) -> Iterator[tuple[socket.socket, BinaryIO]]:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        yield sock, sock.makefile("rb")


def test_pipelined_requests_are_answered_in_order(connection: tuple) -> None:
    sock, stream = connection
    name = unique("pipe")
    sock.sendall(_request("CreateQueue", {"QueueName": name})
                 + _request("GetQueueUrl", {"QueueName": name})
                 + _request("GetQueueUrl", {"QueueName": name + "-missing"})
                 + _request("ListQueues", {"QueueNamePrefix": name}))
    answers = [_response(stream) for _ in range(4)]
    assert [status for status, _, _ in answers] == [200, 200, 400, 200]
    url = json.loads(answers[0][2])["QueueUrl"]
    assert json.loads(answers[1][2])["QueueUrl"] == url
    assert json.loads(answers[2][2])["__type"].endswith("QueueDoesNotExist")
    assert json.loads(answers[3][2])["QueueUrls"] == [url]


def test_a_request_written_a_byte_at_a_time(connection: tuple) -> None:
    sock, stream = connection
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for byte in _request("ListQueues", {"MaxResults": 1}):
        sock.send(bytes([byte]))
    status, _, body = _response(stream)
    assert status == 200 and isinstance(json.loads(body), dict)


def test_chunked_body(connection: tuple) -> None:
    sock, stream = connection
    name = unique("chunked")
    data = json.dumps({"QueueName": name}).encode()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (data[:5], data[5:]))
    sock.sendall(_request("CreateQueue", {}, "Transfer-Encoding: chunked\r\n",
                          body=chunks + b"0\r\n\r\n"))
    status, _, body = _response(stream)
    assert status == 200, body
    assert json.loads(body)["QueueUrl"].endswith("/" + name)


def test_expect_100_continue(connection: tuple) -> None:
    sock, stream = connection
    name = unique("continue")
    data = json.dumps({"QueueName": name}).encode()
    head, _, _ = _request("CreateQueue", {}, "Expect: 100-continue\r\n", body=data).partition(
        b"\r\n\r\n")
    sock.sendall(head + b"\r\n\r\n")  # the body waits for the go-ahead, as a client would
    assert stream.readline() == b"HTTP/1.1 100 Continue\r\n"
    assert stream.readline() == b"\r\n"
    sock.sendall(data)
    status, _, body = _response(stream)
    assert status == 200 and json.loads(body)["QueueUrl"].endswith("/" + name)


def test_connection_close_is_honoured(connection: tuple) -> None:
    sock, stream = connection
    sock.sendall(_request("ListQueues", {}, "Connection: close\r\n"))
    status, headers, _ = _response(stream)
    assert status == 200 and headers.get("connection") == "close"
    assert stream.read() == b""  # and the server closed its side


def test_http_1_0_closes_after_one_answer(connection: tuple) -> None:
    sock, stream = connection
    sock.sendall(_request("ListQueues", {}).replace(b"HTTP/1.1", b"HTTP/1.0", 1))
    status, _, _ = _response(stream)
    assert status == 200
    assert stream.read() == b""


def test_keep_alive_serves_many_requests_on_one_connection(connection: tuple) -> None:
    sock, stream = connection
    for _ in range(50):
        sock.sendall(_request("ListQueues", {"MaxResults": 1}))
        assert _response(stream)[0] == 200


@pytest.mark.parametrize("head", [
    b"POST / HTTP/1.1\r\n",  # an HTTP/1.1 request without Host
    b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: elsewhere\r\n",  # two Host lines
])
def test_a_request_without_exactly_one_host_is_refused(connection: tuple, head: bytes) -> None:
    """RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request) status code to any
    HTTP/1.1 request message that lacks a Host header field and to any request message
    that contains more than one Host header field line"."""
    sock, stream = connection
    sock.sendall(head + f"X-Amz-Target: {TARGET}ListQueues\r\nContent-Type: {JSON}\r\n"
                 "Content-Length: 2\r\n\r\n{}".encode())
    status, headers, body = _response(stream)
    assert status == 400 and headers["connection"] == "close", body
    assert b"Host" in body
    assert stream.read() == b""


def test_an_http_1_0_request_needs_no_host(connection: tuple) -> None:
    """RFC 9112 §3.2 asks Host of HTTP/1.1 requests only (HTTP/1.0, RFC 1945, has none)."""
    sock, stream = connection
    sock.sendall(f"POST / HTTP/1.0\r\nX-Amz-Target: {TARGET}ListQueues\r\n"
                 f"Content-Type: {JSON}\r\nContent-Length: 2\r\n\r\n{{}}".encode())
    assert _response(stream)[0] == 200


def test_a_refused_request_is_answered_though_another_follows_it(connection: tuple) -> None:
    """A request refused before its handler (here 431, headers too large) gets its answer
    even when the client has pipelined another behind it; the connection then closes
    (the request after it is not read: RFC 9112 §9.6, a server may close after a
    response, and clients retry what was not answered)."""
    sock, stream = connection
    too_large = _request("ListQueues", {}, "X-Padding: " + "x" * 70_000 + "\r\n")
    sock.sendall(too_large + _request("ListQueues", {}))
    status, headers, _ = _response(stream)
    assert status == 431 and headers["connection"] == "close"
    assert stream.read() == b""
