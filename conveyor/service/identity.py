"""A queue's identity is its own (DESIGN.md, invariant 6): what ends with a queue.

A queue's id is never handed out again (SQLite: AUTOINCREMENT; PostgreSQL: a sequence),
and DeleteQueue ends every record keyed by the queue, so that a queue created later, under
its name or any other, starts empty in every respect. The rule is here, once:
`ending_of` decides what ends beside the rows keyed by the queue's id, the store ends all
of it in the transaction that deletes the queue (Store.delete_queue), and `forget_queue`
drops what this node keeps of it in memory.

RECORDS lists every kind of record a store keeps and what a queue's deletion does to it;
each store's TABLE_KINDS maps its tables to these kinds. tests/store/test_identity.py
reads both stores' schemas and fails for a table, or a lease-name kind of
conveyor/lease_names.py, that is not accounted for here.

Move tasks follow AWS where it is recorded: a task whose destination is deleted while it
runs fails with FailureReason AWS.SimpleQueueService.NonExistentQueue (LocalStack's
recording of AWS, test_move_task_delete_destination_queue_while_running). A deleted
source queue's tasks go with it (ListMessageMoveTasks of a missing queue is
ResourceNotFoundException; a new queue of the name lists none of them).
"""

from __future__ import annotations

from mypy_extensions import trait

from conveyor import lease_names
from conveyor.service.workers import WorkerActions
from conveyor.sqs.errors import QueueDoesNotExist
from conveyor.store.base import QueueEnding, QueueRecord

# Every kind of record a store keeps that is keyed by a queue, and how its deletion ends it.
ENDED = {
    "queue": "its row, with its attributes, tags and Policy (AddPermission's grants)",
    "messages": "its messages; moves and dead letters into it meanwhile are refused",
    "dedup": "its FIFO deduplication ids",
    "rates": "its receive-rate buckets, its own and its groups'",
    "move_tasks": "its own tasks; other queues' running tasks into it FAILED, as AWS does",
    "activity": "its charts' figures (buckets of each range)",
    "leases": "the lease records named after it (lease_names.of_queue), its workers' drains",
    "workers": "the announcements of its workers and autoscalers",
}
# Every other kind of record a store keeps, and why a queue's deletion leaves it.
KEPT = {
    "deleted_queues": "the deletion itself: when the name went, for QueueDeletedRecently",
    "meta": "the store's own bookkeeping (schema version, journal generation)",
    "sign_ins": "the console's failed sign-ins, per access key and address: no queue's",
}
RECORDS = {**ENDED, **KEPT}


@trait  # one of Service's parts (setup.py: mypyc compiles them as traits)
class QueueEndings(WorkerActions):
    async def end_queue(self, queue: QueueRecord) -> None:
        """Delete the queue with every record keyed by it, here and in the store."""
        ending = await self.ending_of(queue)
        await self.store.delete_queue(queue, self.clock.now_s(), ending)
        self.forget_queue(queue)
        self.log.info("deleted queue %s in %s, with %d move task(s) into it failed, %d "
                      "worker announcement(s) and its lease records", queue.name, queue.region,
                      len(ending.failed_tasks), len(ending.worker_ids),
                      extra={"queue": queue.name})

    async def ending_of(self, queue: QueueRecord) -> QueueEnding:
        """What the queue's deletion ends beside the rows keyed by its id."""
        names, prefixes = lease_names.of_queue(queue.name)
        workers = [w.worker_id for w in await self.live_workers()
                   if (w.region, w.queue) == (queue.region, queue.name)]
        names += [lease_names.drain(w) for w in workers]
        failed = []
        for task in await self.store.move_tasks(None):
            if (task.status == "RUNNING" and task.destination_queue_id == queue.id
                    and task.source_queue_id != queue.id):
                task.status, task.failure = "FAILED", QueueDoesNotExist.query_code
                failed.append(task)
        return QueueEnding(names, prefixes, workers, failed)

    def forget_queue(self, queue: QueueRecord) -> None:
        """Drop what this node keeps of a deleted queue, and answer its parked long polls
        (QueueDoesNotExist)."""
        self.forget(queue)
        self.activity.forget(queue.id)
        for attempt in [k for k in self._attempts if k[0] == queue.id]:
            del self._attempts[attempt]
        for message in [k for k in self._attempt_of if k[0] == queue.id]:
            del self._attempt_of[message]
        self.on_ready(queue, 1 << 30)
