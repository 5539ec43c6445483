"""Receive from the worker queue: ReceiveMessage, or on a Conveyor server PollMessages.

An idle worker keeps one long poll parked on its queue at all times, so a message reaches
it the moment it is sent. On Amazon SQS a long poll lasts at most 20 s: 180 calls an hour.
A Conveyor server also answers `ConveyorWorkers.PollMessages` (service/polls.py): the same
receive, waiting up to ExtendedPollWaitTime (120 s by default: 30 calls an hour), carrying
the worker's announcement when one is due (runtime/presence.py), so an idle worker makes no other
call. The first refusal of PollMessages (any endpoint that is not Conveyor, see
runtime/extensions.py) turns it off and the worker carries on with ReceiveMessage.

Something between worker and server (a reverse proxy, a NAT) may cut a request that stays
silent for longer than its idle timeout (nginx: 60 s). A poll that fails after it waited
longer than SQS's 20 s is taken for such a cut, not for an outage: the wait is shortened
to a few seconds less than the cuts came after (twice in a row, about as long: one cut may
be a server that went away), and each such failure is an empty answer.

Given several queues (a partitioned queue's partitions, worker/partitions.py), one
PollMessages parks on all of them (`QueueUrls`); each message comes back with the queue it
came from (`Received.sources`). Where PollMessages is refused, such a receiver answers
empty: its caller then reads the queues one by one with ReceiveMessage.

A queue whose receive rate or group limits held a poll back (service/tenants.py) answers
with `RetryAfterSeconds`; the poller waits that long before its next receive
(`Received.retry_after_s`) rather than coming back at once for the few messages a bucket
lets go at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from conveyor.client import Message, SQSClient, SQSError, SQSTransportError, queue_name_from_url
from conveyor.clock import Clock
from conveyor.runtime.extensions import Extension
from conveyor.runtime.presence import TARGET_PREFIX, Presence
from conveyor.worker import telemetry

log = logging.getLogger(__name__)

SQS_MAX_WAIT_S = 20
# A request's own timeout beyond the wait it asks the server for.
_ANSWER_MARGIN_S = 10.0
# A poll cut after `elapsed` seconds is shortened to this much less.
_CUT_MARGIN_S = 5


@dataclass(frozen=True, slots=True)
class Received:
    """One receive's messages, and how long it asked the server to wait for them."""

    messages: list[Message]
    wait_s: int
    sources: list[str] = field(default_factory=list)  # several queues: each message's URL
    # A Conveyor server's word that the queue's rate or group limits held this receive
    # back, and for how long (PollMessages' RetryAfterSeconds): no poll before then.
    retry_after_s: float = 0.0


