"""The app behind the worker in tests/worker/test_batch_delivery.py: a `http.server` app (HTTP/1.1,
keep-alive) that takes BatchSize POSTs (AWS Lambda's SQS event) and answers with Lambda's
partial batch response, the way a Lambda function for an SQS trigger does.

Every record is written, before the answer, as one JSON line {"id", "body", "count",
"group", "batch", "size"} to the file named by $CONVEYOR_TEST_RECORD; the whole first
request is kept in $CONVEYOR_TEST_RECORD.first.json for the tests of the event's shape.
Each record's body says what becomes of it:

    ok          succeeds
    fail-once   listed in batchItemFailures on its first receive, succeeds after
    fail-always always listed

(only the failed message itself is listed, never those behind it in its FIFO group: the
worker is to hold those back by itself)

and a body `answer:<how>` on its first receive makes the app answer the whole batch that
way (after that receive, the batch succeeds): malformed, unknown-id, bad-key, empty-id,
null-id, array, huge, 500, slow, and for success, empty, null, empty-object, empty-list,
null-list.
"""

from __future__ import annotations

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SLOW_S = 3.5  # longer than the tests' InactivityTimeout
HUGE_BYTES = 6 * 1024 * 1024 + 1  # one byte over Lambda's 6 MB response quota

ANSWERS: dict[str, tuple[int, bytes]] = {
    "malformed": (200, b'{"batchItemFailures": [{"itemIdentifier": '),
    "unknown-id": (200, b'{"batchItemFailures": [{"itemIdentifier": "no-such-message"}]}'),
    "bad-key": (200, b'{"batchItemFailures": [{"messageId": "%(id)s"}]}'),
    "empty-id": (200, b'{"batchItemFailures": [{"itemIdentifier": ""}]}'),
    "null-id": (200, b'{"batchItemFailures": [{"itemIdentifier": null}]}'),
    "array": (200, b'[{"itemIdentifier": "%(id)s"}]'),
    "500": (500, b'{"batchItemFailures": []}'),
    "empty": (200, b""),
    "null": (200, b"null"),
    "empty-object": (200, b"{}"),
    "empty-list": (200, b'{"batchItemFailures": []}'),
    "null-list": (200, b'{"batchItemFailures": null}'),
}


def _record(lines: list[dict[str, Any]], first_request: bytes) -> None:
    path = os.environ["CONVEYOR_TEST_RECORD"]
    first = Path(path + ".first.json")
    if not first.exists():
        first.write_bytes(first_request)
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _failed(records: list[dict[str, Any]]) -> list[str]:
    failed = []
    for record in records:
        first = record["attributes"]["ApproximateReceiveCount"] == "1"
        body = record["body"]
        if body == "fail-always" or (first and body == "fail-once"):
            failed.append(record["messageId"])
    return failed


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        request = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        records = json.loads(request)["Records"]
        batch = f"{time.monotonic_ns()}-{records[0]['messageId']}"
        _record([{"id": r["messageId"], "body": r["body"],
                  "count": int(r["attributes"]["ApproximateReceiveCount"]),
                  "group": r["attributes"].get("MessageGroupId"), "batch": batch,
                  "size": len(records)} for r in records], request)
        how = next((r["body"].removeprefix("answer:") for r in records
                    if r["body"].startswith("answer:")
                    and r["attributes"]["ApproximateReceiveCount"] == "1"), None)
        if how == "slow":
            time.sleep(SLOW_S)
        elif how == "huge":
            return self._answer(200, b'{"batchItemFailures": [], "padding": "'
                                + b"x" * HUGE_BYTES + b'"}')
        elif how is not None:
            status, body = ANSWERS[how]
            return self._answer(status, body.replace(b"%(id)s", records[0]["messageId"].encode()))
        failures = [{"itemIdentifier": msgid} for msgid in _failed(records)]
        return self._answer(200, json.dumps({"batchItemFailures": failures}).encode())

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


if __name__ == "__main__":
    ThreadingHTTPServer.daemon_threads = True
    with ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler) as server:
        server.serve_forever()
