"""An idle worker: always a long poll parked on its queue, and few calls (issue 22).

The call counts over an hour are worked out here on a moved clock (presence, receiver);
bench/idle_worker.py measures them, and the pick-up delay, on real servers.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from conveyor.client import Message, SQSError, SQSTransportError
from conveyor.clock import ManualClock
from conveyor.runtime.presence import ANNOUNCE_EVERY_S, Presence
from conveyor.worker.backoff import IdleBackoff
from conveyor.worker.flow import IdleControl
from conveyor.worker.receiver import Receiver
from tests.support import sqs_client
from tests.worker.conftest import (
    aio,
    make_queue,
    queue_total,
    recording_app,
    run,
    running_worker,
    wait_until,
)

HOUR_S = 3600.0


class FakeSQS:
    """Records the calls a Presence or a Receiver makes; answers as told."""

    endpoint_url = "http://fake"

    def __init__(self, clock: ManualClock, poll: Any = None, poll_takes_s: float = 0.0) -> None:
        self.clock = clock
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.poll = poll  # an exception to raise for PollMessages, or None to answer
        self.poll_takes_s = poll_takes_s

    async def call(self, action: str, params: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.calls.append((action, params))
        if action == "PollMessages":
            self.clock.advance(self.poll_takes_s)
            if self.poll is not None:
                raise self.poll
        return {}

    async def receive_messages(self, *_: Any, **__: Any) -> list[Message]:
        self.calls.append(("ReceiveMessage", {}))
        return []

    def count(self, action: str) -> int:
        return sum(1 for name, _ in self.calls if name == action)


# -- no pause between long polls --------------------------------------------------------------

def test_an_empty_long_poll_is_followed_by_the_next_at_once() -> None:
    async def scenario() -> None:
        idle = IdleControl(1, IdleBackoff(3600, 3600, random.Random(1)))
        for _ in range(5):  # the server waited: no pause, however many in a row
            await asyncio.wait_for(idle.after_poll(0, 10, early=False), 1)
        await idle.after_poll(0, 10, early=True)  # the first early one of a streak: none
        with pytest.raises(TimeoutError):  # then the back-off (an hour here)
            await asyncio.wait_for(idle.after_poll(0, 10, early=True), 0.2)

    run(scenario())


@pytest.mark.parametrize("extended_wait_s", [0, 2], ids=["ReceiveMessage", "PollMessages"])
def test_an_idle_worker_keeps_polling_without_pauses(sqs, queue_name, extended_wait_s):
    """With an hour's idle back-off, a pause anywhere between polls would strand the
    message: it is POSTed because a long poll is always parked."""
    url = make_queue(sqs, queue_name)

    async def scenario() -> None:
        async with recording_app() as app, running_worker(
                url, app.url, IdleBackoffMin=3600, IdleBackoffMax=3600,
                ExtendedPollWaitTime=extended_wait_s, HttpConnections=1) as worker:
            action = "PollMessages" if extended_wait_s else "ReceiveMessage"
            await wait_until(lambda: worker.metrics.value(
                "conveyor_worker_api_calls_total", action=action, outcome="ok") >= 3,
                what="three empty long polls")
            await aio(sqs.send_message, QueueUrl=url, MessageBody="wake")
            await wait_until(lambda: app.requests, what="the POST")
            await wait_until(lambda: queue_total(sqs, url) == 0, what="the delete")

    run(scenario())


# -- announcements ----------------------------------------------------------------------------

def _presence(clock: ManualClock, sqs: FakeSQS, figures: dict[str, Any]) -> Presence:
    return Presence(sqs, "jobs", lambda: dict(figures), clock=clock)  # type: ignore[arg-type]


def _hour_of_ticks(presence: Presence, clock: ManualClock, poll_s: float | None = None) -> None:
    """An hour, second by second: the presence's tick every ANNOUNCE_EVERY_S, and long
    polls of `poll_s` back to back, each asking at its start whether it should carry the
    announcement, and answered (`carried`) at its end."""
    async def hour() -> None:
        in_flight: tuple[float, dict[str, Any] | None] | None = None
        for second in range(int(HOUR_S)):
            if poll_s is not None:
                if in_flight is not None and clock.monotonic_s() >= in_flight[0] + poll_s:
                    started, request = in_flight
                    if request is not None:
                        presence.carried(request, started)
                    in_flight = None
                if in_flight is None:
                    in_flight = (clock.monotonic_s(), presence.for_poll(poll_s))
            if second % ANNOUNCE_EVERY_S == 0:
                await presence.tick()
            clock.advance(1)

    run(hour())


def test_an_idle_worker_announces_a_dozen_times_an_hour() -> None:
    clock = ManualClock()
    sqs = FakeSQS(clock)
    presence = _presence(clock, sqs, {"status": "ok", "processed": 0})
    _hour_of_ticks(presence, clock)
    assert sqs.count("AnnounceWorker") <= 13  # 3600 / 300, plus the first
    [(_, last)] = sqs.calls[-1:]
    assert last["TtlSeconds"] > 300  # lasts until past the next one


def test_a_working_worker_announces_every_ten_seconds_briefly() -> None:
    clock = ManualClock()
    sqs = FakeSQS(clock)
    figures = {"status": "ok", "processed": 0}
    presence = _presence(clock, sqs, figures)

    async def minute() -> None:
        for _ in range(6):
            figures["processed"] += 7
            await presence.tick()
            clock.advance(ANNOUNCE_EVERY_S)

    run(minute())
    ttls = [params["TtlSeconds"] for _, params in sqs.calls]
    assert len(ttls) == 6 and max(ttls) <= 60  # a crashed busy worker drops off soon


def test_announcements_ride_on_long_polls() -> None:
    clock = ManualClock()
    sqs = FakeSQS(clock)
    presence = _presence(clock, sqs, {"status": "ok"})
    _hour_of_ticks(presence, clock, poll_s=120)
    assert sqs.count("AnnounceWorker") == 0  # each poll carried one: none of its own


def test_a_refused_announcement_is_not_tried_again_within_the_hour() -> None:
    clock = ManualClock()
    sqs = FakeSQS(clock)
    sqs.call = _refusing(sqs, SQSError("HTTP500", "", status=500))  # moto's answer
    presence = _presence(clock, sqs, {"status": "ok"})
    run(presence.tick())
    assert presence.for_poll(120) is None  # nor carried by polls
    _hour_of_ticks(presence, clock)
    assert sqs.count("AnnounceWorker") == 1


def _refusing(sqs: FakeSQS, error: Exception) -> Any:
    async def call(action: str, params: dict[str, Any], **_: Any) -> dict[str, Any]:
        sqs.calls.append((action, params))
        raise error
    return call


# -- receiving --------------------------------------------------------------------------------

def _receiver(sqs: FakeSQS, clock: ManualClock, presence: Presence | None = None) -> Receiver:
    return Receiver(sqs, "http://fake/000000000000/jobs", wait_s=20,  # type: ignore[arg-type]
                    extended_wait_s=120, visibility_timeout_s=30, presence=presence,
                    clock=clock)


@pytest.mark.parametrize("refusal", [
    SQSError("HTTP500", "", status=500),  # moto: an HTML page
    SQSError("UnknownOperationException", "", status=400),
    SQSError("InvalidAction", "", status=400),
])
def test_a_server_without_poll_messages_gets_receive_message(refusal: SQSError) -> None:
    clock = ManualClock()
    sqs = FakeSQS(clock, poll=refusal)
    receiver = _receiver(sqs, clock)

    async def scenario() -> list[int]:
        return [(await receiver.receive(10)).wait_s for _ in range(3)]

    assert run(scenario()) == [20, 20, 20]
    assert [name for name, _ in sqs.calls] == ["PollMessages"] + ["ReceiveMessage"] * 3
    clock.advance(HOUR_S)  # asked again an hour later (a server upgraded meanwhile)
    sqs.poll = None
    assert run(receiver.receive(10)).wait_s == 120


def test_a_conveyor_server_in_trouble_is_not_taken_for_one_without_it() -> None:
    clock = ManualClock()
    sqs = FakeSQS(clock, poll=SQSError("ServiceUnavailable", "", status=503))
    receiver = _receiver(sqs, clock)
    with pytest.raises(SQSError):
        run(receiver.receive(10))
    assert receiver.extended


def test_a_poll_carries_the_announcement_when_one_is_due() -> None:
    clock = ManualClock()
    sqs = FakeSQS(clock)
    presence = _presence(clock, sqs, {"status": "ok"})
    receiver = _receiver(sqs, clock, presence)

    async def polls(count: int) -> None:
        for _ in range(count):
            await receiver.receive(10)
            clock.advance(120)

    run(polls(3))
    announced = [params.get("Announce") for name, params in sqs.calls]
    assert all(a is not None and a["TtlSeconds"] >= 120 for a in announced), announced


def test_polls_cut_twice_by_a_proxy_are_shortened_below_the_cut() -> None:
    clock = ManualClock()
    cut = SQSError("HTTP504", "", status=504)  # nginx's proxy_read_timeout: 60 s
    sqs = FakeSQS(clock, poll=cut, poll_takes_s=60)
    receiver = _receiver(sqs, clock)
    first = run(receiver.receive(10))
    assert (first.messages, receiver._extended_wait_s) == ([], 120)  # one cut: maybe not
    run(receiver.receive(10))
    assert receiver._extended_wait_s == 55
    sqs.poll, sqs.poll_takes_s = None, 0
    assert run(receiver.receive(10)).wait_s == 55


def test_a_transport_error_before_20_s_is_an_error_not_a_cut() -> None:
    clock = ManualClock()
    sqs = FakeSQS(clock, poll=SQSTransportError("PollMessages", "x", "reset"), poll_takes_s=3)
    receiver = _receiver(sqs, clock)
    with pytest.raises(SQSTransportError):
        run(receiver.receive(10))


# -- against moto's server, a stand-in for Amazon SQS -------------------------------------------

def test_on_moto_the_worker_falls_back_after_one_refusal_each(moto_sqs_url, queue_name):
    moto = sqs_client(moto_sqs_url)
    url = make_queue(moto, queue_name)

    async def scenario() -> None:
        async with recording_app() as app, running_worker(
                url, app.url, ExtendedPollWaitTime=120, CreateQueue=False) as worker:
            await aio(moto.send_message, QueueUrl=url, MessageBody="hello")
            await wait_until(lambda: app.requests, what="the POST")
            await wait_until(lambda: queue_total(moto, url) == 0, what="the delete")
            calls = {(action, outcome): worker.metrics.value(
                "conveyor_worker_api_calls_total", action=action, outcome=outcome)
                for action in ("PollMessages", "AnnounceWorker") for outcome in ("HTTP500",)}
            assert worker.receiver is not None and not worker.receiver.extended
        assert calls[("PollMessages", "HTTP500")] == 1
        assert calls[("AnnounceWorker", "HTTP500")] <= 1  # refused once, if tried yet
        assert [r.body for r in app.requests] == [b"hello"]

    run(scenario())


def test_an_announcement_on_a_failed_poll_is_made_again() -> None:
    clock = ManualClock()
    sqs = FakeSQS(clock, poll=SQSTransportError("PollMessages", "x", "refused"))
    presence = _presence(clock, sqs, {"status": "ok"})
    receiver = _receiver(sqs, clock, presence)
    with pytest.raises(SQSTransportError):
        run(receiver.receive(10))
    assert sqs.calls[0][1]["Announce"] is not None
    assert presence.for_poll(120) is not None  # still due: the failed poll did not make it


def test_a_confirmed_extension_survives_errors_about_the_call_but_not_a_rollback() -> None:
    clock = ManualClock()
    sqs = FakeSQS(clock)
    receiver = _receiver(sqs, clock)
    run(receiver.receive(10))  # answered: confirmed
    sqs.poll = SQSError("AWS.SimpleQueueService.NonExistentQueue", "", status=400)
    with pytest.raises(SQSError):
        run(receiver.receive(10))
    assert receiver.extended
    sqs.poll = SQSError("InvalidAction", "", status=400)  # a server without it now
    assert run(receiver.receive(10)).wait_s == 20
    assert not receiver.extended
