"""Request-response through temporary virtual queues, sync and asyncio."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from conveyor.tempqueues import (
    AsyncRequester,
    AsyncResponder,
    Requester,
    Responder,
    ResponseTimeout,
    TemporaryQueuesClient,
)

from .conftest import CallCounter, EchoResponders
from .test_virtual import wait_until


@pytest.fixture
def requester(make_temporary: Callable[..., TemporaryQueuesClient]) -> Requester:
    return Requester(None, temporary=make_temporary())


def ask(requester: Requester, echo: EchoResponders, body: str,
        timeout_s: float = 10) -> dict[str, Any]:
    return requester.send_message_and_get_response(
        {"QueueUrl": echo.request_url, "MessageBody": body}, timeout_s)


def test_round_trip(requester: Requester, echo: EchoResponders) -> None:
    assert ask(requester, echo, "hello")["Body"] == "HELLO"
    assert requester.temporary.virtual.virtual_queue_urls == []  # response queue deleted


def test_round_trips_make_no_queue_calls(requester: Requester, echo: EchoResponders) -> None:
    ask(requester, echo, "warm-up")  # creates the host queue once
    counter = CallCounter(requester.temporary.sqs)
    for i in range(10):
        assert ask(requester, echo, f"r{i}")["Body"] == f"R{i}"
    calls = counter.snapshot()
    assert calls["CreateQueue"] == 0 and calls["DeleteQueue"] == 0
    assert calls["SendMessage"] == 10 and calls["DeleteMessage"] == 10
    # Besides one send and one delete per request, only the shared host long polls.
    assert set(calls) <= {"SendMessage", "DeleteMessage", "ReceiveMessage", "TagQueue"}


def test_many_concurrent_requesters(requester: Requester, echo: EchoResponders) -> None:
    bodies = [f"req-{i}" for i in range(100)]
    with ThreadPoolExecutor(max_workers=25) as pool:
        replies = list(pool.map(lambda b: ask(requester, echo, b)["Body"], bodies))
    assert replies == [b.upper() for b in bodies]  # each requester got its own reply
    assert sum(echo.served.values()) == 100
    assert len(requester.temporary.host_queue_urls) == 1


def test_async_round_trips(requester: Requester, echo: EchoResponders) -> None:
    async_requester = AsyncRequester(requester)

    async def main() -> list[str]:
        requests = [async_requester.send_message_and_get_response(
            {"QueueUrl": echo.request_url, "MessageBody": f"a{i}"}, 10) for i in range(100)]
        return [reply["Body"] for reply in await asyncio.gather(*requests)]

    assert asyncio.run(main()) == [f"A{i}" for i in range(100)]


def test_timeout_raises(requester: Requester, echo: EchoResponders) -> None:
    echo.hold.set()  # responders receive but do not answer yet
    with pytest.raises(ResponseTimeout) as raised:
        ask(requester, echo, "slow", timeout_s=0.5)
    assert isinstance(raised.value, TimeoutError)
    assert requester.temporary.virtual.virtual_queue_urls == []


def test_async_timeout_raises(requester: Requester, echo: EchoResponders) -> None:
    echo.hold.set()

    async def main() -> None:
        await AsyncRequester(requester).send_message_and_get_response(
            {"QueueUrl": echo.request_url, "MessageBody": "slow"}, 0.5)

    with pytest.raises(ResponseTimeout):
        asyncio.run(main())


def test_reply_after_timeout_is_logged_and_dropped(requester: Requester, echo: EchoResponders,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "conveyor.tempqueues")
    echo.hold.set()
    with pytest.raises(ResponseTimeout):
        ask(requester, echo, "late", timeout_s=0.3)
    echo.hold.clear()  # the late reply now goes to a virtual queue that no longer exists
    assert wait_until(lambda: "unknown virtual queue" in caplog.text)
    assert ask(requester, echo, "next")["Body"] == "NEXT"  # never the late "LATE"
    (host,) = requester.temporary.host_queue_urls

    def host_empty() -> bool:
        attributes = requester.temporary.sqs.get_queue_attributes(
            QueueUrl=host, AttributeNames=["ApproximateNumberOfMessages",
                                           "ApproximateNumberOfMessagesNotVisible"])
        return set(attributes["Attributes"].values()) == {"0"}

    assert wait_until(host_empty)


def test_reply_to_deleted_queue_is_logged_and_dropped(client_factory: Callable[[], Any],
                                                      queue_name: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "conveyor.tempqueues")
    sqs = client_factory()
    gone = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.delete_queue(QueueUrl=gone)
    responder = Responder(sqs)
    request = {"MessageId": "m-1", "MessageAttributes": {
        "ResponseQueueUrl": {"DataType": "String", "StringValue": gone + "#reply"}}}
    assert responder.is_response_message_requested(request)
    assert responder.send_response_message(request, {"MessageBody": "too late"}) is False
    assert "no longer exists" in caplog.text
    assert not responder.is_response_message_requested({"MessageId": "m-2"})
    assert responder.send_response_message({"MessageId": "m-2"}, {"MessageBody": "x"}) is False
    assert asyncio.run(AsyncResponder(sqs).send_response_message(
        request, {"MessageBody": "x"})) is False


def test_requester_owning_its_client_shuts_it_down(client_factory: Callable[[], Any],
                                                   prefix: str, echo: EchoResponders) -> None:
    sqs = client_factory()
    requester = Requester(sqs, prefix=prefix, poll_wait_s=1, sweep_period_s=None)
    assert ask(requester, echo, "once")["Body"] == "ONCE"
    hosts = requester.temporary.host_queue_urls
    requester.shutdown()
    listed = sqs.list_queues(QueueNamePrefix=prefix).get("QueueUrls", [])
    assert hosts and not set(hosts) & set(listed)
