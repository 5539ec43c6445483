"""The history checker on histories written by hand: it must find what it looks for
(a checker that finds nothing proves nothing), and nothing the visibility rules allow."""

from __future__ import annotations

from tests.cluster.history import History, Op, check

VT = 5.0


def _history(*ops: Op) -> History:
    history = History(VT)
    for op in ops:
        history.record(op)
    return history


def test_an_acknowledged_send_never_received_nor_queued_is_lost() -> None:
    history = _history(Op("send", 0, 0.0, 0.1, ("a", "b", "c")),
                       Op("receive", 1, 0.2, 0.3, ("a",)))
    verdict = check(history, queued_at_end={"b"})
    assert verdict.acknowledged == 3
    assert verdict.lost == {"c": 0.1}
    assert not verdict.ok


def test_a_received_or_queued_send_is_not_lost() -> None:
    history = _history(Op("send", 0, 0.0, 0.1, ("a", "b")), Op("receive", 0, 0.2, 0.3, ("a",)))
    assert check(history, queued_at_end={"b"}).ok


def test_a_message_received_after_its_acknowledged_delete_is_an_undone_delete() -> None:
    history = _history(Op("send", 0, 0.0, 0.1, ("a",)),
                       Op("receive", 0, 1.0, 1.1, ("a",)),
                       Op("delete", 0, 1.2, 1.3, ("a",)),
                       Op("receive", 1, 2.0, 2.1, ("a",)))
    assert check(history, set()).undone == [("a", 1.3, 2.1)]


def test_a_receive_overlapping_the_delete_is_not_after_it() -> None:
    history = _history(Op("send", 0, 0.0, 0.1, ("a",)),
                       Op("receive", 0, 1.0, 1.1, ("a",)),
                       Op("receive", 1, 1.0, 1.5, ("a",)),  # begun before the delete's answer
                       Op("delete", 0, 1.2, 1.3, ("a",)))
    assert check(history, set()).ok


def test_a_delete_past_the_visibility_timeout_may_be_followed_by_a_delivery() -> None:
    """Its receipt may be stale (SQS: the message can be received again): not a fault."""
    history = _history(Op("send", 0, 0.0, 0.1, ("a",)),
                       Op("receive", 0, 1.0, 1.1, ("a",)),
                       Op("delete", 0, 1.0 + VT + 0.5, 1.0 + VT + 0.6, ("a",)),
                       Op("receive", 1, 9.0, 9.1, ("a",)))
    assert check(history, set()).ok


def test_a_group_first_delivered_out_of_its_send_order_is_out_of_order() -> None:
    history = _history(Op("receive", 0, 1.0, 1.1, ("a", "b"), ("g:0", "g:2")),
                       Op("receive", 1, 2.0, 2.1, ("c",), ("g:1",)))
    assert check(history, set()).out_of_order == [("g", 2, 1)]


def test_redelivery_of_a_group_in_order_is_not_out_of_order() -> None:
    """A message whose delete failed comes back after its visibility timeout, first in its
    group: the later ones were held behind it."""
    history = _history(Op("receive", 0, 1.0, 1.1, ("a", "b"), ("g:0", "g:1")),
                       Op("receive", 1, 7.0, 7.1, ("a", "b"), ("g:0", "g:1")),
                       Op("receive", 1, 8.0, 8.1, ("c",), ("g:2",)),
                       Op("receive", 0, 8.0, 8.2, ("d",), ("h:0",)))
    assert check(history, set()).ok


def test_a_body_delivered_under_two_message_ids_is_a_duplicate() -> None:
    """A retried send (same deduplication id) let in as a second message."""
    history = _history(Op("receive", 0, 1.0, 1.1, ("a",), ("g:0",)),
                       Op("receive", 0, 2.0, 2.1, ("b",), ("g:0",)))
    assert check(history, set()).duplicated == {"g:0": {"a", "b"}}
