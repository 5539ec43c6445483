"""Batch delivery (BatchSize): up to N messages in one POST, as AWS Lambda's SQS event, and
the app's answer read as Lambda's partial batch response.

The request body is Lambda's SQS event (AWS Lambda Developer Guide, "Using Lambda with
Amazon SQS", the example events for standard and FIFO queues): `{"Records": [...]}`, one
record per message with messageId, receiptHandle, body, attributes (all system attributes
received: ApproximateReceiveCount is the receive count, MessageGroupId and SequenceNumber
on FIFO queues), messageAttributes (camelCase, as Lambda writes them), md5OfBody,
eventSource "aws:sqs", eventSourceARN (the ARN of the queue the message came from: on a
partitioned queue its partition's, as a Lambda mapped to each partition would say) and
awsRegion. Code written for a Lambda SQS trigger
reads it unchanged. It goes to HttpPath as `Content-Type: application/json` (MimeType is
for one message's body), with User-Agent, X-Aws-Sqsd-Queue, X-Conveyor-Batch-Size and,
with SigningSecret, X-Conveyor-Signature over the whole document. There is no batching
window: a batch holds what was received and not yet POSTed, so a lone message waits for
no companions. Scheduled jobs (cron.yaml) still go one by one to their own paths.

The answer is read by the rules of the same guide ("Reporting batch item failures",
"Success and failure conditions"):

- a 200 (any 2xx with AcceptAny2xx) whose body is empty, `null`, `{}`, or has a null or
  empty `batchItemFailures` list: every message succeeded;
- `{"batchItemFailures": [{"itemIdentifier": "<messageId>"}, ...]}`: the listed messages
  failed (retried with back-off, MaxRetries and the dead-letter queue as any failure),
  the others succeeded (deleted);
- invalid JSON, an itemIdentifier that is null, empty, under another key name, or not the
  id of a message of the batch: the whole batch failed. So does a body that is not a JSON
  object or an answer over MAX_ANSWER_BYTES (Lambda's response payload quota), and, as in
  the worker's one-message mode, any other status or no answer at all.

FIFO queues: "your function should stop processing messages after the first failure and
return all failed and unprocessed messages in batchItemFailures" (same guide). The worker
enforces it whatever the app answers: in each message group, the messages after the
group's first failure are unprocessed — neither deleted nor counted as failed; they stay
held behind it, in order (batch_dispatch.py, `GroupQueues`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

from conveyor.client import Message
from conveyor.client.attempts import ANSWER_HEAD_BYTES
from conveyor.worker import telemetry
from conveyor.worker.delivery import USER_AGENT, Deliverer, Outcome
from conveyor.worker.trace_context import trace_headers

log = logging.getLogger(__name__)

# Lambda's quota for a synchronous invocation's response payload is 6 MB (AWS Lambda
# Developer Guide, "Lambda quotas"); a longer answer is not a partial batch response.
MAX_ANSWER_BYTES = 6 * 1024 * 1024
# Outcome.status of one message of a batch, for the failure metric and the logs.
ITEM_FAILED = "batch-item-failure"
INVALID_ANSWER = "batch-answer-invalid"
_ATTRIBUTE_KEYS = {"StringValue": "stringValue", "BinaryValue": "binaryValue",
                   "DataType": "dataType"}


class InvalidAnswer(ValueError):
    """The app's answer to a batch is not a partial batch response: the whole batch failed."""


@dataclass(frozen=True, slots=True)
class QueueIdentity:
    """What each record says about the queue: Lambda's eventSourceARN and awsRegion."""

    arn: str
    region: str

    @classmethod
    def from_url(cls, queue_url: str, region: str) -> QueueIdentity:
        """`http://host/123456789012/jobs` in `us-east-1` → `arn:aws:sqs:us-east-1:...:jobs`."""
        segments = urlsplit(queue_url).path.strip("/").split("/")
        account = segments[0] if len(segments) > 1 else ""
        return cls(f"arn:aws:sqs:{region}:{account}:{segments[-1]}", region)


