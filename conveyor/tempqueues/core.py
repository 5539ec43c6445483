"""The I/O-free core shared by the thread and asyncio front ends.

Everything here is arithmetic on request parameters, messages, tags and timestamps: no
SQS calls, no threads, no sleeping. Time is always passed in.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidVirtualQueueAttributes
from .names import (
    HEARTBEAT_TAG,
    HOST_QUEUE_URL,
    IDLE_QUEUE_RETENTION_PERIOD,
    MIN_RETENTION_S,
    RESPONSE_QUEUE_URL,
    RETENTION_TAG,
    VIRTUAL_QUEUE_NAME_ATTRIBUTE,
    VIRTUAL_URL_SEPARATOR,
)

Message = dict[str, Any]
Params = dict[str, Any]


@dataclass(frozen=True)
class VirtualQueueId:
    """A virtual queue: its host queue's URL and its own name."""

    host_url: str
    name: str

    @property
    def url(self) -> str:
        """The virtual queue's URL, `<host-url>#<name>`."""
        return f"{self.host_url}{VIRTUAL_URL_SEPARATOR}{self.name}"


def parse_virtual_url(queue_url: str) -> VirtualQueueId | None:
    """The virtual queue a URL names, or None for a real queue's URL."""
    host_url, sep, name = queue_url.partition(VIRTUAL_URL_SEPARATOR)
    return VirtualQueueId(host_url, name) if sep else None


def string_attribute(value: str) -> dict[str, str]:
    """An SQS String message attribute value."""
    return {"DataType": "String", "StringValue": value}


def with_message_attribute(params: Params, name: str, value: str) -> Params:
    """A copy of SendMessage parameters (or a batch entry) with one more String attribute."""
    attributes = {**params.get("MessageAttributes", {}), name: string_attribute(value)}
    return {**params, "MessageAttributes": attributes}


def to_host_send(params: Params, queue: VirtualQueueId) -> Params:
    """SendMessage parameters for a virtual queue, rewritten to go to its host queue."""
    tagged = with_message_attribute(params, VIRTUAL_QUEUE_NAME_ATTRIBUTE, queue.name)
    return {**tagged, "QueueUrl": queue.host_url}


def to_host_batch(params: Params, queue: VirtualQueueId) -> Params:
    """SendMessageBatch parameters for a virtual queue, rewritten for its host queue."""
    entries = [with_message_attribute(e, VIRTUAL_QUEUE_NAME_ATTRIBUTE, queue.name)
               for e in params["Entries"]]
    return {**params, "QueueUrl": queue.host_url, "Entries": entries}


def message_attribute(message: Mapping[str, Any], name: str) -> str | None:
    """A String message attribute of a received message, or None."""
    value = message.get("MessageAttributes", {}).get(name)
    return None if value is None else value.get("StringValue")


def virtual_queue_name(message: Mapping[str, Any]) -> str | None:
    """The virtual queue a message received from a host queue is meant for."""
    return message_attribute(message, VIRTUAL_QUEUE_NAME_ATTRIBUTE)


def response_queue_url(message: Mapping[str, Any]) -> str | None:
    """The URL a request message wants its response sent to, or None."""
    return message_attribute(message, RESPONSE_QUEUE_URL)


def with_response_queue(params: Params, response_url: str) -> Params:
    """SendMessage parameters for a request that asks for a reply on `response_url`."""
    return with_message_attribute(params, RESPONSE_QUEUE_URL, response_url)


def parse_retention_s(value: str | int | None) -> int | None:
    """IdleQueueRetentionPeriodSeconds as an int, checked, or None when absent."""
    if value is None:
        return None
    retention_s = int(value)
    if retention_s < MIN_RETENTION_S:
        msg = f"{IDLE_QUEUE_RETENTION_PERIOD} must be at least {MIN_RETENTION_S} second(s)"
        raise InvalidVirtualQueueAttributes(msg)
    return retention_s


