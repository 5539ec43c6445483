"""Heartbeats: keep tagging the host queues a live client owns, within TagQueue limits."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .core import heartbeat_tags
from .errors import is_queue_missing

log = logging.getLogger(__name__)


class TagPacer:
    """Spaces calls at least `1 / rate_per_s` apart. Pure: the caller sleeps."""

    def __init__(self, rate_per_s: float) -> None:
        self.spacing_s = 1.0 / rate_per_s
        self._next_s = float("-inf")

    def reserve(self, now_s: float) -> float:
        """Claim the next slot; how long to wait before using it."""
        slot_s = max(now_s, self._next_s)
        self._next_s = slot_s + self.spacing_s
        return slot_s - now_s


class Heartbeater:
    """Tags every registered host queue with a fresh timestamp once per interval.

    `on_missing(url)` is called when a host queue vanished under a live client (a sweeper
    with a too-short retention, or an operator): the owner may recreate it.
    """

    def __init__(self, sqs: Any, interval_s: float, max_tag_calls_per_s: float,
                 on_missing: Callable[[str], None],
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.sqs = sqs
        self.interval_s = interval_s
        self._pacer = TagPacer(max_tag_calls_per_s)
        self._on_missing = on_missing
        self._wall_clock = wall_clock
        self._urls: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="tempqueues-heartbeat")
        self.beats = 0  # TagQueue calls made, for tests and metrics

    def start(self) -> Heartbeater:
        """Start the heartbeat thread."""
        self._thread.start()
        return self

    def add(self, queue_url: str) -> None:
        """Heartbeat this queue from now on."""
        with self._lock:
            self._urls.add(queue_url)

    def remove(self, queue_url: str) -> None:
        """Stop heartbeating this queue."""
        with self._lock:
            self._urls.discard(queue_url)

    def stop(self) -> None:
        """Stop the thread (it ends within one TagQueue call)."""
        self._stop.set()

    def join(self, timeout_s: float) -> bool:
        """Wait for the thread; True if it ended."""
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._lock:
                urls = sorted(self._urls)
            for url in urls:
                delay_s = self._pacer.reserve(time.monotonic())
                if self._stop.wait(delay_s):
                    return
                self.beat(url)

    def beat(self, queue_url: str) -> None:
        """One heartbeat to one queue."""
        now_ms = int(self._wall_clock() * 1000)
        try:
            self.sqs.tag_queue(QueueUrl=queue_url, Tags=heartbeat_tags(now_ms))
            self.beats += 1
        except Exception as exc:  # supervisor loop: one failed beat must not end the others
            if is_queue_missing(exc):
                log.warning("host queue %s was deleted while in use", queue_url)
                self._on_missing(queue_url)
            else:
                log.exception("heartbeat to %s failed", queue_url)
