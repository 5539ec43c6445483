"""What each queue did over the last hour, a minute at a time, kept in this node's memory.

The service counts messages sent, received and deleted where those actions happen (once,
whoever called: an SQS client or the console), and once a minute the server samples the
age of each active queue's oldest message waiting to be received. The console draws the
last hour as small charts; /metrics exports the running totals. Memory is bounded: a ring
of MINUTES slots per queue, for at most MAX_QUEUES queues (the least recently active one
is forgotten first).

With several nodes on one shared store (PostgreSQL), each node counts what it served and
hands its new counts (`take_unsaved`) to the store every few seconds, where they add up in a
small table of minutes (an hour of rows per active queue, older ones pruned); every node
draws the charts from there (`History.from_rows`), plus what it has not saved yet, so all
nodes agree. /metrics keeps exporting each node's own running totals: Prometheus adds them.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

SENT, RECEIVED, DELETED = 0, 1, 2
KINDS = ("sent", "received", "deleted")
MINUTE_MS = 60_000
MINUTES = 60  # the charts' hour
MAX_QUEUES = 5_000  # ~ 5,000 x 60 x 4 numbers: a few tens of MB at most
NOT_SAMPLED = -1


@dataclass(slots=True)
class Series:
    """One queue's ring of minutes: slot `minute % MINUTES` holds minute `stamps[slot]`."""

    region: str
    name: str
    stamps: list[int] = field(default_factory=lambda: [NOT_SAMPLED] * MINUTES)
    counts: list[list[int]] = field(default_factory=lambda: [[0] * MINUTES for _ in KINDS])
    oldest_s: list[int] = field(default_factory=lambda: [NOT_SAMPLED] * MINUTES)
    totals: list[int] = field(default_factory=lambda: [0] * len(KINDS))

    def slot(self, minute: int) -> int:
        """The slot of `minute`, emptied first if it still holds an older minute."""
        i = minute % MINUTES
        if self.stamps[i] != minute:
            self.stamps[i] = minute
            for counts in self.counts:
                counts[i] = 0
            self.oldest_s[i] = NOT_SAMPLED
        return i


@dataclass(slots=True)
class History:
    """The last MINUTES minutes of one queue, the oldest first: messages per second of each
    kind (averaged over its minute), and the oldest message's age in seconds (None where
    not sampled)."""

    per_second: dict[str, list[float]]
    oldest_s: list[int | None]

    @staticmethod
    def from_rows(rows: list[MinuteRow], now_ms: int) -> History | None:
        """The last hour from (minute, sent, received, deleted, oldest age or None) rows of
        one queue (the shared store's table); None when there are none."""
        if not rows:
            return None
        now_minute = now_ms // MINUTE_MS
        first = now_minute - MINUTES + 1
        counts = [[0] * MINUTES for _ in KINDS]
        oldest: list[int | None] = [None] * MINUTES
        for minute, sent, received, deleted, age in rows:
            i = minute - first
            if 0 <= i < MINUTES:
                for kind, n in enumerate((sent, received, deleted)):
                    counts[kind][i] += n
                if age is not None:
                    oldest[i] = age
        return History({kind: [n / 60 for n in series] for kind, series in
                        zip(KINDS, counts, strict=True)}, oldest)


# One queue's minute in a shared store: (minute, sent, received, deleted, oldest age s|None).
MinuteRow = tuple[int, int, int, int, int | None]
# New counts for a shared store: (queue id, minute, sent, received, deleted, oldest|None).
UnsavedRow = tuple[int, int, int, int, int, int | None]


