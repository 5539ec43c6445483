"""How many POSTs may be open to the app at once: a limit that follows the app.

The rule is TCP Vegas (Brakmo & Peterson, "TCP Vegas: End to End Congestion Avoidance on
a Global Internet", IEEE JSAC 1995) as Netflix's concurrency-limits library applies it to
requests (`VegasLimit`): an app whose answers take longer than they do unloaded is
queueing requests, and by Little's law the queue is about

    queue = limit × (1 − rtt_noload / rtt)

requests. The limit grows while that queue stays under `alpha` (latency flat: the app has
room), holds between `alpha` and `beta`, and shrinks above `beta`, so the app keeps a few
requests queued (enough to stay busy) and no more. Three changes for a worker tier:

- Overload answers (429, 503, 504, no answer within InactivityTimeout, no connection
  within ConnectTimeout) cut the limit at once by a multiplicative factor (0.7, CUBIC's β,
  RFC 9438 §4.6), at most once per round trip: only requests started after a cut can
  cause the next (TCP's one reduction per window of data, RFC 5681 §3.1).
- Samples are judged per window (`max(limit, MIN_WINDOW)` answers to requests sent since
  the last judgement, so each window measures one limit), on their mean, not one by one:
  a job's own duration varies more than a packet's, and one slow job says nothing about
  queueing.
- `rtt_noload` is the lowest window mean over the last `BASELINE_WINDOWS` windows, and
  every `PROBE_EVERY` windows the limit is halved for one window (the probe), as BBR's
  ProbeRTT refreshes its minimum RTT (Cardwell et al., "BBR: Congestion-Based Congestion
  Control", ACM Queue 2016): so an app that became slower for good (a new release, a
  heavier mix of jobs) is measured anew instead of being taken for a congested one.

The limit stays between 1 and HttpConnections, and does not grow while fewer than half of
it are in use (the queue, not the app, is what limits the worker then). Time comes from
a `Clock` (conveyor/clock.py), so tests move it instead of sleeping.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from conveyor.clock import Clock

START_LIMIT = 10  # VegasLimit's default initial limit
MIN_WINDOW = 10  # answers per window, at least: fewer make a noisy mean
BACKOFF = 0.7  # multiplicative decrease on an overload answer (RFC 9438's β_cubic)
PROBE_EVERY = 30  # windows between probes: one window in 31 at half the limit (~1.6%)
BASELINE_WINDOWS = PROBE_EVERY + 2  # so the last probe's window is always in the horizon
# Outcomes that say "too much": the app sheds load, or cannot keep up with what it has.
OVERLOAD = frozenset({"429", "503", "504", "inactivity-timeout"})
# Outcomes that say nothing about load: the app is down (the circuit breaker's business).
NOT_MEASURED = frozenset({"connect-failed", "connect-timeout", "no-answer", "connection-error",
                          "cancelled"})


@dataclass(slots=True)
class _Window:
    """Answers to requests started since `started_s`, collected for one judgement."""

    started_s: float
    count: int = 0
    rtt_sum_s: float = 0.0
    peak_in_flight: int = 0


class ConcurrencyLimit:
    """The current limit on open POSTs. `start()` before each POST and `finish(...)` after
    it; `current` is how many may be open now. With `adaptive=False` it stays at
    `max_limit` (Elastic Beanstalk's fixed HttpConnections)."""

    def __init__(self, clock: Clock, max_limit: int, *, adaptive: bool = True) -> None:
        self._clock = clock
        self.max_limit = max_limit
        self.adaptive = adaptive
        self.limit = float(min(START_LIMIT, max_limit) if adaptive else max_limit)
        self.in_flight = 0
        self.rtt_noload_s: float | None = None
        self.cuts = 0  # overload cuts so far
        self._window = _Window(clock.monotonic_s())
        self._means: deque[float] = deque(maxlen=BASELINE_WINDOWS)
        self._windows = 0
        # The first probe comes early: the first windows ran at START_LIMIT, maybe past
        # the app's capacity already, so none of them saw it unloaded.
        self._next_probe = 2
        self._probing = False
        self._cut_s = -math.inf

    @property
    def current(self) -> int:
        """How many POSTs may be open now (halved during a probe)."""
        limit = max(1, int(self.limit))
        return max(1, limit // 2) if self._probing else limit

    def start(self) -> float:
        """A POST starts now; returns its start time for `finish`."""
        self.in_flight += 1
        self._window.peak_in_flight = max(self._window.peak_in_flight, self.in_flight)
        return self._clock.monotonic_s()

    def finish(self, started_s: float, status: str) -> None:
        """A POST started at `started_s` ended with `status` (an Outcome's status)."""
        self.in_flight -= 1
        if not self.adaptive or status in NOT_MEASURED:
            return
        if status in OVERLOAD:
            if started_s >= self._cut_s:  # once per round trip
                self._cut()
            return
        window = self._window
        if started_s < window.started_s:
            return  # sent under an earlier limit: says nothing about this one
        window.count += 1
        window.rtt_sum_s += self._clock.monotonic_s() - started_s
        if window.count >= max(self.current, MIN_WINDOW):
            self._judge(window)

    def _cut(self) -> None:
        self.limit = max(1.0, self.limit * BACKOFF)
        self.cuts += 1
        self._cut_s = self._clock.monotonic_s()
        self._probing = False
        self._new_window()

    def _judge(self, window: _Window) -> None:
        mean_s = window.rtt_sum_s / window.count
        self._means.append(mean_s)
        self.rtt_noload_s = min(self._means)
        if self._probing:  # the probe's mean is in the horizon now; back to the limit
            self._probing = False
        else:
            self._adjust(mean_s, window.peak_in_flight)
            self._windows += 1
            if self._windows >= self._next_probe:
                self._next_probe += PROBE_EVERY
                self._probing = True
        self._new_window()

    def _adjust(self, mean_s: float, peak_in_flight: int) -> None:
        """Vegas: grow while the estimated queue is short, shrink while it is long."""
        assert self.rtt_noload_s is not None
        limit = self.limit
        queue = limit * (1 - self.rtt_noload_s / mean_s) if mean_s > 0 else 0.0
        step = max(1.0, math.log10(limit))  # VegasLimit's log10 steps, at least 1
        alpha, beta = 3 * step, 6 * step
        room = peak_in_flight * 2 >= limit  # else the worker, not the app, is the limit
        if queue <= step and room:
            limit += beta  # no sign of a queue: grow fast (slow start)
        elif queue < alpha and room:
            limit += step
        elif queue > beta:
            limit -= max(step, (queue - beta) / 2)  # halve the excess each round trip
        self.limit = min(float(self.max_limit), max(1.0, limit))

    def _new_window(self) -> None:
        self._window = _Window(self._clock.monotonic_s(), peak_in_flight=self.in_flight)
