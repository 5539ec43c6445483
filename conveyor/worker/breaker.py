"""The app's circuit breaker: what a POST's outcome says about the app, and when to look again.

Each POST's outcome is one of:

- DOWN: nothing took the request (the connection was refused or never made). The app is
  not there; no message can cause this.
- SUSPECT: the request was dropped before a byte of answer (a reset), or a 502/503/504
  came back. That is how an app that restarts, or a proxy with no app behind it, answers;
  but an app that crashes on one message, or answers 503 to it, looks the same. It is
  told apart by what the app does next: if it answers another request after this
  failure, the failure was this message's, a real one (it counts towards MaxRetries);
  if not, the app is unavailable.
- ANSWERED: anything else that came from the app (2xx, 4xx, 500, an answer cut off
  halfway): the app is there.
- NEUTRAL: no answer in time (InactivityTimeout): the app is there but slow, or hung; it
  says nothing either way, and fails the message as ever.

DOWN and SUSPECT open the breaker (outage.py): the worker stops receiving, holds what it
has (nothing is given back while the app is unavailable: settlement.py says why), and looks
again after a short back-off (PROBE_FIRST_S doubling to PROBE_MAX_S): the health check
(HealthCheckPath) if there is one, then a held message. A probe that answers closes the
breaker: the held messages go to the app, in order, and receiving resumes.
"""

from __future__ import annotations

import asyncio
import enum
import random
from typing import Generic, TypeVar

from conveyor.clock import Clock
from conveyor.worker.delivery import Outcome

T = TypeVar("T")

PROBE_FIRST_S = 0.1
PROBE_MAX_S = 2.0  # the health check, or a message the app refused to connect for
# Re-POSTing a message that got a SUSPECT answer may be re-POSTing the message that makes
# the app crash: not faster than this.
SUSPECT_PROBE_MAX_S = 10.0
RETRY_AFTER_MAX_S = 30.0  # a 503's Retry-After is honoured up to this between probes
MAX_PROBES = 2  # held messages enough to try the app with (no second opinion fetched)
# A SUSPECT failure is the message's own when the app answered something this shortly
# before the request was sent (or since), unless SUSPECT_STREAK of them come in a row
# with no answer between: then the app went away (a crash behind a proxy answers 502 to
# everything at once), and the breaker opens however recently it answered.
RECENT_ANSWER_S = 1.0
SUSPECT_STREAK = 3
# With only SUSPECT failures and no other message held to compare with, one more message
# is received to try (a second opinion) at most this often.
SECOND_OPINION_EVERY_S = 60.0

_DOWN = frozenset({"connect-failed", "connect-timeout"})
_SUSPECT = frozenset({"no-answer", "502", "503", "504"})
# A payload that could not be fetched from the blob store says nothing about the app.
_NEUTRAL = frozenset({"inactivity-timeout", "payload-unavailable"})


class Verdict(enum.Enum):
    DOWN = "down"
    SUSPECT = "suspect"
    ANSWERED = "answered"
    NEUTRAL = "neutral"


def verdict(outcome: Outcome) -> Verdict:
    """What one POST's outcome says about the app."""
    if outcome.ok:
        return Verdict.ANSWERED
    if outcome.status in _DOWN:
        return Verdict.DOWN
    if outcome.status in _SUSPECT:
        return Verdict.SUSPECT
    if outcome.status in _NEUTRAL:
        return Verdict.NEUTRAL
    return Verdict.ANSWERED


class Breaker(Generic[T]):
    """The breaker's state, without I/O: open or closed, the messages it holds, and when to
    probe next. `T` is the daemon's Job (job.py)."""

    def __init__(self, rng: random.Random, clock: Clock) -> None:
        self._rng = rng
        self._clock = clock
        self.is_open = False
        self.closed = asyncio.Event()  # pollers wait on it
        self.closed.set()
        self.opened_s = 0.0
        self.failed: list[T] = []  # held after a DOWN or SUSPECT POST, oldest first
        self.parked: list[T] = []  # held before their POST, while open
        self.last_answer_s = -float("inf")  # when the app last answered (ANSWERED verdict)
        self.suspects = 0  # SUSPECT failures since the app last answered
        self.second_opinion_s = -float("inf")
        self.opened = 0  # times opened, for the log and /metrics
        self._pauses = 0

    def open(self) -> bool:
        """Open (if closed); True when it just opened."""
        if self.is_open:
            return False
        self.is_open = True
        self.closed.clear()
        self.opened_s = self._clock.monotonic_s()
        self.opened += 1
        self._pauses = 0
        return True

    def close(self) -> tuple[list[T], list[T]]:
        """Close; return (failed, parked): the messages it held."""
        held = (self.failed, self.parked)
        self.failed, self.parked = [], []
        self.is_open = False
        self.closed.set()
        return held

    def forget(self, job: T) -> None:
        """`job` is done with (deleted, released): hold it no more."""
        for held in (self.failed, self.parked):
            for i, other in enumerate(held):
                if other is job:
                    del held[i]
                    return

    def answered(self) -> None:
        """The app answered a request (or its health check) just now."""
        self.last_answer_s = self._clock.monotonic_s()
        self.suspects = 0

    def own_failure(self, sent_s: float) -> bool:
        """Judge a SUSPECT failure of a request sent at `sent_s`: True when it is the
        message's own (see RECENT_ANSWER_S), False when it says the app is unavailable."""
        self.suspects += 1
        return self.last_answer_s > sent_s - RECENT_ANSWER_S and self.suspects < SUSPECT_STREAK

    @property
    def held(self) -> int:
        """Messages held to try the app with."""
        return len(self.failed) + len(self.parked)

    def next_pause_s(self, *, suspect: bool, retry_after_s: int | None = None) -> float:
        """Seconds until the next probe: doubling, jittered, capped (see the constants)."""
        self._pauses += 1
        cap_s = SUSPECT_PROBE_MAX_S if suspect else PROBE_MAX_S
        ceiling = min(cap_s, PROBE_FIRST_S * 2 ** min(self._pauses - 1, 20))
        pause = self._rng.uniform(ceiling / 2, ceiling)
        if retry_after_s is not None:
            pause = max(pause, min(retry_after_s, RETRY_AFTER_MAX_S))
        return pause

    def wants_second_opinion(self) -> bool:
        """True when no untried message is held to compare the SUSPECT ones with, there is
        room for one, and none was fetched for a while (the caller checks for suspects)."""
        if self.parked or self.held >= MAX_PROBES:
            return False
        if self._clock.monotonic_s() - self.second_opinion_s < SECOND_OPINION_EVERY_S:
            return False
        self.second_opinion_s = self._clock.monotonic_s()
        return True
