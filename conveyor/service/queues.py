"""Queue actions: create, find, list, attributes, tags, permissions, purge, delete."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
from mypy_extensions import trait

from conveyor.service import attributes as attrs
from conveyor.service import controls, rules, validate
from conveyor.service.context import RequestContext
from conveyor.service.identity import QueueEndings
from conveyor.service.redrive import check_redrive
from conveyor.sqs.errors import (
    InvalidAttributeName,
    InvalidAttributeValue,
    InvalidParameterValue,
    PurgeQueueInProgress,
    QueueDeletedRecently,
    QueueNameExists,
    invalid_value,
)
from conveyor.store.base import Counts, QueueRecord, StoredMessage

Request = dict[str, Any]


@trait  # one of Service's parts (setup.py: mypyc compiles them as traits)
class QueueActions(QueueEndings):
    async def create_queue(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        name = req["QueueName"]
        given = req.get("Attributes", {})
        fifo = attrs.fifo_at_creation(given)
        validate.queue_name(name, fifo, self.limits)
        tags = req.get("tags", {})
        self._check_tags(tags, {})
        wanted = {k: attrs.check(k, v, self.limits, fifo) for k, v in given.items()}
        attrs.check_encryption(wanted)
        attrs.check_delays(attrs.apply(attrs.defaults(self.limits, fifo), wanted), self.limits)
        existing = await self.store.get_queue(ctx.region, name)
        if existing is not None:
            for key, value in wanted.items():
                current = existing.attributes.get(key, attrs.OWN.get(key, ""))
                if not attrs.same_value(key, current, value):
                    raise QueueNameExists(
                        f"A queue already exists with the same name and a different value for "
                        f"attribute {key}")
            return {"QueueUrl": ctx.queue_url(name)}
        deleted_s = await self.store.deleted_at(ctx.region, name)
        now_s = self.clock.now_s()
        if deleted_s is not None and now_s - deleted_s < self.limits.deleted_name_cooldown_s:
            raise QueueDeletedRecently(
                f"You must wait {self.limits.deleted_name_cooldown_s} seconds after deleting a "
                "queue before you can create another with the same name.")
        values = attrs.at_creation(attrs.apply(attrs.defaults(self.limits, fifo), wanted))
        draft = QueueRecord(0, ctx.region, name, values, tags, now_s, now_s)
        await check_redrive(self, ctx, draft)
        queue = await self.store.create_queue(ctx.region, name, values, tags, now_s)
        self.forget(queue)
        self.log.info("created queue %s in %s", name, ctx.region)
        return {"QueueUrl": ctx.queue_url(name)}

    async def get_queue_url(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        owner = req.get("QueueOwnerAWSAccountId")
        if owner and owner != ctx.account_id:
            await self.queue(ctx, "\0")  # raises QueueDoesNotExist
        queue = await self.queue(ctx, req["QueueName"])
        return {"QueueUrl": ctx.queue_url(queue.name)}

    async def list_queues(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        prefix = req.get("QueueNamePrefix", "")
        max_results = req.get("MaxResults")
        if max_results is not None and not 1 <= max_results <= self.limits.max_list_queues:
            raise invalid_value(max_results, "MaxResults",
                                f"MaxResults must be between 1 and {self.limits.max_list_queues}.")
        names: list[str] = []
        if validate.plain_name(prefix):  # other characters begin no queue name
            names = [q.name for q in await self.store.list_queues(ctx.region, prefix)
                     if ctx.sees(q.name)]
        return self.paginate(names, req, "QueueUrls", ctx.queue_url)

    async def delete_queue(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        await self.end_queue(await self.queue(ctx, req["QueueUrl"]))  # identity.py
        return {}

    async def purge_queue(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        queue = await self.queue(ctx, req["QueueUrl"])
        now_ms = self.clock.now_ms()
        if queue.purged_s and now_ms // 1000 - queue.purged_s < self.limits.purge_cooldown_s:
            raise PurgeQueueInProgress(
                f"Only one PurgeQueue operation on {queue.name} is allowed every "
                f"{self.limits.purge_cooldown_s} seconds.")
        queue.purged_s = now_ms // 1000  # refuse another purge while this one runs
        try:
            await self.store.purge(queue, now_ms)
        finally:
            self.forget(queue)
        self.log.info("purged queue %s", queue.name)
        return {}

    async def get_queue_attributes(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        queue = await self.queue(ctx, req["QueueUrl"])
        known = [*attrs.SETTABLE, *attrs.COMPUTED]
        if not queue.fifo:
            known = [n for n in known if n not in attrs.FIFO_ONLY]
        names = req.get("AttributeNames", [])
        # Conveyor's own, asked by name: its extension used as designed, in any mode.
        asked_own = attrs.OWN.keys() & set(names)
        wanted = validate.requested_names([n for n in names if n not in attrs.OWN], known,
                                          "Attribute") | asked_own
        if self.limits.conveyor_attributes and "All" in names:
            # `All` lists those set (a new queue reads as SQS's would); strict: never.
            wanted |= attrs.OWN.keys() & queue.attributes.keys()
        values: dict[str, str] = {}
        if wanted & {"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                     "ApproximateNumberOfMessagesDelayed"}:
            counts = await self.counts(queue, self.clock.now_ms())
            values |= {"ApproximateNumberOfMessages": str(counts.visible),
                       "ApproximateNumberOfMessagesNotVisible": str(counts.in_flight),
                       "ApproximateNumberOfMessagesDelayed": str(counts.delayed)}
        values |= {"CreatedTimestamp": str(queue.created_s),
                   "LastModifiedTimestamp": str(queue.modified_s),
                   "QueueArn": ctx.queue_arn(queue.name, queue.region)}
        values |= attrs.OWN | queue.attributes
        result = {k: v for k, v in values.items() if k in wanted and v != ""}
        return {"Attributes": result} if result else {}

    async def set_queue_attributes(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        queue = await self.queue(ctx, req["QueueUrl"])
        changes = req["Attributes"]
        checked = {k: attrs.check(k, v, self.limits, queue.fifo, existing=True)
                   for k, v in changes.items()}
        await self._save_attributes(ctx, queue, checked)
        return {}

    async def set_conveyor_attributes(self, ctx: RequestContext, req: Request
                                      ) -> dict[str, Any]:
        """ConveyorQueues.SetConveyorAttributes {QueueUrl, Attributes}: set Conveyor's own
        queue attributes (attributes.OWN) in any mode, strict too, where SetQueueAttributes
        refuses them as SQS does; other names are refused."""
        url, changes = req.get("QueueUrl"), req.get("Attributes")
        queue = await self.queue(ctx, url if isinstance(url, str) else "")
        if not isinstance(changes, dict) or not changes:
            raise InvalidParameterValue("Attributes must name at least one attribute.")
        own = replace(self.limits, conveyor_attributes=True)
        checked: dict[str, str] = {}
        for name, value in changes.items():
            if name not in attrs.OWN:
                raise InvalidAttributeName(f"Unknown Attribute {name}.")
            if not isinstance(value, str):
                raise InvalidAttributeValue(f"Invalid value for the parameter {name}.")
            checked[name] = attrs.check(name, value, own, queue.fifo, existing=True)
        await self._save_attributes(ctx, queue, checked)
        return {}

    async def _save_attributes(self, ctx: RequestContext, queue: QueueRecord,
                               checked: dict[str, str]) -> None:
        """Apply checked attribute changes to the queue, once they hold together."""
        attrs.check_encryption(checked)
        draft = replace(queue, attributes=attrs.apply(queue.attributes, checked))
        attrs.check_delays(draft.attributes, self.limits)
        await check_redrive(self, ctx, draft)
        draft.modified_s = self.clock.now_s()
        await self.store.update_queue(draft)
        self.forget(queue)
        if controls.is_paused(queue) and not controls.is_paused(draft):
            self.on_ready(queue, controls.WAKE_ALL)  # resumed: as ResumeQueue does

    async def tag_queue(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        queue = await self.queue(ctx, req["QueueUrl"])
        tags = req["Tags"]
        if not tags:
            raise InvalidParameterValue("The request must contain at least one tag.")
        self._check_tags(tags, queue.tags)
        queue.tags = {**queue.tags, **tags}
        await self.store.update_queue(queue)
        self.forget(queue)
        return {}

    async def untag_queue(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        queue = await self.queue(ctx, req["QueueUrl"])
        keys = req["TagKeys"]
        if not keys:
            raise InvalidParameterValue("The request must contain at least one tag key.")
        queue.tags = {k: v for k, v in queue.tags.items() if k not in keys}
        await self.store.update_queue(queue)
        self.forget(queue)
        return {}

    async def list_queue_tags(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        queue = await self.queue(ctx, req["QueueUrl"])
        return {"Tags": queue.tags} if queue.tags else {}

    async def queue_counts(self) -> list[tuple[QueueRecord, Counts]]:
        """Every queue with its message counts (for metrics and the console)."""
        now_ms = self.clock.now_ms()
        return [(q, await self.counts(q, now_ms))
                for q in await self.store.list_queues(None, "")]

    async def all_queues(self) -> list[QueueRecord]:
        """Every queue of every region, without counts (the console counts one page)."""
        return await self.store.list_queues(None, "")

    async def peek(self, queue: QueueRecord, limit: int, after: tuple[int, int] | None = None
                   ) -> list[tuple[StoredMessage, int]]:
        """The queue's next messages and when each is (or becomes) visible, for the
        console: not an SQS action, and it changes nothing. `after` (visible_at, seq):
        those past that one (a keyset cursor: store.peek)."""
        return await self.store.peek(queue, limit,
                                     rules.retention_cutoff_ms(queue, self.clock.now_ms()),
                                     after)

    async def find_message(self, queue: QueueRecord, message_id: str) -> StoredMessage | None:
        """The queue's message of this id at any depth the attempts API reaches (the
        store's find_message over limits.attempts_scan_messages), for the console."""
        return await self.store.find_message(queue, message_id,
                                             self.limits.attempts_scan_messages)

    def _check_tags(self, new: dict[str, str], existing: dict[str, str]) -> None:
        if len({**existing, **new}) > self.limits.max_tags:
            raise InvalidParameterValue(
                f"Too many tags added for queue. A queue can have at most "
                f"{self.limits.max_tags} tags.")
        for key, value in new.items():
            if not (validate.valid_chars(key) and validate.valid_chars(value)):
                raise InvalidParameterValue("Tag keys and values can only contain characters "
                                            "that SQS allows in a message body.")
            if not key or len(key) > self.limits.max_tag_key_chars:
                # AWS's wording (ballerina-platform/module-ballerinax-aws.sqs, its tests
                # against SQS: testTagQueueWithEmptyTagKey).
                raise InvalidParameterValue(f"Tag keys must be between 1 and "
                                            f"{self.limits.max_tag_key_chars} characters in "
                                            "length.")
            if key.lower().startswith("aws:"):
                raise invalid_value(key, "TagKey", "Tag keys can't start with aws:.")
            if len(value) > self.limits.max_tag_value_chars:
                raise invalid_value(value, "TagValue", f"Tag values can be at most "
                                    f"{self.limits.max_tag_value_chars} characters long.")

    async def add_permission(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        queue = await self.queue(ctx, req["QueueUrl"])
        label = req["Label"]
        accounts, actions = req["AWSAccountIds"], req["Actions"]
        if not accounts or not actions:
            raise InvalidParameterValue("AWSAccountIds and Actions must not be empty.")
        for action in actions:
            _check_grantable(action)
        policy = _policy(queue, ctx)
        if any(s.get("Sid") == label for s in policy["Statement"]):
            raise invalid_value(label, "Label", "Already exists.")
        principals = [f"arn:aws:iam::{a}:root" for a in accounts]
        granted = [f"SQS:{a}" for a in actions]
        # One principal or action is a string, several a list: the shape of AWS's recorded
        # Policy (LocalStack's recording of AWS, test_sqs_permission_lifecycle).
        policy["Statement"].append({
            "Sid": label, "Effect": "Allow",
            "Principal": {"AWS": _one_or_list(principals)},
            "Action": _one_or_list(granted),
            "Resource": ctx.queue_arn(queue.name, queue.region),
        })
        queue.attributes["Policy"] = orjson.dumps(policy).decode()
        await self.store.update_queue(queue)
        self.forget(queue)
        return {}

    async def remove_permission(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        queue = await self.queue(ctx, req["QueueUrl"])
        label = req["Label"]
        policy = _policy(queue, ctx)
        kept = [s for s in policy["Statement"] if s.get("Sid") != label]
        if len(kept) == len(policy["Statement"]):
            raise invalid_value(label, "Label", "can't find label.")
        if kept:
            queue.attributes["Policy"] = orjson.dumps({**policy, "Statement": kept}).decode()
        else:
            queue.attributes.pop("Policy", None)
        await self.store.update_queue(queue)
        self.forget(queue)
        return {}


def _policy(queue: QueueRecord, ctx: RequestContext) -> dict[str, Any]:
    if queue.attributes.get("Policy"):
        policy = orjson.loads(queue.attributes["Policy"])
        policy.setdefault("Statement", [])
        return policy
    # AWS's first AddPermission writes this header (test_sqs_permission_lifecycle's record).
    return {"Version": "2008-10-17",
            "Id": f"{ctx.queue_arn(queue.name, queue.region)}/SQSDefaultPolicy", "Statement": []}


def _one_or_list(values: list[str]) -> str | list[str]:
    return values[0] if len(values) == 1 else values


# What AddPermission may grant: the actions a queue policy can give another account.
GRANTABLE = frozenset({"*", "SendMessage", "ReceiveMessage", "DeleteMessage",
                       "ChangeMessageVisibility", "GetQueueAttributes", "GetQueueUrl",
                       "ListDeadLetterSourceQueues", "PurgeQueue"})
# Actions only the queue's owner may call (AddPermission API reference: "Only you, the
# owner of the queue, can grant or deny permissions to the queue").
OWNER_ONLY = frozenset({"AddPermission", "RemovePermission", "CreateQueue", "DeleteQueue",
                        "ListQueues", "SetQueueAttributes", "TagQueue", "UntagQueue",
                        "ListQueueTags", "StartMessageMoveTask", "CancelMessageMoveTask",
                        "ListMessageMoveTasks"})


def _check_grantable(action: str) -> None:
    """Refuse what AddPermission cannot grant, in AWS's words: a batch action or a name
    that is no SQS action gets "Please refer to the appropriate WSDL ..." (SQS's answer,
    quoted in cloudtools/awacs#34 and aws/aws-cdk#2381), an action only the owner may
    call "Only the queue owner is allowed to invoke this action." (moto's wording: no
    recording of AWS's found)."""
    if action in GRANTABLE:
        return
    reason = ("Only the queue owner is allowed to invoke this action." if action in OWNER_ONLY
              else "Please refer to the appropriate WSDL for a list of valid actions.")
    raise invalid_value(f"SQS:{action}", "ActionName", reason)
