"""A worker announces itself to the server it reads from, and the console lists it."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

from conveyor.client import SQSClient
from conveyor.clock import Clock
from conveyor.runtime.presence import Presence
from tests.support import ServerProcess
from tests.worker.conftest import aio, make_queue, recording_app, run, running_worker, wait_until


def _workers(server: ServerProcess) -> list[dict[str, Any]]:
    request = urllib.request.Request(
        server.url + "/", data=b"{}", method="POST",
        headers={"Content-Type": "application/x-amz-json-1.0",
                 "X-Amz-Target": "ConveyorWorkers.ListWorkers"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())["Workers"]


def _console(server: ServerProcess) -> str:
    with urllib.request.urlopen(server.url + "/console", timeout=10) as resp:
        return resp.read().decode()


def test_a_running_worker_is_listed_and_a_stopped_one_is_not(
        server: ServerProcess, sqs: Any, queue_name: str) -> None:
    url = make_queue(sqs, queue_name)

    async def scenario() -> None:
        async with recording_app() as app:
            async with running_worker(url, app.url) as worker:
                await aio(sqs.send_message, QueueUrl=url, MessageBody="x")
                await wait_until(lambda: app.requests, what="the POST")
                assert worker.presence is not None
                worker_id = worker.presence.worker_id
                mine = [w for w in await aio(_workers, server) if w["WorkerId"] == worker_id]
                assert [(w["Queue"], w["Status"]["status"]) for w in mine] == [
                    (queue_name, "ok")]
                assert mine[0]["Status"]["app"] == app.url + "/"
                page = await aio(_console, server)
                assert worker_id in page and f">{queue_name}</a>" in page
            # Stopped: its last announcement lasts a second.
            await wait_until(lambda: all(w["WorkerId"] != worker_id for w in _workers(server)),
                             10, "the stopped worker to leave the list")

    run(scenario())


def test_an_endpoint_without_the_registry_is_not_asked_again(server: ServerProcess) -> None:
    async def scenario() -> None:
        calls: list[str] = []
        async with SQSClient(server.url,
                             observer=lambda _action, outcome, _s: calls.append(outcome)) as sqs:
            presence = Presence(sqs, "q", lambda: {"status": "ok"}, clock=Clock())
            presence.target_prefix = "NoSuchApi."  # what Amazon SQS or another emulator is
            presence.start()
            await wait_until(lambda: not presence.enabled, 10, "the presence to give up")
            await asyncio.sleep(0.2)
            await presence.stop()
            assert calls == ["InvalidAction"]  # one refused call, no goodbye

    run(scenario())


def test_a_failing_status_report_still_announces_and_stops_cleanly(server: ServerProcess) -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("figures unavailable")

    async def scenario() -> None:
        async with SQSClient(server.url) as sqs:
            presence = Presence(sqs, "q", broken, clock=Clock())
            presence.start()
            await wait_until(lambda: any(w["WorkerId"] == presence.worker_id
                                         for w in _workers(server)), 10, "the announcement")
            [mine] = [w for w in await aio(_workers, server)
                      if w["WorkerId"] == presence.worker_id]
            assert mine["Status"] == {}
            await presence.stop()  # no exception from the failed report
            assert presence.enabled

    run(scenario())
