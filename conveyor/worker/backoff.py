"""Back-off arithmetic: after a failed job, and between empty polls. Pure functions of
their inputs (the random source is passed in), so tests can pin them down."""

from __future__ import annotations

import email.utils
import random

# SQS refuses visibility timeouts above 12 hours.
MAX_VISIBILITY_S = 43200


def failure_visibility(receive_count: int, base_s: int, cap_s: int,
                       rng: random.Random) -> int:
    """Seconds a failed message stays invisible before its next attempt.

    The first failure waits exactly `base_s` (ErrorVisibilityTimeout, as Elastic Beanstalk
    does); each further receive doubles it, up to `cap_s`, with jitter in the upper half
    so that a burst of failures does not come back as a burst.
    """
    if receive_count <= 1 or base_s == 0:
        return min(base_s, cap_s)
    ceiling = min(cap_s, base_s * 2 ** min(receive_count - 1, 30))
    floor = max(base_s, ceiling // 2)
    return min(ceiling, max(floor, round(rng.uniform(floor, ceiling))))


def parse_retry_after(value: str | None, now_s: float) -> int | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP-date, against `now_s`, unix
    seconds), clamped to SQS's range."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(int(value), MAX_VISIBILITY_S)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0, min(round(when.timestamp() - now_s), MAX_VISIBILITY_S))


class IdleBackoff:
    """Randomized exponential pauses between empty polls (seed 004).

    The first empty poll of a streak costs no pause (one stray empty answer in a busy
    period must not delay the next message); from the second on, the pause is drawn from
    [min_s, ceiling], the ceiling doubling from `min_s` up to `max_s`.
    """

    def __init__(self, min_s: float, max_s: float, rng: random.Random) -> None:
        self._min_s = min_s
        self._max_s = max_s
        self._rng = rng
        self._empties = 0

    def next_pause(self) -> float:
        """The pause before the next poll, after one more empty poll."""
        self._empties += 1
        if self._empties == 1:
            return 0.0
        ceiling = min(self._max_s, self._min_s * 2 ** min(self._empties - 2, 30))
        return self._rng.uniform(self._min_s, max(self._min_s, ceiling))

    def reset(self) -> None:
        """Work arrived: the next empty streak starts over."""
        self._empties = 0


class ErrorBackoff:
    """Pauses after API errors (queue server down): 0.1 s doubling to 5 s, full jitter."""

    def __init__(self, rng: random.Random, first_s: float = 0.1, max_s: float = 5.0) -> None:
        self._rng = rng
        self._first_s = first_s
        self._max_s = max_s
        self.failures = 0

    def next_pause(self) -> float:
        """Pause after one more consecutive failure."""
        self.failures += 1
        ceiling = min(self._max_s, self._first_s * 2 ** min(self.failures - 1, 20))
        return self._rng.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        """A call succeeded."""
        self.failures = 0
