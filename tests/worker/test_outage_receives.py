"""An app that is unavailable costs no message a receive (issue 34).

The defect these reproduce: a worker started while its app still boots (connections
refused), MaxRetries 3, ErrorVisibilityTimeout 1, the app up 30 s later: 8 of 10 good jobs
ended in the dead-letter queue. Opening the breaker did not stop the receives parked on
the server; the held messages were released with visibility 0, a parked poll took them
back at once (ApproximateReceiveCount +1), and the queue's redrive policy dead-lettered
them on their fourth receive (Amazon SQS Developer Guide, "Using dead-letter queues":
a message moves once its ReceiveCount exceeds maxReceiveCount).

The rule (settlement.py): a message is dead-lettered only after the app itself failed it
MaxRetries times; so each scenario sends 10 good jobs and one poison message the app
answers 500: every good job is POSTed once and deleted, and only the poison reaches the
dead-letter queue, after exactly MaxRetries POSTs.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from conveyor.clock import Clock
from tests.support import MOTO, ServerProcess, running_moto, sqs_client
from tests.worker.conftest import aio, queue_total, run, running_worker, wait_until
from tests.worker.outage_app import (
    POISON,
    DevClock,
    SwitchedApp,
    advance_both,
    bodies_in,
)

GOOD = [f"job {i}" for i in range(10)]
MAX_RETRIES = 3


def _send_all(sqs: Any, url: str) -> None:
    """The 10 good jobs in one batch (one receive can take them all), then the poison."""
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": body}
                                                  for i, body in enumerate(GOOD)])
    sqs.send_message(QueueUrl=url, MessageBody=POISON)


def _check(app: SwitchedApp, dead_letters: list[str]) -> None:
    """Each good job POSTed once (a 2xx is final), only the poison dead-lettered, after
    exactly MaxRetries failures of its own."""
    for body in GOOD:
        statuses = [r.receive_count for r in app.posts(body)]
        assert len(statuses) == 1, (body, statuses)
    assert dead_letters == [POISON]
    assert len(app.posts(POISON)) == MAX_RETRIES


def test_a_worker_started_before_its_app_dead_letters_only_the_poison(
        server: ServerProcess, sqs: Any, queue_name: str, tmp_path: Path) -> None:
    """The exact reproduction: a real `conveyor worker` process with default options but
    MaxRetries 3 and ErrorVisibilityTimeout 1; the app refuses connections for 30 s."""
    app = SwitchedApp()
    url = f"{server.url}/000000000000/{queue_name}"
    log = tmp_path / "worker.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "conveyor", "worker", "--worker-queue-url", url,
         "--app-url", app.url, "--max-retries", str(MAX_RETRIES),
         "--error-visibility-timeout", "1", "--cron", ""],
        stdout=log.open("ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.getcwd()})

    async def scenario() -> list[str]:
        def created() -> bool:
            names = sqs.list_queues(QueueNamePrefix=queue_name).get("QueueUrls", [])
            return len(names) == 2  # the queue and its dead-letter queue
        await wait_until(created, what="the worker to create its queues")
        await aio(_send_all, sqs, url)
        await asyncio.sleep(30)
        await app.up()
        await wait_until(lambda: queue_total(sqs, url) == 0, 60, "every message settled")
        return await aio(bodies_in, sqs, f"{url}-dead-letter")

    try:
        dead_letters = run(scenario(), timeout_s=150)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    _check(app, dead_letters)


def _outage_from_start(clock_server: ServerProcess, queue_name: str, outage_s: float) -> None:
    """The same on the dev clock: the app refuses for `outage_s` of the server's and the
    worker's time (both moved together, heartbeats running between the steps)."""
    sqs = sqs_client(clock_server.url)
    url = f"{clock_server.url}/000000000000/{queue_name}"
    app = SwitchedApp()
    clock = DevClock()

    async def scenario() -> None:
        async with running_worker(url, app.url, clock=clock, hooks=(),
                                  MaxRetries=MAX_RETRIES, ErrorVisibilityTimeout=1,
                                  VisibilityTimeout=30, PollWaitTime=20,
                                  ExtendedPollWaitTime=120) as worker:
            dead_letter_url = worker.queues.dead_letter_url
            await aio(_send_all, sqs, url)
            await wait_until(lambda: worker.metrics.value(
                "conveyor_worker_app_available") == 0, what="the breaker to open")
            await asyncio.sleep(4)  # past the old grace period, when the loop began
            await advance_both(clock_server.url, clock, outage_s)
            await app.up()
            await wait_until(lambda: queue_total(sqs, url) == 0, 60, "every message settled")
        _check(app, await aio(bodies_in, sqs, dead_letter_url))

    run(scenario(), timeout_s=180)


