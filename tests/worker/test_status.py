"""A worker's status tells the truth (issue 34, item 7): /health, /metrics and the
announcement the console lists say when the app is down and since when, and when the
worker drains; processed and failed count jobs, not attempts; jobs a second are the last
minute's. A real server, a real worker and a real app that goes down and comes back."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from tests.support import free_port
from tests.worker.conftest import aio, make_queue, run, running_worker, wait_until
from tests.worker.test_breaker import App
from tests.worker.test_operability import _get


async def _health(port: int) -> dict[str, Any]:
    return json.loads((await aio(_get, f"http://127.0.0.1:{port}/health"))[1])


async def _metrics(port: int) -> str:
    return (await aio(_get, f"http://127.0.0.1:{port}/metrics"))[1]


def test_status_says_app_down_since_when_and_counts_jobs_not_attempts(sqs, queue_name):
    dlq = make_queue(sqs, queue_name + "-dlq")
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])
    url = make_queue(sqs, queue_name, RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": arn["Attributes"]["QueueArn"], "maxReceiveCount": 3}))
    answers = {"flaky": [500, 500, 200], "poison": [500, 500, 500]}

    async def behaviour(request: Any) -> web.Response:
        body = request.body.decode()
        return web.Response(status=answers[body].pop(0) if answers[body] else 200)

    app = App(behaviour)
    port = free_port()

    async def scenario() -> None:
        async with running_worker(url, app.url, StatusPort=port, MaxRetries=3,
                                  ErrorVisibilityTimeout=0) as worker:
            # the app is not up yet: the first POST is refused and the breaker opens
            await aio(sqs.send_message, QueueUrl=url, MessageBody="flaky")
            async def app_down() -> bool:
                return (await _health(port))["status"] == "app-down"

            await wait_until(app_down, what="app-down on /health")
            down = await _health(port)
            assert down["app_available"] is False and down["app_down_since"].endswith("Z")
            metrics = await _metrics(port)
            assert f'conveyor_worker_app_unavailable_since_seconds{{queue="{queue_name}"}} 0.0' \
                not in metrics
            await app.up()
            await aio(sqs.send_message, QueueUrl=url, MessageBody="poison")
            async def settled() -> bool:
                report = await _health(port)
                return report["failed"] == 1 and report["processed"] == 1

            await wait_until(settled, what="one job done, one failed")
            report = await _health(port)
            # 6 POSTs came back with a failure or a refusal; 2 jobs finished
            assert report["status"] == "ok" and report["app_down_since"] is None
            assert report["processed"] == 1 and report["failed"] == 1
            assert report["jobs_per_s"] == round(2 / 60, 3)  # both within the last minute
            metrics = await _metrics(port)
            for outcome, count in (("done", 1), ("dead_lettered", 1)):
                assert (f'conveyor_worker_jobs_total{{outcome="{outcome}",queue="{queue_name}"}} '
                        f'{count}.0') in metrics
            worker.stop()
            await wait_until(lambda: worker.state in ("draining", "stopped"), what="drain")
            assert worker.health()[1]["status"] in ("draining", "stopped")
        await app.down()

    run(scenario())
