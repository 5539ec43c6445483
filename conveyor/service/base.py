"""State and helpers every action shares: the store, limits, clock and queue lookup."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import orjson

from conveyor.clock import Clock
from conveyor.service import activity as figures
from conveyor.service import rules, validate
from conveyor.service.activity import MINUTE_MS, Activity, History, Range
from conveyor.service.context import RequestContext
from conveyor.service.signins import SignInThrottle
from conveyor.service.tenants import HeldBack
from conveyor.sqs.errors import InvalidParameterValue, QueueDoesNotExist
from conveyor.sqs.limits import Limits
from conveyor.store.base import (
    ActivityTuple,
    Counts,
    QueueRecord,
    Store,
    StoreError,
    StoreUnavailable,
)

# With several nodes on one store, another node's change to a queue shows within this.
QUEUE_CACHE_SHARED_S = 1.0

class Wakeups:
    """Where the service says that parked long polls should look again; the server sets
    its long-poll waiters (server/waiters.py) here. Does nothing by default."""

    def notify(self, queue_id: int, count: int) -> None:
        """`count` messages of the queue became receivable."""

    def notify_later(self, queue_id: int, seconds: float) -> None:
        """A message of the queue becomes receivable in `seconds`."""

    def notify_all(self) -> None:
        """Anything may have become receivable anywhere."""

    def wake_worker(self, worker_id: str) -> None:
        """A drain was asked of this worker: its parked long polls should answer."""


class ServiceBase:
    def __init__(self, store: Store, limits: Limits, clock: Clock | None = None,
                 account_id: str = "000000000000",
                 queue_cache_s: float | None = None) -> None:
        self.store = store
        self.limits = limits
        self.clock = clock or Clock()
        self.account_id = account_id
        self.log = logging.getLogger("conveyor.service")
        self.wakeups = Wakeups()
        self.sign_ins = SignInThrottle(store, self.clock)  # the console's failed sign-ins
        self.activity = Activity()  # what each queue did, for the charts (activity.py)
        self._activity_pruned_minute = 0
        self.held_back = HeldBack()  # receives each tenant limit held back (tenants.py)
        # Word from other nodes sharing the store goes to this node's parked long polls.
        store.on_remote_ready = lambda queue_id, count: self.wakeups.notify(queue_id, count)
        store.on_remote_missed = lambda: self.wakeups.notify_all()
        store.on_remote_drain = lambda worker_id: self.wakeups.wake_worker(worker_id)
        self._announcing: set[asyncio.Task[None]] = set()
        self.follow_store_clock()
        if queue_cache_s is None:
            queue_cache_s = QUEUE_CACHE_SHARED_S if store.shared else float("inf")
        # Queue records are read on every call; cache them. A single node invalidates on
        # each change; shared stores pass a short `queue_cache_s`.
        self._queue_cache_s = queue_cache_s
        self._queues: dict[tuple[str, str], tuple[QueueRecord, float]] = {}
        # FIFO ReceiveRequestAttemptId replays: (queue id, attempt id) → (until ms, result),
        # and which attempt returned each message, to end a replay once one is touched.
        self._attempts: dict[tuple[int, str], tuple[int, dict[str, Any]]] = {}
        self._attempt_of: dict[tuple[int, int], tuple[int, str]] = {}
        self._action_cache: dict[str, Any] = {}
        self._names: dict[str, str | None] = {}  # queue URL or name → queue name

    @property
    def shared(self) -> bool:
        """Whether other nodes share this node's store (PostgreSQL)."""
        return self.store.shared

    async def queue(self, ctx: RequestContext, url_or_name: str) -> QueueRecord:
        """Find a queue by URL (any host) or bare name, in the caller's region."""
        name = self._names.get(url_or_name, "")
        if name == "":
            name = queue_name_from(url_or_name, ctx.account_id)
            if len(self._names) > 10_000:
                self._names.clear()
            self._names[url_or_name] = name
        key = (ctx.region, name or "")
        cached = self._queues.get(key)
        if cached and self.clock.monotonic_s() - cached[1] < self._queue_cache_s:
            return cached[0]
        queue = await self.store.get_queue(ctx.region, name) if name else None
        if queue is None:
            raise QueueDoesNotExist()
        self._queues[key] = (queue, self.clock.monotonic_s())
        return queue

    def paginate(self, names: list[str], req: dict[str, Any], key: str,
                 to_url: Callable[[str], str]) -> dict[str, Any]:
        """SQS pagination: NextToken only when MaxResults was given and more remain."""
        max_results = req.get("MaxResults")
        start = 0
        if req.get("NextToken"):
            start = _decode_token(req["NextToken"])
        page_size = max_results or self.limits.max_list_queues
        page = names[start:start + page_size]
        result: dict[str, Any] = {}
        if page:
            result[key] = [to_url(n) for n in page]
        if max_results and start + page_size < len(names):
            result["NextToken"] = base64.urlsafe_b64encode(
                orjson.dumps({"offset": start + page_size})).decode()
        return result

    async def counts(self, queue: QueueRecord, now_ms: int | None = None) -> Counts:
        """The queue's visible, in-flight and delayed messages (at `now_ms`, or now)."""
        if now_ms is None:
            now_ms = self.clock.now_ms()
        return rules.counts(await self.store.tally(queue, now_ms,
                                                   rules.retention_cutoff_ms(queue, now_ms)))

    def counted(self, queue: QueueRecord, kind: int, n: int, now_ms: int | None = None) -> None:
        """`n` messages of the queue were sent / received / deleted (activity.py)."""
        if n:
            self.activity.count(queue.id, queue.region, queue.name, kind, n,
                                self.clock.now_ms() if now_ms is None else now_ms)

    async def histories(self, queue_ids: list[int], range_: Range = figures.HOUR
                        ) -> dict[int, History | None]:
        """Each queue's figures over `range_`, for the console's charts: the store's (every
        node's, on PostgreSQL) and this node's not yet saved (activity.py)."""
        now_ms = self.clock.now_ms()
        first = range_.first_minute(now_ms // MINUTE_MS)
        stored: dict[int, list[ActivityTuple]] = {i: [] for i in queue_ids}
        for row in await self.store.activity(queue_ids, range_.span_min, first):
            stored[row[0]].append(row)
        unsaved = self.activity.unsaved(set(queue_ids))
        return {i: figures.history(range_, stored[i], unsaved.get(i, []), now_ms)
                for i in queue_ids}

    async def save_activity(self) -> None:
        """Add this node's new counts to the store's (the server does so every few
        seconds), and once a minute forget the buckets older than their charts' range."""
        unsaved = self.activity.take_unsaved()
        minute = self.clock.now_ms() // MINUTE_MS
        prune = figures.prunes(minute) if minute != self._activity_pruned_minute else []
        if not unsaved and not prune:
            return
        try:
            await self.store.add_activity(figures.buckets(unsaved), prune)
        except StoreError:
            self.activity.give_back(unsaved, self.clock.now_ms())
            raise
        if prune:
            self._activity_pruned_minute = minute

    async def sample_oldest_ages(self, limit: int) -> None:
        """Note the age of the oldest message waiting in each of the `limit` most recently
        active queues (the server does so once a minute, for the console's charts)."""
        for queue_id in self.activity.active(limit):
            queue = await self.store.get_queue_by_id(queue_id)
            if queue is None:
                self.activity.forget(queue_id)
            else:
                await self.sample_oldest_age(queue)

    async def sample_oldest_age(self, queue: QueueRecord) -> None:
        """Note the age of the queue's oldest message waiting to be received (the first
        that a move would take), if the queue is one whose activity is kept."""
        if not self.activity.tracks(queue.id):
            return
        now_ms = self.clock.now_ms()
        oldest = await self.store.movable(queue, 1, now_ms,
                                          rules.retention_cutoff_ms(queue, now_ms))
        self.activity.sample_oldest(
            queue.id, (now_ms - oldest[0].sent_ms) // 1000 if oldest else 0, now_ms)

    def on_ready(self, queue: QueueRecord, count: int) -> None:
        """`count` messages of the queue became receivable: wake this node's long polls,
        and other nodes' ones through a shared store."""
        self.wakeups.notify(queue.id, count)
        if self.store.shared:
            task = asyncio.get_running_loop().create_task(self.store.announce(queue.id, count))
            self._announcing.add(task)
            task.add_done_callback(self._announced)

    def on_drain(self, worker_id: str) -> None:
        """A drain was asked of the worker: wake its long polls parked on this node, and
        on other nodes through a shared store (a drain waits for no poll to end)."""
        self.wakeups.wake_worker(worker_id)
        if self.store.shared:
            task = asyncio.get_running_loop().create_task(self.store.announce_drain(worker_id))
            self._announcing.add(task)
            task.add_done_callback(self._announced)

    def _announced(self, task: asyncio.Task[None]) -> None:
        self._announcing.discard(task)
        error = None if task.cancelled() else task.exception()
        # Unavailable: the store logs the outage, and the other nodes, who lost their
        # notifications too, wake all their long polls once it is over.
        if error is not None and not isinstance(error, StoreUnavailable):
            self.log.warning("could not announce to other nodes: %s", error)

    def on_later(self, queue: QueueRecord, seconds: float) -> None:
        """A message of the queue becomes receivable in `seconds` (parked long polls planned
        their sleep without it)."""
        self.wakeups.notify_later(queue.id, seconds)

    def follow_store_clock(self) -> None:
        """Keep a shared store's time: every node then stamps and compares the same."""
        self.clock.skew_ms = self.store.clock_skew_ms

    def unready(self) -> str | None:
        """Why this node cannot serve requests now (its store is unreachable), else None."""
        return self.store.outage()

    def store_figures(self) -> tuple[dict[str, tuple[str, float]], dict[str, tuple[str, float]]]:
        """The store's own gauges and counters, for /metrics."""
        return self.store.gauges(), self.store.counters()

    def forget(self, queue: QueueRecord) -> None:
        self._queues.pop((queue.region, queue.name), None)


def queue_name_from(url_or_name: str, account_id: str) -> str | None:
    """`http://host/<account>/<name>` or `<name>` → name; None when it cannot name a queue
    (then it is never looked up: PostgreSQL, for one, cannot even compare a NUL)."""
    if "/" not in url_or_name:
        name = url_or_name
    else:
        try:
            path = urlsplit(url_or_name).path if "://" in url_or_name else url_or_name
        except ValueError:  # e.g. `http://[`: an unclosed IPv6 host
            return None
        parts = [p for p in path.split("/") if p]
        if len(parts) != 2 or parts[0] != account_id:
            return None
        name = parts[1]
    return name if name and validate.plain_name(name) else None


def _decode_token(token: str) -> int:
    try:
        offset = orjson.loads(base64.urlsafe_b64decode(token.encode()))["offset"]
    except (ValueError, KeyError, TypeError):
        raise InvalidParameterValue("Invalid NextToken value.") from None
    if not isinstance(offset, int) or offset < 0:
        raise InvalidParameterValue("Invalid NextToken value.")
    return offset