def test_an_outage_of_15_seconds_from_the_start(clock_server, queue_name) -> None:
    _outage_from_start(clock_server, queue_name, 15)


def test_an_outage_of_a_minute_from_the_start(clock_server, queue_name) -> None:
    _outage_from_start(clock_server, queue_name, 60)


def test_an_outage_of_five_minutes_from_the_start(clock_server, queue_name) -> None:
    """Longer than VisibilityTimeout (30 s): the held messages' visibility is extended by
    heartbeats while the app is down, so none reappears and none is received again."""
    _outage_from_start(clock_server, queue_name, 300)


def test_the_app_going_down_while_a_batch_arrives(sqs: Any, queue_name: str) -> None:
    """The app answers, then goes down just as 10 messages arrive in one receive: each POST
    is refused at once, all at the same moment."""
    app = SwitchedApp()

    async def scenario() -> None:
        await app.up()
        async with running_worker(
                f"{_endpoint(sqs)}/000000000000/{queue_name}", app.url, hooks=(),
                MaxRetries=MAX_RETRIES, ErrorVisibilityTimeout=1, PollWaitTime=20,
                ExtendedPollWaitTime=120) as worker:
            url, dead_letter_url = worker.queue_url, worker.queues.dead_letter_url
            await aio(sqs.send_message, QueueUrl=url, MessageBody="before")
            await wait_until(lambda: app.posts("before"), what="the app to answer")
            await app.down()
            await aio(_send_all, sqs, url)
            await wait_until(lambda: worker.metrics.value(
                "conveyor_worker_app_available") == 0, what="the breaker to open")
            await asyncio.sleep(8)  # the old code looped within 4 s of the outage
            await app.up()
            await wait_until(lambda: queue_total(sqs, url) == 0, 60, "every message settled")
        app.requests = [r for r in app.requests if r.body != b"before"]
        _check(app, await aio(bodies_in, sqs, dead_letter_url))

    run(scenario(), timeout_s=120)


def _endpoint(sqs: Any) -> str:
    return sqs.meta.endpoint_url


def test_against_moto_a_plain_receive_message_endpoint(queue_name: str, tmp_path: Path) -> None:
    """moto's server knows no PollMessages: the worker long-polls with ReceiveMessage, as on
    Amazon SQS, and the receives it parks there must cost no message either."""
    with running_moto(lambda port: [str(MOTO), "-H", "127.0.0.1", "-p", str(port)],
                      tmp_path) as endpoint:
        sqs = sqs_client(endpoint)
        app = SwitchedApp()

        async def scenario() -> None:
            async with running_worker(
                    f"{endpoint}/123456789012/{queue_name}", app.url, hooks=(),
                    clock=Clock(), MaxRetries=MAX_RETRIES, ErrorVisibilityTimeout=1,
                    PollWaitTime=20, EndpointURL=endpoint) as worker:
                url, dead_letter_url = worker.queue_url, worker.queues.dead_letter_url
                await aio(_send_all, sqs, url)
                await wait_until(lambda: worker.metrics.value(
                    "conveyor_worker_app_available") == 0, what="the breaker to open")
                await asyncio.sleep(10)
                await app.up()
                await wait_until(lambda: queue_total(sqs, url) == 0, 90,
                                 "every message settled")
            _check(app, await aio(bodies_in, sqs, dead_letter_url))

        run(scenario(), timeout_s=150)
