"""The scheduler's clock: wall time, or (tests only) a shared sped-up time.

`CONVEYOR_CRON_CLOCK="EPOCH_S,SINCE_S,SPEED"` makes cron time
`EPOCH_S + (time.time() - SINCE_S) * SPEED`. Every process given the same value agrees on
the time, so several daemons can be driven through hours of schedule in seconds. Lease
expiry is unaffected: it stays real time on the lease backend.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

ENV = "CONVEYOR_CRON_CLOCK"


@dataclass(frozen=True, slots=True)
class CronClock:
    """Epoch time for schedules, and how many real seconds a span of it takes."""

    epoch_s: float = 0.0
    since_s: float = 0.0
    speed: float = 1.0
    real: Callable[[], float] = time.time

    def now_s(self) -> float:
        """Current cron time, epoch seconds."""
        if self.speed == 1.0 and not self.epoch_s:
            return self.real()
        return self.epoch_s + (self.real() - self.since_s) * self.speed

    def now_ms(self) -> int:
        """Current cron time, epoch milliseconds."""
        return int(self.now_s() * 1000)

    def real_seconds(self, cron_seconds: float) -> float:
        """Real seconds until `cron_seconds` of cron time have passed."""
        return cron_seconds / self.speed

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CronClock:
        """The wall clock, unless CONVEYOR_CRON_CLOCK asks for a test clock."""
        value = (os.environ if env is None else env).get(ENV, "").strip()
        if not value:
            return cls()
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
        return cls(epoch_s, since_s, speed)