def queue_identities(url_of: Callable[[Message], str], region: str
                     ) -> Callable[[Message], QueueIdentity]:
    """What a batch's records say of each message's queue, from the url of the queue it
    came from: its partition's own, on a partitioned queue (Lambda's record names the
    queue it read the message from). Made once per queue."""
    identities: dict[str, QueueIdentity] = {}

    def identity(message: Message) -> QueueIdentity:
        url = url_of(message)
        if url not in identities:
            identities[url] = QueueIdentity.from_url(url, region)
        return identities[url]

    return identity


def lambda_event(messages: Sequence[Message],
                 queue_of: Callable[[Message], QueueIdentity]) -> bytes:
    """The request body for a batch: Lambda's SQS event with one record per message, each
    naming the queue its message came from (a partition's, on a partitioned queue)."""
    return orjson.dumps({"Records": [_record(message, queue_of(message))
                                     for message in messages]})


def _record(message: Message, queue: QueueIdentity) -> dict[str, Any]:
    return {
        "messageId": message.message_id,
        "receiptHandle": message.receipt_handle,
        "body": message.body,
        "attributes": message.attributes,
        "messageAttributes": {name: _message_attribute(value)
                              for name, value in message.message_attributes.items()},
        "md5OfBody": message.md5_of_body,
        "eventSource": "aws:sqs",
        "eventSourceARN": queue.arn,
        "awsRegion": queue.region,
    }


def _message_attribute(value: dict[str, Any]) -> dict[str, Any]:
    """SQS's `{"DataType", "StringValue"}` → Lambda's `{"dataType", "stringValue", ...}`."""
    converted: dict[str, Any] = {"stringListValues": [], "binaryListValues": []}
    for key, lambda_key in _ATTRIBUTE_KEYS.items():
        if key in value:
            converted[lambda_key] = value[key]
    return converted


def failed_ids(body: bytes, batch_ids: Sequence[str]) -> set[str]:
    """The ids the app's answer lists as failed (empty: all succeeded); InvalidAnswer when
    the answer fails the whole batch (see the module's docstring)."""
    if not body.strip():
        return set()
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        msg = f"not JSON: {exc}"
        raise InvalidAnswer(msg) from None
    if answer is None:
        return set()
    if not isinstance(answer, dict):
        msg = f"not a JSON object but {type(answer).__name__}"
        raise InvalidAnswer(msg)
    failures = answer.get("batchItemFailures")
    if failures is None:
        return set()
    if not isinstance(failures, list):
        msg = f"batchItemFailures is not a list but {type(failures).__name__}"
        raise InvalidAnswer(msg)
    known = set(batch_ids)
    failed: set[str] = set()
    for item in failures:
        failed.add(_item_identifier(item, known))
    return failed


def _item_identifier(item: Any, known: set[str]) -> str:
    if not isinstance(item, dict) or "itemIdentifier" not in item:
        msg = f"a batchItemFailures entry without itemIdentifier: {_excerpt(item)}"
        raise InvalidAnswer(msg)
    identifier = item["itemIdentifier"]
    if not isinstance(identifier, str) or not identifier:
        msg = f"itemIdentifier is not a message id: {_excerpt(identifier)}"
        raise InvalidAnswer(msg)
    if identifier not in known:
        msg = f"itemIdentifier {_excerpt(identifier)} is no message of this batch"
        raise InvalidAnswer(msg)
    return identifier


