"""What each queue did, a bucket of time at a time, kept in the store for the console's charts.

The service counts, where each happens (once, whoever called: an SQS client, the console
or a worker): messages sent, received and deleted, dead letters arrived (counted in the
dead-letter queue that took them) and failed attempts (a worker's RecordAttempts, counted
in the queue it works on); once a minute the server samples the age of each active queue's
oldest message waiting to be received.

Each node keeps what it counted since its last save, a row per (queue, minute), and hands
it to the store every few seconds (`take_unsaved`; SQLite and PostgreSQL alike), where
each minute adds up into one bucket of each chart range (RANGES): minutes for the last
hour, 10 minutes for the last day, hours for the last 7 days. Older buckets are pruned, so
a queue keeps at most 61 + 145 + 169 rows, and a chart reads one row per point whatever
its range. Every node draws the charts from the store plus what it has not saved yet
(`unsaved`), so on PostgreSQL all nodes agree; /metrics exports each node's own running
totals (`totals`): Prometheus adds them. Memory is bounded: at most MAX_QUEUES queues'
totals (the least recently active is forgotten first) and at most an hour of unsaved rows.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from conveyor.store.base import ACTIVITY_SPANS_MIN, ActivityRow, ActivityTuple

SENT, RECEIVED, DELETED, DEAD_LETTERED, FAILED = range(5)
KINDS = ("sent", "received", "deleted", "dead_lettered", "failed")
MINUTE_MS = 60_000
KEPT_UNSAVED_MIN = 60  # rows a store outage leaves unsaved are kept this long, no longer
MAX_QUEUES = 5_000  # queues whose totals a node keeps: a few hundred kB
NOT_SAMPLED = -1


@dataclass(frozen=True, slots=True)
class Range:
    """A chart's range: `points` full buckets of `span_min` minutes, then the current one."""

    name: str  # as the console's `?range=` names it
    title: str
    span_min: int
    points: int

    def first_minute(self, now_minute: int) -> int:
        """The first minute of the range's first bucket, at `now_minute`."""
        return (now_minute // self.span_min - self.points) * self.span_min


# Points a chart can show legibly (60-170), a row each: the 24 h chart is not 1,440 minutes.
RANGES = {r.name: r for r in (Range("1h", "the last hour", 1, 60),
                              Range("24h", "the last 24 hours", 10, 144),
                              Range("7d", "the last 7 days", 60, 168))}
HOUR = RANGES["1h"]
assert {r.span_min for r in RANGES.values()} == set(ACTIVITY_SPANS_MIN)  # what stores copy

# A node's unsaved minute: (queue id, minute, sent, received, deleted, dead-lettered,
# failed, oldest age s or None).
MinuteRow = tuple[int, int, int, int, int, int, int, int | None]


@dataclass(slots=True)
class History:
    """One queue's figures over a range, a bucket a point, the oldest first; the last point
    is the current bucket, still being counted."""

    range: Range
    first_minute: int
    counts: dict[str, list[int]]  # each kind's count per bucket
    oldest_s: list[int | None]  # the oldest waiting message's age (the most sampled)

    def start_ms(self, i: int) -> int:
        """When bucket `i` began."""
        return (self.first_minute + i * self.range.span_min) * MINUTE_MS

    def total(self, kind: str) -> int:
        """The kind's count over the whole range, the current bucket too."""
        return sum(self.counts[kind])


def history(range_: Range, stored: list[ActivityTuple], unsaved: list[MinuteRow],
            now_ms: int) -> History | None:
    """A queue's `range_` from the store's rows of its span and this node's unsaved
    minutes; None when neither has anything in the range."""
    span = range_.span_min
    first = range_.first_minute(now_ms // MINUTE_MS)
    size = range_.points + 1
    sent, received, deleted, dead, failed = counts = [[0] * size for _ in KINDS]
    oldest: list[int | None] = [None] * size
    found = False
    # Indexes, not names: an overview reads some 17,000 rows (100 queues, 7 days).
    for row in (*stored, *((0, 1, *r[1:]) for r in unsaved)):
        i = (row[2] - first) // span
        if not 0 <= i < size:
            continue
        found = True
        sent[i] += row[3]
        received[i] += row[4]
        deleted[i] += row[5]
        dead[i] += row[6]
        failed[i] += row[7]
        if row[8] is not None:
            oldest[i] = max(row[8], oldest[i] or 0)
    if not found:
        return None
    return History(range_, first, dict(zip(KINDS, counts, strict=True)), oldest)


def buckets(rows: list[MinuteRow]) -> list[ActivityRow]:
    """Minutes as the store keeps them: added up into each range's buckets."""
    out: dict[tuple[int, int, int], list[int]] = {}
    for queue_id, minute, *values, age in rows:
        for range_ in RANGES.values():
            key = (queue_id, range_.span_min, minute // range_.span_min * range_.span_min)
            kept = out.setdefault(key, [0] * len(KINDS) + [NOT_SAMPLED])
            for kind, n in enumerate(values):
                kept[kind] += n  # type: ignore[operator]
            if age is not None:
                kept[-1] = max(kept[-1], age)
    return [ActivityRow._make((*key, *values[:-1],
                               None if values[-1] == NOT_SAMPLED else values[-1]))
            for key, values in out.items()]


def prunes(now_minute: int) -> list[tuple[int, int]]:
    """(span, first minute kept) of each range: the store forgets the buckets before."""
    return [(r.span_min, r.first_minute(now_minute)) for r in RANGES.values()]


@dataclass(slots=True)
class Series:
    """A queue this node counted: its name, for /metrics, and its totals of each kind."""

    region: str
    name: str
    totals: list[int] = field(default_factory=lambda: [0] * len(KINDS))


class Activity:
    """A node's counting: running totals per queue, and the minutes not yet saved."""

    def __init__(self, max_queues: int = MAX_QUEUES) -> None:
        self.max_queues = max_queues
        self._series: OrderedDict[int, Series] = OrderedDict()  # least recently active first
        # (queue id, minute) -> [each kind's count..., oldest age or NOT_SAMPLED]
        self._unsaved: dict[tuple[int, int], list[int]] = {}

    def count(self, queue_id: int, region: str, name: str, kind: int, n: int,
              now_ms: int) -> None:
        """`n` messages of the queue were sent / received / ... (`kind`) at `now_ms`."""
        if n <= 0:
            return
        self._touch(queue_id, region, name).totals[kind] += n
        self._unsaved_minute(queue_id, now_ms // MINUTE_MS)[kind] += n

    def sample_oldest(self, queue_id: int, age_s: int, now_ms: int) -> None:
        """The queue's oldest waiting message is `age_s` old (0: none waits)."""
        if queue_id in self._series:
            self._unsaved_minute(queue_id, now_ms // MINUTE_MS)[-1] = max(0, age_s)

    def _unsaved_minute(self, queue_id: int, minute: int) -> list[int]:
        found = self._unsaved.get((queue_id, minute))
        if found is None:
            found = self._unsaved[queue_id, minute] = [0] * len(KINDS) + [NOT_SAMPLED]
        return found

    def take_unsaved(self) -> list[MinuteRow]:
        """The counts (and samples) not yet handed to the store, forgotten here."""
        taken, self._unsaved = self._unsaved, {}
        return [_minute_row(key, values) for key, values in taken.items()]

    def give_back(self, rows: list[MinuteRow], now_ms: int) -> None:
        """Rows the store could not take: kept for the next try, the last
        KEPT_UNSAVED_MIN minutes of them (so a long outage costs memory only so far)."""
        first_minute = now_ms // MINUTE_MS - KEPT_UNSAVED_MIN + 1
        for queue_id, minute, *counts, age in rows:
            if minute < first_minute:
                continue
            mine = self._unsaved_minute(queue_id, minute)
            for kind, n in enumerate(counts):
                mine[kind] += n  # type: ignore[operator]
            if age is not None:
                mine[-1] = max(mine[-1], age)

    def unsaved(self, queue_ids: set[int]) -> dict[int, list[MinuteRow]]:
        """This node's minutes of these queues that the store does not hold yet."""
        out: dict[int, list[MinuteRow]] = {}
        for key, values in self._unsaved.items():
            if key[0] in queue_ids:
                out.setdefault(key[0], []).append(_minute_row(key, values))
        return out

    def active(self, limit: int) -> list[int]:
        """The ids of the `limit` most recently active queues, the most recent first."""
        out: list[int] = []
        for queue_id in reversed(self._series):
            if len(out) == limit:
                break
            out.append(queue_id)
        return out

    def tracks(self, queue_id: int) -> bool:
        return queue_id in self._series

    def forget(self, queue_id: int) -> None:
        """Drop the queue's totals and its minutes not yet saved."""
        self._series.pop(queue_id, None)
        for key in [k for k in self._unsaved if k[0] == queue_id]:
            del self._unsaved[key]

    def totals(self) -> list[tuple[str, str, list[int]]]:
        """(region, name, a count of each kind) since this node began counting each."""
        return [(s.region, s.name, list(s.totals)) for s in self._series.values()]

    def _touch(self, queue_id: int, region: str, name: str) -> Series:
        series = self._series.get(queue_id)
        if series is None:
            series = self._series[queue_id] = Series(region, name)
            if len(self._series) > self.max_queues:
                self._series.popitem(last=False)
        else:
            self._series.move_to_end(queue_id)
        return series


def _minute_row(key: tuple[int, int], values: list[int]) -> MinuteRow:
    *counts, age = values
    return (*key, *counts, None if age == NOT_SAMPLED else age)  # type: ignore[return-value]
