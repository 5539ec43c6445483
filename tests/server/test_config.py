"""The server's config file: queues declared at start, and clear errors for bad files."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ServerProcess, sqs_client, start_fails

CONFIG = """
mode: relaxed
queues:
  - name: jobs
    attributes: {VisibilityTimeout: 60, ReceiveMessageWaitTimeSeconds: 20}
    dead_letter: {queue: jobs-dlq, max_receive_count: 5}
    tags: {team: billing}
  - name: jobs-dlq
  - name: events.fifo
    attributes: {FifoQueue: true, ContentBasedDeduplication: true}
"""


def test_declared_queues_exist_with_their_settings(tmp_path: Path) -> None:
    config = tmp_path / "conveyor.yaml"
    config.write_text(CONFIG)
    server = ServerProcess(tmp_path / "data", "--config", str(config)).start()
    try:
        sqs = sqs_client(server.url)
        jobs = sqs.get_queue_url(QueueName="jobs")["QueueUrl"]
        attributes = sqs.get_queue_attributes(QueueUrl=jobs, AttributeNames=["All"])["Attributes"]
        assert attributes["VisibilityTimeout"] == "60"
        assert attributes["ReceiveMessageWaitTimeSeconds"] == "20"
        assert json.loads(attributes["RedrivePolicy"]) == {
            "deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:jobs-dlq",
            "maxReceiveCount": 5}
        assert sqs.list_queue_tags(QueueUrl=jobs)["Tags"] == {"team": "billing"}
        events = sqs.get_queue_url(QueueName="events.fifo")["QueueUrl"]
        fifo = sqs.get_queue_attributes(QueueUrl=events, AttributeNames=["All"])["Attributes"]
        assert fifo["FifoQueue"] == "true" and fifo["ContentBasedDeduplication"] == "true"

        # A restart with a changed file updates what exists and keeps its messages.
        sqs.send_message(QueueUrl=jobs, MessageBody="kept")
        config.write_text(CONFIG.replace("VisibilityTimeout: 60", "VisibilityTimeout: 90"))
        server.restart()
        attributes = sqs.get_queue_attributes(QueueUrl=jobs, AttributeNames=["All"])["Attributes"]
        assert attributes["VisibilityTimeout"] == "90"
        assert attributes["ApproximateNumberOfMessages"] == "1"
    finally:
        server.stop()


@pytest.mark.parametrize(("text", "error"), [
    ("queues: [1, 2\n", "while parsing"),
    ("- 1\n", "expected a mapping at the top level"),
    ("colour: blue\n", "unknown keys ['colour']"),
    ('port: "x"\n', "port: expected a port number, not 'x'"),
    ("port: 70000\n", "port: expected 0-65535"),
    ("port: false\n", "port: expected a port number, not False"),
    ("access_keys: [AKID]\n", "access_keys: expected a mapping"),
    ("log_level: loud\n", "log_level: expected one of"),
    ("queues: {name: a}\n", "queues: expected a list"),
    ("queues: [{attributes: {}}]\n", "queues[0]: expected a mapping with a name"),
    ("queues: [{name: a, attributes: [1]}]\n", "queues[0] (a): attributes: expected a mapping"),
    ("queues: [{name: a, tags: x}]\n", "queues[0] (a): tags: expected a mapping"),
    ("queues: [{name: a, dead_letter: {queue: b, max_receive_count: x}}, {name: b}]\n",
     "max_receive_count: expected a whole number, not 'x'"),
    ("queues: [{name: a, dead_letter: b}]\n", "dead_letter: expected a mapping"),
    ("queues: [{name: a, dead_letter: {queue: b, max_receive_count: 5000}}, {name: b}]\n",
     "queue a: InvalidParameterValue"),
    ("queues: [{name: 'bad name'}]\n", "queue bad name: InvalidParameterValue"),
    ("metrics_token: 'two words'\n", "metrics_token: expected letters, digits and -._~+/"),
    ("metrics_token: 'caf\u00e9'\n", "metrics_token: expected letters, digits and -._~+/"),
    ("metrics_port: 9324\n", "metrics_port: expected a port other than the main one (9324)"),
    ("metrics_port: 0\n", "metrics_port: expected 1-65535, not 0"),
    ("console_session_hours: 0\n", "console_session_hours: expected more than 0"),
    ("console_session_hours: soon\n", "console_session_hours: expected a number of hours"),
    ("request_timeout: soon\n", "request_timeout: expected seconds, not 'soon'"),
    ("request_timeout: 0\n", "request_timeout: expected seconds above 0, not 0"),
    ("max_connections: 0\n", "max_connections: expected at least 1, not 0"),
    ("max_connections: 1.5\n", "max_connections: expected a number of connections"),
    ("tls_cert: /nonexistent/cert.pem\n", "--tls-cert /nonexistent/cert.pem: no such file"),
])
def test_a_bad_file_is_refused_with_a_clear_error(tmp_path: Path, text: str,
                                                  error: str) -> None:
    config = tmp_path / "conveyor.yaml"
    config.write_text(text)
    # no --port: it would override the file's
    assert error in start_fails("--data-dir", str(tmp_path / "data"), "--config", str(config))


def test_start_problems_are_explained(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        error = start_fails("--port", port, "--data-dir", str(tmp_path / "a"))
    assert f"127.0.0.1:{port} is already in use" in error and "--port" in error

    error = start_fails("--host", "0.0.0.0", "--data-dir", str(tmp_path / "b"))
    assert "without access keys" in error and "--allow-open" in error

    # A malformed PostgreSQL URL: one line naming the option, not the driver's traceback
    # (asyncpg parses the port itself; nothing is connected).
    error = start_fails("--store", "postgresql://postgres@127.0.0.1:abc/test")
    assert error.strip().count("\n") == 0 and "--store: not a valid PostgreSQL URL" in error

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        error = start_fails("--port", "0", "--metrics-port", port, "--data-dir",
                             str(tmp_path / "d"))
    assert f"--metrics-port {port}: " in error

    running = ServerProcess(tmp_path / "c").start()
    try:
        error = start_fails("--port", "0", "--data-dir", str(tmp_path / "c"))
    finally:
        running.stop()
    assert "in use by another Conveyor server" in error


def test_port_0_listens_on_a_free_port_and_names_it(tmp_path: Path) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "conveyor", "server", "--port", "0", "--data-dir",
         str(tmp_path / "data")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert server.stdout is not None
        line = next(line for line in server.stdout if "listening on" in line)
        port = int(line.split("http://127.0.0.1:", 1)[1].split()[0])
        assert port > 0
        sqs = sqs_client(f"http://127.0.0.1:{port}")
        url = sqs.create_queue(QueueName="found")["QueueUrl"]
        assert url == f"http://127.0.0.1:{port}/000000000000/found"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_keys_and_allow_open_come_from_the_environment_too(monkeypatch) -> None:
    """A CI service container gets variables, not arguments."""
    from conveyor.server.cli import _settings, server_command
    from conveyor.server.config import ConfigError

    monkeypatch.setenv("CONVEYOR_HOST", "0.0.0.0")
    monkeypatch.setenv("CONVEYOR_ACCESS_KEY", "AKID1:secret1 AKID2:secret2")
    params = server_command.make_context("server", []).params
    assert sorted(_settings(None, params)["access_keys"]) == ["AKID1", "AKID2"]

    monkeypatch.delenv("CONVEYOR_ACCESS_KEY")
    monkeypatch.setenv("CONVEYOR_ALLOW_OPEN", "true")
    assert _settings(None, server_command.make_context("server", []).params)["allow_open"]
    monkeypatch.setenv("CONVEYOR_ALLOW_OPEN", "false")
    with pytest.raises(ConfigError, match="without access keys"):
        _settings(None, server_command.make_context("server", []).params)
