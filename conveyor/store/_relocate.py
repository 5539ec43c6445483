"""Moving a queue from one shard to another while nodes serve it, losing nothing.

The steps, each safe to run again (a move cut short, by a kill or a shard's outage, is
finished by running the tool again; the catalog remembers the shard it came from):

1. the queue is made on the target shard, with its id, attributes and tags, and its move
   tasks copied there;
2. the catalog serves it from the target (moving_from: the source); nodes that look it up
   from now on go there, nodes that knew it keep using the source until step 4;
3. its messages are copied to the target a batch at a time, each batch committed there
   before it is deleted from the source, in the transaction that locks it there (a kill
   in between leaves a batch on both: delivered twice, never lost); messages in flight
   keep their receive count and visibility (a receipt given out before is refused by the
   target: the message is delivered again when its visibility ends);
4. the source's row of the queue is deleted: sends from nodes that still route there are
   refused from then on (PostgresStore.fenced) and go to the target;
5. what was sent to the source before that is copied too, until it holds none;
6. the rest of the source's records of the queue (its charts' minutes are copied first,
   its deduplication ids are not) are deleted, and the catalog forgets the source.

While it runs both shards serve the queue: a FIFO queue's messages sent meanwhile may be
delivered before older ones of their group still on the source. Move FIFO queues while
their producers pause, when their order matters.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from conveyor.store._placement import Catalog, Placement
from conveyor.store.base import (
    ACTIVITY_SPANS_MIN,
    ActivityRow,
    QueueEnding,
    QueueRecord,
    StoreError,
)
from conveyor.store.postgres import PostgresStore
from conveyor.store.shards import ShardedStore

log = logging.getLogger(__name__)

BATCH = 500  # messages per copy: one transaction on each shard
SETTLE_S = 0.2  # a message a receive holds locked is looked at again this much later


async def relocate(store: ShardedStore, region: str, name: str, to: str,
                   now_s: int) -> int:
    """Move the queue to shard `to` (steps above); how many messages were copied."""
    if to not in store.shards:
        raise StoreError(f"no shard named {to}; the shards are {', '.join(store.shards)}")
    placement = await store.look_up(region, name)
    if placement is None:
        raise StoreError(f"no queue {name} in {region}")
    source_name = placement.moving_from or placement.shard
    if placement.moving_from and placement.shard != to:
        raise StoreError(f"{name} is being moved to {placement.shard}; finish that first "
                         f"(move it to {placement.shard} again)")
    if source_name == to:
        return 0
    source, target = store.shards[source_name], store.shards[to]
    queue = await source.get_queue(region, name) or await target.get_queue(region, name)
    if queue is None or queue.id != placement.queue_id:
        raise StoreError(f"{name}: its shard {source_name} does not hold it")
    await _open_on(target, queue, await source.move_tasks(queue.id))
    async with store.catalog.transaction() as db:
        await Catalog.serve_from(db, queue.id, to, source_name)
    store.learn([dataclasses.replace(placement, shard=to, moving_from=source_name)])
    log.info("moving queue %s (%s) from shard %s to %s", name, region, source_name, to,
             extra={"queue": name})
    copied = await _copy_all(source, target, queue)
    await source.fence(queue.id)
    copied += await _copy_all(source, target, queue)
    for span_min in ACTIVITY_SPANS_MIN:  # the queue's charts go with it
        rows = await source.activity([queue.id], span_min, 0)
        await target.add_activity([ActivityRow(*row) for row in rows], [])
    await source.delete_queue(queue, now_s, QueueEnding(), note_deleted=False)
    async with store.catalog.transaction() as db:
        await Catalog.serve_from(db, queue.id, to, None)
    store.learn([Placement(queue.id, region, name, to)])
    log.info("moved queue %s (%s) to shard %s: %d message(s) copied", name, region, to,
             copied, extra={"queue": name})
    return copied


async def _open_on(target: PostgresStore, queue: QueueRecord, tasks: list) -> None:
    """The queue on the target shard as it is on the source (step 1)."""
    made = await target.create_queue(queue.region, queue.name, queue.attributes, queue.tags,
                                     queue.created_s, queue_id=queue.id)
    if made.id != queue.id:
        raise StoreError(f"shard holds another queue named {queue.name} (id {made.id})")
    await target.update_queue(queue)  # its times as they were
    for task in tasks:
        await target.save_move_task(task)


async def _copy_all(source: PostgresStore, target: PostgresStore, queue: QueueRecord) -> int:
    """Copy the queue's messages from the source, then delete them there, until it holds
    none (a message a receive holds locked is skipped, then looked at again)."""
    copied = 0
    while True:
        async with source.take(queue, BATCH) as taken:
            if taken.messages:
                if not await target.put(queue.id, taken.messages):
                    raise StoreError(f"{queue.name} was deleted during its move")
                await taken.remove()
                copied += len(taken.messages)
                continue
        if not sum((await source.tally(queue, 0, -1)).values()):
            return copied
        await asyncio.sleep(SETTLE_S)
