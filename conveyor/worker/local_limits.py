"""A receive rate and a group cap the worker applies itself, where the queue server cannot.

A Conveyor server enforces a queue's receive rate and group limits in its store, across
every worker (service/tenants.py); Amazon SQS and other servers have no such thing. So
where the server does not answer Conveyor's PollMessages (receiver.py tells), the worker
applies the ReceiveRate / ReceiveBurst options itself, to its own receives: each asks for
no more messages than its bucket holds, waits for a token when it is empty, and gives back
what the receive did not bring. The bound is per worker: N workers take N times the rate.
On a Conveyor server the options are left to the queue's own attributes
(ConveyorReceiveRate), which hold fleet-wide; the worker says which at its first receive.

GroupConcurrency is the same for a queue's message groups (ConveyorGroupConcurrency): where
the queue's server caps none (Amazon SQS, another server, or a Conveyor queue without the
attribute), the worker keeps at most that many messages of one MessageGroupId at its app at
once; the others wait in their group's line (groups.py, settlement.py), invisible, while
other groups' messages pass them. It asks the queue for the attribute at start and says
which side caps in one line; a Conveyor queue that has it keeps it for every worker.
"""

from __future__ import annotations

import asyncio
import logging

from conveyor.client import SQSClient, SQSError
from conveyor.clock import Clock
from conveyor.ratelimit import Rate

log = logging.getLogger("conveyor.worker.daemon")

# A Conveyor server's own queue attribute (docs/queue-controls.md): the most messages of one
# group in flight at once, for every worker; "0" or absent: no cap.
SERVER_GROUP_CAP = "ConveyorGroupConcurrency"


class LocalRate:
    """The worker's own bucket for its receives (one per worker, shared by its pollers)."""

    def __init__(self, rate: Rate, queue_name: str, clock: Clock) -> None:
        self._rate = rate
        self._queue_name = queue_name
        self._clock = clock
        self._tat_ms: float | None = None
        self._decided = False

    def applies(self, server_enforces: bool | None) -> bool:
        """Whether this worker applies the rate (the server cannot, or is not known yet:
        None); said once, in one log line, when first known."""
        if server_enforces is None:
            return True
        if not self._decided:
            self._decided = True
            if server_enforces:
                log.info("queue %s: ReceiveRate is left to the Conveyor server (set the "
                         "queue's ConveyorReceiveRate, which holds for every worker)",
                         self._queue_name)
            else:
                log.info("queue %s: the server enforces no receive rate: this worker "
                         "applies ReceiveRate=%g/s (burst %d) to its own receives",
                         self._queue_name, self._rate.per_s, self._rate.burst)
        return not server_enforces

    async def take(self, wanted: int) -> int:
        """Up to `wanted` tokens, waiting for at least one."""
        while True:
            now_ms = self._now_ms()
            room = self._rate.room(self._tat_ms, now_ms)
            if room:
                taken = min(wanted, room)
                self._tat_ms = self._rate.spend(self._tat_ms, now_ms, taken)
                return taken
            await asyncio.sleep((self._rate.ready_ms(self._tat_ms, now_ms, 1) - now_ms) / 1000)

    def give_back(self, unused: int) -> None:
        """Tokens a receive took and did not use."""
        if unused > 0:
            self._tat_ms = self._rate.spend(self._tat_ms, self._now_ms(), -unused)

    def _now_ms(self) -> int:
        return int(self._clock.monotonic_s() * 1000)


async def local_group_cap(sqs: SQSClient, queue_url: str, queue_name: str, *,
                          wanted: int, fifo: bool) -> int:
    """The cap per message group this worker applies itself: GroupConcurrency (`wanted`)
    where the queue's server caps none, else 0; said in one log line. Raises what
    GetQueueAttributes raises when it may be retried (the server is unreachable)."""
    if fifo:
        log.info("queue %s: FIFO, SQS lets one message of a group out at a time; "
                 "GroupConcurrency=%d does not apply", queue_name, wanted)
        return 0
    server_cap = await _server_group_cap(sqs, queue_url)
    if server_cap:
        log.info("queue %s: the Conveyor server caps each message group at %d in flight "
                 "(ConveyorGroupConcurrency, for every worker); GroupConcurrency=%d is left "
                 "to it", queue_name, server_cap, wanted)
        return 0
    log.info("queue %s: the server caps no message group: this worker keeps at most "
             "GroupConcurrency=%d of each at its app at once", queue_name, wanted)
    return wanted


async def _server_group_cap(sqs: SQSClient, queue_url: str) -> int:
    """The queue's ConveyorGroupConcurrency; 0 where it has none, or the server knows no
    such attribute (Amazon SQS answers InvalidAttributeName, "The specified attribute
    doesn't exist": GetQueueAttributes, Amazon SQS API Reference)."""
    try:
        attributes = await sqs.get_queue_attributes(queue_url, [SERVER_GROUP_CAP])
    except SQSError as exc:
        if exc.retryable:
            raise
        return 0
    value = attributes.get(SERVER_GROUP_CAP, "0")
    return int(value) if value.isdigit() else 0
