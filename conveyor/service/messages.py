"""Message actions: send, receive, delete and change visibility, single and batched."""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from mypy_extensions import trait

from conveyor.ids import UuidSequence
from conveyor.service import attributes as attrs
from conveyor.service import controls, rules, tenants, validate
from conveyor.service.activity import DEAD_LETTERED, DELETED, RECEIVED, SENT
from conveyor.service.base import ServiceBase
from conveyor.service.context import RequestContext, parse_arn
from conveyor.sqs.errors import (
    BatchRequestTooLong,
    EmptyValue,
    InvalidParameterValue,
    MissingParameter,
    ReceiptHandleIsInvalid,
    SqsError,
    invalid_value,
)
from conveyor.sqs.md5 import md5_of_attributes, md5_of_body
from conveyor.store.base import (
    OK,
    STALE,
    Handle,
    NewMessage,
    QueueRecord,
    Store,
    StoredMessage,
)

Request = dict[str, Any]

# Joins group and id in a messageGroup-scoped deduplication key; tokens cannot contain it.
DEDUP_SCOPE_SEP = "\x1f"

SYSTEM_ATTRIBUTE_NAMES = (
    "SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
    "SequenceNumber", "MessageDeduplicationId", "MessageGroupId", "AWSTraceHeader",
    "DeadLetterQueueSourceArn",
)


# init=False and __init__ written out: compiled, it is a quarter of the cost (setup.py)
@dataclass(slots=True, init=False)
class ReceivePlan:
    """A validated ReceiveMessage: the server's long-poll loop fetches it repeatedly."""

    queue: QueueRecord
    max_messages: int
    visibility_ms: int
    wait_s: int
    system_names: set[str]
    attribute_names: list[str]
    attempt_id: str | None
    fetched_ms: int = 0  # the clock at the last fetch
    paused: bool = False  # the queue's delivery was paused at the last fetch (controls.py)
    # When a limit that held the last fetch back lets more go (tenants.py), else None.
    retry_ms: int | None = None
    # Members added to the answer (PollMessages: `Drain` from its announcement, polls.py).
    answer_extra: dict[str, Any] = field(default_factory=dict)

    def __init__(self, queue: QueueRecord, max_messages: int, visibility_ms: int, wait_s: int,
                 system_names: set[str], attribute_names: list[str],
                 attempt_id: str | None) -> None:
        self.queue, self.max_messages, self.visibility_ms = queue, max_messages, visibility_ms
        self.wait_s, self.system_names = wait_s, system_names
        self.attribute_names, self.attempt_id = attribute_names, attempt_id
        self.fetched_ms, self.paused, self.retry_ms, self.answer_extra = 0, False, None, {}


