"""Every `conveyor` command that takes an endpoint or a URL refuses a bad one in one line
(no traceback), and a queue given by URL is reached at that URL's host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ServerProcess, free_port

ROOT = Path(__file__).resolve().parent.parent
GOOD_QUEUE = "http://127.0.0.1:9/000000000000/jobs"  # never contacted: the call fails first


def conveyor(*args: str, env: dict[str, str] | None = None,
             timeout_s: float = 30) -> subprocess.CompletedProcess[str]:
    """`conveyor ARGS` in a process of its own, as from a shell."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")}
    return subprocess.run([sys.executable, "-P", "-m", "conveyor", *args], cwd=ROOT,
                          env={**base, "PYTHONPATH": str(ROOT), **(env or {})},
                          capture_output=True, text=True, timeout=timeout_s)


BAD = ["not-a-url", "http://127.0.0.1:99999", "http://127.0.0.1:port", "https://"]

CASES = [
    *[(["queue", "list", "--endpoint-url", bad], "--endpoint-url") for bad in BAD],
    (["queue", "create", "jobs", "--endpoint-url", "not-a-url"], "--endpoint-url"),
    (["queue", "redrive", "jobs-dlq", "--endpoint-url", "http://h:70000"], "--endpoint-url"),
    (["message", "send", "jobs", "x", "--endpoint-url", "http://127.0.0.1:x"],
     "--endpoint-url"),
    (["message", "receive", "jobs", "--endpoint-url", "localhost:9324"], "--endpoint-url"),
    (["message", "send", "http://127.0.0.1:99999/000000000000/jobs", "x"], "not a queue URL"),
    (["cron", "run", "--worker-queue-url", "not-a-url"], "--worker-queue-url"),
    (["cron", "run", "--worker-queue-url", GOOD_QUEUE, "--endpoint-url", "http://h:0"],
     "--endpoint-url"),
    (["worker", "--worker-queue-url", "http://127.0.0.1:99999/000000000000/jobs"],
     "WorkerQueueURL"),
    (["worker", "--worker-queue-url", GOOD_QUEUE, "--endpoint-url", "not-a-url"],
     "EndpointURL"),
    (["worker", "--worker-queue-url", GOOD_QUEUE, "--app-url", "http://localhost:808o"],
     "AppURL"),
    (["scale", "run", "--queue-url", "not-a-url"], "--queue-url"),
    (["scale", "run", "--queue-url", GOOD_QUEUE, "--app-url", "http://[::1"], "--app-url"),
    (["scale", "status", "--url", "127.0.0.1:9330"], "--url"),
    (["up", "--app", "http://localhost:99999"], "--app"),
    (["up", "--demo", "--port", "99999"], "--port"),
]


@pytest.mark.parametrize(("args", "named"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_bad_endpoint_is_a_one_line_error(args: list[str], named: str) -> None:
    done = conveyor(*args)
    assert done.returncode in (1, 2), done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    assert named in lines[0]


def test_a_bad_endpoint_from_the_environment_names_the_variable() -> None:
    done = conveyor("queue", "list", env={"CONVEYOR_ENDPOINT_URL": "127.0.0.1:9324"})
    assert done.returncode == 2
    assert done.stderr.startswith("Error: CONVEYOR_ENDPOINT_URL: '127.0.0.1:9324' is not an "
                                  "http(s) URL"), done.stderr


def test_a_queue_url_is_reached_at_its_own_host(server: ServerProcess, sqs,
                                                queue_name: str) -> None:
    assert server.port != 9324  # the default endpoint is not where this queue lives
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sent = conveyor("message", "send", url, "hello")
    assert sent.returncode == 0, sent.stderr
    received = conveyor("message", "receive", url, "--wait", "5", "--delete")
    assert received.returncode == 0, received.stderr
    assert received.stdout.splitlines()[1] == "hello"
    shown = conveyor("queue", "show", url, "--json")
    assert shown.returncode == 0 and url in shown.stdout, shown.stderr
    # an endpoint given explicitly still wins, as with the AWS CLI
    elsewhere = f"http://127.0.0.1:{free_port()}"
    explicit = conveyor("message", "send", url, "hello", "--endpoint-url", elsewhere)
    assert explicit.returncode == 1 and f"cannot reach {elsewhere}" in explicit.stderr
