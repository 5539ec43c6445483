"""One background long-poll receiver per host queue, handing messages to a router."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from .core import Message
from .errors import is_queue_missing

log = logging.getLogger(__name__)

Router = Callable[[str, list[Message]], None]

_MAX_BACKOFF_S = 5.0  # after errors, poll at least this often so a recreated queue is noticed


class HostReceiver:
    """Long-polls one host queue in a daemon thread and routes what it receives."""

    def __init__(self, sqs: Any, host_url: str, route: Router, poll_wait_s: int) -> None:
        self.sqs = sqs
        self.host_url = host_url
        self._route = route
        self._poll_wait_s = poll_wait_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"tempqueues-receiver-{host_url.rsplit('/', 1)[-1]}")

    def start(self) -> HostReceiver:
        """Start polling."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask the thread to end after its current long poll; does not wait."""
        self._stop.set()

    def join(self, timeout_s: float) -> bool:
        """Wait for the thread to end; True if it did."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        """True while the polling thread runs."""
        return self._thread.is_alive()

    def _run(self) -> None:
        backoff_s = 0.1
        while not self._stop.is_set():
            try:
                messages = self._poll()
            except Exception as exc:  # supervisor loop: log, back off, carry on
                if self._stop.is_set():
                    break
                if is_queue_missing(exc):
                    log.warning("host queue %s does not exist; retrying in %.1fs",
                                self.host_url, backoff_s)
                else:
                    log.exception("receive from host queue %s failed", self.host_url)
                self._stop.wait(backoff_s)
                backoff_s = min(backoff_s * 2, _MAX_BACKOFF_S)
                continue
            backoff_s = 0.1
            if self._stop.is_set():
                self._release(messages)
                break
            if messages:
                self._route(self.host_url, messages)

    def _poll(self) -> list[Message]:
        response = self.sqs.receive_message(
            QueueUrl=self.host_url, MaxNumberOfMessages=10, WaitTimeSeconds=self._poll_wait_s,
            MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"])
        return response.get("Messages", [])

    def _release(self, messages: list[Message]) -> None:
        """Make messages received while stopping visible again at once for other clients."""
        if not messages:
            return
        entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                   for i, m in enumerate(messages)]
        try:
            self.sqs.change_message_visibility_batch(QueueUrl=self.host_url, Entries=entries)
        except Exception:  # best effort while stopping; they reappear after their timeout
            log.debug("could not release %d messages on %s", len(messages), self.host_url)
