"""Dead letters: redrive policies, source-queue listing and message move tasks."""

from __future__ import annotations

import asyncio
import base64
import uuid
from typing import Any

import orjson
from mypy_extensions import trait

from conveyor.service import rules
from conveyor.service.base import ServiceBase
from conveyor.service.context import RequestContext, parse_arn
from conveyor.sqs.errors import (
    InternalError,
    InvalidParameterValue,
    QueueDoesNotExist,
    ResourceNotFoundException,
    SqsError,
    invalid_value,
)
from conveyor.store.base import MoveTaskRecord, QueueRecord, StoredMessage

Request = dict[str, Any]
MOVE_STEP_S = 0.2  # how often running move tasks move their next slice
MOVE_LOCK = "conveyor.move-tasks"


async def check_redrive(service: ServiceBase, ctx: RequestContext, queue: QueueRecord) -> None:
    """Refuse a RedrivePolicy / RedriveAllowPolicy SQS would refuse."""
    allow_text = queue.attributes.get("RedriveAllowPolicy")
    if allow_text:
        _parse_allow_policy(allow_text)
    policy_text = queue.attributes.get("RedrivePolicy")
    if not policy_text:
        return
    policy = orjson.loads(policy_text)

    def bad(reason: str) -> InvalidParameterValue:
        return invalid_value(policy_text, "RedrivePolicy", reason)

    count = policy.get("maxReceiveCount")
    try:
        count = int(count)
    except (TypeError, ValueError):
        raise bad("Redrive policy maxReceiveCount must be an integer.") from None
    if not 1 <= count <= service.limits.max_receive_count:
        raise bad(f"Value {count} for parameter maxReceiveCount is invalid. Reason: Must be "
                  f"between 1 and {service.limits.max_receive_count}.")
    arn = parse_arn(str(policy.get("deadLetterTargetArn", "")))
    if arn is None:
        raise bad("Invalid value for deadLetterTargetArn.")
    if arn.account_id != ctx.account_id or arn.region != queue.region:
        raise bad("Dead-letter target must be in the same account and region.")
    try:
        dlq = await service.queue(ctx, arn.name)
    except SqsError:
        raise bad("Dead letter target does not exist.") from None
    if dlq.fifo != queue.fifo:
        raise bad("Dead-letter queue must be the same type (standard or FIFO) as the "
                  "source queue.")
    if not _allows(dlq, ctx.queue_arn(queue.name, queue.region)):
        raise bad("Dead-letter queue does not allow this source queue (RedriveAllowPolicy).")
    policy["maxReceiveCount"] = count
    queue.attributes["RedrivePolicy"] = orjson.dumps(policy).decode()


