"""Real runs: the scaler starts and drains real `conveyor worker` processes against a real
queue server; the app records every job, so a lost or repeated message fails the test."""

from __future__ import annotations

import asyncio
import urllib.request

from aiohttp import web

from conveyor.client import SQSClient
from conveyor.scale.local import LocalActuator
from conveyor.scale.policy import BacklogPolicy, BacklogSettings
from conveyor.scale.scaler import Scaler
from conveyor.scale.status import scale_status_server
from tests.support import free_port
from tests.worker.conftest import (
    Recorded,
    aio,
    make_queue,
    queue_total,
    recording_app,
    run,
    running_worker,
    wait_until,
)

JOBS = 24
WORKER_ARGS = ["--http-connections", "1", "--poll-wait-time", "1", "--idle-backoff-min",
               "0.05", "--idle-backoff-max", "0.2", "--drain-timeout", "30",
               "--no-create-queue"]


def test_burst_scales_out_then_back_to_min_nothing_lost_or_repeated(server, sqs, queue_name,
                                                                    tmp_path):
    url = make_queue(sqs, queue_name, VisibilityTimeout="60")
    finished: list[str] = []

    async def slow(request: Recorded) -> web.StreamResponse:
        await asyncio.sleep(0.25)
        finished.append(request.msgid)
        return web.Response(status=200)

    async def scenario() -> None:
        async with recording_app(slow) as app:
            actuator = LocalActuator(["--worker-queue-url", url, "--app-url", app.url,
                                      *WORKER_ARGS], tmp_path / "workers")
            policy = BacklogPolicy(BacklogSettings(
                min_workers=0, max_workers=3, target=4, scale_in_cooldown_s=1.0,
                scale_in_stabilization_s=1.0))
            sizes: list[int] = []
            async with SQSClient(server.url) as client:
                scaler = Scaler(policy, client, url, actuator, interval_s=0.3)
                port = free_port()
                status = scale_status_server(scaler, "127.0.0.1", port)
                await status.start()
                task = asyncio.create_task(scaler.run())
                try:
                    await wait_until(lambda: scaler.last is not None, what="first decision")
                    assert scaler.last.desired == 0  # empty queue, min 0: no worker
                    await wait_until(lambda: _console_shows_scaler(server.url, queue_name),
                                     what="the scaler in the server's console")
                    entries = [{"Id": str(i), "MessageBody": f"job-{i}"} for i in range(10)]
                    for start in range(0, JOBS, 10):
                        await aio(sqs.send_message_batch, QueueUrl=url,
                                  Entries=entries[: min(10, JOBS - start)])

                    def watch() -> bool:
                        sizes.append(len(actuator.workers))
                        return len(finished) >= JOBS
                    await wait_until(watch, timeout_s=60, what="every job done")
                    await wait_until(lambda: not actuator.workers, timeout_s=30,
                                     what="scale back in to zero")
                    timeline = await aio(_console_timeline, server.url, queue_name)
                    report = await aio(_get_json, f"http://127.0.0.1:{port}/status")
                    metrics = await aio(_get_text, f"http://127.0.0.1:{port}/metrics")
                finally:
                    scaler.stop()
                    await task
                    await actuator.close()
                    await status.stop()
            assert max(sizes) >= 2, sizes  # scaled out
            assert report["desired"] == 0 and report["in_service"] == 0
            # The server kept its actions (RecordScalingDecision): out, then back in.
            assert 'class="decision out"' in timeline and 'class="decision in"' in timeline
            assert "conveyor_scale_backlog_per_instance" in metrics
            assert scaler.metrics.value("conveyor_scale_actions_total", direction="out") >= 2
            # Learnt from the workers' announcements (the app's own time is not asserted).
            assert scaler.metrics.value("conveyor_scale_processing_seconds_avg") > 0
            ids = [r.msgid for r in app.requests]
            assert len(ids) == JOBS and len(set(ids)) == JOBS, "a job was lost or repeated"
            assert sorted(finished) == sorted(ids), "a job was cut off mid-request"
            assert await aio(queue_total, sqs, url) == 0

    run(scenario(), timeout_s=120)


def _console_shows_scaler(server_url: str, queue_name: str) -> bool:
    """The scaler announced itself: the console's Autoscaling table names its queue."""
    with urllib.request.urlopen(server_url + "/console", timeout=10) as resp:
        page = resp.read().decode()
    section = page.partition("<h2>Autoscaling</h2>")[2]
    return f">{queue_name}</a>" in section and "backlog" in section


def _console_timeline(server_url: str, queue_name: str) -> str:
    """The console's timeline of the queue's scaling decisions (HTML), newest first."""
    with urllib.request.urlopen(server_url + "/console", timeout=10) as resp:
        page = resp.read().decode()
    label = f'aria-label="scaling decisions of {queue_name}">'
    return page.partition(label)[2].partition("</ol>")[0]


