"""The scheduler's clock: a `conveyor.clock.Clock` whose wall time is cron time.

Cron time is the base clock's time, or (tests only) a shared sped-up time:
`CONVEYOR_CRON_CLOCK="EPOCH_S,SINCE_S,SPEED"` makes it `EPOCH_S + (now - SINCE_S) * SPEED`.
Every process given the same value agrees on the time, so several daemons can be driven
through hours of schedule in seconds. Lease expiry is unaffected: it stays real time on the
lease backend, and `monotonic_s()` stays the base clock's real monotonic time.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from conveyor.clock import Clock

log = logging.getLogger(__name__)

ENV = "CONVEYOR_CRON_CLOCK"


class CronClock(Clock):
    """Epoch time for schedules (`now_ms()`), real monotonic time for leases
    (`monotonic_s()`), and how many real seconds a span of cron time takes.

    Built on a base Clock (the machine's by default; a ManualClock in tests), so moving the
    base moves cron time and monotonic time together."""

    def __init__(self, base: Clock | None = None, *, epoch_s: float = 0.0,
                 since_s: float = 0.0, speed: float = 1.0) -> None:
        super().__init__()
        self.base = base or Clock()
        self.epoch_s = epoch_s
        self.since_s = since_s
        self.speed = speed

    def local_ms(self) -> int:
        """Current cron time, epoch milliseconds (before this clock's own advance)."""
        real_ms = self.base.now_ms()
        if self.speed == 1.0 and not self.epoch_s:
            return real_ms
        return int(self.epoch_s * 1000 + (real_ms - self.since_s * 1000) * self.speed)

    def monotonic_s(self) -> float:
        """The base's monotonic time: lease validity is real time, never sped up."""
        return self.base.monotonic_s()

    def advance(self, seconds: float) -> None:
        """Move the base by `seconds` of real time, so wall and monotonic move together
        (cron time moves `seconds * speed`)."""
        self.base.advance(seconds)

    def real_seconds(self, cron_seconds: float) -> float:
        """Real seconds until `cron_seconds` of cron time have passed."""
        return cron_seconds / self.speed

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None,
                 base: Clock | None = None) -> CronClock:
        """Cron time on `base` (the machine's clock by default), unless CONVEYOR_CRON_CLOCK
        asks for a test clock."""
        value = (os.environ if env is None else env).get(ENV, "").strip()
        if not value:
            return cls(base)
        try:
            epoch_s, since_s, speed = (float(part) for part in value.split(","))
        except ValueError:
            msg = f"{ENV} must be EPOCH_S,SINCE_S,SPEED, got {value!r}"
            raise ValueError(msg) from None
        if speed <= 0:
            msg = f"{ENV} speed must be positive, got {speed:g}"
            raise ValueError(msg)
        log.warning("cron clock is simulated (%s=%s): schedules run %gx real time",
                    ENV, value, speed)
        return cls(base, epoch_s=epoch_s, since_s=since_s, speed=speed)
