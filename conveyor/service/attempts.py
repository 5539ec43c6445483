"""Why a message failed: the worker's delivery attempts, kept with the message.

Wire: the JSON 1.0 protocol with `X-Amz-Target: ConveyorWorkers.<Action>`, signed like
any SQS call, beside AnnounceWorker (workers.py). No SQS client sends these; one that
never heard of them is unaffected.

- RecordAttempts {QueueUrl, Entries: [{Id, ReceiptHandle, At, Reason, Status?,
  AnswerHead?, WorkerId?}]}: a worker's failed attempts at messages it received (by the
  receipt handle it holds), up to 10 per call, each answered in `Successful` / `Failed` as
  an SQS batch is. `At` is epoch ms (the worker's clock), `Reason` a short word
  (`http-500`, `refused`, `timeout`, `payload-unavailable`...), `Status` the app's HTTP
  status when it answered, `AnswerHead` the start of its answer (at most
  Limits.max_attempt_answer_bytes).
- GetMessageAttempts {QueueUrl, MessageId}: {MessageId, Attempts: [...]}, the recorded
  attempts, oldest first, of a message in the queue (visible, in flight or delayed).

Each attempt also keeps which receive it was (RECEIVE, never answered), so the console
can tell a message waiting out the back-off after its latest receive failed from one a
worker holds now (`after_failure`).

A message keeps its last Limits.max_attempts_kept attempts inside its own system attributes
JSON (under ATTEMPTS, beside rules.DIED), so they go where the message goes: to the
dead-letter queue with it (a dead letter tells why it died), back with a redrive, and away
with its deletion or its queue's; a receive never returns them (it reads AWSTraceHeader
alone). A handle names its message's seq, so an attempt recorded after the message moved on
to its dead-letter queue (the worker's record and the receive that moved it race) is still
kept: a dead letter's history is that of its life in the queue the handle names, which the
caller may act on.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, TypeGuard

import orjson
from mypy_extensions import trait

from conveyor.service.activity import FAILED
from conveyor.service.base import ServiceBase
from conveyor.service.context import RequestContext
from conveyor.service.messages import batch_result, decode_handle
from conveyor.service.validate import batch_entries
from conveyor.service.workers import ID_PATTERN
from conveyor.sqs.errors import (
    InvalidBatchEntryId,
    InvalidParameterValue,
    MissingParameter,
    ReceiptHandleIsInvalid,
    SqsError,
)
from conveyor.sqs.limits import Limits
from conveyor.store.base import Annotated, QueueRecord

ACTIONS = ("RecordAttempts", "GetMessageAttempts")
ATTEMPTS = "ConveyorAttempts"  # where a message keeps them, in its system attributes JSON
ENTRY_NAME = "RecordAttemptsEntry"
# Kept with each attempt, never answered: which receive it was (a digest of that receive's
# token), so an attempt of the message's latest receive is told from an older one (a
# message waiting out its back-off after it, not received again since: the console's
# "retry now").
RECEIVE = "Receive"
MAX_AT_MS = 1 << 53  # epoch ms a JSON number holds exactly (year 287,396)
MAX_MESSAGE_ID_CHARS = 128
_REASON = re.compile(r"[a-z0-9][a-z0-9_.:-]*")

Request = dict[str, Any]


@trait  # one of Service's parts (setup.py: mypyc compiles them as traits)
class AttemptActions(ServiceBase):
    async def record_attempts(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        queue = await self.queue(ctx, _url(req))
        entries = req.get("Entries")
        if entries is None:
            raise MissingParameter("The request must contain the parameter Entries.")
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise InvalidParameterValue(f"Entries must be a list of {ENTRY_NAME} objects.")
        if any(not isinstance(e.get("Id", ""), str) for e in entries):
            raise InvalidBatchEntryId("A batch entry id must be a string.")
        batch_entries(entries, ENTRY_NAME, self.limits)  # count, Ids (SQS's batch rules)
        failed, valid = [], []
        for entry in entries:
            try:
                handle = decode_handle(_text(entry, "ReceiptHandle"), queue)
                attempt = checked_attempt(entry, self.limits)
                attempt[RECEIVE] = receive_tag(handle.token)
                valid.append((entry["Id"], handle.seq, attempt))
            except SqsError as error:
                failed.append(_failure(entry["Id"], error))
        kept = await self._append(ctx, queue, valid)
        self.counted(queue, FAILED, len(kept))  # charted where the worker worked
        for entry_id, _, _ in valid:
            if entry_id not in kept:
                failed.append(_failure(entry_id, ReceiptHandleIsInvalid(
                    "The message of this receipt handle is no longer in the queue.")))
        return batch_result([{"Id": i} for i, _, _ in valid if i in kept], failed)

    async def _append(self, ctx: RequestContext, queue: QueueRecord,
                      valid: list[tuple[str, int, dict[str, Any]]]) -> set[str]:
        """Add each (entry id, seq, attempt) to its message; the entry ids whose message
        took it. Nothing is awaited between the read and the write (stores rely on it)."""
        if not valid:
            return set()
        arn = ctx.queue_arn(queue.name)
        async with self.store.amend(queue, sorted({seq for _, seq, _ in valid})) as amending:
            systems: dict[int, str | None] = {}
            kept: set[str] = set()
            for entry_id, seq, attempt in valid:
                found = amending.found.get(seq)
                if found is None or not _of_queue(found, queue, arn):
                    continue
                current = systems.get(seq, found.system)
                systems[seq] = with_attempts(current, [attempt], self.limits.max_attempts_kept)
                kept.add(entry_id)
            changes = [(seq, system) for seq, system in systems.items() if system is not None]
            if changes:
                await amending.set_system(changes)
        return kept

    async def get_message_attempts(self, ctx: RequestContext, req: Request
                                   ) -> dict[str, Any]:
        queue = await self.queue(ctx, _url(req))
        message_id = _text(req, "MessageId")
        if len(message_id) > MAX_MESSAGE_ID_CHARS:
            raise InvalidParameterValue(
                f"MessageId must be at most {MAX_MESSAGE_ID_CHARS} characters.")
        message = await self.store.find_message(queue, message_id,
                                                self.limits.attempts_scan_messages)
        if message is None:
            raise InvalidParameterValue(
                f"No message {message_id} in queue {queue.name} (among its "
                f"{self.limits.attempts_scan_messages:,} oldest).")
        return {"MessageId": message_id, "Attempts": [
            {k: v for k, v in a.items() if k != RECEIVE} for a in attempts_of(message.system)]}


def _of_queue(found: Annotated, queue: QueueRecord, arn: str) -> bool:
    """True for a message received in `queue` and still there, or dead-lettered from it."""
    if found.queue_id == queue.id:
        return found.receipt is not None
    return found.dlq_source_arn == arn


def checked_attempt(entry: Request, limits: Limits) -> dict[str, Any]:
    """One attempt as it is kept, from a RecordAttempts entry; InvalidParameterValue for a
    member out of its range."""
    at = entry.get("At")
    if not _integer(at) or not 0 <= at < MAX_AT_MS:
        raise InvalidParameterValue("At must be the attempt's time in milliseconds since the "
                                    "epoch (an integer).")
    reason = entry.get("Reason")
    if (not isinstance(reason, str) or len(reason) > limits.max_attempt_reason_chars
            or not _REASON.fullmatch(reason)):
        raise InvalidParameterValue(
            f"Reason must be 1-{limits.max_attempt_reason_chars} characters of lower-case "
            "letters, digits and _ . : - (e.g. http-500, refused, timeout).")
    attempt: dict[str, Any] = {"At": at, "Reason": reason}
    status = entry.get("Status")
    if status is not None:
        if not _integer(status) or not 100 <= status <= 599:
            raise InvalidParameterValue("Status must be an HTTP status code (100-599).")
        attempt["Status"] = status
    head = entry.get("AnswerHead")
    if head is not None:
        if not isinstance(head, str) or len(head.encode()) > limits.max_attempt_answer_bytes:
            raise InvalidParameterValue(f"AnswerHead must be text of at most "
                                        f"{limits.max_attempt_answer_bytes} bytes (UTF-8).")
        attempt["AnswerHead"] = head
    worker_id = entry.get("WorkerId")
    if worker_id is not None:
        if not isinstance(worker_id, str) or not ID_PATTERN.fullmatch(worker_id):
            raise InvalidParameterValue("WorkerId must be 1-256 characters of letters, "
                                        "digits and _ . : / # @ -.")
        attempt["WorkerId"] = worker_id
    return attempt


def with_attempts(system: str | None, attempts: list[dict[str, Any]], keep: int) -> str:
    """A message's system attributes JSON with `attempts` added to its last `keep`."""
    found = orjson.loads(system) if system else {}
    found[ATTEMPTS] = [*_listed(found.get(ATTEMPTS)), *attempts][-keep:]
    return orjson.dumps(found).decode()


