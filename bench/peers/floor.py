"""A yardstick, not a peer: the least an SQS server in Python can do per request.

uvloop, httptools and orjson, as Conveyor uses them, with messages in a deque and no
checks, no receipt or visibility bookkeeping, no durability: only the actions the
benchmark calls, in the JSON protocol. What it costs per message is what Python and the
HTTP layer cost on this machine; Conveyor's figure over it is the price of everything
else (SQS's semantics and checks, the SQLite store). It is measured beside the peers
but never counts as one in the targets.

    python bench/peers/floor.py PORT
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import sys
import uuid
from collections import deque
from typing import Any

import httptools
import orjson
import uvloop

Message = tuple[str, str, str]  # id, body, MD5 of the body


class Queue:
    def __init__(self) -> None:
        self.ready: deque[Message] = deque()
        self.in_flight: dict[str, Message] = {}
        self.waiters: deque[asyncio.Future[None]] = deque()

    def put(self, message: Message) -> None:
        self.ready.append(message)
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


class Floor:
    def __init__(self, port: int) -> None:
        self.port = port
        self.queues: dict[str, Queue] = {}
        self._counter = itertools.count()
        self._prefix = uuid.uuid4().hex[:24]

    def _message(self, body: str) -> Message:
        return (f"{self._prefix}{next(self._counter):08x}", body,
                hashlib.md5(body.encode()).hexdigest())

    async def handle(self, action: str, req: dict[str, Any]) -> dict[str, Any]:
        if action in ("CreateQueue", "GetQueueUrl"):
            url = f"http://127.0.0.1:{self.port}/000000000000/{req['QueueName']}"
            self.queues.setdefault(url, Queue())
            return {"QueueUrl": url}
        if action == "DeleteQueue":
            self.queues.pop(req["QueueUrl"], None)
            return {}
        queue = self.queues[req["QueueUrl"]]
        if action == "SendMessage":
            message_id, _, md5 = message = self._message(req["MessageBody"])
            queue.put(message)
            return {"MessageId": message_id, "MD5OfMessageBody": md5}
        if action == "SendMessageBatch":
            sent = []
            for entry in req["Entries"]:
                message_id, _, md5 = message = self._message(entry["MessageBody"])
                queue.put(message)
                sent.append({"Id": entry["Id"], "MessageId": message_id, "MD5OfMessageBody": md5})
            return {"Successful": sent, "Failed": []}
        if action == "ReceiveMessage":
            return await self._receive(queue, req.get("MaxNumberOfMessages", 1),
                                       req.get("WaitTimeSeconds", 0))
        if action == "DeleteMessage":
            queue.in_flight.pop(req["ReceiptHandle"], None)
            return {}
        if action == "DeleteMessageBatch":
            for entry in req["Entries"]:
                queue.in_flight.pop(entry["ReceiptHandle"], None)
            return {"Successful": [{"Id": e["Id"]} for e in req["Entries"]], "Failed": []}
        return {}

    async def _receive(self, queue: Queue, limit: int, wait_s: int) -> dict[str, Any]:
        if not queue.ready and wait_s:
            waiter = asyncio.get_running_loop().create_future()
            queue.waiters.append(waiter)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter, wait_s)
        messages = []
        while queue.ready and len(messages) < limit:
            message_id, body, md5 = message = queue.ready.popleft()
            handle = message_id + "-r"
            queue.in_flight[handle] = message
            messages.append({"MessageId": message_id, "ReceiptHandle": handle,
                             "MD5OfBody": md5, "Body": body})
        return {"Messages": messages} if messages else {}


class Connection(asyncio.Protocol):
    def __init__(self, floor: Floor) -> None:
        self.floor = floor
        self.parser = httptools.HttpRequestParser(self)
        self.target = b""
        self.body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_begin(self) -> None:
        self.target, self.body = b"", []

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"x-amz-target":
            self.target = value

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        action = self.target.decode().partition(".")[2]
        req = orjson.loads(b"".join(self.body)) if self.body else {}
        asyncio.get_running_loop().create_task(self._answer(action, req))

    async def _answer(self, action: str, req: dict[str, Any]) -> None:
        body = orjson.dumps(await self.floor.handle(action, req)) if action else b"{}"
        self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\n"
                             b"content-length: %d\r\n\r\n%s" % (len(body), body))


async def serve(port: int) -> None:
    floor = Floor(port)
    server = await asyncio.get_running_loop().create_server(
        lambda: Connection(floor), "127.0.0.1", port)
    print(f"floor listening on 127.0.0.1:{port}", flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(serve(int(sys.argv[1])))
