"""A node's counting (service/activity.py): minutes kept until saved, folded into each
chart range's buckets, and read back as a range's points with the current one last."""

from __future__ import annotations

from conveyor.service.activity import (
    DEAD_LETTERED,
    FAILED,
    HOUR,
    MINUTE_MS,
    RANGES,
    RECEIVED,
    SENT,
    Activity,
    buckets,
    history,
    prunes,
)

T0 = 1_800_000_000_000  # an hour's start
MINUTE = T0 // MINUTE_MS


def test_counts_wait_in_their_minute_until_taken_once() -> None:
    activity = Activity()
    activity.count(1, "r", "q", SENT, 120, T0)
    activity.count(1, "r", "q", RECEIVED, 60, T0 + MINUTE_MS)
    activity.count(2, "r", "dlq", DEAD_LETTERED, 5, T0 + MINUTE_MS + 59_999)
    activity.count(1, "r", "q", FAILED, 0, T0)  # nothing: no row
    activity.sample_oldest(1, 7, T0 + MINUTE_MS)
    activity.sample_oldest(3, 9, T0)  # a queue that did nothing here: not sampled
    assert activity.unsaved({1}) == {1: [(1, MINUTE, 120, 0, 0, 0, 0, None),
                                         (1, MINUTE + 1, 0, 60, 0, 0, 0, 7)]}
    rows = activity.take_unsaved()
    assert len(rows) == 3 and activity.take_unsaved() == []
    assert activity.totals() == [("r", "q", [120, 60, 0, 0, 0]), ("r", "dlq", [0, 0, 0, 5, 0])]
    # Rows a store refused come back for the next save, the last hour of them.
    activity.give_back(rows, T0 + 60 * MINUTE_MS)
    assert sorted(activity.take_unsaved()) == [(1, MINUTE + 1, 0, 60, 0, 0, 0, 7),
                                               (2, MINUTE + 1, 0, 0, 0, 5, 0, None)]


def test_a_minute_lands_once_in_each_range_s_bucket() -> None:
    minute = MINUTE + 17
    rows = buckets([(1, minute, 1, 2, 3, 4, 5, 30), (1, minute + 1, 1, 0, 0, 0, 0, 20)])
    by_span = {(r.span_min, r.minute): tuple(r[3:]) for r in rows}
    assert by_span == {(1, minute): (1, 2, 3, 4, 5, 30), (1, minute + 1): (1, 0, 0, 0, 0, 20),
                       (10, MINUTE + 10): (2, 2, 3, 4, 5, 30),  # the larger age kept
                       (60, MINUTE): (2, 2, 3, 4, 5, 30)}
    assert prunes(MINUTE) == [(1, MINUTE - 60), (10, MINUTE - 1440), (60, MINUTE - 10_080)]


def test_a_range_reads_its_full_buckets_then_the_current_one() -> None:
    """The store's rows and the node's unsaved minutes add up; the last point is the
    current bucket, the one before it the last full one; older rows fall outside."""
    now = T0 + 30 * MINUTE_MS + 5_000  # 30 min into the hour
    stored = buckets([(1, MINUTE + 29, 4, 0, 0, 0, 0, None),
                      (1, MINUTE - 61, 100, 0, 0, 0, 0, None)])  # over an hour ago
    unsaved = [(1, MINUTE + 30, 2, 0, 0, 0, 0, 12)]
    hour = history(HOUR, [r for r in stored if r.span_min == 1], unsaved, now)
    assert hour is not None
    assert hour.counts["sent"][-3:] == [0, 4, 2] and hour.total("sent") == 6
    assert hour.oldest_s[-1] == 12 and hour.oldest_s[0] is None
    assert hour.start_ms(len(hour.counts["sent"]) - 1) == T0 + 30 * MINUTE_MS
    day = history(RANGES["24h"], [r for r in stored if r.span_min == 10], unsaved, now)
    assert day is not None and day.counts["sent"][-2:] == [4, 2]
    week = history(RANGES["7d"], [r for r in stored if r.span_min == 60], unsaved, now)
    assert week is not None and week.counts["sent"][-3:] == [100, 0, 6]
    assert history(HOUR, [], [], now) is None


def test_the_least_recently_active_queue_goes_first() -> None:
    activity = Activity(max_queues=2)
    activity.count(1, "r", "a", SENT, 1, T0)
    activity.count(2, "r", "b", SENT, 1, T0)
    activity.count(1, "r", "a", SENT, 1, T0)  # a is now the more recent
    activity.count(3, "r", "c", SENT, 1, T0)
    assert activity.active(10) == [3, 1]
    assert not activity.tracks(2)
    activity.forget(1)
    assert activity.active(10) == [3] and activity.unsaved({1}) == {}
