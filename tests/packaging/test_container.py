"""The container image (Containerfile), built and run with podman: the server through a
published loopback port (send, receive, console, HEALTHCHECK, non-root), a restart that
keeps queued messages in the volume, a worker that POSTs to a sample app and drains on
`podman stop`, `conveyor up` from the same image, and deploy/compose/compose.yaml
(server + worker + sample app) under podman-compose.

No registry is reachable on CI's machines: .ci/container-setup installs podman and runc
and builds a local Debian base (mmdebstrap), which the build takes as its BASE argument.
Without podman, runc or that base the test skips locally and fails in CI.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.packaging.conftest import ROOT, SampleApp, missing, require_module
from tests.support import free_port, sqs_client, wait_http

pytestmark = [pytest.mark.packaging, pytest.mark.container]

BASE = os.environ.get("CONVEYOR_CONTAINER_BASE", "localhost/conveyor-base:bookworm")
IMAGE = "localhost/conveyor-sqs:test"
BUILD_TIMEOUT_S = 600  # a cold build downloads every dependency; a warm one takes seconds


class Podman:
    """podman with runc and limits this VM lets a container set."""

    def __init__(self, conf: Path) -> None:
        self.env = {**os.environ, "CONTAINERS_CONF": str(conf)}
        self.names: list[str] = []
        self.volumes: list[str] = []
        self.volumes_before: set[str] = set()

    def __call__(self, *args: str, timeout_s: float = 60,
                 check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["podman", "--runtime", "runc", *args], env=self.env,
                              capture_output=True, text=True, timeout=timeout_s, check=False)
        if check and done.returncode:
            pytest.fail(f"podman {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
        return done

    def start(self, *args: str) -> str:
        """`podman run -d` a container of the image; removed at the end."""
        name = f"conveyor-test-{uuid.uuid4().hex[:10]}"
        self.names.append(name)
        self("run", "-d", "--name", name, *args)
        return name

    def exit_code(self, name: str) -> int:
        return int(self("inspect", name, "--format", "{{.State.ExitCode}}").stdout)

    def logs(self, name: str) -> str:
        done = self("logs", name, check=False)
        return done.stdout + done.stderr

    def cleanup(self) -> None:
        for name in self.names:
            self("rm", "-f", "-v", "-t", "0", name, check=False)
        for volume in self.volumes:
            self("volume", "rm", "-f", volume, check=False)
        # Anonymous /data volumes (the image's VOLUME) that a container left behind: only
        # new ones, and only when no container uses them (no -f).
        for volume in set(self("volume", "ls", "-q").stdout.split()) - self.volumes_before:
            if re.fullmatch(r"[0-9a-f]{64}", volume):
                self("volume", "rm", volume, check=False)


def _containers_conf(path: Path) -> Path:
    # podman's default limits (open files, processes) are above what this VM allows a
    # container: ask for what this process has (processes capped, as runc may not set more).
    files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    procs = min(resource.getrlimit(resource.RLIMIT_NPROC)[0], 4096)
    path.write_text(f'[containers]\ndefault_ulimits = ["nofile={files}:{files}", '
                    f'"nproc={procs}:{procs}"]\n'
                    '[engine]\nruntime = "runc"  # for podman-compose, which runs podman itself\n')
    return path


def _ca_bundle() -> str | None:
    for candidate in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE"),
                      "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


@pytest.fixture(scope="module")
def podman(tmp_path_factory) -> Iterator[Podman]:
    for tool in ("podman", "runc"):
        if not shutil.which(tool):
            missing(f"{tool} is not installed")
    tool = Podman(_containers_conf(tmp_path_factory.mktemp("podman") / "containers.conf"))
    tool.volumes_before = set(tool("volume", "ls", "-q").stdout.split())
    if tool("image", "exists", BASE, check=False).returncode:
        missing(f"the base image {BASE} is not there")
    ca = _ca_bundle()
    secret = ["--secret", f"id=ca,src={ca}"] if ca else []
    tool("build", "--format", "docker", "--build-arg", f"BASE={BASE}", *secret, "-t", IMAGE,
         str(ROOT), timeout_s=BUILD_TIMEOUT_S)
    yield tool
    tool.cleanup()


def _server(podman: Podman, volume: str) -> tuple[str, str]:
    port = free_port()
    name = podman.start("-p", f"127.0.0.1:{port}:9324", "-v", f"{volume}:/data",
                        "-e", "CONVEYOR_ALLOW_OPEN=true", IMAGE)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/health", timeout_s=30)
    except TimeoutError:
        pytest.fail(f"the server container did not answer:\n{podman.logs(name)}")
    return name, url


def test_image_serves_keeps_its_volume_and_stops_cleanly(podman: Podman) -> None:
    volume = f"conveyor-test-{uuid.uuid4().hex[:10]}"
    podman.volumes.append(volume)
    name, url = _server(podman, volume)
    assert podman("exec", name, "id", "-u").stdout.strip() == "10001"
    assert podman("healthcheck", "run", name, check=False).returncode == 0

    sqs = sqs_client(url)
    queue_url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    sqs.send_message(QueueUrl=queue_url, MessageBody="first")
    (got,) = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=2)["Messages"]
    assert got["Body"] == "first"
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=got["ReceiptHandle"])
    with urllib.request.urlopen(url + "/console", timeout=5) as resp:
        assert resp.status == 200 and "jobs" in resp.read().decode()

    sqs.send_message(QueueUrl=queue_url, MessageBody="kept")
    podman("stop", "-t", "30", name)  # SIGTERM; a SIGKILL (exit code 137) only 30 s later
    assert podman.exit_code(name) == 0, podman.logs(name)  # it stopped itself, cleanly

    podman("start", name)
    wait_http(url + "/health", timeout_s=30)
    (kept,) = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=2)["Messages"]
    assert kept["Body"] == "kept"


def test_worker_posts_to_the_app_and_drains_on_stop(podman: Podman,
                                                    sample_app: SampleApp) -> None:
    app_url, posts = sample_app.url, sample_app.posts
    volume = f"conveyor-test-{uuid.uuid4().hex[:10]}"
    podman.volumes.append(volume)
    _, url = _server(podman, volume)
    sqs = sqs_client(url)
    queue_url = sqs.create_queue(QueueName="work")["QueueUrl"]
    # The host's network: the sample app listens on this machine's loopback.
    worker = podman.start("--network", "host", "-e", f"CONVEYOR_WORKER_QUEUE_URL={queue_url}",
                          "-e", f"CONVEYOR_APP_URL={app_url}", "-e", "CONVEYOR_CRON=",
                          "-e", "CONVEYOR_HTTP_CONNECTIONS=1", IMAGE, "worker")

    def posted(count: int) -> None:
        deadline = time.monotonic() + 30
        while len(posts) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(posts) == count, podman.logs(worker)

    sqs.send_message(QueueUrl=queue_url, MessageBody="hello")
    posted(1)
    sqs.send_message(QueueUrl=queue_url, MessageBody="slow:2")  # the app takes 2 s
    posted(2)
    assert [body for _, _, body in posts] == [b"hello", b"slow:2"]

    # Stopped while the slow job runs: the worker lets it finish, deletes it, exits 0.
    podman("stop", "-t", "30", worker)
    assert podman.exit_code(worker) == 0, podman.logs(worker)
    assert sample_app.finished == [b"hello", b"slow:2"], podman.logs(worker)
    attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    assert (attrs["ApproximateNumberOfMessages"], attrs["ApproximateNumberOfMessagesNotVisible"]) \
        == ("0", "0"), podman.logs(worker)


def test_up_runs_from_the_same_image(podman: Podman, sample_app: SampleApp) -> None:
    app_url, posts = sample_app.url, sample_app.posts
    port = free_port()
    name = podman.start("--network", "host", IMAGE, "up", "--app", app_url, "--port", str(port),
                        "--queue", "up-jobs", "--cron", "")
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/health", timeout_s=30)
    sqs = sqs_client(url)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        urls = sqs.list_queues(QueueNamePrefix="up-jobs").get("QueueUrls", [])
        if urls:
            break
        time.sleep(0.2)
    sqs.send_message(QueueUrl=f"{url}/000000000000/up-jobs", MessageBody="via up")
    while not posts and time.monotonic() < deadline:
        time.sleep(0.05)
    assert posts and posts[0][2] == b"via up", podman.logs(name)
    podman("stop", "-t", "30", name)
    assert podman.exit_code(name) == 0, podman.logs(name)


def test_compose_runs_server_worker_and_sample_app(podman: Podman) -> None:
    require_module("podman_compose")
    project = f"conveyor-test-{uuid.uuid4().hex[:8]}"
    compose = [sys.executable, "-m", "podman_compose", "-p", project,
               "-f", str(ROOT / "deploy" / "compose" / "compose.yaml")]
    port = free_port()
    env = {**podman.env, "CONVEYOR_IMAGE": IMAGE, "CONVEYOR_PORT": str(port)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*compose, *args], env=env, capture_output=True, text=True,
                              timeout=120, check=False)

    up = run("up", "-d")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", timeout_s=30)
        sqs = sqs_client(url)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the worker creates its queue when it starts
            if sqs.list_queues(QueueNamePrefix="jobs").get("QueueUrls"):
                break
            time.sleep(0.2)
        sqs.send_message(QueueUrl=f"{url}/000000000000/jobs", MessageBody='{"via": "compose"}')
        logs = ""
        while '"via' not in logs and time.monotonic() < deadline:
            time.sleep(0.2)
            logs = run("logs", "app").stdout
        assert '\\"via\\": \\"compose\\"' in logs, logs + run("logs", "worker").stdout
    finally:
        ids = podman("ps", "-a", "-q", "--filter",
                     f"label=io.podman.compose.project={project}", check=False).stdout.split()
        if ids:  # -v: the anonymous /data volumes of the worker and app containers too
            podman("rm", "-f", "-v", "-t", "30", *ids, check=False)
        run("down", "-v")