@trait  # one of Service's parts (setup.py: mypyc compiles them as traits)
class RedriveActions(ServiceBase):
    async def list_dead_letter_source_queues(self, ctx: RequestContext,
                                             req: Request) -> dict[str, Any]:
        dlq = await self.queue(ctx, req["QueueUrl"])
        sources = [q.name for q in await self.dead_letter_sources(ctx, dlq) if ctx.sees(q.name)]
        return self.paginate(sources, req, "queueUrls", ctx.queue_url)

    async def dead_letter_sources(self, ctx: RequestContext,
                                  dlq: QueueRecord) -> list[QueueRecord]:
        """The queues of the caller's region whose RedrivePolicy targets `dlq`."""
        arn = ctx.queue_arn(dlq.name, dlq.region)
        return [q for q in await self.store.list_queues(ctx.region, "")
                if dead_letter_arn(q) == arn]

    async def redrive_destinations(self, ctx: RequestContext, source_arn: str) -> list[str]:
        """The ARNs of every queue a move task from `source_arn` without a DestinationArn
        may move messages into: where its messages were dead-lettered from, and the
        queues that dead-letter into it now (whose next dead letters it would move back).
        Empty when `source_arn` names no queue (the task is then refused anyway)."""
        arn = parse_arn(source_arn)
        if arn is None or arn.account_id != ctx.account_id:
            return []
        source = await self.store.get_queue(arn.region, arn.name)
        if source is None:
            return []
        configured = [ctx.queue_arn(q.name, q.region)
                      for q in await self.dead_letter_sources(ctx, source)]
        return sorted({*configured, *await self.store.dead_letter_origins(source)})

    async def move_task_source(self, handle: str) -> QueueRecord | None:
        """The source queue of the move task this handle is, from the task's own record
        (never from the queue named inside the handle); None when no task has it."""
        for task in await self.store.move_tasks(None):
            if task.handle == handle:
                return await self.store.get_queue_by_id(task.source_queue_id)
        return None

    # --- move tasks -------------------------------------------------------------------

    async def start_message_move_task(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        source = await self._queue_by_arn(ctx, req["SourceArn"], "SourceArn")
        if not any(dead_letter_arn(q) == req["SourceArn"]
                   for q in await self.store.list_queues(ctx.region, "")):
            # AWS's words, without the usual "Value ... is invalid" (LocalStack's recording
            # of AWS, test_sqs_move_task.snapshot.json, test_source_needs_redrive_policy).
            raise InvalidParameterValue("Source queue must be configured as a Dead Letter Queue.")
        destination = None
        if req.get("DestinationArn"):
            destination = await self._queue_by_arn(ctx, req["DestinationArn"], "DestinationArn")
            if destination.id == source.id:
                raise invalid_value(req["DestinationArn"], "DestinationArn",
                                    "Destination must differ from the source.")
        rate = req.get("MaxNumberOfMessagesPerSecond")
        if rate is not None and not 1 <= rate <= self.limits.max_move_rate:
            raise invalid_value(rate, "MaxNumberOfMessagesPerSecond",
                                f"Must be between 1 and {self.limits.max_move_rate}.")
        tasks = await self.store.move_tasks(source.id)
        if any(t.status == "RUNNING" for t in tasks):  # recorded: test_start_multiple_move_tasks
            raise InvalidParameterValue("There is already a task running. Only one active task "
                                        "is allowed for a source queue arn at a given time.")
        counts = await self.counts(source, self.clock.now_ms())
        handle = base64.b64encode(orjson.dumps(
            {"taskId": str(uuid.uuid4()), "sourceArn": req["SourceArn"]})).decode()
        task = MoveTaskRecord(handle, source.id, destination.id if destination else None, rate,
                              "RUNNING", self.clock.now_ms(), to_move=counts.visible,
                              extra={"SourceArn": req["SourceArn"],
                                     "DestinationArn": req.get("DestinationArn", "")})
        await self.store.save_move_task(task)
        self.log.info("move task started from %s", source.name)
        return {"TaskHandle": handle}

    async def list_message_move_tasks(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        source = await self._queue_by_arn(ctx, req["SourceArn"], "SourceArn")
        max_results = req.get("MaxResults", 1)
        if not 1 <= max_results <= 10:
            raise invalid_value(max_results, "MaxResults", "Must be between 1 and 10.")
        tasks = sorted(await self.store.move_tasks(source.id), key=lambda t: -t.started_ms)
        return {"Results": [_task_out(t) for t in tasks[:max_results]]}

    async def cancel_message_move_task(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        for _ in range(50):  # the runner holds the lock for one short step at a time
            async with self.store.exclusive(MOVE_LOCK) as mine:
                if mine:
                    task = await self._task(ctx, req["TaskHandle"])
                    if task.status != "RUNNING":
                        raise ResourceNotFoundException("Task does not exist.")
                    task.status = "CANCELLED"
                    await self.store.save_move_task(task)
                    return {"ApproximateNumberOfMessagesMoved": task.moved}
            await asyncio.sleep(MOVE_STEP_S / 4)
        raise InternalError("Could not cancel the task now; try again.")

    async def run_move_tasks(self, ctx: RequestContext) -> None:
        """Move the next slice of every running task; called every MOVE_STEP_S. One node at
        a time, so a task moves each message once and its counters add up. A look without
        the lock first: mostly there is nothing to run, and on PostgreSQL that look is one
        round trip where taking the lock is four (BEGIN, the lock, the read, COMMIT)."""
        if not any(task.status == "RUNNING" for task in await self.store.move_tasks(None)):
            return
        async with self.store.exclusive(MOVE_LOCK) as mine:
            if mine:
                await self._run_move_tasks(ctx)

    async def _run_move_tasks(self, ctx: RequestContext) -> None:
        for task in await self.store.move_tasks(None):
            if task.status != "RUNNING":
                continue
            source = await self.store.get_queue_by_id(task.source_queue_id)
            if source is None:
                task.status, task.failure = "FAILED", "The source queue was deleted."
                await self.store.save_move_task(task)
            else:
                await self._step(ctx, source, task)

    async def _step(self, ctx: RequestContext, source: QueueRecord, task: MoveTaskRecord) -> None:
        now_ms = self.clock.now_ms()
        limit = move_budget(task, now_ms, self.limits.max_move_rate)
        if limit <= 0:
            return  # ahead of MaxNumberOfMessagesPerSecond: wait for the next step
        messages = await self.store.movable(source, limit, now_ms,
                                            rules.retention_cutoff_ms(source, now_ms))
        if not messages:
            task.status = "COMPLETED"
            await self.store.save_move_task(task)
            return
        moves: list[tuple[int, int]] = []
        ready: dict[int, QueueRecord] = {}
        for m in messages:
            destination = await self._destination(ctx, source, task, m.dlq_source_arn)
            if destination is None:
                # The destination (given, or the message's source) is gone: AWS fails the
                # task with this reason (test_move_task_delete_destination_queue_while_running).
                task.status, task.failure = "FAILED", QueueDoesNotExist.query_code
                break
            if not rules.may_move(source.id, destination.id):
                task.status = "FAILED"
                task.failure = "Message's source queue is the queue it is in."
                break
            moves.append((m.seq, destination.id))
            ready[destination.id] = destination
        task.moved += await self.store.move(source, moves, now_ms) if moves else 0
        await self.store.save_move_task(task)
        for destination in ready.values():
            self.on_ready(destination, len(moves))

    async def move_selected(self, source: QueueRecord, messages: list[StoredMessage],
                            destination: QueueRecord | None, by: str) -> int:
        """Move these messages of `source` (the console's selection) to `destination`, or
        each to the queue it was dead-lettered from, as fresh visible messages, as a move
        task moves them; not an SQS action, so no client reaches it. Those received since
        they were looked at stay. How many moved, logged with `by` (who asked)."""
        moves: list[tuple[int, int]] = []
        ready: dict[int, QueueRecord] = {}
        sources: dict[str, QueueRecord | None] = {}  # a source queue looked up once
        for m in messages:
            target = destination
            if target is None:
                source_arn = m.dlq_source_arn or ""
                if source_arn not in sources:
                    arn = parse_arn(source_arn)
                    sources[source_arn] = (await self.store.get_queue(arn.region, arn.name)
                                           if arn else None)
                target = sources[source_arn]
                if target is None:
                    raise InvalidParameterValue(
                        f"Message {m.message_id} came from no queue that exists: choose a "
                        "destination.")
            if not rules.may_move(source.id, target.id) or target.fifo != source.fifo:
                raise InvalidParameterValue(
                    f"Message {m.message_id} cannot move to {target.name}: a destination "
                    "must differ from the queue and be of its type (standard or FIFO).")
            moves.append((m.seq, target.id))
            ready[target.id] = target
        moved = await self.store.move(source, moves, self.clock.now_ms()) if moves else 0
        for target in ready.values():
            self.on_ready(target, moved)
        self.log.info("moved %d selected message(s) of %s for %s", moved, source.name, by,
                      extra={"queue": source.name, "access_key": by})
        return moved

    async def _destination(self, ctx: RequestContext, source: QueueRecord, task: MoveTaskRecord,
                           source_arn: str | None) -> QueueRecord | None:
        if task.destination_queue_id is not None:
            return await self.store.get_queue_by_id(task.destination_queue_id)
        arn = parse_arn(source_arn or "")
        if arn is None:
            return None
        return await self.store.get_queue(arn.region, arn.name)

    async def _queue_by_arn(self, ctx: RequestContext, value: str, name: str) -> QueueRecord:
        arn = parse_arn(value)
        if arn is None or arn.account_id != ctx.account_id:
            raise invalid_value(value, name, "Invalid queue ARN.")
        queue = await self.store.get_queue(arn.region, arn.name)
        if queue is None:
            raise ResourceNotFoundException("The resource that you specified for the "
                                            f"{name} parameter doesn't exist.")
        return queue

    async def _task(self, ctx: RequestContext, handle: str) -> MoveTaskRecord:
        """The task a handle names. As AWS answers (LocalStack's recordings of AWS,
        test_sqs_move_task.snapshot.json): a handle that is not one is
        InvalidParameterValue, one whose source queue does not exist (in this account)
        names the SourceArn, an unknown task of a queue that does is "Task does not
        exist." (ResourceNotFoundException, 404)."""
        try:
            decoded = orjson.loads(base64.b64decode(handle, validate=True))
            source_arn, task_id = decoded["sourceArn"], decoded["taskId"]
            if not isinstance(source_arn, str) or not isinstance(task_id, str):
                raise TypeError(source_arn)
        except (ValueError, KeyError, TypeError):
            raise InvalidParameterValue("Value for parameter TaskHandle is invalid.") from None
        arn = parse_arn(source_arn)
        source = None
        if arn is not None and arn.account_id == ctx.account_id:
            source = await self.store.get_queue(arn.region, arn.name)
        if source is None:
            raise ResourceNotFoundException(
                "The resource that you specified for the SourceArn parameter doesn't exist.")
        for task in await self.store.move_tasks(source.id):
            if task.handle == handle:
                return task
        raise ResourceNotFoundException("Task does not exist.")


def move_budget(task: MoveTaskRecord, now_ms: int, max_rate: int) -> int:
    """How many messages the task may move now. With MaxNumberOfMessagesPerSecond, one at
    once, then that many per second since the task started, counting what it moved (so a
    rate below 1 / MOVE_STEP_S is honoured too: AWS's rate 1 moves 4 messages in no less
    than 3 s, LocalStack's AWS-validated test_move_task_with_throughput_limit); without,
    the system's rate per step."""
    if not task.max_per_second:
        return max(1, int(max_rate * MOVE_STEP_S))
    elapsed_s = max(0, now_ms - task.started_ms) / 1000
    allowed = 1 + int(task.max_per_second * elapsed_s)
    return min(allowed - task.moved, max(1, int(task.max_per_second * MOVE_STEP_S)))


def _task_out(task: MoveTaskRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Status": task.status,
        "SourceArn": task.extra["SourceArn"],
        "ApproximateNumberOfMessagesMoved": task.moved,
        "ApproximateNumberOfMessagesToMove": task.to_move,
        "StartedTimestamp": task.started_ms,
    }
    if task.status == "RUNNING":
        out["TaskHandle"] = task.handle
    if task.extra.get("DestinationArn"):
        out["DestinationArn"] = task.extra["DestinationArn"]
    if task.max_per_second:
        out["MaxNumberOfMessagesPerSecond"] = task.max_per_second
    if task.failure:
        out["FailureReason"] = task.failure
    return out


def dead_letter_arn(queue: QueueRecord) -> str | None:
    """The ARN a queue's RedrivePolicy sends dead letters to, if it has one."""
    text = queue.attributes.get("RedrivePolicy")
    return orjson.loads(text).get("deadLetterTargetArn") if text else None


def _parse_allow_policy(text: str) -> dict[str, Any]:
    policy = orjson.loads(text)
    permission = policy.get("redrivePermission")
    if permission not in ("allowAll", "denyAll", "byQueue"):
        raise invalid_value(text, "RedriveAllowPolicy",
                            "redrivePermission must be allowAll, denyAll or byQueue.")
    arns = policy.get("sourceQueueArns")
    if permission == "byQueue":
        if not isinstance(arns, list) or not 1 <= len(arns) <= 10:
            raise invalid_value(text, "RedriveAllowPolicy",
                                "byQueue needs sourceQueueArns with 1 to 10 queue ARNs.")
    elif arns:
        raise invalid_value(text, "RedriveAllowPolicy",
                            "sourceQueueArns is only allowed with redrivePermission byQueue.")
    return policy


def _allows(dlq: QueueRecord, source_arn: str) -> bool:
    text = dlq.attributes.get("RedriveAllowPolicy")
    if not text:
        return True
    policy = orjson.loads(text)
    permission = policy.get("redrivePermission")
    if permission == "denyAll":
        return False
    if permission == "byQueue":
        return source_arn in policy.get("sourceQueueArns", [])
    return True
