"""The daemon's HTTP/1.1 client against apps that answer in unusual but valid ways."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from conveyor.worker.http1 import AppClient, ConnectionBroken
from tests.worker.conftest import run


@asynccontextmanager
async def raw_app(answer: bytes) -> AsyncIterator[str]:
    """An app that reads one request per connection turn and writes `answer` back."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                await reader.readexactly(length)
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()


async def post_twice(answer: bytes) -> list[tuple[int, dict[str, str]]]:
    async with raw_app(answer) as url:
        client = AppClient(url, connect_timeout_s=5)
        try:
            return [((r := await client.post("/", {}, b"job", 5)).status, r.headers)
                    for _ in range(2)]
        finally:
            client.close()


@pytest.mark.parametrize("interim", [b"HTTP/1.1 100 Continue\r\n\r\n",
                                     b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"])
def test_an_interim_answer_is_skipped_for_the_final_one(interim: bytes) -> None:
    final = b"HTTP/1.1 503 Busy\r\nRetry-After: 7\r\nContent-Length: 2\r\n\r\nno"
    # Twice on one kept-alive connection: the parser is back in step after each.
    assert run(post_twice(interim + final)) == [(503, {"retry-after": "7"})] * 2


def test_bad_http_from_the_app_is_a_broken_connection() -> None:
    with pytest.raises(ConnectionBroken, match="bad HTTP"):
        run(post_twice(b"garbage\r\n\r\n"))
