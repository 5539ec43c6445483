"""The last hour of each queue, kept in memory: a ring of minutes, bounded in queues."""

from __future__ import annotations

from conveyor.service.activity import (
    DELETED,
    MINUTE_MS,
    MINUTES,
    RECEIVED,
    SENT,
    Activity,
    History,
)

T0 = 1_700_000_000_000 // MINUTE_MS * MINUTE_MS  # a minute's start


def test_counts_land_in_their_minute_and_read_as_per_second() -> None:
    activity = Activity()
    activity.count(1, "r", "q", SENT, 120, T0)
    activity.count(1, "r", "q", RECEIVED, 60, T0 + MINUTE_MS)
    activity.count(1, "r", "q", DELETED, 30, T0 + MINUTE_MS + 59_999)
    history = activity.history(1, T0 + MINUTE_MS)
    assert history is not None
    assert history.per_second["sent"][-2:] == [2.0, 0.0]
    assert history.per_second["received"][-2:] == [0.0, 1.0]
    assert history.per_second["deleted"][-1] == 0.5
    assert len(history.per_second["sent"]) == len(history.oldest_s) == MINUTES
    assert activity.totals() == [("r", "q", [120, 60, 30])]


def test_a_minute_an_hour_old_is_forgotten_not_shown_again() -> None:
    activity = Activity()
    activity.count(1, "r", "q", SENT, 60, T0)
    later = T0 + MINUTES * MINUTE_MS  # the same slot of the ring, an hour on
    history = activity.history(1, later)
    assert history is not None and sum(history.per_second["sent"]) == 0
    activity.count(1, "r", "q", SENT, 6, later)
    history = activity.history(1, later)
    assert history is not None and history.per_second["sent"][-1] == 0.1


def test_oldest_ages_are_sampled_for_active_queues_only() -> None:
    activity = Activity()
    activity.sample_oldest(1, 50, T0)  # not active: nothing kept
    assert activity.history(1, T0) is None
    activity.count(1, "r", "q", SENT, 1, T0)
    activity.sample_oldest(1, 50, T0)
    history = activity.history(1, T0)
    assert history is not None and history.oldest_s[-1] == 50 and history.oldest_s[0] is None


def test_the_least_recently_active_queue_goes_first() -> None:
    activity = Activity(max_queues=2)
    activity.count(1, "r", "a", SENT, 1, T0)
    activity.count(2, "r", "b", SENT, 1, T0)
    activity.count(1, "r", "a", SENT, 1, T0)  # a is now the more recent
    activity.count(3, "r", "c", SENT, 1, T0)
    assert activity.active(10) == [3, 1]
    assert activity.history(2, T0) is None
    activity.forget(1)
    assert activity.active(10) == [3]


def test_a_shared_store_gets_each_count_once_and_draws_what_it_adds_up() -> None:
    """With a shared store, what a node counted is handed over once (take_unsaved), kept
    for a retry within the hour (give_back), and rows from every node read as one hour."""
    activity = Activity()
    activity.shared = True
    activity.count(1, "r", "q", SENT, 60, T0)
    activity.count(1, "r", "q", RECEIVED, 30, T0 + MINUTE_MS)
    activity.sample_oldest(1, 7, T0 + MINUTE_MS)
    assert activity.unsaved({1, 2}) == {1: [(T0 // MINUTE_MS, 60, 0, 0, None),
                                           (T0 // MINUTE_MS + 1, 0, 30, 0, 7)]}
    rows = activity.take_unsaved()
    assert activity.take_unsaved() == []
    activity.give_back(rows, T0 + MINUTES * MINUTE_MS)  # an hour on: the first minute is gone
    assert activity.take_unsaved() == [(1, T0 // MINUTE_MS + 1, 0, 30, 0, 7)]

    other_node = (T0 // MINUTE_MS + 1, 0, 0, 30, None)
    history = History.from_rows([row[1:] for row in rows] + [other_node], T0 + MINUTE_MS)
    assert history is not None
    assert history.per_second["sent"][-2:] == [1.0, 0.0]
    assert history.per_second["received"][-1] == history.per_second["deleted"][-1] == 0.5
    assert history.oldest_s[-2:] == [None, 7]
    assert History.from_rows([], T0) is None
