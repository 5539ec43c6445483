"""The rules module on its own: pure functions of a message's facts and a time that the
test chooses (no store, no clock that moves by itself)."""

from __future__ import annotations

import pytest

from conveyor.service import rules
from conveyor.store.base import OK, STALE, Counts, QueueRecord, StoredMessage

NOW = 1_800_000_000_000


def _queue(name: str = "q", retention_s: int = 60, purged_s: int = 0) -> QueueRecord:
    return QueueRecord(1, "us-east-1", name, {"MessageRetentionPeriod": str(retention_s)}, {},
                       0, 0, purged_s)


def _message(seq: int, receive_count: int) -> StoredMessage:
    return StoredMessage(seq, f"id-{seq}", "body", "", None, None, None, NOW, "me",
                         receive_count, None, "r", None, None, None)


def test_a_message_expires_exactly_at_the_end_of_its_retention() -> None:
    cutoff = rules.retention_cutoff_ms(_queue(retention_s=60), NOW)
    assert rules.expired(NOW - 60_000, cutoff)
    assert not rules.expired(NOW - 59_999, cutoff)


def test_an_unfinished_purge_expires_what_was_sent_before_its_second() -> None:
    cutoff = rules.retention_cutoff_ms(_queue(purged_s=NOW // 1000), NOW)
    assert rules.expired(NOW // 1000 * 1000 - 1, cutoff)
    assert not rules.expired(NOW // 1000 * 1000, cutoff)


@pytest.mark.parametrize(("visible_at", "receive_count", "state"), [
    (NOW, 0, rules.VISIBLE), (NOW, 3, rules.VISIBLE), (NOW - 1, 1, rules.VISIBLE),
    (NOW + 1, 1, rules.IN_FLIGHT), (NOW + 1, 0, rules.DELAYED)])
def test_states(visible_at: int, receive_count: int, state: str) -> None:
    assert rules.state(visible_at, receive_count, NOW) == state


def test_counts_from_a_tally() -> None:
    tally = {(True, False): 2, (True, True): 1, (False, True): 4, (False, False): 5}
    assert rules.counts(tally) == Counts(visible=3, in_flight=4, delayed=5)
    assert rules.counts({}) == Counts()


def test_a_receive_count_past_the_maximum_is_spent() -> None:
    claimed = [_message(1, 2), _message(2, 3), _message(3, 1)]  # counting this receive
    assert [m.seq for m in rules.spent(claimed, 2)] == [2]


@pytest.mark.parametrize(("name", "found", "outcome"), [
    ("q", None, STALE), ("q", (None, NOW), STALE), ("q", ("other", NOW + 1), OK),
    ("q", ("token", NOW), OK), ("q.fifo", ("other", NOW + 1), STALE),
    ("q.fifo", ("token", NOW), OK), ("q.fifo", ("token", NOW + 1), OK)])
def test_visibility_outcomes(name: str, found: tuple[str | None, int] | None,
                             outcome: str) -> None:
    """A handle whose visibility ran out still changes it (LocalStack's AWS-validated
    test_change_message_visibility_after_visibility_timeout_expiration); an earlier
    receive's handle does on a standard queue (test_terminate_visibility_timeout_after_
    receive); a gone message's, or one never received, never does."""
    assert rules.visibility_outcome(_queue(name), "token", found) == outcome


def test_fifo_groups_are_the_heads_the_walk_meets_in_order() -> None:
    """A walk row is (seq, group, visible_at, its group's head seq)."""
    walk = [(5, "b", NOW - 9, 5), (7, "a", NOW - 8, 6), (6, "a", NOW - 2, 6),
            (9, "c", NOW - 1, 8)]
    assert rules.fifo_groups(walk, 10) == [("b", 5), ("a", 6)]
    assert rules.fifo_groups(walk, 1) == [("b", 5)]


def test_a_fifo_run_stops_at_the_first_message_not_visible() -> None:
    assert rules.fifo_run([(1, NOW), (2, NOW - 5), (3, NOW + 1), (4, NOW)], NOW) == [1, 2]
    assert rules.fifo_run([(1, NOW + 1)], NOW) == []


def test_fair_deal_is_round_robin_up_to_the_limit() -> None:
    runs = [[1, 2, 3, 4], [10], [20, 21]]
    assert rules.fair_deal(runs, 10) == [1, 10, 20, 2, 21, 3, 4]
    assert rules.fair_deal(runs, 4) == [1, 10, 20, 2]
    assert rules.fair_deal([], 10) == []


def test_a_fifo_receipt_deletes_only_while_in_flight() -> None:
    assert rules.delete_in_flight_after_ms(_queue("q.fifo"), NOW) == NOW
    assert rules.delete_in_flight_after_ms(_queue("q"), NOW) is None


def test_a_message_never_moves_onto_its_own_queue() -> None:
    assert not rules.may_move(7, 7)
    assert rules.may_move(7, 8)


@pytest.mark.parametrize(("cap", "rate", "in_flight", "tat_ms", "held"), [
    (3, None, 1, None, ["group_concurrency"]),  # room for 2 of the 10 asked
    (20, None, 1, None, []),  # room for all 10
    (0, rules.Rate(5, 5), 0, None, ["group_receive_rate"]),  # a full bucket holds 5
    (0, rules.Rate(100, 100), 0, None, []),
    (1, rules.Rate(1, 1), 1, NOW + 1000, ["group_concurrency", "group_receive_rate"]),
])
def test_group_holds_names_the_limits_that_left_a_group_short(
        cap: int, rate: rules.Rate | None, in_flight: int, tat_ms: float | None,
        held: list[str]) -> None:
    assert rules.group_holds(cap, rate, in_flight, tat_ms, NOW, 10) == held
    room = rules.group_room(cap, rate, in_flight, tat_ms, NOW, 10)
    assert (room < 10) == bool(held)  # short exactly when a limit is named