@trait  # one of Service's parts (setup.py: mypyc compiles them as traits)
class MessageActions(ServiceBase):
    # --- send -------------------------------------------------------------------------

    async def send_message(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        queue = await self.queue(ctx, req["QueueUrl"])
        now_ms = self.clock.now_ms()
        message = self._new_message(ctx, queue, req, now_ms)
        [sent] = await self.store.send(queue, [message], now_ms, self._dedup_ms)
        self._announce(queue, [message], [sent.duplicate])
        self.counted(queue, SENT, 0 if sent.duplicate else 1, now_ms)
        return self._sent_entry(queue, message, sent.message_id, sent.seq)

    async def send_message_batch(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        queue = await self.queue(ctx, req["QueueUrl"])
        entries = req["Entries"]
        validate.batch_entries(entries, "SendMessageBatchRequestEntry", self.limits)
        # Bodies and message attributes count (LocalStack's recording of AWS,
        # test_send_message_batch_with_oversized_contents: 262,136 bytes of body + 8 of
        # attributes + 1 = "You have sent 262145 bytes.").
        total = sum(len(e.get("MessageBody", "").encode())
                    + validate.attributes_size(e.get("MessageAttributes")) for e in entries)
        if total > self.limits.max_batch_bytes:
            raise BatchRequestTooLong(
                f"Batch requests cannot be longer than {self.limits.max_batch_bytes} bytes. "
                f"You have sent {total} bytes.")
        if queue.fifo:
            self._check_fifo_batch(queue, entries)
        now_ms = self.clock.now_ms()
        failed, ready = [], []
        for entry in entries:
            try:  # the protocol layer made sure every entry has its required members
                if entry["MessageBody"] == "":  # its own code in a batch (errors.py)
                    raise EmptyValue("The request must contain the parameter MessageBody.")
                ready.append((entry["Id"], self._new_message(ctx, queue, entry, now_ms)))
            except SqsError as error:
                failed.append(_failure(entry["Id"], error))
        results = await self.store.send(queue, [m for _, m in ready], now_ms, self._dedup_ms)
        self._announce(queue, [m for _, m in ready], [r.duplicate for r in results])
        self.counted(queue, SENT, sum(not r.duplicate for r in results), now_ms)
        successful = [{"Id": entry_id, **self._sent_entry(queue, m, r.message_id, r.seq)}
                      for (entry_id, m), r in zip(ready, results, strict=True)]
        return batch_result(successful, failed)

    @staticmethod
    def _check_fifo_batch(queue: QueueRecord, entries: list[Request]) -> None:
        """A FIFO batch with an entry lacking its group, or its deduplication id on a queue
        without content-based deduplication, fails whole, as recorded from AWS (LocalStack's
        test_send_batch_missing_message_group_id_for_fifo_queue and ..._missing_
        deduplication_id_for_fifo_queue: InvalidParameterValue, HTTP 400, nothing sent)."""
        if any(e.get("MessageGroupId") is None for e in entries):
            raise InvalidParameterValue("The request must contain the parameter MessageGroupId.")
        if queue.attributes.get("ContentBasedDeduplication") != "true" and any(
                e.get("MessageDeduplicationId") is None for e in entries):
            raise InvalidParameterValue(
                "The queue should either have ContentBasedDeduplication enabled or "
                "MessageDeduplicationId provided explicitly")

    @property
    def _dedup_ms(self) -> int:
        return self.limits.dedup_interval_s * 1000

    def _new_message(self, ctx: RequestContext, queue: QueueRecord, req: Request,
                     now_ms: int) -> NewMessage:
        body = req["MessageBody"]
        validate.body(body)
        data = body.encode()
        user_attributes = req.get("MessageAttributes")
        size = len(data)
        if user_attributes:
            size += validate.message_attributes(user_attributes, self.limits)
        max_size = int(queue.attributes["MaximumMessageSize"])
        if size > max_size:
            raise InvalidParameterValue(
                f"One or more parameters are invalid. Reason: Message must be shorter than "
                f"{max_size} bytes.")
        system_attributes = req.get("MessageSystemAttributes")
        if system_attributes:
            validate.system_attributes(system_attributes, self.limits)
        delay_s = self._delay(queue, req)
        group_id, dedup_key = self._fifo_keys(queue, req, body)
        return NewMessage(
            message_id=new_message_id(),
            body=body,
            md5_body=md5_of_body(data),
            attributes=_encode_attributes(user_attributes) if user_attributes else None,
            md5_attributes=md5_of_attributes(user_attributes) if user_attributes else None,
            system=_encode_attributes(system_attributes) if system_attributes else None,
            md5_system=md5_of_attributes(system_attributes) if system_attributes else None,
            sent_ms=now_ms,
            sender_id=ctx.sender_id or ctx.account_id,
            visible_at_ms=now_ms + delay_s * 1000,
            group_id=group_id,
            dedup_key=dedup_key,
        )

    def _delay(self, queue: QueueRecord, req: Request) -> int:
        delay = req.get("DelaySeconds")
        if delay is None:
            return int(queue.attributes["DelaySeconds"])
        if queue.fifo:
            # 0 is taken (the queue's delay then applies): LocalStack's AWS-validated
            # test_send_message_with_delay_0_works_for_fifo; any other value is refused
            # (its recording test_fifo_queue_send_message_with_delay_seconds_fails).
            if delay == 0:
                return int(queue.attributes["DelaySeconds"])
            raise invalid_value(delay, "DelaySeconds", "The request include parameter that is "
                                "not valid for this queue type.")
        longest_s = attrs.max_delay_s(queue.attributes, self.limits)  # 900 unless raised
        if not 0 <= delay <= longest_s:
            # Worded as AWS answers it, full stop and all (ballerina-platform/module-
            # ballerinax-aws.sqs, its tests against SQS: testSendMessageWithInvalidDelay).
            raise invalid_value(delay, "DelaySeconds", "DelaySeconds must be >= 0 and <= "
                                f"{longest_s}.")
        return delay

    def _fifo_keys(self, queue: QueueRecord, req: Request,
                   body: str) -> tuple[str | None, str | None]:
        group_id = req.get("MessageGroupId")
        dedup_id = req.get("MessageDeduplicationId")
        if group_id is not None:
            validate.token(group_id, "MessageGroupId", self.limits.max_group_id_chars)
        if not queue.fifo:
            if dedup_id is not None:
                raise invalid_value(dedup_id, "MessageDeduplicationId", "The request include "
                                    "parameter that is not valid for this queue type.")
            return group_id, None
        if group_id is None:
            raise MissingParameter("The request must contain the parameter MessageGroupId.")
        if dedup_id is None:
            if queue.attributes.get("ContentBasedDeduplication") != "true":
                raise InvalidParameterValue(
                    "The queue should either have ContentBasedDeduplication enabled or "
                    "MessageDeduplicationId provided explicitly")
            dedup_id = hashlib.sha256(body.encode()).hexdigest()
        validate.token(dedup_id, "MessageDeduplicationId", self.limits.max_dedup_id_chars)
        if attrs.dedup_scope(queue.attributes) == "messageGroup":
            return group_id, f"{group_id}{DEDUP_SCOPE_SEP}{dedup_id}"
        return group_id, dedup_id

    def _sent_entry(self, queue: QueueRecord, message: NewMessage, message_id: str,
                    seq: int) -> dict[str, Any]:
        entry = {"MessageId": message_id, "MD5OfMessageBody": message.md5_body}
        if message.md5_attributes:
            entry["MD5OfMessageAttributes"] = message.md5_attributes
        if message.md5_system:
            entry["MD5OfMessageSystemAttributes"] = message.md5_system
        if queue.fifo:
            entry["SequenceNumber"] = _sequence_number(seq)
        return entry

    def _announce(self, queue: QueueRecord, messages: list[NewMessage],
                  duplicates: list[bool]) -> None:
        now_ms = self.clock.now_ms()
        ready, soonest_ms = 0, None
        tell = self.log.isEnabledFor(logging.DEBUG)  # asked once per call, not per message
        for m, dup in zip(messages, duplicates, strict=True):
            if dup:
                continue
            if tell:
                self.log.debug("sent %s to %s", m.message_id, queue.name,
                               extra={"message_id": m.message_id, "queue": queue.name})
            if m.visible_at_ms <= now_ms:
                ready += 1
            elif soonest_ms is None or m.visible_at_ms < soonest_ms:
                soonest_ms = m.visible_at_ms
        if ready:  # this node's long polls; the store told other nodes' (Store.send)
            self.wakeups.notify(queue.id, ready)
        if soonest_ms is not None:  # a delayed message: parked receivers must look again then
            self.on_later(queue, (soonest_ms - now_ms) / 1000)

    # --- receive ----------------------------------------------------------------------

    async def plan_receive(self, ctx: RequestContext, req: Request) -> ReceivePlan:
        queue = await self.queue(ctx, req["QueueUrl"])
        max_messages = req.get("MaxNumberOfMessages", 1)
        if not 1 <= max_messages <= self.limits.max_receive_messages:
            raise invalid_value(max_messages, "MaxNumberOfMessages", "Must be between 1 and "
                                f"{self.limits.max_receive_messages}, if provided.")
        visibility_s = req.get("VisibilityTimeout", int(queue.attributes["VisibilityTimeout"]))
        if not 0 <= visibility_s <= self.limits.max_visibility_s:
            raise invalid_value(visibility_s, "VisibilityTimeout", "Must be >= 0 and <= "
                                f"{self.limits.max_visibility_s}, if provided.")
        wait_s = req.get("WaitTimeSeconds", int(queue.attributes["ReceiveMessageWaitTimeSeconds"]))
        if not 0 <= wait_s <= self.limits.max_wait_s:
            raise invalid_value(wait_s, "WaitTimeSeconds", "Must be >= 0 and <= "
                                f"{self.limits.max_wait_s}, if provided.")
        names = [*req.get("AttributeNames", []), *req.get("MessageSystemAttributeNames", [])]
        system_names = validate.requested_names(names, SYSTEM_ATTRIBUTE_NAMES, "Attribute")
        attempt_id = req.get("ReceiveRequestAttemptId")
        if attempt_id is not None:
            validate.token(attempt_id, "ReceiveRequestAttemptId",
                           self.limits.max_dedup_id_chars)
        return ReceivePlan(queue, max_messages, visibility_s * 1000, wait_s, system_names,
                           req.get("MessageAttributeNames", []), attempt_id if queue.fifo else None)

    async def fetch(self, ctx: RequestContext, plan: ReceivePlan) -> dict[str, Any]:
        """One receive attempt (no waiting)."""
        now_ms = plan.fetched_ms = self.clock.now_ms()
        if plan.attempt_id:
            replay = self._attempts.get((plan.queue.id, plan.attempt_id))
            if replay and replay[0] > now_ms:
                return replay[1]
        queue = await self.queue(ctx, plan.queue.name)
        plan.paused = await controls.still_paused(self, queue)
        if plan.paused:
            return {}
        granted, plan.retry_ms = await tenants.take(self.store, queue, plan.max_messages,
                                                    now_ms)
        if not granted:
            self.held_back.count(queue, [tenants.HELD_BY_RATE])
            return {}
        moved_before = 0
        redrive = await self._redrive_for(ctx, queue)
        picking = tenants.picking(queue)
        stored, retry_ms = await receive_from(self.store, queue, granted, plan.visibility_ms,
                                              now_ms, redrive, picking)
        while (redrive and not stored and len(redrive.moved) > moved_before
               and redrive.dead_letter_queue_id != queue.id):
            # Every message claimed went to the dead-letter queue: the receive looks again
            # rather than answer empty (or park a long poll) while messages are visible.
            # (A queue that is its own dead-letter queue would find the same ones again.)
            moved_before = len(redrive.moved)
            stored, retry_ms = await receive_from(self.store, queue, granted,
                                                  plan.visibility_ms, now_ms, redrive, picking)
        plan.retry_ms = tenants.sooner(plan.retry_ms, retry_ms)
        self.held_back.count(queue, tenants.held(plan.max_messages, granted, len(stored),
                                                 picking))
        await tenants.give_back(self.store, queue, granted - len(stored), now_ms)
        if redrive and redrive.moved:
            dlq = await self.store.get_queue_by_id(redrive.dead_letter_queue_id)
            for message_id in redrive.moved:
                self.log.info("dead-lettered %s from %s to %s after %d receives", message_id,
                              queue.name, dlq.name if dlq else "?", redrive.max_receive_count,
                              extra={"message_id": message_id, "queue": queue.name,
                                     "dead_letter_queue": dlq.name if dlq else None})
            if dlq is not None:
                self.on_ready(dlq, len(redrive.moved))
                self.counted(dlq, DEAD_LETTERED, len(redrive.moved), now_ms)
        self.counted(queue, RECEIVED, len(stored), now_ms)
        messages = [self._message_out(ctx, queue, m, plan) for m in stored]
        if self.log.isEnabledFor(logging.DEBUG):
            for m in stored:
                self.log.debug("received %s from %s (count %d)", m.message_id, queue.name,
                               m.receive_count, extra={"message_id": m.message_id,
                                                       "queue": queue.name,
                                                       "receive_count": m.receive_count})
        result = {"Messages": messages} if messages else {}
        if plan.attempt_id and messages:
            self._prune_attempts()
            key = (queue.id, plan.attempt_id)
            self._attempts[key] = (now_ms + self.limits.receive_attempt_s * 1000, result)
            for m in stored:
                self._attempt_of[(queue.id, m.seq)] = key
        return result

    async def expire_messages(self) -> int:
        """The retention sweep: delete what rules.retention_cutoff_ms says is gone (receives
        skip it meanwhile), and stale deduplication entries; how many messages went."""
        now_ms = self.clock.now_ms()
        queues = await self.store.list_queues(None, "")
        return await self.store.expire(
            {q.id: rules.retention_cutoff_ms(q, now_ms) for q in queues}, now_ms)

    def _touched(self, queue: QueueRecord, handles: list[Handle]) -> list[Handle]:
        """Deleting or changing a message ends the replay of the receive that returned it."""
        if queue.fifo:
            for h in handles:
                key = self._attempt_of.pop((queue.id, h.seq), None)
                if key:
                    self._attempts.pop(key, None)
        return handles

    async def seconds_until_visible(self, plan: ReceivePlan) -> float | None:
        """How long until the queue's next delayed or in-flight message becomes visible,
        counting from the last fetch: one that became visible since (the clock may have
        passed its time between the fetch and now) means fetch again at once. Nothing
        becomes visible on a paused queue: its resume wakes the poll (controls.py)."""
        if plan.paused:
            return None
        next_ms = tenants.sooner(await self.store.next_visible_ms(plan.queue, plan.fetched_ms),
                                 plan.retry_ms)  # a limit's tokens come back then
        return None if next_ms is None else max(0.0, (next_ms - self.clock.now_ms()) / 1000)

    def _prune_attempts(self) -> None:
        """Bound memory: drop expired replays once there are many."""
        if len(self._attempts) > 10_000:
            now_ms = self.clock.now_ms()
            for key in [k for k, (until, _) in self._attempts.items() if until <= now_ms]:
                del self._attempts[key]
            live = set(self._attempts)
            self._attempt_of = {k: v for k, v in self._attempt_of.items() if v in live}

    async def _redrive_for(self, ctx: RequestContext, queue: QueueRecord) -> Redrive | None:
        policy_text = queue.attributes.get("RedrivePolicy")
        if not policy_text:
            return None
        policy = orjson.loads(policy_text)
        arn = parse_arn(str(policy.get("deadLetterTargetArn", "")))
        if arn is None:
            return None
        try:
            dlq = await self.queue(ctx, arn.name)
        except SqsError:
            self.log.warning("dead-letter queue %s of %s does not exist", arn.name, queue.name)
            return None
        if dlq.fifo != queue.fifo:  # recreated as the other type since the policy was set
            self.log.warning("dead-letter queue %s of %s is not of its type", arn.name,
                             queue.name)
            return None
        return Redrive(int(policy["maxReceiveCount"]), dlq.id,
                       ctx.queue_arn(queue.name, queue.region))

    def _message_out(self, ctx: RequestContext, queue: QueueRecord, m: StoredMessage,
                     plan: ReceivePlan) -> dict[str, Any]:
        out: dict[str, Any] = {
            "MessageId": m.message_id,
            "ReceiptHandle": encode_handle(queue, m.seq, m.receipt or ""),
            "MD5OfBody": m.md5_body,
            "Body": m.body,
        }
        if plan.system_names:
            system = _system_attributes(queue, m)
            chosen = {k: v for k, v in system.items() if k in plan.system_names}
            if chosen:
                out["Attributes"] = chosen
        if plan.attribute_names and m.attributes:
            everything = _decode_attributes(m.attributes)
            chosen_attrs = _select_attributes(everything, plan.attribute_names)
            # Names that match none of a message's attributes: an empty map and no MD5, as
            # AWS answers in JSON (LocalStack's recording of AWS, 14-11-2023,
            # test_receive_message_message_attribute_names_filters, "only_non_existing_names");
            # the Query protocol has nothing to write for it.
            out["MessageAttributes"] = chosen_attrs
            if chosen_attrs:
                out["MD5OfMessageAttributes"] = (
                    m.md5_attributes if len(chosen_attrs) == len(everything)
                    else md5_of_attributes(chosen_attrs))
        return out

    # --- delete / change visibility ---------------------------------------------------

    async def delete_message(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        queue = await self.queue(ctx, req["QueueUrl"])
        handle = decode_handle(req["ReceiptHandle"], queue)
        [outcome] = await self._delete(queue, [handle])
        self._check_delete(queue, req["ReceiptHandle"], outcome)
        return {}

    async def _delete(self, queue: QueueRecord, handles: list[Handle]) -> list[str]:
        outcomes = await self.store.delete(
            queue, self._touched(queue, handles),
            rules.delete_in_flight_after_ms(queue, self.clock.now_ms()),
            any_receipt=rules.delete_takes_any_receipt(queue))
        deleted = outcomes.count(OK)  # "gone" too: a delete repeated counts again
        self.counted(queue, DELETED, deleted)
        if deleted and tenants.wakes_on_delete(queue):
            self.on_ready(queue, deleted)  # the next message of a group is free
        return outcomes

    async def drop_unreceived(self, queue: QueueRecord, messages: list[StoredMessage],
                              by: str) -> list[str]:
        """Delete messages that no receipt can name (never received since they arrived in
        this queue: fresh ones, dead letters since they landed), for the console's delete;
        not an SQS action, so no client reaches it. One received meanwhile is left to its
        receiver. The ids of those deleted, each logged with `by` (who asked)."""
        gone = set(await self.store.drop(queue, [m.seq for m in messages]))
        dropped = [m.message_id for m in messages if m.seq in gone]
        self.counted(queue, DELETED, len(dropped))
        for message_id in dropped:
            self.log.info("deleted unreceived message %s of %s for %s", message_id, queue.name,
                          by, extra={"message_id": message_id, "queue": queue.name,
                                     "access_key": by})
        return dropped

    async def delete_message_batch(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        queue = await self.queue(ctx, req["QueueUrl"])
        return await self._batch(req["Entries"], "DeleteMessageBatchRequestEntry",
                                 lambda handles: self._delete(queue, handles),
                                 lambda entry, outcome: self._check_delete(
                                     queue, entry["ReceiptHandle"], outcome),
                                 lambda entry: decode_handle(entry["ReceiptHandle"], queue))

    def _check_delete(self, queue: QueueRecord, raw: str, outcome: str) -> None:
        # A stale handle on a standard queue "succeeds but might not delete", as in SQS.
        if outcome == STALE and queue.fifo:
            raise invalid_value(raw, "ReceiptHandle", "The receipt handle has expired.")

    async def change_message_visibility(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        queue = await self.queue(ctx, req["QueueUrl"])
        handle = self._visibility_handle(queue, req)
        [outcome] = await change_visibility_in(self.store, queue, self._touched(queue, [handle]),
                                               self.clock.now_ms())
        self._check_visibility(queue, req, outcome)
        return {}

    async def change_message_visibility_batch(self, ctx: RequestContext,
                                              req: Request) -> dict[str, Any]:
        queue = await self.queue(ctx, req["QueueUrl"])
        return await self._batch(
            req["Entries"], "ChangeMessageVisibilityBatchRequestEntry",
            lambda handles: change_visibility_in(self.store, queue, self._touched(queue, handles),
                                                 self.clock.now_ms()),
            lambda entry, outcome: self._check_visibility(queue, entry, outcome),
            lambda entry: self._visibility_handle(queue, entry))

    def _visibility_handle(self, queue: QueueRecord, req: Request) -> Handle:
        if "VisibilityTimeout" not in req:
            raise MissingParameter("The request must contain the parameter VisibilityTimeout.")
        timeout = req["VisibilityTimeout"]
        if not 0 <= timeout <= self.limits.max_visibility_s:
            raise invalid_value(timeout, "VisibilityTimeout", "VisibilityTimeout must be an "
                                f"integer between 0 and {self.limits.max_visibility_s}")
        handle = decode_handle(req["ReceiptHandle"], queue)
        handle.visible_at_ms = self.clock.now_ms() + timeout * 1000
        return handle

    def _check_visibility(self, queue: QueueRecord, req: Request, outcome: str) -> None:
        if outcome == STALE:
            raise invalid_value(req["ReceiptHandle"], "ReceiptHandle", "Message does not exist "
                                "or is not available for visibility timeout change.")
        if req["VisibilityTimeout"] == 0:
            self.on_ready(queue, 1)
        else:  # parked receivers planned their sleep with the old visibility
            self.on_later(queue, req["VisibilityTimeout"])

    async def _batch(self, entries: list[Request], entry_name: str,
                     apply: Callable[[list[Handle]], Awaitable[list[str]]],
                     check: Callable[[Request, str], None],
                     to_handle: Callable[[Request], Handle]) -> dict[str, Any]:
        """Run a delete / change-visibility batch, reporting each entry's outcome."""
        validate.batch_entries(entries, entry_name, self.limits)
        failed, valid = [], []
        for entry in entries:
            try:
                if "ReceiptHandle" not in entry:
                    raise MissingParameter("The request must contain the parameter ReceiptHandle.")
                valid.append((entry, to_handle(entry)))
            except SqsError as error:
                failed.append(_failure(entry["Id"], error))
        outcomes = await apply([h for _, h in valid]) if valid else []
        successful = []
        for (entry, _), outcome in zip(valid, outcomes, strict=True):
            try:
                check(entry, outcome)
                successful.append({"Id": entry["Id"]})
            except SqsError as error:
                failed.append(_failure(entry["Id"], error))
        return batch_result(successful, failed)


new_message_id = UuidSequence().next


@dataclass(slots=True)
class Redrive:
    """Where a message goes once received more than `max_receive_count` times; the ids of
    the messages a receive moved there are appended to `moved`, for the log."""

    max_receive_count: int
    dead_letter_queue_id: int
    source_arn: str
    moved: list[str] = field(default_factory=list)


async def receive_from(store: Store, queue: QueueRecord, max_messages: int, visibility_ms: int,
                       now_ms: int, redrive: Redrive | None, picking: rules.Picking
                       ) -> tuple[list[StoredMessage], int | None]:
    """Claim up to `max_messages` messages and decide each one's fate (rules.py): returned,
    or moved to the dead-letter queue; with when a group limit lets more go (claim's
    retry_ms). The receive primitive of every store."""
    async with store.claim(queue, max_messages, now_ms, rules.retention_cutoff_ms(queue, now_ms),
                           now_ms + visibility_ms, picking) as claim:
        taken = claim.messages
        spent = rules.spent(taken, redrive.max_receive_count) if redrive and taken else []
        if spent:
            assert redrive is not None
            await claim.dead_letter([m.seq for m in spent], redrive.dead_letter_queue_id,
                                    redrive.source_arn, now_ms,
                                    [rules.with_death(m, now_ms) for m in spent])
            redrive.moved += [m.message_id for m in spent]
            gone = {m.seq for m in spent}
            taken = [m for m in taken if m.seq not in gone]
    return taken, claim.retry_ms


async def change_visibility_in(store: Store, queue: QueueRecord, handles: list[Handle],
                               now_ms: int) -> list[str]:
    """Each handle's outcome (rules.visibility_outcome), the OK ones applied at once."""
    async with store.hold(queue, [h.seq for h in handles]) as held:
        outcomes = [rules.visibility_outcome(queue, h.token, held.found.get(h.seq))
                    for h in handles]
        changes = [(h.seq, h.visible_at_ms) for h, outcome in zip(handles, outcomes, strict=True)
                   if outcome == OK]
        if changes:
            await held.set_visible_at(changes)
    return outcomes


def encode_handle(queue: QueueRecord, seq: int, token: str) -> str:
    # binascii directly: base64's wrappers add Python calls (and, to validate, a regex).
    return binascii.b2a_base64(f"{queue.id}:{seq}:{token}".encode(), newline=False).decode()


def decode_handle(raw: str, queue: QueueRecord) -> Handle:
    """A handle names its queue, message and receive; one for another queue is invalid."""
    try:
        data = binascii.a2b_base64(raw, strict_mode=True)
        queue_id, seq, token = data.decode().split(":")
        if int(queue_id) == queue.id:
            return Handle(int(seq), token)
    except (ValueError, binascii.Error, UnicodeError):
        pass
    raise ReceiptHandleIsInvalid(
        f'The input receipt handle "{raw[:200]}" is not a valid receipt handle.')


def batch_result(successful: list[dict[str, Any]],
                 failed: list[dict[str, Any]]) -> dict[str, Any]:
    """A batch's answer: AWS leaves an empty list out (in JSON, `Failed` of a batch that
    fully succeeded; the Query protocol has no way to send one)."""
    result: dict[str, Any] = {}
    if successful:
        result["Successful"] = successful
    if failed:
        result["Failed"] = failed
    return result


TRACED_ACTIONS = ("SendMessage", "SendMessageBatch")


def apply_trace_header(action: str, request: Request, trace: str) -> None:
    """An `X-Amzn-Trace-Id` HTTP header is the AWSTraceHeader of every message a send
    carries, unless a message sets its own, which wins (AWS X-Ray Developer Guide,
    "Amazon SQS and AWS X-Ray": the default HTTP header "corresponds to all messages
    included in a SendMessage or SendMessageBatch request"; "if both ... are set, the
    message system attribute overrides the HTTP trace header")."""
    if action not in TRACED_ACTIONS:
        return
    messages = request.get("Entries") if action == "SendMessageBatch" else [request]
    for message in messages or ():
        if not isinstance(message, dict):
            continue
        system = message.get("MessageSystemAttributes")
        if not isinstance(system, dict):
            system = message["MessageSystemAttributes"] = {}
        system.setdefault("AWSTraceHeader", {"DataType": "String", "StringValue": trace})


def _failure(entry_id: str, error: SqsError) -> dict[str, Any]:
    return {"Id": entry_id, "SenderFault": error.sender_fault,
            "Code": error.query_code, "Message": error.message}


def _sequence_number(seq: int) -> str:
    return str(seq).zfill(20)


def _encode_attributes(attributes: dict[str, Any]) -> str:
    return orjson.dumps(attributes, default=_b64).decode()


def _b64(value: Any) -> str:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(type(value).__name__)


def _decode_attributes(text: str) -> dict[str, Any]:
    attributes = orjson.loads(text)
    for value in attributes.values():
        if "BinaryValue" in value:
            value["BinaryValue"] = base64.b64decode(value["BinaryValue"])
    return attributes


def _select_attributes(attributes: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """MessageAttributeNames as AWS applies them (LocalStack's recording of AWS,
    test_receive_message_message_attribute_names_filters): `All`, `*` and `.*` select
    every attribute, `Hel.*` every name starting `Hel` (Hello and Help.Me alike), other
    names themselves; unknown names select nothing."""
    if "All" in names or ".*" in names or "*" in names:
        return attributes
    prefixes = tuple(n[:-2] for n in names if n.endswith(".*"))
    wanted = set(names)
    return {k: v for k, v in attributes.items()
            if k in wanted or (prefixes and k.startswith(prefixes))}


def _system_attributes(queue: QueueRecord, m: StoredMessage) -> dict[str, str]:
    values = {
        "SenderId": m.sender_id,
        "SentTimestamp": str(m.sent_ms),
        "ApproximateReceiveCount": str(m.receive_count),
        "ApproximateFirstReceiveTimestamp": str(m.first_receive_ms or ""),
    }
    if m.group_id is not None:
        values["MessageGroupId"] = m.group_id
    if queue.fifo:
        values["SequenceNumber"] = _sequence_number(m.seq)
        if m.dedup_key:
            values["MessageDeduplicationId"] = m.dedup_key.rsplit(DEDUP_SCOPE_SEP, 1)[-1]
    if m.system:
        trace = orjson.loads(m.system).get("AWSTraceHeader")
        if trace:
            values["AWSTraceHeader"] = trace["StringValue"]
    if m.dlq_source_arn:
        values["DeadLetterQueueSourceArn"] = m.dlq_source_arn
    return values