class Activity:
    def __init__(self, max_queues: int = MAX_QUEUES) -> None:
        self.max_queues = max_queues
        self._series: OrderedDict[int, Series] = OrderedDict()  # least recently active first
        self.shared = False  # set for a shared store: keep what is new for take_unsaved
        # (queue id, minute) -> [sent, received, deleted, oldest age or NOT_SAMPLED]
        self._unsaved: dict[tuple[int, int], list[int]] = {}

    def count(self, queue_id: int, region: str, name: str, kind: int, n: int,
              now_ms: int) -> None:
        """`n` messages of the queue were sent / received / deleted (`kind`) at `now_ms`."""
        if n <= 0:
            return
        series = self._touch(queue_id, region, name)
        series.counts[kind][series.slot(now_ms // MINUTE_MS)] += n
        series.totals[kind] += n
        if self.shared:
            self._unsaved_minute(queue_id, now_ms)[kind] += n

    def sample_oldest(self, queue_id: int, age_s: int, now_ms: int) -> None:
        """The queue's oldest waiting message is `age_s` old (0: none waits)."""
        series = self._series.get(queue_id)
        if series is not None:
            series.oldest_s[series.slot(now_ms // MINUTE_MS)] = max(0, age_s)
            if self.shared:
                self._unsaved_minute(queue_id, now_ms)[3] = max(0, age_s)

    def _unsaved_minute(self, queue_id: int, now_ms: int) -> list[int]:
        key = (queue_id, now_ms // MINUTE_MS)
        found = self._unsaved.get(key)
        if found is None:
            found = self._unsaved[key] = [0, 0, 0, NOT_SAMPLED]
        return found

    def take_unsaved(self) -> list[UnsavedRow]:
        """The counts (and samples) not yet handed to the shared store, forgotten here."""
        taken, self._unsaved = self._unsaved, {}
        return [_unsaved_row(key, values) for key, values in taken.items()]

    def give_back(self, rows: list[UnsavedRow], now_ms: int) -> None:
        """Rows the store could not take: kept for the next try, while they are within the
        charts' hour (so a long outage costs at most an hour of rows)."""
        first_minute = now_ms // MINUTE_MS - MINUTES + 1
        for queue_id, minute, *counts, age in rows:
            if minute < first_minute:
                continue
            mine = self._unsaved_minute(queue_id, minute * MINUTE_MS)
            for kind, n in enumerate(counts):
                mine[kind] += n
            if age is not None and mine[3] == NOT_SAMPLED:
                mine[3] = age

    def unsaved(self, queue_ids: set[int]) -> dict[int, list[MinuteRow]]:
        """This node's counts of these queues that the shared store does not hold yet."""
        out: dict[int, list[MinuteRow]] = {}
        for key, values in self._unsaved.items():
            if key[0] in queue_ids:
                out.setdefault(key[0], []).append(_unsaved_row(key, values)[1:])
        return out

    def active(self, limit: int) -> list[int]:
        """The ids of the `limit` most recently active queues, the most recent first."""
        out = []
        for queue_id in reversed(self._series):
            if len(out) == limit:
                break
            out.append(queue_id)
        return out

    def tracks(self, queue_id: int) -> bool:
        return queue_id in self._series

    def forget(self, queue_id: int) -> None:
        """Drop the queue's minutes, the ones not yet handed to a shared store too."""
        self._series.pop(queue_id, None)
        for key in [k for k in self._unsaved if k[0] == queue_id]:
            del self._unsaved[key]

    def history(self, queue_id: int, now_ms: int) -> History | None:
        """The queue's last hour, or None if it did nothing this node saw."""
        series = self._series.get(queue_id)
        if series is None:
            return None
        now_minute = now_ms // MINUTE_MS
        per_second: dict[str, list[float]] = {k: [] for k in KINDS}
        oldest: list[int | None] = []
        for minute in range(now_minute - MINUTES + 1, now_minute + 1):
            i = minute % MINUTES
            current = series.stamps[i] == minute
            for kind, counts in zip(KINDS, series.counts, strict=True):
                per_second[kind].append(counts[i] / 60 if current else 0.0)
            sampled = series.oldest_s[i] if current else NOT_SAMPLED
            oldest.append(None if sampled == NOT_SAMPLED else sampled)
        return History(per_second, oldest)

    def totals(self) -> list[tuple[str, str, list[int]]]:
        """(region, name, [sent, received, deleted]) since this node began counting each."""
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


def _unsaved_row(key: tuple[int, int], values: list[int]) -> UnsavedRow:
    sent, received, deleted, age = values
    return (*key, sent, received, deleted, None if age == NOT_SAMPLED else age)
