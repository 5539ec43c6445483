"""A stand-in for your app: answers the worker's POST /tasks with 200 and prints each job.

Standard library only, so it runs in the Conveyor image itself (compose.yaml mounts it).
GET /health answers 200 for the container's health check.
"""

import json
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        job = {"path": self.path, "id": self.headers.get("X-Aws-Sqsd-Msgid"),
               "attempt": self.headers.get("X-Aws-Sqsd-Receive-Count"),
               "body": body.decode(errors="replace")}
        print(json.dumps(job), flush=True)
        self._answer(200 if self.path == "/tasks" else 404)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(200 if self.path == "/health" else 404)

    def _answer(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    # PID 1 in a container ignores SIGTERM unless it handles it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ThreadingHTTPServer(("0.0.0.0", 8000), Handler).serve_forever()
