"""Several PostgreSQL primaries: each queue on one shard, every node serving every queue.

One primary takes only so many writes. A sharded store spreads queues over several
independent PostgreSQL databases (shards), each a PostgresStore of its own (its pool, its
LISTEN connection, its failover), and routes every call to the shard of its queue. Where
each queue lives is recorded in the catalog on the first shard (_placement.py, which
also holds the rule that places a new queue). What spans queues is merged: ListQueues,
the console's lists and /metrics list every reachable shard's queues; the retention
sweep, the charts' counts and move tasks go to each queue's shard. What belongs to no
queue (leases, workers' announcements, the console's sign-in failures, the node-wide
locks of `exclusive`) lives on the catalog shard.

A dead-letter queue and its sources may live on different shards. Dead-lettering on
receive and move tasks then copy the messages into the destination's shard, committed,
before they are deleted from the source's, inside the transaction that locks them there:
a node killed in between leaves each message in both (delivered again: at least once),
never in neither.

A shard that is down makes its own queues unavailable (StoreUnavailable: a retryable
503) and no others: lists leave its queues out meanwhile, sweeps carry on elsewhere. The
catalog shard down stops queue creation and deletion, leases and node-wide locks; queues
whose placement this node knows keep serving.

Sends are fenced on every shard (PostgresStore.fenced): a send into a queue whose row is
not on the shard, because the queue was moved away (_relocate.py), is refused there, and
this store asks the catalog where the queue is now and sends it there.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

from conveyor.store._placement import Catalog, Placement, set_up_shard, shard_for
from conveyor.store.base import (
    ActivityRow,
    ActivityTuple,
    Bucket,
    Handle,
    LeaseRecord,
    MoveTaskRecord,
    NewMessage,
    Picking,
    QueueElsewhere,
    QueueEnding,
    QueueRecord,
    SentMessage,
    StoredMessage,
    StoreError,
    StoreUnavailable,
    Tally,
)
from conveyor.store.postgres import PostgresStore

log = logging.getLogger(__name__)

T = TypeVar("T")


class ShardedStore:
    """A Store over named PostgresStores; the first named is the catalog shard. `place`
    chooses a new queue's shard (region, name, shard names): the rule, unless a test
    wants its queues elsewhere."""

    shared = True

    def __init__(self, shards: dict[str, PostgresStore],
                 place: Callable[[str, str, list[str]], str] = shard_for) -> None:
        if not shards:
            raise StoreError("a sharded store needs at least one shard")
        self.shards = shards
        self.catalog_name = next(iter(shards))
        self.catalog = shards[self.catalog_name]
        self.place = place
        self.on_remote_ready: Callable[[int, int], None] = lambda queue_id, count: None
        self.on_remote_missed: Callable[[], None] = lambda: None
        self.on_remote_drain: Callable[[str], None] = lambda worker_id: None
        self._by_id: dict[int, Placement] = {}
        self._by_name: dict[tuple[str, str], Placement] = {}

    # --- life cycle ----------------------------------------------------------------------

    async def open(self) -> ShardedStore:
        opened = await asyncio.gather(*(s.open() for s in self.shards.values()),
                                      return_exceptions=True)
        failed = [(n, e) for n, e in zip(self.shards, opened, strict=True)
                  if isinstance(e, BaseException)]
        if failed:
            await self.close()
            name, error = failed[0]
            raise StoreError(f"shard {name}: {error}") from error
        for name, shard in self.shards.items():
            shard.fenced = True
            # Word from other nodes, through any shard, goes where the service listens.
            shard.on_remote_ready = lambda queue_id, count: self.on_remote_ready(queue_id, count)
            shard.on_remote_missed = lambda: self.on_remote_missed()
            shard.on_remote_drain = lambda worker_id: self.on_remote_drain(worker_id)
            async with shard.transaction() as db:
                await set_up_shard(db, name, shard is self.catalog)
        await self._adopt()
        return self

    async def _adopt(self) -> None:
        """Record the queues found on a shard that the catalog does not place: a single
        store's queues when it becomes the catalog shard, a creation cut short."""
        async with self.catalog.transaction() as db:
            placed = {p.queue_id for p in await Catalog.all(db)}
        found = [Placement(q.id, q.region, q.name, name)
                 for name, shard in self.shards.items()
                 for q in await shard.list_queues(None, "") if q.id not in placed]
        async with self.catalog.transaction() as db:
            clashes = await Catalog.adopt(db, found)
            self.learn(await Catalog.all(db))
        for p in clashes:
            log.error("shard %s holds queue %s (id %d) whose id another queue has: it is not"
                      " served; a shard must join empty", p.shard, p.name, p.queue_id)

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.shards.values()),
                             return_exceptions=True)

    @property
    def clock_skew_ms(self) -> int:  # type: ignore[override]
        """The catalog shard's clock: times are the node's, so one reference is enough."""
        return self.catalog.clock_skew_ms

    def outage(self) -> str | None:
        """Why this node cannot serve at all: only when every shard is out (one shard out
        leaves the others' queues served)."""
        reasons = [s.outage() for s in self.shards.values()]
        if all(reasons):
            return "every shard is unreachable: " + "; ".join(
                f"{n}: {r}" for n, r in zip(self.shards, reasons, strict=True))
        return None

    def gauges(self) -> dict[str, tuple[str, float]]:
        down = sum(s.outage() is not None for s in self.shards.values())
        return {"conveyor_store_shards": ("Shards (PostgreSQL primaries) of the store.",
                                          len(self.shards)),
                "conveyor_store_shards_down": ("Shards this node cannot reach now; their "
                                               "queues answer ServiceUnavailable.", down)}

    def counters(self) -> dict[str, tuple[str, float]]:
        return {}

    # --- placement -----------------------------------------------------------------------

    def learn(self, placements: Iterable[Placement]) -> None:
        for p in placements:
            old = self._by_id.get(p.queue_id)
            if old is not None:
                self._by_name.pop((old.region, old.name), None)
            self._by_id[p.queue_id] = p
            self._by_name[(p.region, p.name)] = p

    def _forget(self, queue_id: int) -> None:
        old = self._by_id.pop(queue_id, None)
        if old is not None:
            self._by_name.pop((old.region, old.name), None)

    async def look_up(self, region: str, name: str) -> Placement | None:
        """The catalog's placement of the name, now."""
        async with self.catalog.transaction() as db:
            found = await Catalog.by_name(db, region, name)
        stale = self._by_name.get((region, name))
        if stale is not None and (found is None or found.queue_id != stale.queue_id):
            self._forget(stale.queue_id)
        if found is not None:
            self.learn([found])
        return found

    async def _look_up_id(self, queue_id: int) -> Placement | None:
        async with self.catalog.transaction() as db:
            found = await Catalog.by_id(db, queue_id)
        if found is None:
            self._forget(queue_id)
        else:
            self.learn([found])
        return found

    async def placement_of(self, queue_id: int) -> Placement | None:
        known = self._by_id.get(queue_id)
        return known if known is not None else await self._look_up_id(queue_id)

    async def home(self, queue: QueueRecord | int) -> PostgresStore:
        """The shard that serves the queue (the catalog's, for a queue it does not place:
        a call on a queue deleted meanwhile finds nothing there, as on one store)."""
        queue_id = queue if isinstance(queue, int) else queue.id
        placement = await self.placement_of(queue_id)
        return self.shards[placement.shard] if placement else self.catalog

    def shard_name(self, shard: PostgresStore) -> str:
        return next(n for n, s in self.shards.items() if s is shard)

    # --- the store's calls -----------------------------------------------------------------

    async def announce(self, queue_id: int, count: int) -> None:
        await (await self.home(queue_id)).announce(queue_id, count)

    async def announce_drain(self, worker_id: str) -> None:
        await self.catalog.announce_drain(worker_id)

    def exclusive(self, name: str) -> contextlib.AbstractAsyncContextManager[bool]:
        return self.catalog.exclusive(name)

    async def create_queue(self, region: str, name: str, attributes: dict[str, str],
                           tags: dict[str, str], now_s: int) -> QueueRecord:
        placement = await self.look_up(region, name)
        if placement is None:
            async with self.catalog.transaction() as db:
                placement = await Catalog.place(db, Placement(
                    await self.catalog.next_queue_id(), region, name,
                    self.place(region, name, list(self.shards))))
            queue_id = placement.queue_id
        else:
            shard = self.shards[placement.shard]
            existing = await shard.get_queue(region, name)
            # A placement left by a deletion cut short must not hand its id out again.
            queue_id = existing.id if existing else await self.catalog.next_queue_id()
        queue = await self.shards[placement.shard].create_queue(region, name, attributes, tags,
                                                                now_s, queue_id=queue_id)
        if queue.id != placement.queue_id:  # the shard's row is the truth of the id
            async with self.catalog.transaction() as db:
                await Catalog.renumber(db, region, name, queue.id)
        self.learn([dataclasses.replace(placement, queue_id=queue.id)])
        return queue

    async def get_queue(self, region: str, name: str) -> QueueRecord | None:
        placement = self._by_name.get((region, name)) or await self.look_up(region, name)
        if placement is None:
            return None
        queue = await self.shards[placement.shard].get_queue(region, name)
        if queue is not None and queue.id == placement.queue_id:
            return queue
        fresh = await self.look_up(region, name)  # moved, deleted, or created anew
        if fresh is None:
            return None
        queue = await self.shards[fresh.shard].get_queue(region, name)
        return queue if queue is not None and queue.id == fresh.queue_id else None

    async def get_queue_by_id(self, queue_id: int) -> QueueRecord | None:
        placement = await self.placement_of(queue_id)
        if placement is None:
            return None
        queue = await self.shards[placement.shard].get_queue_by_id(queue_id)
        if queue is not None:
            return queue
        fresh = await self._look_up_id(queue_id)  # moved since we last looked?
        if fresh is None or fresh.shard == placement.shard:
            return None
        return await self.shards[fresh.shard].get_queue_by_id(queue_id)

    async def list_queues(self, region: str | None, prefix: str) -> list[QueueRecord]:
        """Every reachable shard's queues, each where the catalog places it (a queue being
        moved is on two shards for a while), in name order."""
        listed = await self._on_each(lambda s: s.list_queues(region, prefix), merge=True)
        if any(q.id not in self._by_id for _, queues in listed for q in queues):
            with contextlib.suppress(StoreUnavailable):  # then as placed when last known
                async with self.catalog.transaction() as db:
                    self.learn(await Catalog.all(db))
        found = [q for name, queues in listed for q in queues
                 if (p := self._by_id.get(q.id)) is None or p.shard == name]
        return sorted(found, key=lambda q: q.name)

    async def update_queue(self, queue: QueueRecord) -> None:
        await (await self.home(queue)).update_queue(queue)

    async def delete_queue(self, queue: QueueRecord, now_s: int,
                           ending: QueueEnding | None = None) -> None:
        ending = ending or QueueEnding()
        home = await self.home(queue)
        mine = [t for t in ending.failed_tasks if await self.home(t.source_queue_id) is home]
        own = dataclasses.replace(ending, failed_tasks=mine)
        if home is not self.catalog:  # leases and workers are the catalog shard's
            own = QueueEnding(failed_tasks=mine)
        await home.delete_queue(queue, now_s, own)
        for task in ending.failed_tasks:
            if task not in mine:
                await (await self.home(task.source_queue_id)).save_move_task(task)
        if home is not self.catalog:
            # Nothing of the queue's is on the catalog shard: this ends only its leases
            # and its workers' announcements there.
            await self.catalog.delete_queue(queue, now_s, dataclasses.replace(
                ending, failed_tasks=[]), note_deleted=False)
        async with self.catalog.transaction() as db:
            await Catalog.remove(db, queue.id)
        self._forget(queue.id)

    async def deleted_at(self, region: str, name: str) -> int | None:
        found = await self._on_each(lambda s: s.deleted_at(region, name), merge=True)
        times = [t for _, t in found if t is not None]
        return max(times) if times else None

    # --- messages ---------------------------------------------------------------------------

    async def send(self, queue: QueueRecord, messages: list[NewMessage], now_ms: int,
                   dedup_ms: int) -> list[SentMessage]:
        home = await self.home(queue)
        try:
            return await home.send(queue, messages, now_ms, dedup_ms)
        except QueueElsewhere:
            placement = await self._look_up_id(queue.id)
            if placement is None or self.shards[placement.shard] is home:
                raise StoreUnavailable(f"queue {queue.name} was deleted or is being moved; "
                                       "try again") from None
            return await self.shards[placement.shard].send(queue, messages, now_ms, dedup_ms)

    @contextlib.asynccontextmanager
    async def claim(self, queue: QueueRecord, max_messages: int, now_ms: int, cutoff_ms: int,
                    visible_at_ms: int, picking: Picking) -> AsyncIterator[Any]:
        home = await self.home(queue)
        async with home.claim(queue, max_messages, now_ms, cutoff_ms, visible_at_ms,
                              picking) as claim:
            yield _ShardClaim(self, home, claim)

    async def take_tokens(self, queue: QueueRecord, wanted: int, now_ms: int,
                          rate: Bucket) -> tuple[int, int]:
        return await (await self.home(queue)).take_tokens(queue, wanted, now_ms, rate)

    async def delete(self, queue: QueueRecord, handles: list[Handle],
                     in_flight_after_ms: int | None = None, *,
                     any_receipt: bool = False) -> list[str]:
        return await (await self.home(queue)).delete(queue, handles, in_flight_after_ms,
                                                      any_receipt=any_receipt)

    async def drop(self, queue: QueueRecord, seqs: list[int]) -> list[int]:
        return await (await self.home(queue)).drop(queue, seqs)

    @contextlib.asynccontextmanager
    async def hold(self, queue: QueueRecord, seqs: list[int]) -> AsyncIterator[Any]:
        async with (await self.home(queue)).hold(queue, seqs) as held:
            yield held

    @contextlib.asynccontextmanager
    async def amend(self, queue: QueueRecord, seqs: list[int]) -> AsyncIterator[Any]:
        # A message dead-lettered to another shard is a copy there, under another seq: its
        # attempts recorded later are refused as no longer in the queue.
        async with (await self.home(queue)).amend(queue, seqs) as amending:
            yield amending

    async def find_message(self, queue: QueueRecord, message_id: str,
                           scan_limit: int) -> StoredMessage | None:
        return await (await self.home(queue)).find_message(queue, message_id, scan_limit)

    async def purge(self, queue: QueueRecord, now_ms: int) -> None:
        await (await self.home(queue)).purge(queue, now_ms)

    async def tally(self, queue: QueueRecord, now_ms: int, cutoff_ms: int) -> Tally:
        return await (await self.home(queue)).tally(queue, now_ms, cutoff_ms)

    async def next_visible_ms(self, queue: QueueRecord, now_ms: int) -> int | None:
        return await (await self.home(queue)).next_visible_ms(queue, now_ms)

    async def expire(self, cutoffs: dict[int, int], now_ms: int) -> int:
        by_shard: dict[str, dict[int, int]] = {name: {} for name in self.shards}
        for queue_id, cutoff in cutoffs.items():
            placement = self._by_id.get(queue_id)
            if placement is not None:
                by_shard[placement.shard][queue_id] = cutoff
        done = await self._on_each(lambda s: s.expire(by_shard[self.shard_name(s)], now_ms))
        return sum(n for _, n in done)

    async def peek(self, queue: QueueRecord, limit: int, cutoff_ms: int,
                   after: tuple[int, int] | None = None) -> list[tuple[StoredMessage, int]]:
        return await (await self.home(queue)).peek(queue, limit, cutoff_ms, after)

    # --- dead-letter move tasks ------------------------------------------------------------

    async def movable(self, queue: QueueRecord, limit: int, now_ms: int,
                      cutoff_ms: int) -> list[StoredMessage]:
        return await (await self.home(queue)).movable(queue, limit, now_ms, cutoff_ms)

    async def move(self, queue: QueueRecord, moves: list[tuple[int, int]], now_ms: int) -> int:
        """Moves within the source's shard in one statement there; each other shard's by
        copy, then delete (the module's docstring)."""
        home = await self.home(queue)
        by_shard: dict[int, list[tuple[int, int]]] = {}  # id(shard) -> moves
        shards: dict[int, PostgresStore] = {}
        for seq, destination in moves:
            target = await self.home(destination)
            by_shard.setdefault(id(target), []).append((seq, destination))
            shards[id(target)] = target
        moved = 0
        for key, some in by_shard.items():
            if shards[key] is home:
                moved += await home.move(queue, some, now_ms)
            else:
                moved += await self._move_across(home, queue, some, now_ms)
        return moved

    async def _move_across(self, home: PostgresStore, queue: QueueRecord,
                           moves: list[tuple[int, int]], now_ms: int) -> int:
        destination_of = dict(moves)
        async with home.take(queue, len(moves), now_ms, seqs=list(destination_of)) as taken:
            to: dict[int, list[StoredMessage]] = {}
            for m, _ in taken.messages:
                to.setdefault(destination_of[m.seq], []).append(m)
            gone: list[int] = []
            for destination, messages in to.items():
                # A fresh message of its destination, as PostgresStore.move makes it.
                fresh = [(dataclasses.replace(m, receive_count=0, first_receive_ms=None,
                                              receipt=None, dlq_source_arn=None), now_ms)
                         for m in messages]
                if await self.put(destination, fresh):
                    gone += [m.seq for m in messages]
            await taken.remove(gone)
        return len(gone)

    async def put(self, queue_id: int, rows: list[tuple[StoredMessage, int]]) -> bool:
        """Copy the messages into the queue on its shard, following it if it moved; False
        (nothing stored) when it no longer exists."""
        shard = await self.home(queue_id)
        if await shard.put(queue_id, rows):
            return True
        placement = await self._look_up_id(queue_id)
        if placement is None or self.shards[placement.shard] is shard:
            return False
        return await self.shards[placement.shard].put(queue_id, rows)

    async def dead_letter_origins(self, queue: QueueRecord) -> list[str]:
        return await (await self.home(queue)).dead_letter_origins(queue)

    async def save_move_task(self, task: MoveTaskRecord) -> None:
        await (await self.home(task.source_queue_id)).save_move_task(task)

    async def move_tasks(self, source_queue_id: int | None) -> list[MoveTaskRecord]:
        if source_queue_id is not None:
            return await (await self.home(source_queue_id)).move_tasks(source_queue_id)
        found = await self._on_each(lambda s: s.move_tasks(None), merge=True)
        return [task for name, tasks in found for task in tasks
                if (p := self._by_id.get(task.source_queue_id)) is None or p.shard == name]

    # --- what belongs to no queue: on the catalog shard -------------------------------------

    async def lease_acquire(self, region: str, name: str, holder: str, ttl_ms: int,
                            now_ms: int) -> LeaseRecord | None:
        return await self.catalog.lease_acquire(region, name, holder, ttl_ms, now_ms)

    async def lease_update(self, region: str, name: str, holder: str, version: int,
                           data: str, ttl_ms: int, now_ms: int) -> LeaseRecord | None:
        return await self.catalog.lease_update(region, name, holder, version, data, ttl_ms,
                                               now_ms)

    async def lease_release(self, region: str, name: str, holder: str) -> None:
        await self.catalog.lease_release(region, name, holder)

    async def lease_get(self, region: str, name: str) -> LeaseRecord | None:
        return await self.catalog.lease_get(region, name)

    async def save_worker(self, worker_id: str, record: str, now_ms: int, expires_ms: int,
                          max_workers: int) -> bool:
        return await self.catalog.save_worker(worker_id, record, now_ms, expires_ms,
                                              max_workers)

    async def workers(self, now_ms: int) -> list[tuple[str, int, str]]:
        return await self.catalog.workers(now_ms)

    async def sign_in_failures(self, subjects: list[str]) -> dict[str, tuple[int, int]]:
        return await self.catalog.sign_in_failures(subjects)

    async def count_sign_in_failure(self, subjects: list[str], now_ms: int,
                                    forget_before_ms: int) -> dict[str, tuple[int, int]]:
        return await self.catalog.count_sign_in_failure(subjects, now_ms, forget_before_ms)

    async def clear_sign_in_failures(self, subjects: list[str]) -> None:
        await self.catalog.clear_sign_in_failures(subjects)

    # --- the console's charts: each queue's minutes on its shard -----------------------------

    async def add_activity(self, rows: list[ActivityRow],
                           prune_before: list[tuple[int, int]]) -> None:
        by_shard: dict[str, list[ActivityRow]] = {name: [] for name in self.shards}
        for row in rows:
            placement = self._by_id.get(row.queue_id)
            if placement is not None:
                by_shard[placement.shard].append(row)
        await self._on_each(lambda s: s.add_activity(by_shard[self.shard_name(s)],
                                                     prune_before))

    async def activity(self, queue_ids: list[int], span_min: int, from_minute: int
                       ) -> list[ActivityTuple]:
        found = await self._on_each(lambda s: s.activity(queue_ids, span_min, from_minute),
                                    merge=True)
        return [row for name, rows in found for row in rows
                if (p := self._by_id.get(row[0])) is not None and p.shard == name]

    # --- every shard at once -------------------------------------------------------------------

    async def _on_each(self, call: Callable[[PostgresStore], Awaitable[T]],
                       merge: bool = False) -> list[tuple[str, T]]:
        """`call` on every shard at once, (shard name, result) of each that answered. A
        shard out is left out of a merge (its queues are unavailable, not gone); otherwise
        its error is raised once the others are done, as is any other error."""
        results = await asyncio.gather(*(call(s) for s in self.shards.values()),
                                       return_exceptions=True)
        done = []
        for name, result in zip(self.shards, results, strict=True):
            if isinstance(result, StoreUnavailable) and merge:
                continue
            if isinstance(result, BaseException):
                raise result
            done.append((name, result))
        return done