class Receiver:
    """Receives for the pollers of one worker queue (they share it), or of several queues
    at once with PollMessages only (`queue_url` a list: see the module's docstring)."""

    def __init__(self, sqs: SQSClient, queue_url: str | Sequence[str], *, clock: Clock,
                 wait_s: int, extended_wait_s: int, visibility_timeout_s: int,
                 presence: Presence | None = None,
                 system_attributes: Sequence[str] = ("All",)) -> None:
        self._sqs = sqs
        self._queue_urls = None if isinstance(queue_url, str) else list(queue_url)
        self._queue_url = queue_url if isinstance(queue_url, str) else queue_url[0]
        queue = queue_name_from_url(self._queue_url)
        self._span_name = f"receive {queue}"
        self._span_attributes = telemetry.messaging(queue, "receive", "receive")
        self._wait_s = wait_s
        self._extended_wait_s = extended_wait_s
        self._visibility_timeout_s = visibility_timeout_s
        self._presence = presence
        self._system_attributes = list(system_attributes)
        self._clock = clock
        self.extension = Extension("PollMessages", clock=clock)
        self._cut_after_s: float | None = None  # the last poll was cut after this long
        self._trying = asyncio.Lock()

    @property
    def extended(self) -> bool:
        """True while receives go through PollMessages."""
        return self._extended_wait_s > 0 and self.extension.usable

    async def receive(self, max_messages: int) -> Received:
        """One (long) poll; raises SQSError / SQSTransportError as ReceiveMessage does.
        With tracing on (telemetry.py) each poll is a span."""
        with telemetry.span(self._span_name, "CONSUMER", self._span_attributes) as span:
            received = await self._receive_once(max_messages)
            if span is not None:
                span.set_attribute("messaging.batch.message_count", len(received.messages))
        return received

    async def _receive_once(self, max_messages: int) -> Received:
        if self.extended and not self.extension.confirmed:
            async with self._trying:  # one poller finds out; the others wait for its answer
                if not self.extension.confirmed:
                    return await self._receive(max_messages)
        return await self._receive(max_messages)

    async def _receive(self, max_messages: int) -> Received:
        if self.extended:
            try:
                return await self._poll(max_messages)
            except SQSError as exc:
                if not self.extension.refused(exc):
                    raise
                log.info("%s does not take PollMessages (%s): long polls of %ds "
                         "(ReceiveMessage) from now on", self._sqs.endpoint_url, exc.code,
                         self._wait_s)
        if self._queue_urls is not None:
            return Received([], 0)  # the caller reads several queues one by one
        messages = await self._sqs.receive_messages(
            self._queue_url, max_messages=max_messages, wait_time_s=self._wait_s,
            visibility_timeout_s=self._visibility_timeout_s,
            system_attributes=self._system_attributes)
        return Received(messages, self._wait_s)

    async def _poll(self, max_messages: int) -> Received:
        wait_s = self._extended_wait_s
        params: dict[str, Any] = {
            "MaxNumberOfMessages": max_messages,
            "WaitTimeSeconds": wait_s, "VisibilityTimeout": self._visibility_timeout_s,
            "MessageSystemAttributeNames": self._system_attributes,
            "MessageAttributeNames": ["All"],
        }
        if self._queue_urls is None:
            params["QueueUrl"] = self._queue_url
        else:
            params["QueueUrls"] = self._queue_urls
        announcement = self._presence.for_poll(wait_s) if self._presence else None
        if announcement is not None:
            params["Announce"] = announcement
        if self._presence is not None:  # a drain request then answers this poll at once
            params["WorkerId"] = self._presence.worker_id
        started = self._clock.monotonic_s()
        try:
            answer = await self._sqs.call("PollMessages", params,
                                          timeout_s=wait_s + _ANSWER_MARGIN_S,
                                          target_prefix=TARGET_PREFIX)
        except (SQSError, SQSTransportError) as exc:
            if announcement is not None and self._presence is not None:
                self._presence.lost()
            elapsed_s = self._clock.monotonic_s() - started
            if not self._was_cut(exc, elapsed_s, wait_s):
                raise
            self._cut(wait_s, elapsed_s)
            return Received([], wait_s)
        self._cut_after_s = None
        self.extension.worked()
        if announcement is not None and self._presence is not None:
            self._presence.carried(announcement, started, answer)
        elif self._presence is not None:
            self._presence.answered(answer)
        raw_messages = answer.get("Messages") or []
        sources = ([raw.get("QueueUrl", self._queue_url) for raw in raw_messages]
                   if self._queue_urls is not None else [])
        hint = answer.get("RetryAfterSeconds")
        retry_after_s = float(hint) if isinstance(hint, int | float) and hint > 0 else 0.0
        return Received([Message.from_wire(raw) for raw in raw_messages], wait_s, sources,
                        min(retry_after_s, wait_s))

    def _cut(self, wait_s: int, elapsed_s: float) -> None:
        """A poll was cut after `elapsed_s`: the second cut in a row after about as long
        (not a server that went away once) shortens the wait below it."""
        previous, self._cut_after_s = self._cut_after_s, elapsed_s
        if previous is None or abs(previous - elapsed_s) > _CUT_MARGIN_S:
            return
        self._extended_wait_s = max(SQS_MAX_WAIT_S, int(min(previous, elapsed_s)) - _CUT_MARGIN_S)
        log.warning("long polls of %ds were cut after %.0fs twice (a proxy's idle timeout?): "
                    "polling for %ds from now on", wait_s, elapsed_s, self._extended_wait_s)

    @staticmethod
    def _was_cut(exc: Exception, elapsed_s: float, wait_s: int) -> bool:
        """A failure after more than SQS's longest wait, on a poll asked to wait longer."""
        if isinstance(exc, SQSError) and exc.status < 500:
            return False
        return wait_s > SQS_MAX_WAIT_S and SQS_MAX_WAIT_S < elapsed_s < wait_s