def test_scale_in_skips_a_busy_worker_and_its_job_completes(server, sqs, queue_name, tmp_path):
    """Two workers, one holding a long job: scale-in to zero stops only the idle one until
    the job is done; the job is posted once and completes."""
    url = make_queue(sqs, queue_name, VisibilityTimeout="60")
    release = asyncio.Event()
    finished: list[str] = []

    async def long_job(request: Recorded) -> web.StreamResponse:
        await release.wait()
        finished.append(request.msgid)
        return web.Response(status=200)

    async def scenario() -> None:
        async with recording_app(long_job) as app:
            actuator = LocalActuator(["--worker-queue-url", url, "--app-url", app.url,
                                      *WORKER_ARGS], tmp_path / "workers")
            try:
                await actuator.scale_to(2, await actuator.refresh())

                async def in_service() -> int:
                    return sum(v.in_service for v in await actuator.refresh())
                await wait_until(lambda: _eq(in_service(), 2), what="two workers up")
                await aio(sqs.send_message, QueueUrl=url, MessageBody="long")
                await wait_until(lambda: app.active == 1, what="the long job to start")
                views = []

                async def busy_seen() -> bool:
                    views[:] = await actuator.refresh()
                    return any(v.busy for v in views)
                await wait_until(busy_seen, what="a busy worker")
                result = await actuator.scale_to(0, views)
                assert (result.stopped, result.protected) == (1, 1)
                busy_id = next(v.worker_id for v in views if v.busy)
                await wait_until(lambda: _count(actuator, 1), what="idle one gone")
                assert busy_id in actuator.workers
                release.set()
                await wait_until(lambda: len(finished) == 1, what="the job to finish")
                await wait_until(lambda: _idle(actuator), what="the busy worker to be idle")
                result = await actuator.scale_to(0, await actuator.refresh())
                assert result.stopped == 1
                await wait_until(lambda: _count(actuator, 0), what="all gone")
            finally:
                release.set()
                await actuator.close()
            assert [r.body for r in app.requests] == [b"long"]
            assert await aio(queue_total, sqs, url) == 0

    run(scenario(), timeout_s=120)


def test_a_port_answered_by_another_process_is_not_taken_for_a_worker(
        server, sqs, queue_name, tmp_path, monkeypatch):
    """The kernel handed the same free port out twice, and a stranger (another worker,
    busy) answers on the first one: that worker is not taken as running or busy, and the
    next worker gets another port. Once seen: scale-in then protected a worker that had
    never started, as if it held the other one's job."""
    url = make_queue(sqs, queue_name)
    stranger_port, other_port = free_port(), free_port()
    ports = iter([stranger_port, stranger_port, other_port])
    monkeypatch.setattr("conveyor.scale.local.free_port", lambda host: next(ports))

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "holding": 1, "pid": 1})

    async def scenario() -> None:
        stranger = web.Application()
        stranger.router.add_get("/health", health)
        runner = web.AppRunner(stranger)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", stranger_port).start()
        async with recording_app() as app:
            actuator = LocalActuator(["--worker-queue-url", url, "--app-url", app.url,
                                      *WORKER_ARGS], tmp_path / "workers")
            try:
                await actuator.scale_to(2, await actuator.refresh())
                assert actuator.workers["w2"].status_url.endswith(f":{other_port}")

                async def second_running() -> bool:
                    views = {v.worker_id: v for v in await actuator.refresh()}
                    first = views.get("w1")
                    assert first is None or (first.state, first.busy) == ("starting", False)
                    return views["w2"].state == "running"
                await wait_until(second_running, what="the second worker up")
                result = await actuator.scale_to(1, await actuator.refresh())
                assert result.protected == 0 and not actuator.workers["w2"].stopping
            finally:
                await actuator.close()
                await runner.cleanup()

    run(scenario(), timeout_s=60)


def test_one_worker_shrinks_to_one_poller_when_idle_and_grows_back(server, sqs, queue_name):
    """Seed 004 inside one worker: six pollers at HttpConnections 50, one when the queue is
    empty, all of them again when full batches arrive."""
    url = make_queue(sqs, queue_name)

    async def scenario() -> None:
        async with recording_app() as app, running_worker(url, app.url) as worker:
            idle = worker._idle  # the daemon's own poller control
            await wait_until(lambda: idle.active == 1, what="one poller left")
            seen: list[int] = []
            entries = [{"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)]
            for _ in range(40):
                await aio(sqs.send_message_batch, QueueUrl=url, Entries=entries)

            def watch() -> bool:
                seen.append(idle.active)
                return len(app.requests) >= 400
            await wait_until(watch, what="400 messages")
            assert max(seen) > 1
            await wait_until(lambda: idle.active == 1, what="back to one poller")

    run(scenario())


async def _eq(value, expected) -> bool:
    return await value == expected


async def _idle(actuator: LocalActuator) -> bool:
    return all(not v.busy for v in await actuator.refresh())


async def _count(actuator: LocalActuator, expected: int) -> bool:
    await actuator.refresh()  # reaps exited workers
    return len(actuator.workers) == expected


def _get_json(url: str) -> dict:
    import json

    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.load(resp)


def _get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.read().decode()
