"""Virtual queues: many local queues multiplexed on one real host queue.

`VirtualQueuesClient` wraps a boto3 SQS client and is used like one. CreateQueue with the
`HostQueueUrl` attribute makes a virtual queue `<host-url>#<name>` without any SQS call;
sends to it go to the host queue tagged with the virtual queue's name; one background
receiver per host queue routes what it receives to the virtual queues' buffers, where
ReceiveMessage waits locally. Every other call passes through to the wrapped client.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .buffer import VirtualQueue
from .core import (
    Message,
    VirtualQueueId,
    parse_virtual_url,
    split_virtual_attributes,
    to_host_batch,
    to_host_send,
    virtual_queue_name,
)
from .errors import ClientClosed, InvalidVirtualQueueAttributes, queue_missing
from .names import DEFAULT_POLL_WAIT_S, HOST_QUEUE_URL, IDLE_QUEUE_RETENTION_PERIOD
from .receiver import HostReceiver

log = logging.getLogger(__name__)

# Called with the virtual queue a message was addressed to (which no longer exists here)
# and the message; returns True to delete the message from the host queue.
OrphanHandler = Callable[[VirtualQueueId, Message], bool]


def log_and_drop(queue: VirtualQueueId, message: Message) -> bool:
    """Default orphan handler: log a warning and delete the message from the host queue."""
    log.warning("message %s for unknown virtual queue %r on host queue %s: dropped",
                message.get("MessageId"), queue.name, queue.host_url)
    return True


class VirtualQueuesClient:
    """A boto3 SQS client wrapper that adds virtual queues; thread-safe."""

    def __init__(self, sqs: Any, *, orphan_handler: OrphanHandler = log_and_drop,
                 poll_wait_s: int = DEFAULT_POLL_WAIT_S, reap_interval_s: float = 1.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.sqs = sqs
        self.orphan_handler = orphan_handler
        self.poll_wait_s = poll_wait_s
        self.monotonic = monotonic
        self._reap_interval_s = reap_interval_s
        self._lock = threading.Lock()
        self._queues: dict[VirtualQueueId, VirtualQueue] = {}
        self._receivers: dict[str, HostReceiver] = {}
        self._default_wait_s: dict[str, int] = {}
        self._closed = threading.Event()
        self._janitor: threading.Thread | None = None

    def __getattr__(self, name: str) -> Any:
        # Everything this class does not redefine is the wrapped client's own.
        return getattr(self.sqs, name)

    # -- queues ---------------------------------------------------------------------------

    def create_queue(self, *, QueueName: str, Attributes: dict[str, str] | None = None,
                     **params: Any) -> dict[str, Any]:
        """CreateQueue; with the `HostQueueUrl` attribute, a local virtual queue."""
        attributes = dict(Attributes or {})
        if HOST_QUEUE_URL not in attributes:
            return self.sqs.create_queue(QueueName=QueueName, Attributes=attributes, **params)
        host_url, retention_s = split_virtual_attributes(attributes)
        queue = self._add(VirtualQueueId(host_url, QueueName), retention_s)
        queue.tags.update(params.get("tags", {}))
        return {"QueueUrl": queue.id.url}

    def delete_queue(self, *, QueueUrl: str) -> dict[str, Any]:
        """DeleteQueue; for a virtual queue, frees its local resources without an SQS call."""
        queue_id = parse_virtual_url(QueueUrl)
        if queue_id is None:
            return self.sqs.delete_queue(QueueUrl=QueueUrl)
        self._remove(self._get(queue_id, "DeleteQueue"))
        return {}

    def get_queue_attributes(self, *, QueueUrl: str, AttributeNames: list[str] | None = None,
                             **params: Any) -> dict[str, Any]:
        """GetQueueAttributes; a virtual queue answers with its host's plus its own."""
        queue_id = parse_virtual_url(QueueUrl)
        if queue_id is None:
            return self.sqs.get_queue_attributes(QueueUrl=QueueUrl,
                                                 AttributeNames=AttributeNames or [], **params)
        queue = self._get(queue_id, "GetQueueAttributes")
        names = list(AttributeNames or [])
        own = {HOST_QUEUE_URL: queue_id.host_url}
        if queue.retention_s is not None:
            own[IDLE_QUEUE_RETENTION_PERIOD] = str(queue.retention_s)
        host_names = [n for n in names if n not in own]
        attributes: dict[str, str] = {}
        if host_names:
            attributes = self.sqs.get_queue_attributes(
                QueueUrl=queue_id.host_url, AttributeNames=host_names).get("Attributes", {})
        attributes.update({k: v for k, v in own.items() if k in names or "All" in names})
        return {"Attributes": attributes}

    def set_queue_attributes(self, *, QueueUrl: str, **params: Any) -> dict[str, Any]:
        """SetQueueAttributes; refused for virtual queues, which have their host's."""
        if parse_virtual_url(QueueUrl) is not None:
            msg = f"cannot change attributes of a virtual queue: {QueueUrl}"
            raise InvalidVirtualQueueAttributes(msg)
        return self.sqs.set_queue_attributes(QueueUrl=QueueUrl, **params)

    def tag_queue(self, *, QueueUrl: str, Tags: dict[str, str]) -> dict[str, Any]:
        """TagQueue; a virtual queue keeps its tags locally."""
        queue_id = parse_virtual_url(QueueUrl)
        if queue_id is None:
            return self.sqs.tag_queue(QueueUrl=QueueUrl, Tags=Tags)
        self._get(queue_id, "TagQueue").tags.update(Tags)
        return {}

    def untag_queue(self, *, QueueUrl: str, TagKeys: list[str]) -> dict[str, Any]:
        """UntagQueue; local for virtual queues."""
        queue_id = parse_virtual_url(QueueUrl)
        if queue_id is None:
            return self.sqs.untag_queue(QueueUrl=QueueUrl, TagKeys=TagKeys)
        tags = self._get(queue_id, "UntagQueue").tags
        for key in TagKeys:
            tags.pop(key, None)
        return {}

    def list_queue_tags(self, *, QueueUrl: str) -> dict[str, Any]:
        """ListQueueTags; local for virtual queues."""
        queue_id = parse_virtual_url(QueueUrl)
        if queue_id is None:
            return self.sqs.list_queue_tags(QueueUrl=QueueUrl)
        tags = dict(self._get(queue_id, "ListQueueTags").tags)
        return {"Tags": tags} if tags else {}

    # -- messages -------------------------------------------------------------------------

    def send_message(self, *, QueueUrl: str, **params: Any) -> dict[str, Any]:
        """SendMessage; to a virtual URL it goes to the host queue with the name attribute.

        The virtual queue need not exist in this process: senders usually live elsewhere.
        """
        queue_id = parse_virtual_url(QueueUrl)
        if queue_id is None:
            return self.sqs.send_message(QueueUrl=QueueUrl, **params)
        return self.sqs.send_message(**to_host_send(params, queue_id))

    def send_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]],
                           **params: Any) -> dict[str, Any]:
        """SendMessageBatch; virtual URLs as for SendMessage."""
        queue_id = parse_virtual_url(QueueUrl)
        if queue_id is None:
            return self.sqs.send_message_batch(QueueUrl=QueueUrl, Entries=Entries, **params)
        return self.sqs.send_message_batch(**to_host_batch({**params, "Entries": Entries},
                                                           queue_id))

    def receive_message(self, *, QueueUrl: str, **params: Any) -> dict[str, Any]:
        """ReceiveMessage; on a virtual queue it waits locally, honouring WaitTimeSeconds.

        A virtual receive returns messages with all their attributes, as the host receiver
        fetched them; VisibilityTimeout and attribute filters of the request are not applied
        (the host queue's visibility timeout governs).
        """
        queue_id = parse_virtual_url(QueueUrl)
        if queue_id is None:
            return self.sqs.receive_message(QueueUrl=QueueUrl, **params)
        max_count = int(params.get("MaxNumberOfMessages", 1))
        wait_s = self.wait_time_s(queue_id, params.get("WaitTimeSeconds"))
        messages = self.wait_for_messages(QueueUrl, max_count, wait_s)
        return {"Messages": messages} if messages else {}

    def wait_for_messages(self, queue_url: str, max_count: int, wait_s: float) -> list[Message]:
        """Up to `max_count` messages of a virtual queue, waiting up to `wait_s` seconds."""
        queue = self.virtual_queue(queue_url)
        event = threading.Event()
        queue.receiver_started(self.monotonic())
        queue.buffer.add_waiter(event.set)
        try:
            deadline = self.monotonic() + wait_s
            while True:
                messages = queue.buffer.take(max_count)
                remaining_s = deadline - self.monotonic()
                if messages or queue.buffer.closed or remaining_s <= 0:
                    return messages
                event.wait(remaining_s)
                event.clear()
        finally:
            queue.buffer.remove_waiter(event.set)
            queue.receiver_ended(self.monotonic())

    def delete_message(self, *, QueueUrl: str, ReceiptHandle: str) -> dict[str, Any]:
        """DeleteMessage; passes through to the host queue for a virtual URL."""
        return self.sqs.delete_message(QueueUrl=self._real_url(QueueUrl),
                                       ReceiptHandle=ReceiptHandle)

    def delete_message_batch(self, *, QueueUrl: str, **params: Any) -> dict[str, Any]:
        """DeleteMessageBatch; passes through to the host queue."""
        return self.sqs.delete_message_batch(QueueUrl=self._real_url(QueueUrl), **params)

    def change_message_visibility(self, *, QueueUrl: str, **params: Any) -> dict[str, Any]:
        """ChangeMessageVisibility; passes through to the host queue."""
        return self.sqs.change_message_visibility(QueueUrl=self._real_url(QueueUrl), **params)

    def change_message_visibility_batch(self, *, QueueUrl: str, **params: Any) -> dict[str, Any]:
        """ChangeMessageVisibilityBatch; passes through to the host queue."""
        return self.sqs.change_message_visibility_batch(QueueUrl=self._real_url(QueueUrl),
                                                        **params)

    # -- lifecycle ------------------------------------------------------------------------

    def shutdown(self, wait_s: float | None = None) -> None:
        """Stop every host receiver and drop every virtual queue; no SQS calls.

        Waits up to `wait_s` (default: one long poll) for the receiver threads to end.
        """
        self.stop_receivers()
        self.join_receivers(self.poll_wait_s + 2.0 if wait_s is None else wait_s)

    def stop_receivers(self) -> None:
        """First half of shutdown(): close every queue and signal the threads, without waiting."""
        self._closed.set()
        with self._lock:
            queues, self._queues = list(self._queues.values()), {}
            receivers = list(self._receivers.values())
        for queue in queues:
            queue.buffer.close()
        for receiver in receivers:
            receiver.stop()

    def join_receivers(self, wait_s: float) -> bool:
        """Second half of shutdown(): wait for the threads; True if all ended."""
        deadline = self.monotonic() + wait_s
        with self._lock:
            receivers, self._receivers = list(self._receivers.values()), {}
        return all(r.join(max(0.0, deadline - self.monotonic())) for r in receivers)

    @property
    def virtual_queue_urls(self) -> list[str]:
        """URLs of the virtual queues that exist in this client."""
        with self._lock:
            return [q.url for q in self._queues]

    @property
    def host_queue_urls(self) -> list[str]:
        """Host queues this client is receiving from."""
        with self._lock:
            return list(self._receivers)

    @property
    def receivers(self) -> list[HostReceiver]:
        """The background receivers currently registered, one per host queue."""
        with self._lock:
            return list(self._receivers.values())

    def virtual_queue(self, queue_url: str) -> VirtualQueue:
        """The local state of a virtual queue (for the asyncio front end)."""
        queue_id = parse_virtual_url(queue_url)
        if queue_id is None:
            msg = f"not a virtual queue URL: {queue_url}"
            raise ValueError(msg)
        return self._get(queue_id, "ReceiveMessage")

    def wait_time_s(self, queue_id: VirtualQueueId, requested: int | None) -> int:
        """WaitTimeSeconds of a virtual receive: the request's, else the host queue's default."""
        if requested is not None:
            return int(requested)
        if queue_id.host_url not in self._default_wait_s:
            attributes = self.sqs.get_queue_attributes(
                QueueUrl=queue_id.host_url,
                AttributeNames=["ReceiveMessageWaitTimeSeconds"]).get("Attributes", {})
            self._default_wait_s[queue_id.host_url] = int(
                attributes.get("ReceiveMessageWaitTimeSeconds", "0"))
        return self._default_wait_s[queue_id.host_url]

    # -- internals ------------------------------------------------------------------------

    def _add(self, queue_id: VirtualQueueId, retention_s: int | None) -> VirtualQueue:
        if self._closed.is_set():
            raise ClientClosed("virtual queues client was shut down")
        with self._lock:
            queue = self._queues.get(queue_id)
            if queue is None:
                queue = VirtualQueue(queue_id, retention_s, self.monotonic())
                self._queues[queue_id] = queue
                log.debug("created virtual queue %s", queue_id.url)
            if queue_id.host_url not in self._receivers:
                self._receivers[queue_id.host_url] = HostReceiver(
                    self.sqs, queue_id.host_url, self._route, self.poll_wait_s).start()
            if retention_s is not None and self._janitor is None:
                self._janitor = threading.Thread(target=self._reap_loop, daemon=True,
                                                 name="tempqueues-janitor")
                self._janitor.start()
        return queue

    def _remove(self, queue: VirtualQueue) -> None:
        with self._lock:
            if self._queues.get(queue.id) is queue:
                del self._queues[queue.id]
        left = queue.buffer.close()
        log.debug("deleted virtual queue %s", queue.id.url)
        self._orphaned(queue.id.host_url, [(queue.id, m) for m in left])

    def _get(self, queue_id: VirtualQueueId, operation: str) -> VirtualQueue:
        with self._lock:
            queue = self._queues.get(queue_id)
        if queue is None:
            raise queue_missing(self.sqs, queue_id.url, operation)
        queue.touch(self.monotonic())
        return queue

    def _real_url(self, queue_url: str) -> str:
        queue_id = parse_virtual_url(queue_url)
        if queue_id is None:
            return queue_url
        with self._lock:
            queue = self._queues.get(queue_id)
        if queue is not None:
            queue.touch(self.monotonic())
        return queue_id.host_url

    def _route(self, host_url: str, messages: list[Message]) -> None:
        """Called by a host receiver: hand each message to its virtual queue's buffer."""
        by_queue: dict[VirtualQueueId, list[Message]] = {}
        for message in messages:
            queue_id = VirtualQueueId(host_url, virtual_queue_name(message) or "")
            by_queue.setdefault(queue_id, []).append(message)
        orphans: list[tuple[VirtualQueueId, Message]] = []
        for queue_id, batch in by_queue.items():
            with self._lock:
                queue = self._queues.get(queue_id)
            if queue is None or not queue.buffer.put(batch):
                orphans.extend((queue_id, m) for m in batch)
        self._orphaned(host_url, orphans)

    def _orphaned(self, host_url: str, orphans: list[tuple[VirtualQueueId, Message]]) -> None:
        doomed = []
        for queue_id, message in orphans:
            try:
                if self.orphan_handler(queue_id, message):
                    doomed.append(message)
            except Exception:  # a user callback must not stop the receiver
                log.exception("orphan handler failed on message %s", message.get("MessageId"))
        if doomed:
            self._delete_on_host(host_url, doomed)

    def _delete_on_host(self, host_url: str, messages: list[Message]) -> None:
        for start in range(0, len(messages), 10):
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                       for i, m in enumerate(messages[start:start + 10])]
            try:
                self.sqs.delete_message_batch(QueueUrl=host_url, Entries=entries)
            except Exception:  # the messages reappear later and are handled again
                log.exception("could not delete %d orphaned messages on %s",
                              len(entries), host_url)

    def _reap_loop(self) -> None:
        while not self._closed.wait(self._reap_interval_s):
            self.reap_idle()

    def reap_idle(self) -> list[str]:
        """Delete every virtual queue idle longer than its retention; their URLs."""
        now_s = self.monotonic()
        with self._lock:
            expired = [q for q in self._queues.values() if q.is_expired(now_s)]
        for queue in expired:
            log.info("virtual queue %s idle for over %ss: deleted", queue.id.url,
                     queue.retention_s)
            self._remove(queue)
        return [q.id.url for q in expired]
