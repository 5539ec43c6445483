"""Stopping and surviving: SIGTERM drain of a `conveyor worker` process, queue server restarts."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
import time
from pathlib import Path

import pytest
from aiohttp import web

from tests.server.helpers import Browser, RawClient
from tests.support import ServerProcess, sqs_client
from tests.worker.conftest import (
    Behaviour,
    Recorded,
    aio,
    make_queue,
    queue_total,
    recording_app,
    run,
    running_worker,
    wait_until,
)


async def _start_worker_process(url: str, app_url: str, log: Path,
                                *args: str) -> asyncio.subprocess.Process:
    with open(log, "wb") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "conveyor", "worker", "--worker-queue-url", url,
            "--app-url", app_url, "--poll-wait-time", "1", "--idle-backoff-min", "0.05",
            "--idle-backoff-max", "0.2", *args, stdout=out, stderr=asyncio.subprocess.STDOUT)


async def _receive_all(sqs, url: str, count: int) -> list[dict]:
    """Receive `count` messages (with a long visibility so none is seen twice)."""
    got: dict[str, dict] = {}
    deadline = time.monotonic() + 20
    while len(got) < count and time.monotonic() < deadline:
        answer = await aio(sqs.receive_message, QueueUrl=url, MaxNumberOfMessages=10,
                           WaitTimeSeconds=1, VisibilityTimeout=600,
                           MessageSystemAttributeNames=["All"])
        got.update({m["MessageId"]: m for m in answer.get("Messages", [])})
    return list(got.values())


def _ok_once(released: asyncio.Event) -> Behaviour:
    """An app that answers 200 to each request once `released` is set."""
    async def held(_request: Recorded) -> web.StreamResponse:
        await released.wait()
        return web.Response(status=200)
    return held


def test_sigterm_releases_unfinished_messages_at_once(sqs, queue_name, tmp_path):
    """Requests still open at the drain deadline, and messages not yet posted, are handed
    back with visibility 0: another worker gets them now, not after VisibilityTimeout."""
    url = make_queue(sqs, queue_name)
    never = asyncio.Event()

    async def scenario() -> None:
        async with recording_app(_ok_once(never)) as app:
            entries = [{"Id": str(i), "MessageBody": f"job-{i}"} for i in range(6)]
            await aio(sqs.send_message_batch, QueueUrl=url, Entries=entries)
            proc = await _start_worker_process(
                url, app.url, tmp_path / "worker.log", "--http-connections", "2",
                "--visibility-timeout", "600", "--drain-timeout", "1")
            await wait_until(lambda: app.active == 2, what="two open requests")
            proc.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(proc.wait(), 20)
            never.set()
        log = (tmp_path / "worker.log").read_text()
        assert code == 0, log
        back = await _receive_all(sqs, url, 6)
        assert sorted(m["Body"] for m in back) == [f"job-{i}" for i in range(6)], log
        posted = {r.msgid for r in app.requests}
        assert len(posted) == 2
        assert all(int(m["Attributes"]["ApproximateReceiveCount"]) >= 2
                   for m in back if m["MessageId"] in posted)

    run(scenario())


def test_sigterm_lets_open_requests_finish_within_drain_timeout(sqs, queue_name, tmp_path):
    url = make_queue(sqs, queue_name)

    async def slow(_request: Recorded) -> web.StreamResponse:
        await asyncio.sleep(1.0)
        return web.Response(status=200)

    async def scenario() -> None:
        async with recording_app(slow) as app:
            entries = [{"Id": str(i), "MessageBody": f"job-{i}"} for i in range(6)]
            await aio(sqs.send_message_batch, QueueUrl=url, Entries=entries)
            proc = await _start_worker_process(
                url, app.url, tmp_path / "worker.log", "--http-connections", "2",
                "--visibility-timeout", "600", "--drain-timeout", "20")
            await wait_until(lambda: app.active == 2, what="two open requests")
            proc.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(proc.wait(), 30)
        log = (tmp_path / "worker.log").read_text()
        assert code == 0, log
        finished = {r.body.decode() for r in app.requests}
        assert len(finished) == 2  # the two open requests, no new ones after SIGTERM
        back = await _receive_all(sqs, url, 4)
        assert sorted(m["Body"] for m in back) == sorted(
            f"job-{i}" for i in range(6) if f"job-{i}" not in finished), log

    run(scenario())


def test_queue_server_killed_and_restarted_loses_nothing(tmp_path, queue_name):
    server = ServerProcess(tmp_path / "server").start()
    try:
        sqs = sqs_client(server.url)
        url = make_queue(sqs, queue_name)
        total = 300

        async def quick(_request: Recorded) -> web.StreamResponse:
            await asyncio.sleep(0.005)
            return web.Response(status=200)

        async def scenario() -> None:
            for start in range(0, total, 10):
                entries = [{"Id": str(i), "MessageBody": f"job-{start + i}"} for i in range(10)]
                await aio(sqs.send_message_batch, QueueUrl=url, Entries=entries)
            async with recording_app(quick) as app, running_worker(
                    url, app.url, VisibilityTimeout=5, HttpConnections=10) as worker:
                await wait_until(lambda: len(app.requests) >= total // 5, what="some progress")
                await aio(server.kill)
                await asyncio.sleep(1.0)
                await aio(server.start)
                await wait_until(lambda: len({r.body for r in app.requests}) == total,
                                 timeout_s=60, what="every job")
                await wait_until(lambda: queue_total(sqs, url) == 0, timeout_s=30,
                                 what="an empty queue")
                assert worker.state == "running"
            assert {r.body.decode() for r in app.requests} == {f"job-{i}" for i in range(total)}

        run(scenario())
    finally:
        server.stop()


def test_a_drain_asked_from_the_console_finishes_open_requests_and_exits(
        server, sqs, queue_name, tmp_path):
    """The console's Drain button (DrainWorker) reaches the worker (its parked poll);
    it then drains as on SIGTERM: the open request finishes (and its message is deleted),
    nothing more is received, and the process exits 0."""
    url = make_queue(sqs, queue_name)
    release = asyncio.Event()

    async def scenario() -> None:
        async with recording_app(_ok_once(release)) as app:
            await aio(sqs.send_message, QueueUrl=url, MessageBody="first")
            proc = await _start_worker_process(
                url, app.url, tmp_path / "worker.log", "--http-connections", "1",
                "--visibility-timeout", "600", "--drain-timeout", "60",
                "--extended-poll-wait-time", "2")
            await wait_until(lambda: app.active == 1, what="an open request")
            console = Browser(server.url)
            rows: list[str] = []
            await wait_until(lambda: rows.extend(_worker_rows(console, queue_name)) or rows,
                             what="the worker in the console")
            row = rows[0]
            token = re.search(r'name="csrf" value="([^"]*)"', row).group(1)
            worker_id = re.search(r'name="worker" value="([^"]*)"', row).group(1)
            resp = await aio(console.post, "/console/drain-worker",
                             {"csrf": token, "region": "us-east-1", "worker": worker_id})
            assert resp.status == 303, resp.text
            await aio(sqs.send_message, QueueUrl=url, MessageBody="after the drain")
            await wait_until(lambda: "draining" in _log(tmp_path), timeout_s=60,
                             what="the worker to hear of the drain")
            release.set()
            code = await asyncio.wait_for(proc.wait(), 60)
        log = _log(tmp_path)
        assert code == 0, log
        assert [r.body for r in app.requests] == [b"first"], log
        back = await _receive_all(sqs, url, 1)
        assert [m["Body"] for m in back] == ["after the drain"]
        recent = (await aio(console.get, "/console")).text  # the audit: who asked what
        assert f"<td>DrainWorker</td><td>worker {worker_id} (us-east-1)</td><td>ok</td>" in recent

    run(scenario())


def _log(tmp_path: Path) -> str:
    return (tmp_path / "worker.log").read_text()


def _worker_rows(console, queue_name: str) -> list[str]:
    """The console's workers-table rows of workers of `queue_name` with a Drain form."""
    page = console.get("/console").text
    return [row for row in re.findall(r"<tr>.*?</tr>", page, re.S)
            if f">{queue_name}</a>" in row and "drain-worker" in row]


