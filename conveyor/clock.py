"""The one clock. Server, service and stores take `now` from here; tests move it instead
of sleeping."""

from __future__ import annotations

import time

from mypy_extensions import mypyc_attr


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled (setup.py); tests subclass it
class Clock:
    """Wall-clock time in milliseconds, corrected to a shared store's, plus what tests
    moved it by; and a monotonic clock for how long things take."""

    def __init__(self, offset_s: float = 0.0) -> None:
        self.offset_ms = int(offset_s * 1000)  # a machine clock this far off (--dev-clock-skew)
        self.skew_ms = 0  # set from a shared store, so every node keeps the database's time
        # Moved by tests (--dev-clock). Kept apart from the machine's clock: a shared store
        # measures its skew against local_ms(), and must not correct a test's jump away.
        self.advanced_ms = 0

    def local_ms(self) -> int:
        """This machine's idea of the time (what a shared store corrects)."""
        return time.time_ns() // 1_000_000 + self.offset_ms

    def now_ms(self) -> int:
        return self.local_ms() + self.skew_ms + self.advanced_ms

    def now_s(self) -> int:
        return self.now_ms() // 1000

    def monotonic_s(self) -> float:
        """Seconds from an arbitrary start, never set back: for ages and timeouts."""
        return time.monotonic()

    def advance(self, seconds: float) -> None:
        self.advanced_ms += int(seconds * 1000)


class ManualClock(Clock):
    """A clock that moves only when told (`advance`), for tests: time is a value, never a
    sleep. Its monotonic time moves with it."""

    def __init__(self, now_ms: int = 1_800_000_000_000) -> None:
        super().__init__()
        self.machine_ms = now_ms

    def local_ms(self) -> int:
        return self.machine_ms

    def monotonic_s(self) -> float:
        return (self.machine_ms + self.advanced_ms) / 1000
