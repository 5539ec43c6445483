"""A key stays in its scope (DESIGN.md, invariant 5): the one table of the queues each
call touches, and the one check that applies it to API calls and console actions alike.

For every action of botocore's SQS model and every call of Conveyor's own APIs beside
it, `TABLE` lists each queue the call reads or writes, with the IAM action it needs there:

- named: the queues its request names (`QueueUrl`, `QueueUrls`, `QueueName`,
  `SourceArn`, `DestinationArn`, the `deadLetterTargetArn` inside a `RedrivePolicy`
  attribute, the source named inside a `TaskHandle`, a worker call's `Queue`);
- implied: the queues it touches without naming them, which only the service can tell
  (a move task's destinations when it has no `DestinationArn`, the real source of the
  task a `TaskHandle` is, the queue a drained worker serves);
- listed: the results of a list call, of which a key sees only its queues
  (`RequestContext.visible`, which the service applies before it pages).

A limited key (server/access.py) may make a call only if it may call the action and may
act, with the IAM action each entry names, on every queue the call touches; otherwise the
call is refused with AccessDenied before it runs, so it changes nothing. A queue that
cannot be told (a malformed member, a worker that is not there) passes only a key that
may touch every queue (`queues: ["*"]`).

The IAM actions follow AWS. A move task needs `sqs:StartMessageMoveTask`,
`sqs:ReceiveMessage`, `sqs:DeleteMessage` and `sqs:GetQueueAttributes` on its source and
`sqs:SendMessage` on its destination (SQS developer guide, "Configuring queue
permissions for dead-letter queue redrive",
https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-configure-dead-letter-queue-redrive.html).
A queue's RedrivePolicy makes it send to its dead-letter queue, so naming one needs
`sqs:SendMessage` there. A batch needs its single action's permission (developer guide,
"Amazon SQS API permissions: Actions and resource reference").

Deliberately not queues a call touches (each recorded in its entry's `unscoped`, which
the generated matrix test holds against the model): a ReceiptHandle (the service takes it
only for the queue the call names: messages.decode_handle), `QueueNamePrefix` (a prefix;
ListQueues' results are filtered instead), `QueueOwnerAWSAccountId` and `AWSAccountIds`
(accounts), the other queue attributes, `sourceQueueArns` in a RedriveAllowPolicy (it
lets those queues dead-letter into the key's own queue, and reads or writes nothing of
theirs; AWS asks only `sqs:SetQueueAttributes` on the queue set), and the dead-letter
queue that a receive moves a message to (its RedrivePolicy was authorized when set).
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from conveyor.server.access import AccessKey
from conveyor.service import QueueRecord, RequestContext, attempts, leases, polls, workers
from conveyor.service.base import queue_name_from
from conveyor.service.context import parse_arn
from conveyor.sqs.errors import AccessDenied

Request = dict[str, Any]
# A queue's name; "" for a URL or ARN of no queue of this account (only "*" matches it),
# None for one that cannot be told (only a key for every queue passes).
Name = str | None

# What a move task's source needs (the developer guide's redrive permissions, above).
MOVE_SOURCE = ("StartMessageMoveTask", "ReceiveMessage", "DeleteMessage", "GetQueueAttributes")
SEND = ("SendMessage",)


class Lookups(Protocol):
    """What implied queues are read from: the service (the server wraps it)."""

    async def redrive_destinations(self, ctx: RequestContext, source_arn: str) -> list[str]: ...

    async def move_task_source(self, handle: str) -> QueueRecord | None: ...

    async def worker_queue(self, ctx: RequestContext, worker_id: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Touch:
    """One queue a call touches, and the IAM action it needs there."""

    role: str  # the table's name for it: the member, or what implies it
    queue: Name
    action: str


@dataclass(frozen=True, slots=True)
class Named:
    """Queues the request names at `member` (a path into the request)."""

    member: str
    read: Callable[[Request, RequestContext], list[Name]]
    actions: tuple[str, ...] = ()  # () : the call's own action


@dataclass(frozen=True, slots=True)
class Implied:
    """Queues the call touches without naming them, found through the service."""

    role: str
    resolve: Callable[[Request, RequestContext, Lookups], Awaitable[list[Name]]]
    actions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Entry:
    touches: tuple[Named | Implied, ...] = ()
    listed: tuple[str, ...] = ()  # result members whose queues are filtered (ctx.visible)
    # Result members that name queues and are shown whole, on purpose (see `TABLE`).
    shown: tuple[str, ...] = ()
    # Request members that look queue-bearing but are not (see the module's docstring).
    unscoped: tuple[str, ...] = ()


# --- reading named queues -------------------------------------------------------------------

def _url(member: str) -> Callable[[Request, RequestContext], list[Name]]:
    def read(req: Request, ctx: RequestContext) -> list[Name]:
        if member not in req:
            return []  # the service asks for it (MissingParameter)
        value = req[member]
        return [queue_name_from(value, ctx.account_id) or ""] if isinstance(value, str) \
            else [None]
    return read


def _urls(req: Request, ctx: RequestContext) -> list[Name]:
    urls = req.get("QueueUrls")
    if urls is None:
        return []
    if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
        return [None]  # malformed: the service refuses it, after a key for every queue
    return [queue_name_from(u, ctx.account_id) or "" for u in urls]


def _name(member: str) -> Callable[[Request, RequestContext], list[Name]]:
    def read(req: Request, ctx: RequestContext) -> list[Name]:
        if member not in req:
            return []
        return [req[member]] if isinstance(req[member], str) else [None]
    return read


def _arn_name(value: str, ctx: RequestContext) -> str:
    arn = parse_arn(value)
    return arn.name if arn and arn.account_id == ctx.account_id else ""


def _arn(member: str) -> Callable[[Request, RequestContext], list[Name]]:
    def read(req: Request, ctx: RequestContext) -> list[Name]:
        value = req.get(member)
        if not value:  # absent or "": the service treats it as not given
            return []
        return [_arn_name(value, ctx)] if isinstance(value, str) else [None]
    return read


def _dead_letter_target(req: Request, ctx: RequestContext) -> list[Name]:
    """The queue a RedrivePolicy attribute names, read as the service reads it
    (service/redrive.py's check_redrive), so the two cannot disagree on which it is."""
    attributes = req.get("Attributes")
    text = attributes.get("RedrivePolicy") if isinstance(attributes, dict) else None
    if not text:
        return []
    try:
        policy = orjson.loads(text) if isinstance(text, str) else None
    except orjson.JSONDecodeError:
        return []  # the service refuses it (InvalidAttributeValue)
    if not isinstance(policy, dict) or "deadLetterTargetArn" not in policy:
        return []
    return [_arn_name(str(policy["deadLetterTargetArn"]), ctx)]


def _announced(req: Request, ctx: RequestContext) -> list[Name]:
    announce = req.get("Announce")
    return _name("Queue")(announce, ctx) if isinstance(announce, dict) else []


def _claimed_task_source(req: Request, ctx: RequestContext) -> list[Name]:
    """The source queue a TaskHandle claims (its `sourceArn`): not trusted to be the
    task's (see `_task_source`), but a key out of its scope is refused on it anyway, so a
    forged handle cannot probe another queue's tasks."""
    handle = req.get("TaskHandle")
    if not isinstance(handle, str):
        return []
    try:
        claimed = orjson.loads(base64.b64decode(handle, validate=True)).get("sourceArn")
    except (ValueError, AttributeError):
        return []  # not a handle: the service says so (InvalidParameterValue)
    return [_arn_name(claimed, ctx)] if isinstance(claimed, str) else []


# --- finding implied queues -------------------------------------------------------------------

async def _move_destinations(req: Request, ctx: RequestContext,
                             lookups: Lookups) -> list[Name]:
    """Without a DestinationArn, a move task sends each message back to the queue it was
    dead-lettered from (SQS API reference, StartMessageMoveTask): every such queue."""
    source = req.get("SourceArn")
    if req.get("DestinationArn") or not isinstance(source, str):
        return []
    return [_arn_name(arn, ctx) for arn in await lookups.redrive_destinations(ctx, source)]


async def _task_source(req: Request, ctx: RequestContext, lookups: Lookups) -> list[Name]:
    """The source of the task a TaskHandle is, from the server's own record of it."""
    handle = req.get("TaskHandle")
    if not isinstance(handle, str):
        return []
    source = await lookups.move_task_source(handle)
    return [source.name] if source is not None else []


async def _worker_queue(req: Request, ctx: RequestContext, lookups: Lookups) -> list[Name]:
    """The queue the worker serves; None (only "*" passes) for no live worker, so a key
    cannot tell another queue's worker from none."""
    worker_id = req.get("WorkerId")
    return [await lookups.worker_queue(ctx, worker_id) if isinstance(worker_id, str) else None]


# --- the table ----------------------------------------------------------------------------------

_QUEUE_URL = Named("QueueUrl", _url("QueueUrl"))
_RECEIPT = ("ReceiptHandle",)
_BATCH_RECEIPT = ("Entries.ReceiptHandle",)
_ATTRIBUTES = ("Attributes",)  # every attribute but RedrivePolicy's target

TABLE: dict[str, Entry] = {
    # botocore's SQS model
    "AddPermission": Entry((_QUEUE_URL,), unscoped=("AWSAccountIds",)),
    "CancelMessageMoveTask": Entry((Named("TaskHandle.sourceArn", _claimed_task_source),
                                    Implied("TaskHandle's task source", _task_source))),
    "ChangeMessageVisibility": Entry((_QUEUE_URL,), unscoped=_RECEIPT),
    "ChangeMessageVisibilityBatch": Entry((_QUEUE_URL,), unscoped=_BATCH_RECEIPT),
    "CreateQueue": Entry((Named("QueueName", _name("QueueName")),
                          Named("Attributes.RedrivePolicy.deadLetterTargetArn",
                                _dead_letter_target, SEND)), unscoped=_ATTRIBUTES),
    "DeleteMessage": Entry((_QUEUE_URL,), unscoped=_RECEIPT),
    "DeleteMessageBatch": Entry((_QUEUE_URL,), unscoped=_BATCH_RECEIPT),
    "DeleteQueue": Entry((_QUEUE_URL,)),
    "GetQueueAttributes": Entry((_QUEUE_URL,)),
    "GetQueueUrl": Entry((Named("QueueName", _name("QueueName")),),
                         unscoped=("QueueOwnerAWSAccountId",)),
    "ListDeadLetterSourceQueues": Entry((_QUEUE_URL,), listed=("queueUrls",)),
    # The tasks of the source named, whole (their handles and destinations too), as AWS
    # answers a principal allowed sqs:ListMessageMoveTasks on that source.
    "ListMessageMoveTasks": Entry((Named("SourceArn", _arn("SourceArn")),), shown=(
        "Results.TaskHandle", "Results.SourceArn", "Results.DestinationArn")),
    "ListQueueTags": Entry((_QUEUE_URL,)),
    "ListQueues": Entry(listed=("QueueUrls",), unscoped=("QueueNamePrefix",)),
    "PurgeQueue": Entry((_QUEUE_URL,)),
    "ReceiveMessage": Entry((_QUEUE_URL,)),
    "RemovePermission": Entry((_QUEUE_URL,)),
    "SendMessage": Entry((_QUEUE_URL,)),
    "SendMessageBatch": Entry((_QUEUE_URL,)),
    "SetQueueAttributes": Entry((_QUEUE_URL, Named(
        "Attributes.RedrivePolicy.deadLetterTargetArn", _dead_letter_target, SEND)),
        unscoped=_ATTRIBUTES),
    "StartMessageMoveTask": Entry((Named("SourceArn", _arn("SourceArn"), MOVE_SOURCE),
                                   Named("DestinationArn", _arn("DestinationArn"), SEND),
                                   Implied("original sources (no DestinationArn)",
                                           _move_destinations, SEND))),
    "TagQueue": Entry((_QUEUE_URL,)),
    "UntagQueue": Entry((_QUEUE_URL,)),
    # ConveyorWorkers.* (service/workers.py, service/polls.py)
    "AnnounceWorker": Entry((Named("Queue", _name("Queue")),)),
    "ListWorkers": Entry(listed=("Workers.Queue",)),
    "DrainWorker": Entry((Implied("the worker's queue", _worker_queue),)),
    "RecordScalingDecision": Entry((Named("Queue", _name("Queue")),)),
    "ListScalingDecisions": Entry((Named("Queue", _name("Queue")),)),
    "PollMessages": Entry((_QUEUE_URL, Named("QueueUrls", _urls),
                           Named("Announce.Queue", _announced, ("AnnounceWorker",)))),
    # ConveyorWorkers.RecordAttempts / GetMessageAttempts (service/attempts.py): a message's
    # failed attempts, on the queue named (a record may land on a message the queue has just
    # dead-lettered: its history from this queue, not a touch of the dead-letter queue).
    "RecordAttempts": Entry((_QUEUE_URL,), unscoped=_BATCH_RECEIPT),
    "GetMessageAttempts": Entry((_QUEUE_URL,)),
    # ConveyorQueues.* (service/controls.py): the queue paused or resumed.
    "PauseQueue": Entry((_QUEUE_URL,)),
    "ResumeQueue": Entry((_QUEUE_URL,)),
    "SetConveyorAttributes": Entry((_QUEUE_URL,)),
    # ConveyorLease.* (service/leases.py): leases are named records, no queue's.
    **{action: Entry() for action in leases.ACTIONS},
}
# every call the server accepts
assert set(workers.ACTIONS + polls.ACTIONS + attempts.ACTIONS) <= set(TABLE)


# --- the check ----------------------------------------------------------------------------------

def named(action: str, request: Request, ctx: RequestContext) -> list[Touch]:
    """The queues the request names, each with the IAM action it needs there."""
    entry = TABLE.get(action)
    if entry is None:  # no entry, no knowing what it touches: only "*" passes
        return [Touch("unknown action", None, action)]
    return [Touch(t.member, name, needed)
            for t in entry.touches if isinstance(t, Named)
            for name in t.read(request, ctx) for needed in t.actions or (action,)]


async def implied(action: str, request: Request, ctx: RequestContext,
                  lookups: Lookups) -> list[Touch]:
    """The queues the call touches without naming them, found through the service."""
    entry = TABLE.get(action, Entry())
    return [Touch(t.role, name, needed)
            for t in entry.touches if isinstance(t, Implied)
            for name in await t.resolve(request, ctx, lookups)
            for needed in t.actions or (action,)]


async def authorize(key: AccessKey | None, action: str, request: Request,
                    ctx: RequestContext, lookups: Lookups) -> None:
    """Raise AccessDenied, before the call runs, unless `key` may make it on every queue
    it touches (None: no keys configured, everything is allowed)."""
    if key is None or key.unlimited:
        return
    if key.may_call(action) and _within(key, named(action, request, ctx)) and _within(
            key, await implied(action, request, ctx, lookups)):
        return
    raise AccessDenied(f"Access to the resource {ctx.base_url}/ is denied.")


def _within(key: AccessKey, touches: list[Touch]) -> bool:
    return all(key.may(t.action, t.queue) for t in touches)


def visible(key: AccessKey | None, queue: str) -> bool:
    """Whether a list (or a console page) may show the queue called `queue` to `key`."""
    return key is None or key.queues_unlimited or key.touches(queue)


def scoped(ctx: RequestContext, key: AccessKey | None) -> RequestContext:
    """`ctx` for a call by `key`: list results then show only the key's queues."""
    if key is None or key.queues_unlimited:
        return ctx
    return dataclasses.replace(ctx, visible=key.touches)
