"""The app behind the worker in tests/worker/test_app_servers.py, once per Python server kind:
a WSGI app (gunicorn, waitress), an ASGI app (uvicorn) and a `http.server` handler.

Every POST is recorded, before it is answered, as one line `<message id> <mode> <receive
count>` appended to the file named by $CONVEYOR_TEST_RECORD (one write with O_APPEND, so the
processes of a gunicorn stay whole lines). The message attribute `mode` (header
X-Aws-Sqsd-Attr-mode) says how to answer:

    length   200 with Content-Length      chunked  200, chunked body in three pieces
    close    200, body ended by the close  big      200, 1 MiB body
    fail500  500 on the first receive, 200 after
    fail503  503 + Retry-After: 1 on the first receive, 200 after
    reset    on the first receive, 200 + Content-Length 1000, 10 bytes, then the connection
             dropped (a crash mid-answer: must not count as a success); 200 after
    slow     on the first receive, answers after SLOW_S (past the worker's
             InactivityTimeout); 200 after
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SLOW_S = 3.5
BIG = b"x" * (1 << 20)
PIECES = [b"one,", b"two,", b"three"]


def record(msgid: str, mode: str, receive_count: str) -> None:
    line = f"{msgid} {mode} {receive_count}\n".encode()
    fd = os.open(os.environ["CONVEYOR_TEST_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _abort(sock: socket.socket) -> None:
    """Drop the connection with a reset, as a crashing process's kernel would."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


# -- WSGI (gunicorn sync worker, waitress) ---------------------------------------------------

def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
    environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    mode = environ.get("HTTP_X_AWS_SQSD_ATTR_MODE", "length")
    first = environ.get("HTTP_X_AWS_SQSD_RECEIVE_COUNT") == "1"
    record(environ.get("HTTP_X_AWS_SQSD_MSGID", ""), mode,
           environ.get("HTTP_X_AWS_SQSD_RECEIVE_COUNT", ""))
    if first and mode == "fail500":
        start_response("500 Internal Server Error", [("Content-Length", "4")])
        return iter([b"boom"])
    if first and mode == "fail503":
        start_response("503 Service Unavailable", [("Content-Length", "4"),
                                                   ("Retry-After", "1")])
        return iter([b"busy"])
    if first and mode == "reset":
        start_response("200 OK", [("Content-Length", "1000")])
        return _crash_after(b"x" * 10)
    if first and mode == "slow":
        time.sleep(SLOW_S)
    if mode == "chunked":
        start_response("200 OK", [])  # no length: the server chunks (HTTP/1.1)
        return _pieces()
    body = BIG if mode == "big" else b"ok"
    start_response("200 OK", [("Content-Length", str(len(body)))])
    return iter([body])


def _pieces() -> Iterator[bytes]:
    yield from PIECES  # a generator: the server cannot know the length, so it chunks


def _crash_after(part: bytes) -> Iterator[bytes]:
    yield part
    raise RuntimeError("the app crashed mid-answer (on purpose)")


# -- ASGI (uvicorn) --------------------------------------------------------------------------

async def asgi(scope: dict[str, Any], receive: Callable[..., Any],
               send: Callable[..., Any]) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    mode = headers.get("x-aws-sqsd-attr-mode", "length")
    count = headers.get("x-aws-sqsd-receive-count", "")
    first = count == "1"
    record(headers.get("x-aws-sqsd-msgid", ""), mode, count)

    async def answer(status: int, body: bytes, *extra: tuple[bytes, bytes]) -> None:
        start = [(b"content-length", str(len(body)).encode()), *extra]
        await send({"type": "http.response.start", "status": status, "headers": start})
        await send({"type": "http.response.body", "body": body})

    if first and mode == "fail500":
        return await answer(500, b"boom")
    if first and mode == "fail503":
        return await answer(503, b"busy", (b"retry-after", b"1"))
    if first and mode == "reset":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"1000")]})
        await send({"type": "http.response.body", "body": b"x" * 10, "more_body": True})
        raise RuntimeError("the app crashed mid-answer (on purpose)")
    if first and mode == "slow":
        await asyncio.sleep(SLOW_S)
    if mode == "chunked":  # no length: uvicorn chunks
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for piece in PIECES:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return None
    return await answer(200, BIG if mode == "big" else b"ok")


# -- http.server (python apps.py PORT 1.0|1.1) -----------------------------------------------

class Handler(BaseHTTPRequestHandler):
    """BaseHTTPRequestHandler as people write it; protocol_version set per run."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        mode = self.headers.get("X-Aws-Sqsd-Attr-mode", "length")
        count = self.headers.get("X-Aws-Sqsd-Receive-Count", "")
        first = count == "1"
        record(self.headers.get("X-Aws-Sqsd-Msgid", ""), mode, count)
        if first and mode == "fail500":
            return self._answer(500, b"boom")
        if first and mode == "fail503":
            return self._answer(503, b"busy", {"Retry-After": "1"})
        if first and mode == "reset":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"x" * 10)
            self.close_connection = True
            return _abort(self.connection)
        if first and mode == "slow":
            time.sleep(SLOW_S)
        if mode == "chunked" and self.protocol_version == "HTTP/1.1":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in PIECES:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
            return None
        if mode == "close" or (mode == "big" and self.protocol_version == "HTTP/1.0"):
            # http.server's default: no Content-Length, the close ends the body
            self.send_response(200)
            if self.protocol_version == "HTTP/1.1":
                self.send_header("Connection", "close")  # (1.1 needs to say it)
            self.end_headers()
            self.wfile.write(BIG if mode == "big" else b"done")
            self.close_connection = True
            return None
        return self._answer(200, BIG if mode == "big" else b"ok")

    def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


def serve_stdlib(port: int, version: str) -> None:
    Handler.protocol_version = f"HTTP/{version}"
    ThreadingHTTPServer.daemon_threads = True
    with ThreadingHTTPServer(("127.0.0.1", port), Handler) as server:
        server.serve_forever()


if __name__ == "__main__":
    serve_stdlib(int(sys.argv[1]), sys.argv[2])