def split_virtual_attributes(attributes: Mapping[str, str]) -> tuple[str, int | None]:
    """(host URL, retention) from a virtual CreateQueue's attributes; rejects any other."""
    rest = {k: v for k, v in attributes.items()
            if k not in (HOST_QUEUE_URL, IDLE_QUEUE_RETENTION_PERIOD)}
    if rest:
        msg = ("virtual queues cannot set these attributes independently of their host "
               f"queue: {sorted(rest)}")
        raise InvalidVirtualQueueAttributes(msg)
    retention_s = parse_retention_s(attributes.get(IDLE_QUEUE_RETENTION_PERIOD))
    return attributes[HOST_QUEUE_URL], retention_s


def host_key(attributes: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """One host queue per distinct attribute set: the set as a hashable, ordered key."""
    return tuple(sorted(attributes.items()))


def host_tags(retention_s: int, now_ms: int) -> dict[str, str]:
    """Tags a new host queue is created with: its retention and a first heartbeat."""
    return {RETENTION_TAG: str(retention_s), HEARTBEAT_TAG: str(now_ms)}


def heartbeat_tags(now_ms: int) -> dict[str, str]:
    """The TagQueue tags of one heartbeat."""
    return {HEARTBEAT_TAG: str(now_ms)}


def _int_tag(tags: Mapping[str, str], key: str) -> int | None:
    try:
        return int(tags[key])
    except (KeyError, ValueError):
        return None


def is_idle(tags: Mapping[str, str], now_ms: int) -> bool:
    """True if a queue's tags say its owner stopped heartbeating longer than its retention ago.

    Queues without a retention tag are never idle: they are not temporary queues (the Java
    client's own work queue shares the prefix, for one).
    """
    retention_s = _int_tag(tags, RETENTION_TAG)
    if retention_s is None:
        return False
    heartbeat_ms = _int_tag(tags, HEARTBEAT_TAG)
    return heartbeat_ms is None or now_ms - heartbeat_ms > retention_s * 1000


EMPTY_COUNT_ATTRIBUTES = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                          "ApproximateNumberOfMessagesDelayed")


def is_empty(attributes: Mapping[str, str]) -> bool:
    """True if GetQueueAttributes counts show no stored, in-flight or delayed message."""
    return all(int(attributes.get(name, "0")) == 0 for name in EMPTY_COUNT_ATTRIBUTES)


# -- sweeping tasks: one `list` per epoch, one `check` per (epoch, queue) ------------------


@dataclass(frozen=True)
class SweepTask:
    """One unit of sweeping work passed between clients through the shared FIFO queue."""

    kind: str  # "list": list the prefix and fan out checks; "check": one queue
    epoch: int
    queue_url: str = ""

    def encode(self) -> Params:
        """SendMessage(Batch) fields; the deduplication id makes every task happen once."""
        body = json.dumps({"kind": self.kind, "epoch": self.epoch, "url": self.queue_url})
        key = hashlib.sha256(f"{self.kind}|{self.epoch}|{self.queue_url}".encode()).hexdigest()
        # A group per task: FIFO order does not matter here, parallel delivery does.
        return {"MessageBody": body, "MessageDeduplicationId": key, "MessageGroupId": key}

    @classmethod
    def decode(cls, body: str) -> SweepTask | None:
        """The task in a message body, or None for anything else."""
        try:
            data = json.loads(body)
            return cls(str(data["kind"]), int(data["epoch"]), str(data.get("url", "")))
        except (ValueError, KeyError, TypeError):
            return None


def sweep_epoch(now_s: float, period_s: float) -> int:
    """The sweep period `now_s` falls in; clients agree on it through the wall clock."""
    return int(now_s // period_s)


def is_stale(task: SweepTask, current_epoch: int) -> bool:
    """Tasks from before the previous period are dropped: a newer sweep covers them."""
    return task.epoch < current_epoch - 1
