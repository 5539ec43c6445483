"""GET /ready: readiness, kept apart from GET /health (liveness).

Kubernetes' probes (kubernetes.io/docs/tasks/configure-pod-container/
configure-liveness-readiness-startup-probes/): a failing liveness probe restarts the
container, a failing readiness probe removes the pod from its Service's endpoints until it
passes again; an httpGet probe passes on a status from 200 to 399 and fails on any other.
So /health stays 200 while the process answers (a restart cannot bring a database back),
and /ready answers 503 Service Unavailable ("currently unable to handle the request due to
a temporary overload or scheduled maintenance, which will likely be alleviated after some
delay", RFC 9110 §15.6.4) while the store is unreachable or the server is shutting down.
"""

from __future__ import annotations

import json
import signal
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pg_instance import PostgresInstance, own_postgres
from tests.server.conftest import Launcher
from tests.server.helpers import read_response, wait_for
from tests.support import ServerProcess, free_port, sqs_client

GUARD_S = 10  # a socket read that outlasts this means the server never answered
OUTAGE_NOTICED_S = 20  # bounds, not timings: the store notices at once, and reconnects
RECOVERY_S = 30  # with back-off of at most 5 s


def _get(url: str) -> tuple[int, Any]:
    """Status and JSON body of a GET, error statuses included."""
    try:
        with urllib.request.urlopen(url, timeout=GUARD_S) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def test_ready_once_the_store_is_open(launch: Launcher) -> None:
    """On either store (the suite runs per store): ready as soon as the server listens,
    on the main port and on the --metrics-port listener alike, where /health is."""
    port = free_port()
    server = launch("--metrics-port", str(port))
    for base in (server.url, f"http://127.0.0.1:{port}"):
        assert _get(base + "/ready") == (200, {"status": "ready"})
        assert _get(base + "/health") == (200, {"status": "ok"})


def test_ready_is_open_on_a_server_with_keys(launch: Launcher) -> None:
    """Open like /health: a probe carries no signature."""
    server = launch("--access-key", "AKIDREADY:secret")
    assert _get(server.url + "/ready") == (200, {"status": "ready"})


@pytest.fixture
def database() -> Iterator[PostgresInstance]:
    with own_postgres() as instance:  # never the shared one: this one is stopped
        yield instance


def test_ready_follows_the_database_while_health_stays(database: PostgresInstance,
                                                       tmp_path: Path) -> None:
    operator_port = free_port()
    server = ServerProcess(tmp_path, "--store", database.url, "--mode", "relaxed",
                           "--metrics-port", str(operator_port)).start()
    bases = (server.url, f"http://127.0.0.1:{operator_port}")
    try:
        for base in bases:
            assert _get(base + "/ready") == (200, {"status": "ready"})

        database.stop()
        for base in bases:
            status, body = wait_for(lambda base=base: (answer := _get(base + "/ready"))[0]
                                    == 503 and answer, OUTAGE_NOTICED_S, what="/ready 503")
            assert body["status"] == "unavailable"
            assert "PostgreSQL unreachable" in body["reason"]
            assert _get(base + "/health") == (200, {"status": "ok"})  # alive all the same
        with pytest.raises(Exception, match="ServiceUnavailable"):  # as /ready said
            sqs_client(server.url).list_queues()

        database.start()
        for base in bases:
            wait_for(lambda base=base: _get(base + "/ready") == (200, {"status": "ready"}),
                     RECOVERY_S, what="/ready 200 again")
        assert sqs_client(server.url).list_queues()["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert "Traceback" not in server.log()
    finally:
        server.stop()


def test_not_ready_while_shutting_down(tmp_path: Path) -> None:
    """Once SIGTERM has come, /ready says 503 on connections still open, so a load
    balancer stops sending work before the node goes. A long poll parked on the connection
    holds it open until the shutdown answers it; a /ready pipelined behind it is answered
    after that (HTTP/1.1 answers pipelined requests in order, RFC 9112 §9.3.2)."""
    server = ServerProcess(tmp_path).start()
    try:
        queue = sqs_client(server.url).create_queue(QueueName="parked")["QueueUrl"]
        receive = json.dumps({"QueueUrl": queue, "WaitTimeSeconds": 20}).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=GUARD_S) as sock, \
                sock.makefile("rb") as stream:
            sock.sendall(b"GET /ready HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert read_response(stream)[0] == 200
            sock.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Content-Type: application/x-amz-json-1.0\r\n"
                         b"X-Amz-Target: AmazonSQS.ReceiveMessage\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(receive), receive)
                         + b"GET /ready HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert server.proc is not None
            server.proc.send_signal(signal.SIGTERM)
            assert read_response(stream) == (200, b"{}")  # the long poll, answered empty
            status, body = read_response(stream)
        assert (status, json.loads(body)) == (503, {"status": "unavailable",
                                                    "reason": "shutting down"})
        assert server.proc.wait(GUARD_S) == 0
    finally:
        server.stop()
