"""The one clock. Services take `now` from here; tests move it instead of sleeping."""

from __future__ import annotations

import time


class Clock:
    """Wall-clock time in milliseconds, plus an offset that only tests move."""

    def __init__(self, offset_s: float = 0.0) -> None:
        self.offset_ms = int(offset_s * 1000)  # moved by tests (--dev-clock)
        self.skew_ms = 0  # set from a shared store, so every node keeps the database's time

    def local_ms(self) -> int:
        """This machine's idea of the time (what a shared store corrects)."""
        return time.time_ns() // 1_000_000 + self.offset_ms

    def now_ms(self) -> int:
        return self.local_ms() + self.skew_ms

    def now_s(self) -> int:
        return self.now_ms() // 1000

    def advance(self, seconds: float) -> None:
        self.offset_ms += int(seconds * 1000)
