"""A token bucket kept as one number (GCRA, the generic cell rate algorithm of ATM
networks' policing, as redis-cell keeps it): `tat_ms`, the time the bucket is full again.
Each token taken moves it one interval on; the tokens left are how far it may still go
within the burst. Pure: the server's stores keep the number (service/rules.py, tenant
limits), the worker keeps its own where the server cannot (worker/local_limits.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Rate:
    """A token bucket: `per_s` tokens a second, at most `burst` at once."""

    per_s: float
    burst: int

    @property
    def interval_ms(self) -> float:
        return 1000.0 / self.per_s

    def room(self, tat_ms: float | None, now_ms: int) -> int:
        """Tokens available at `now_ms` in a bucket at `tat_ms` (None: never used: full)."""
        if tat_ms is None or tat_ms <= now_ms:
            return self.burst
        # A hair of slack: float steps must not lose a token that is due.
        return max(0, int((now_ms + self.burst * self.interval_ms - tat_ms)
                          / self.interval_ms + 1e-9))

    def spend(self, tat_ms: float | None, now_ms: int, taken: int) -> float:
        """The bucket after `taken` tokens went at `now_ms` (a negative `taken` gives
        unused ones back)."""
        start = now_ms if tat_ms is None else max(tat_ms, now_ms)
        return start + taken * self.interval_ms

    def ready_ms(self, tat_ms: float | None, now_ms: int, wanted: int) -> int:
        """When the bucket holds `wanted` tokens (at most its burst) again."""
        if tat_ms is None:
            return now_ms
        wanted = min(max(wanted, 1), self.burst)
        return max(now_ms, math.ceil(tat_ms + (wanted - self.burst) * self.interval_ms))