def _excerpt(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def in_group_order(messages: Sequence[Message], outcomes: Sequence[Outcome],
                   ) -> list[Outcome | None]:
    """FIFO: after the first failure in a message group, the group's later messages are
    unprocessed (None), whatever the app said about them."""
    stopped: set[str] = set()
    ordered: list[Outcome | None] = []
    for message, outcome in zip(messages, outcomes, strict=True):
        group = message.group_id
        if group is not None and group in stopped:
            ordered.append(None)
            continue
        if group is not None and not outcome.ok:
            stopped.add(group)
        ordered.append(outcome)
    return ordered


class BatchPoster:
    """POSTs batches to the app through the worker's Deliverer and reads the answers."""

    def __init__(self, deliverer: Deliverer, queue_name: str,
                 queue_of: Callable[[Message], QueueIdentity], *, fifo: bool) -> None:
        self._deliverer = deliverer
        self._queue_name = queue_name
        self._queue_of = queue_of  # the queue each message came from
        self._fifo = fifo

    async def post(self, messages: Sequence[Message]) -> list[Outcome | None]:
        """POST one batch; per message (in order) its outcome, or None when it was not
        processed (FIFO: behind a failure in its group)."""
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT,
                   "X-Aws-Sqsd-Queue": self._queue_name,
                   "X-Conveyor-Batch-Size": str(len(messages))}
        # With tracing on (telemetry.py) the POST is a span linked to each message's trace,
        # and the app's parent; each record keeps its own AWSTraceHeader, as Lambda's do.
        # Attributes and links are made only then, not for every batch.
        tracing = telemetry.tracer() is not None
        attributes = telemetry.messaging(self._queue_name, "process", "process", **{
            "messaging.batch.message_count": len(messages),
            "http.request.method": "POST"}) if tracing else {}
        links = [trace_headers(m) for m in messages] if tracing else []
        with telemetry.span("POST", "CLIENT", attributes, links=links) as span:
            if span is not None:
                telemetry.inject(headers)
            whole, answer = await self._deliverer.post(
                self._deliverer.path, headers, lambda_event(messages, self._queue_of),
                keep_body_bytes=MAX_ANSWER_BYTES)
            if span is not None:
                telemetry.http_outcome(span, whole.status, whole.ok, whole.detail)
        read = self._read(messages, whole, answer.body if answer else b"",
                          answer is not None and answer.body_too_large)
        outcomes = in_group_order(messages, read) if self._fifo else list(read)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("batch posted: queue=%s messages=%d status=%s failed=%d unprocessed=%d "
                      "time=%.3fs", self._queue_name, len(messages), whole.status,
                      sum(o is not None and not o.ok for o in outcomes),
                      sum(o is None for o in outcomes), whole.elapsed_s)
        return outcomes

    async def post_one(self, message: Message) -> Outcome:
        """POST a batch of one message (the breaker's probe) and return its outcome."""
        (outcome,) = await self.post([message])
        assert outcome is not None  # a group's first is always processed
        return outcome

    def _read(self, messages: Sequence[Message], whole: Outcome, body: bytes,
              too_large: bool) -> list[Outcome]:
        # Each message's share of the request's time, so that processing time per message
        # (metrics, the autoscaler's average) means the same as without batches.
        whole = dataclasses.replace(whole, elapsed_s=whole.elapsed_s / len(messages))
        if not whole.ok:  # a non-200, a timeout, no answer: the whole batch failed
            return [whole] * len(messages)
        try:
            if too_large:
                msg = f"the answer exceeds {MAX_ANSWER_BYTES} bytes"
                raise InvalidAnswer(msg)
            failed = failed_ids(body, [message.message_id for message in messages])
        except InvalidAnswer as exc:
            log.warning("batch failed whole, the app's answer is not a partial batch response "
                        "(%s): queue=%s messages=%d", exc, self._queue_name, len(messages))
            invalid = Outcome(False, INVALID_ANSWER, whole.elapsed_s, detail=str(exc),
                              answer_head=body[:ANSWER_HEAD_BYTES])
            return [invalid] * len(messages)
        item_failed = Outcome(False, ITEM_FAILED, whole.elapsed_s,
                              detail="listed in batchItemFailures",
                              answer_head=body[:ANSWER_HEAD_BYTES])
        return [item_failed if message.message_id in failed else whole
                for message in messages]