def receive_tag(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def after_failure(receipt: str | None, system: str | None) -> bool:
    """Whether the message's latest receive (its `receipt` token) is one whose attempt
    failed: it waits out the back-off that failure set, and nobody holds it."""
    recorded = attempts_of(system)
    return (receipt is not None and bool(recorded)
            and recorded[-1].get(RECEIVE) == receive_tag(receipt))


def attempts_of(system: str | None) -> list[dict[str, Any]]:
    """A message's recorded attempts, oldest first ([] for none)."""
    return _listed(orjson.loads(system).get(ATTEMPTS)) if system else []


def _listed(value: Any) -> list[dict[str, Any]]:
    return [a for a in value if isinstance(a, dict)] if isinstance(value, list) else []


def _integer(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _url(req: Request) -> str:
    url = req.get("QueueUrl")
    if url is None:
        raise MissingParameter("The request must contain the parameter QueueUrl.")
    if not isinstance(url, str):
        raise InvalidParameterValue("QueueUrl must be a string.")
    return url


def _text(req: Request, name: str) -> str:
    value = req.get(name)
    if value is None:
        raise MissingParameter(f"The request must contain the parameter {name}.")
    if not isinstance(value, str) or not value:
        raise InvalidParameterValue(f"{name} must be a non-empty string.")
    return value


def _failure(entry_id: str, error: SqsError) -> dict[str, Any]:
    return {"Id": entry_id, "SenderFault": error.sender_fault,
            "Code": error.query_code, "Message": error.message}
