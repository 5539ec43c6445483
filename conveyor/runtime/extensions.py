"""Whether the endpoint speaks one of Conveyor's own APIs, learnt from how it answers.

The worker tier runs unchanged on Amazon SQS and other SQS servers; Conveyor's extensions
(AnnounceWorker, PollMessages) are extras it tries and stops trying where they are not
understood. Amazon SQS refuses an unknown target with a 4xx; moto answers an HTML 500; a
Conveyor server that is briefly unavailable answers a proper ServiceUnavailable error.
So an error answer counts as a refusal unless it is a throttle or a server's own
retryable error; once the endpoint has answered the extension, only an "unknown action"
refuses it (a server rolled back to an older version), and any other error is about the
call (a queue deleted meanwhile, the server's passing trouble). A refused extension is
asked again after `RECHECK_S`, so a worker that started before its server was upgraded
picks the extension up within the hour, at the cost of one refused call an hour elsewhere.
"""

from __future__ import annotations

from conveyor.client import SQSError
from conveyor.clock import Clock

RECHECK_S = 3600.0
# Error codes that say "later", not "no such thing": an SQS-speaking server's own answers.
_PASSING = ("ServiceUnavailable", "InternalError", "InternalFailure", "RequestThrottled",
            "ThrottlingException", "Throttling", "AWS.SimpleQueueService.RequestThrottled")
# What an SQS-speaking server answers to an action it does not have.
_UNKNOWN_ACTION = ("InvalidAction", "UnknownOperationException", "UnknownOperation")


class Extension:
    """The known state of one extension on one endpoint."""

    def __init__(self, name: str, *, clock: Clock, recheck_s: float = RECHECK_S) -> None:
        self.name = name
        self.confirmed = False  # the endpoint answered it at least once
        self._recheck_s = recheck_s
        self._clock = clock
        self._off_until_s = -float("inf")

    @property
    def usable(self) -> bool:
        """True unless the endpoint refused it within the last `recheck_s`."""
        return self._clock.monotonic_s() >= self._off_until_s

    def worked(self) -> None:
        """The endpoint answered a call of it."""
        self.confirmed = True

    def refused(self, exc: SQSError) -> bool:
        """Learn from an error answer to a call of it; True when it is now off (until the
        next recheck), False when the error is passing trouble worth the usual retry."""
        if exc.status == 429 or exc.matches(*_PASSING):
            return False
        if self.confirmed and not exc.matches(*_UNKNOWN_ACTION):
            return False
        self.confirmed = False
        self._off_until_s = self._clock.monotonic_s() + self._recheck_s
        return True
