"""What plugs into the worker (conveyor/runtime/hooks.py): a hook sees the worker's life
and has its say before each POST; a real server, a real app, a hook of the test's own."""

from __future__ import annotations

import dataclasses

from aiohttp import web

from conveyor.client import Message, SQSClient
from conveyor.runtime.hooks import DeliveryRequest, TryLater, WorkerHook
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


class Gate(WorkerHook):
    """Refuses the message "skip"; cannot judge "later" the first time it sees it."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.deferred: set[str] = set()

    async def start(self, sqs: SQSClient, queue_url: str) -> None:
        self.calls.append("start")

    async def stop(self) -> None:
        self.calls.append("stop")

    async def close(self) -> None:
        self.calls.append("close")

    async def before_delivery(self, message: Message) -> bool:
        if message.body == "skip":
            return False
        if message.body == "later" and message.message_id not in self.deferred:
            self.deferred.add(message.message_id)
            raise TryLater("not yet")
        return True


def test_a_hook_refuses_defers_and_sees_the_worker_start_and_drain(sqs, queue_name):
    """A refused message is deleted unposted; one the hook cannot judge yet goes back to
    the queue and is POSTed on its next receive; start comes before any delivery, stop
    and close after the last."""
    url = make_queue(sqs, queue_name)
    gate = Gate()

    async def scenario() -> None:
        async with recording_app() as app, running_worker(url, app.url,
                                                          hooks=[lambda *_: gate]):
            assert gate.calls == ["start"]
            for body in ("skip", "later", "post"):
                await aio(sqs.send_message, QueueUrl=url, MessageBody=body)
            await wait_until(lambda: len(app.requests) == 2 and queue_total(sqs, url) == 0,
                             what="two POSTs and an empty queue")
        assert gate.calls == ["start", "stop", "close"]
        posted = {r.body: r.headers["X-Aws-Sqsd-Receive-Count"] for r in app.requests}
        assert posted == {b"later": "2", b"post": "1"}

    run(scenario())


class Steps(WorkerHook):
    """Each delivery step of its own: the message prepared, the request rewritten, the
    outcome and the delete heard of."""

    def __init__(self) -> None:
        self.outcomes: list[tuple[str, bool, str]] = []
        self.deleted: list[tuple[str, str | None]] = []

    async def prepare(self, message: Message) -> Message:
        return dataclasses.replace(message, body=message.body.upper())

    def request(self, message: Message, request: DeliveryRequest) -> DeliveryRequest:
        request.headers["X-Step"] = "rewritten"
        return DeliveryRequest(request.base_path + "/steps", request.headers, request.body)

    def after_delivery(self, message: Message, ok: bool, status: str) -> None:
        self.outcomes.append((message.body, ok, status))

    def after_delete(self, message: Message, refusal: str | None) -> None:
        self.deleted.append((message.body, refusal))


def test_a_hook_prepares_rewrites_and_hears_each_outcome_and_delete(sqs, queue_name):
    """Dramatiq-style steps around each delivery: the app gets the prepared body at the
    rewritten path with the added header; the hook hears the 500 and the 200 (in that
    order) and, once, the delete of the message the app accepted."""
    url = make_queue(sqs, queue_name)
    steps = Steps()
    answers = [500, 200]

    async def answer(_request: Recorded) -> web.StreamResponse:
        return web.Response(status=answers.pop(0) if answers else 200)

    async def scenario() -> None:
        async with recording_app(answer) as app, running_worker(url, app.url,
                                                                hooks=[lambda *_: steps]):
            await aio(sqs.send_message, QueueUrl=url, MessageBody="job")
            await wait_until(lambda: steps.deleted, what="the delete")
        assert [(r.path, r.body, r.headers.get("X-Step")) for r in app.requests] == [
            ("/steps", b"JOB", "rewritten")] * 2
        assert steps.outcomes == [("job", False, "500"), ("job", True, "200")]
        assert steps.deleted == [("job", None)]

    run(scenario())
