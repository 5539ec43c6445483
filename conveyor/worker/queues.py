"""Set up, or check, the worker queue and its dead-letter queue through the SQS API."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import orjson

from conveyor.client import Message, SQSClient, SQSError, queue_name_from_url

log = logging.getLogger(__name__)

_NO_QUEUE = ("QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue")
# Dead letters are kept as long as SQS allows: they are there to be looked at.
DLQ_RETENTION_S = 1209600
# What SendMessage takes back of a received message attribute.
_ATTRIBUTE_FIELDS = ("DataType", "StringValue", "BinaryValue")


@dataclass(frozen=True, slots=True)
class WorkerQueues:
    """The worker queue, its dead-letter queue (if any) and its maxReceiveCount."""

    queue_url: str
    dead_letter_url: str | None
    max_receive_count: int | None


def dead_letter_name(queue_name: str) -> str:
    """`jobs` → `jobs-dead-letter`; `jobs.fifo` → `jobs-dead-letter.fifo`."""
    if queue_name.endswith(".fifo"):
        return queue_name[: -len(".fifo")] + "-dead-letter.fifo"
    return queue_name + "-dead-letter"


async def create_worker_queues(sqs: SQSClient, name: str, *, max_retries: int,
                               visibility_timeout_s: int, retention_period_s: int,
                               dead_letter: str | None = None) -> WorkerQueues:
    """Create (or reuse) `name` and its dead-letter queue with maxReceiveCount = MaxRetries;
    the dead-letter queue is `dead_letter` when given (one shared by several queues)."""
    fifo = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
    dlq_url = await _create_or_reuse(sqs, dead_letter or dead_letter_name(name),
                                     {"MessageRetentionPeriod": str(DLQ_RETENTION_S), **fifo})
    dlq_arn = (await sqs.get_queue_attributes(dlq_url, ["QueueArn"]))["QueueArn"]
    redrive = orjson.dumps({"deadLetterTargetArn": dlq_arn,
                            "maxReceiveCount": max_retries}).decode()
    attributes = {"VisibilityTimeout": str(visibility_timeout_s),
                  "MessageRetentionPeriod": str(retention_period_s), **fifo}
    url = await _create_or_reuse(sqs, name, {**attributes, "RedrivePolicy": redrive})
    return await inspect_worker_queue(sqs, url, max_retries)


async def _create_or_reuse(sqs: SQSClient, name: str, attributes: dict[str, str]) -> str:
    """The URL of queue `name`, created with `attributes` unless it exists (with its own
    attributes, which are kept: an operator may have tuned them)."""
    try:
        return await sqs.create_queue(name, attributes)
    except SQSError as exc:
        if not exc.matches("QueueAlreadyExists", "QueueNameExists"):
            raise
        return await sqs.get_queue_url(name)


async def inspect_worker_queue(sqs: SQSClient, queue_url: str,
                               max_retries: int) -> WorkerQueues:
    """Read an existing queue's redrive policy, warning when it does not match MaxRetries."""
    attributes = await sqs.get_queue_attributes(queue_url, ["RedrivePolicy"])
    raw = attributes.get("RedrivePolicy")
    name = queue_name_from_url(queue_url)
    if not raw:
        log.warning("queue %s has no dead-letter queue (RedrivePolicy): MaxRetries has no effect "
                    "and failing messages are retried until their retention period ends", name)
        return WorkerQueues(queue_url, None, None)
    policy = orjson.loads(raw)
    count = int(policy.get("maxReceiveCount", 0)) or None
    if count != max_retries:
        log.warning("queue %s has maxReceiveCount=%s but MaxRetries=%d; the queue's value wins",
                    name, count, max_retries)
    arn = str(policy.get("deadLetterTargetArn", ""))
    return WorkerQueues(queue_url, _url_for_arn(queue_url, arn), count)


def _url_for_arn(queue_url: str, arn: str) -> str | None:
    """Best guess at the DLQ's URL: same endpoint and path prefix, name from the ARN."""
    if not arn:
        return None
    return queue_url.rsplit("/", 1)[0] + "/" + arn.rsplit(":", 1)[-1]


async def prepare_worker_queue(sqs: SQSClient, queue_url: str, *, create: bool,
                               max_retries: int, visibility_timeout_s: int,
                               retention_period_s: int,
                               dead_letter: str | None = None) -> WorkerQueues:
    """Check the configured queue; create it and its DLQ when missing and `create` is set."""
    try:
        return await inspect_worker_queue(sqs, queue_url, max_retries)
    except SQSError as exc:
        if not (create and exc.matches(*_NO_QUEUE)):
            raise
    name = queue_name_from_url(queue_url)
    queues = await create_worker_queues(sqs, name, max_retries=max_retries,
                                        visibility_timeout_s=visibility_timeout_s,
                                        retention_period_s=retention_period_s,
                                        dead_letter=dead_letter)
    log.warning("queue %s did not exist: created it with dead-letter queue %s "
                "(maxReceiveCount=%d)", name, queues.dead_letter_url, max_retries)
    if queues.queue_url != queue_url:
        log.warning("queue %s: the server names it %s (configured %s)", name,
                    queues.queue_url, queue_url)
    return queues


async def send_to_dead_letter(sqs: SQSClient, dead_letter_url: str, message: Message) -> str:
    """Copy `message` (body, message attributes, FIFO group) into the dead-letter queue and
    return the copy's id; the caller deletes the original after. SQS has no call that moves
    one message, so this is what a worker that must dead-letter a message itself can do.

    On a FIFO dead-letter queue the copy is deduplicated by the original's id, so a send
    retried after a lost answer, or by another worker, stores one copy (within SQS's
    5-minute deduplication interval)."""
    attributes = {name: {k: v for k, v in value.items() if k in _ATTRIBUTE_FIELDS}
                  for name, value in message.message_attributes.items()}
    fifo = queue_name_from_url(dead_letter_url).endswith(".fifo")
    return await sqs.send_message(
        dead_letter_url, message.body, attributes=attributes or None,
        group_id=message.group_id if fifo else None,
        deduplication_id=message.message_id if fifo else None)
