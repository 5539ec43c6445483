"""RetentionPeriod as a step of each delivery (a worker hook, runtime/hooks.py): a message
older than it is not POSTed but expired (settlement.py deletes it, or with
ExpiredToDeadLetter moves it to the dead-letter queue), as Elastic Beanstalk's sqsd does."""

from __future__ import annotations

from conveyor.client import Message
from conveyor.clock import Clock
from conveyor.runtime.hooks import PastRetention, WorkerHook


class Retention(WorkerHook):
    """Refuses to deliver what is older than `retention_period_s`."""

    def __init__(self, retention_period_s: int, clock: Clock) -> None:
        self._retention_period_s = retention_period_s
        self._clock = clock

    async def before_delivery(self, message: Message) -> bool:
        """PastRetention for a message past RetentionPeriod."""
        age_s = self.expired_age_s(message)
        if age_s is not None:
            raise PastRetention(age_s)
        return True

    def expired_age_s(self, message: Message) -> float | None:
        """The message's age when it is past RetentionPeriod, else None."""
        age_s = self.age_s(message)
        return age_s if age_s is not None and age_s > self._retention_period_s else None

    def age_s(self, message: Message) -> float | None:
        """Seconds since the message was sent (SentTimestamp), as RetentionPeriod counts.

        The server stamps SentTimestamp and ApproximateFirstReceiveTimestamp with one clock,
        so their difference is a lower bound of the age that no skew between its clock and
        this machine's can shrink; this machine's clock says how long it has been since."""
        sent_ms = message.sent_ms
        if sent_ms is None:
            return None
        age_s = (self._clock.now_ms() - sent_ms) / 1000
        first_ms = message.first_receive_ms
        if first_ms is not None:
            age_s = max(age_s, (first_ms - sent_ms) / 1000)
        return age_s