@pytest.mark.parametrize("partitions", [0, 3])
def test_a_drain_reaches_an_idle_worker_at_once_not_at_its_next_announcement(
        server, sqs, queue_name, tmp_path, partitions):
    """An idle `conveyor worker` parks five-minute polls (one PollMessages on all its
    partitions, when partitioned) and announces itself with them every five minutes;
    DrainWorker answers its parked poll (`"Drain": true`) and it exits 0 — within the
    test's limit, far shorter than either interval: no timing is asserted beyond it."""
    url = make_queue(sqs, queue_name)
    if partitions:  # the worker makes the partitions (CreateQueue); the logical URL
        url = url.rsplit("/", 1)[0] + "/" + queue_name + "-logical"
    raw = RawClient(server.url)

    def workers_call(action: str, payload: dict) -> dict:
        headers = {"Content-Type": "application/x-amz-json-1.0",
                   "X-Amz-Target": f"ConveyorWorkers.{action}"}
        resp = raw.request("POST", "/", json.dumps(payload).encode(), headers)
        assert resp.status == 200, resp.body
        return resp.json()

    queue = url.rsplit("/", 1)[1]

    def listed() -> list[str]:
        return [w["WorkerId"] for w in workers_call("ListWorkers", {})["Workers"]
                if w["Queue"] == queue]

    async def scenario() -> int:
        async with recording_app() as app:
            proc = await _start_worker_process(
                url, app.url, tmp_path / "worker.log", "--extended-poll-wait-time", "300",
                *(["--partitions", str(partitions)] if partitions else []))
            try:
                ids: list[str] = []
                await wait_until(lambda: aio(listed), 60, "the worker listed")
                ids = await aio(listed)
                await wait_until(lambda: "worker started" in _log(tmp_path), 60,
                                 "the worker polling")
                await aio(workers_call, "DrainWorker", {"WorkerId": ids[0]})
                return await asyncio.wait_for(proc.wait(), 120)
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()

    code = run(scenario(), timeout_s=200)
    assert code == 0, _log(tmp_path)
    assert "the server asked this worker to drain" in _log(tmp_path)
