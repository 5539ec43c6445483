"""The rules module on its own: pure functions of a message's facts and a time that the
test chooses (no store, no clock that moves by itself)."""

from __future__ import annotations

import pytest

from conveyor.service import rules
from conveyor.store.base import NOT_IN_FLIGHT, OK, STALE, Counts, QueueRecord, StoredMessage

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


@pytest.mark.parametrize(("found", "outcome"), [
    (None, STALE), (("other", NOW + 1), STALE), (("token", NOW), NOT_IN_FLIGHT),
    (("token", NOW + 1), OK)])
def test_visibility_outcomes(found: tuple[str, int] | None, outcome: str) -> None:
    assert rules.visibility_outcome("token", found, NOW) == outcome


def test_a_fifo_receipt_deletes_only_while_in_flight() -> None:
    assert rules.delete_in_flight_after_ms(_queue("q.fifo"), NOW) == NOW
    assert rules.delete_in_flight_after_ms(_queue("q"), NOW) is None


def test_a_message_never_moves_onto_its_own_queue() -> None:
    assert not rules.may_move(7, 7)
    assert rules.may_move(7, 8)
