"""The temporary-queues client: every queue it creates is virtual, on host queues it owns.

Host queues are created on demand, one per distinct attribute set, named
`<prefix><client-id>-<n>`, tagged with their retention and heartbeated while this client
lives; a sweeper deletes host queues whose owners died. `shutdown()` deletes the host
queues and stops every thread.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from .core import host_key, host_tags, parse_retention_s
from .errors import ClientClosed
from .heartbeat import Heartbeater
from .names import (
    DEFAULT_HEARTBEAT_INTERVAL_S,
    DEFAULT_MAX_TAG_CALLS_PER_S,
    DEFAULT_POLL_WAIT_S,
    DEFAULT_PREFIX,
    DEFAULT_RETENTION_S,
    DEFAULT_SWEEP_PERIOD_S,
    HOST_QUEUE_URL,
    IDLE_QUEUE_RETENTION_PERIOD,
)
from .sweeper import Sweeper
from .virtual import OrphanHandler, VirtualQueuesClient, log_and_drop

log = logging.getLogger(__name__)


class TemporaryQueuesClient:
    """A boto3 SQS client wrapper whose CreateQueue makes cheap virtual queues; thread-safe.

    `sweep_period_s=None` turns this client's share of orphan sweeping off.
    """

    def __init__(self, sqs: Any, *, prefix: str = DEFAULT_PREFIX,
                 retention_s: int = DEFAULT_RETENTION_S,
                 heartbeat_interval_s: float = DEFAULT_HEARTBEAT_INTERVAL_S,
                 sweep_period_s: float | None = DEFAULT_SWEEP_PERIOD_S,
                 max_tag_calls_per_s: float = DEFAULT_MAX_TAG_CALLS_PER_S,
                 poll_wait_s: int = DEFAULT_POLL_WAIT_S,
                 orphan_handler: OrphanHandler = log_and_drop,
                 wall_clock: Callable[[], float] = time.time) -> None:
        if not prefix:
            raise ValueError("the queue name prefix must not be empty")
        if heartbeat_interval_s >= retention_s:
            msg = "heartbeat_interval_s must be shorter than retention_s"
            raise ValueError(msg)
        self.sqs = sqs
        self.prefix = prefix
        self.retention_s = retention_s
        self.client_id = uuid.uuid4().hex
        self.virtual = VirtualQueuesClient(sqs, orphan_handler=orphan_handler,
                                           poll_wait_s=poll_wait_s)
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._hosts: dict[tuple[tuple[str, str], ...], str] = {}
        self._host_specs: dict[str, tuple[str, dict[str, str]]] = {}  # url -> (name, attributes)
        self._closed = False
        self.heartbeater = Heartbeater(sqs, heartbeat_interval_s, max_tag_calls_per_s,
                                       self._recreate, wall_clock).start()
        self.sweeper = (Sweeper(sqs, prefix, sweep_period_s, wall_clock=wall_clock).start()
                        if sweep_period_s else None)

    def __getattr__(self, name: str) -> Any:
        # Messages, tags and attributes go through the virtual queues client.
        return getattr(self.virtual, name)

    def create_queue(self, *, QueueName: str, Attributes: dict[str, str] | None = None,
                     **params: Any) -> dict[str, Any]:
        """CreateQueue as a virtual queue on the host queue for these attributes."""
        attributes = dict(Attributes or {})
        if HOST_QUEUE_URL in attributes:
            return self.virtual.create_queue(QueueName=QueueName, Attributes=attributes,
                                             **params)
        retention_s = parse_retention_s(attributes.pop(IDLE_QUEUE_RETENTION_PERIOD, None))
        host_url = self.host_queue_url(attributes)
        virtual = {HOST_QUEUE_URL: host_url,
                   IDLE_QUEUE_RETENTION_PERIOD: str(retention_s or self.retention_s)}
        return self.virtual.create_queue(QueueName=QueueName, Attributes=virtual, **params)

    def delete_queue(self, *, QueueUrl: str) -> dict[str, Any]:
        """DeleteQueue: local for virtual queues, a real call otherwise."""
        return self.virtual.delete_queue(QueueUrl=QueueUrl)

    def host_queue_url(self, attributes: dict[str, str]) -> str:
        """The host queue for an attribute set, created (and tagged) on first use."""
        key = host_key(attributes)
        with self._lock:
            if self._closed:
                raise ClientClosed("temporary queues client was shut down")
            url = self._hosts.get(key)
            if url is None:
                name = f"{self.prefix}{self.client_id}-{len(self._hosts)}"
                if attributes.get("FifoQueue", "").lower() == "true":
                    name += ".fifo"
                url = self._create_host(name, attributes)
                self._hosts[key] = url
                self._host_specs[url] = (name, attributes)
                self.heartbeater.add(url)
        return url

    @property
    def host_queue_urls(self) -> list[str]:
        """The host queues this client created and still owns."""
        with self._lock:
            return list(self._hosts.values())

    def shutdown(self) -> None:
        """Release everything: threads, virtual queues and the host queues it created."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            hosts = list(self._hosts.values())
        if self.sweeper is not None:
            self.sweeper.stop()
        self.heartbeater.stop()
        self.virtual.stop_receivers()
        for url in hosts:
            self.heartbeater.remove(url)
            try:
                self.sqs.delete_queue(QueueUrl=url)
                log.info("deleted host queue %s", url)
            except Exception:  # keep releasing the rest; the sweepers catch what is left
                log.exception("could not delete host queue %s", url)
        self.virtual.join_receivers(self.virtual.poll_wait_s + 2.0)
        self.heartbeater.join(2.0)
        if self.sweeper is not None:
            self.sweeper.join(2.0)

    def _create_host(self, name: str, attributes: dict[str, str]) -> str:
        now_ms = int(self._wall_clock() * 1000)
        url = self.sqs.create_queue(QueueName=name, Attributes=attributes,
                                    tags=host_tags(self.retention_s, now_ms))["QueueUrl"]
        log.info("created host queue %s", url)
        return url

    def _recreate(self, url: str) -> None:
        """A host queue vanished while in use (swept by mistake): create it again."""
        with self._lock:
            spec = None if self._closed else self._host_specs.get(url)
        if spec is None:
            return
        try:
            self._create_host(*spec)
        except Exception:  # e.g. QueueDeletedRecently on SQS: the next heartbeat retries
            log.exception("could not recreate host queue %s", url)
