"""`conveyor up` as a newcomer meets it: it waits for the app before saying "ready", says
clearly when the app never answers, works from a directory holding a folder named
`conveyor`, and `conveyor scale status` follows its --autoscale fleet."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support import RecordingApp, ServerProcess, free_port, sqs_client

ROOT = Path(__file__).resolve().parents[2]


def conveyor(*args: str) -> list[str]:
    """How the console script runs this checkout: no working directory on the path."""
    return [sys.executable, "-P", "-m", "conveyor", *args]


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


class Up:
    """A `conveyor up` process whose output is read line by line."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.proc = subprocess.Popen(conveyor("up", *args), cwd=cwd, env=child_env(),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line)
        self._queue.put(None)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout_s: float = 60) -> re.Match[str]:
        """The first output line matching `pattern`; fails the test if none comes."""
        for line in self.lines:
            if found := re.search(pattern, line):
                return found
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            if found := re.search(pattern, line):
                return found
        pytest.fail(f"no line matching {pattern!r} from conveyor up:\n{self.output}")

    def finish(self, timeout_s: float = 60) -> int:
        """Wait for the process to exit (reading everything it printed); its exit code."""
        code = self.proc.wait(timeout_s)
        while (line := self._queue.get(timeout=10)) is not None:
            self.lines.append(line)
        return code

    def interrupt(self) -> int:
        """Ctrl-C, as a terminal sends it."""
        os.killpg(self.proc.pid, signal.SIGINT)
        return self.finish()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def _refuses(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _newcomer_dir(tmp_path: Path) -> Path:
    """A project directory with a package of its own named `conveyor`."""
    project = tmp_path / "project"
    (project / "conveyor").mkdir(parents=True)
    (project / "conveyor" / "__init__.py").write_text(
        'raise ImportError("this is the project\'s own conveyor package")\n')
    return project


def test_up_waits_for_the_app_runs_from_any_directory_and_scale_status_follows_it(
        tmp_path: Path) -> None:
    project = _newcomer_dir(tmp_path)
    port, app_port, status_port = free_port(), free_port(), free_port()
    up = Up(project, "--app", f"http://127.0.0.1:{app_port}", "--port", str(port),
            "--autoscale", "1:2", "--status-port", str(status_port), "--poll-wait-time", "1",
            "--idle-backoff-max", "0.5")
    app = None
    try:
        up.wait_for(r"waiting for your app at http://127\.0\.0\.1:\d+/ to answer "
                    r"\(connection refused\)")
        assert "ready" not in up.output  # the server is up, but no app: not ready
        app = RecordingApp(app_port)
        up.wait_for(r"conveyor up: ready")
        command = up.wait_for(r"autoscaling\s+(conveyor scale status --url \S+)")[1]
        assert command == f"conveyor scale status --url http://127.0.0.1:{status_port}"
        queue_url = up.wait_for(r"worker queue\s+(\S+)")[1]
        # the queue server and the autoscaled workers are child processes started in a
        # directory whose `conveyor` folder they must not import
        sqs_client(f"http://127.0.0.1:{port}").send_message(QueueUrl=queue_url,
                                                            MessageBody='{"job": 1}')
        app.wait_for_post(b'{"job": 1}')
        deadline = time.monotonic() + 60
        while True:
            status = subprocess.run(conveyor(*command.split()[1:]), cwd=project,
                                    env=child_env(), capture_output=True, text=True,
                                    timeout=30)
            if status.returncode == 0 and re.search(r"- w1\s+running", status.stdout):
                break
            if time.monotonic() > deadline:
                pytest.fail(f"conveyor scale status: {status.stdout}{status.stderr}")
            time.sleep(0.5)
        assert status.stdout.startswith("queue worker-queue  policy backlog"), status.stdout
        assert up.interrupt() == 0, up.output
        assert "conveyor up: stopped." in up.output
        assert _refuses(port) and _refuses(status_port)
        assert "ImportError" not in up.output
        assert "ImportError" not in (project / "conveyor-data" / "server.log").read_text()
        for log in (project / "conveyor-data" / "workers").glob("*.log"):
            assert "ImportError" not in log.read_text(), log.read_text()
    finally:
        up.kill()
        if app is not None:
            app.close()


def test_up_says_clearly_when_the_app_never_answers(tmp_path: Path) -> None:
    port, app_port = free_port(), free_port()
    up = Up(tmp_path, "--app", f"http://127.0.0.1:{app_port}/", "--http-path", "/jobs",
            "--port", str(port), "--app-timeout", "1")
    try:
        code = up.finish()
    finally:
        up.kill()
    assert code == 1, up.output
    assert (f"Error: the app at http://127.0.0.1:{app_port}/jobs did not answer within 1s "
            "(last: connection refused)") in up.output
    assert "ready" not in up.output and "Traceback" not in up.output
    assert _refuses(port)  # and the queue server it started is stopped


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_up_stopped_while_it_waits_for_the_app_stops_its_server(tmp_path: Path, sig) -> None:
    port = free_port()
    up = Up(tmp_path, "--app", f"http://127.0.0.1:{free_port()}", "--port", str(port))
    try:
        up.wait_for(r"waiting for your app")
        os.killpg(up.proc.pid, sig)
        assert up.finish() == 0, up.output
    finally:
        up.kill()
    assert "conveyor up: stopped." in up.output and "Traceback" not in up.output
    assert _refuses(port)


def _no_aws_config_env(home: Path) -> dict[str, str]:
    """A newcomer's shell: no AWS configuration anywhere, this checkout's venv on PATH."""
    env = {k: v for k, v in child_env().items() if not k.startswith("AWS_") or k == "AWS_CA_BUNDLE"}
    return {**env, "HOME": str(home), "PATH": f"{Path(sys.executable).parent}:{env['PATH']}"}


def test_the_banners_send_commands_work_as_printed_without_aws_configuration(
        tmp_path: Path) -> None:
    """Both printed ways of sending a job work on a machine with no AWS region or
    credentials configured, and the dead-letter line gives the queue's own
    maxReceiveCount (its RedrivePolicy), not the worker's MaxRetries."""
    port, app_port = free_port(), free_port()
    # The worker queue exists already, its redrive policy saying 7 (MaxRetries will say 4).
    server = ServerProcess(tmp_path / "conveyor-data", port=port).start()
    try:
        sqs = sqs_client(server.url)
        dlq = sqs.create_queue(QueueName="worker-queue-dead-letter")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])
        sqs.create_queue(QueueName="worker-queue", Attributes={"RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": arn["Attributes"]["QueueArn"], "maxReceiveCount": 7})})
    finally:
        server.stop()
    app = RecordingApp(app_port)
    home = tmp_path / "home"
    home.mkdir()
    up = Up(tmp_path, "--app", f"http://127.0.0.1:{app_port}", "--port", str(port),
            "--max-retries", "4", "--poll-wait-time", "1")
    try:
        up.wait_for(r"conveyor up: ready")
        assert up.wait_for(r"dead-letter queue .*\(after (\d+) receives\)")[1] == "7"
        conveyor_send = up.wait_for(r"send a job:\s+(conveyor message send .*)$")[1]
        aws_send = up.wait_for(r"or the AWS CLI: (.*)$")[1]
        for n, command in enumerate((conveyor_send, aws_send)):
            body = f'{{"banner": {n}}}'
            command = command.replace("'{\"hello\": 1}'", f"'{body}'")
            done = subprocess.run(command, shell=True, env=_no_aws_config_env(home),
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, f"{command}\n{done.stdout}{done.stderr}"
            app.wait_for_post(body.encode())
    finally:
        up.kill()
        app.close()