class _ShardClaim:
    """A shard's claim; a dead-letter queue on another shard takes copies, then the claimed
    messages go from here in the claim's own transaction (at least once)."""

    __slots__ = ("store", "home", "inner", "messages")

    def __init__(self, store: ShardedStore, home: PostgresStore, inner: Any) -> None:
        self.store, self.home, self.inner = store, home, inner
        self.messages: list[StoredMessage] = inner.messages

    @property
    def retry_ms(self) -> int | None:
        """As the shard's claim says (a rate held it back)."""
        return self.inner.retry_ms

    async def dead_letter(self, seqs: list[int], dead_letter_queue_id: int, source_arn: str,
                          now_ms: int, systems: list[str | None] | None = None) -> None:
        if await self.store.home(dead_letter_queue_id) is self.home:
            await self.inner.dead_letter(seqs, dead_letter_queue_id, source_arn, now_ms,
                                         systems)
            return
        by_seq = {m.seq: m for m in self.messages}
        # As PostgresStore's dead letter makes it (base.Claim.dead_letter says why).
        copies = [(dataclasses.replace(
            by_seq[seq], receive_count=by_seq[seq].receive_count - 1, receipt=None,
            dlq_source_arn=source_arn,
            system=systems[i] if systems is not None else by_seq[seq].system), now_ms)
            for i, seq in enumerate(seqs)]
        if await self.store.put(dead_letter_queue_id, copies):
            await self.inner.drop(seqs)
