"""The rules of a message's life, each written once: pure functions of what a store holds
about a message and of the time.

Stores claim candidates and apply atomic changes (store/base.py); what becomes of each
message is decided here and nowhere else, so that the SQLite store, its journal and the
PostgreSQL store cannot drift apart. Nothing here does I/O or reads a clock: `now_ms` is
passed in, so tests move time instead of sleeping (tests/service/test_rules.py).

Where a store must select by a rule to stay fast (a receive cannot read a backlog to find
the ten messages it returns), the rule gives the store a number to compare with, such as
`retention_cutoff_ms`, and the store's filter says no more than "sent_ms > cutoff".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from conveyor.store.base import NOT_IN_FLIGHT, OK, STALE, Counts, QueueRecord, StoredMessage

# As SQS does, a FIFO receive looks for available groups among the queue's first 120,000
# messages only: a backlog in one group holds back groups sent after it.
FIFO_SCAN = 120_000

# --- retention -------------------------------------------------------------------------------


def retention_cutoff_ms(queue: QueueRecord, now_ms: int) -> int:
    """Messages of `queue` sent at or before this time are gone: past the queue's retention
    period ("Amazon SQS automatically deletes messages left in a queue longer than the
    retention period", DeleteMessage in the SQS API reference), or sent before a PurgeQueue
    that has not finished deleting them (`purged_s` is whole seconds: what was sent before
    that second was purged).

    A gone message is never received, counted, peeked at or moved, whether or not the
    retention sweep has deleted it yet; nor does it take one of a receive's
    MaxNumberOfMessages places ("Amazon SQS never returns more messages than this value
    (however, fewer messages might be returned)": fewer because there are fewer, not
    because expired ones were looked at)."""
    return max(now_ms - queue.retention_ms, queue.purged_s * 1000 - 1)


def expired(sent_ms: int, cutoff_ms: int) -> bool:
    """Whether a message sent at `sent_ms` is gone (see retention_cutoff_ms)."""
    return sent_ms <= cutoff_ms


# --- states ------------------------------------------------------------------------------------

VISIBLE, IN_FLIGHT, DELAYED = "visible", "in_flight", "delayed"


def state(visible_at_ms: int, receive_count: int, now_ms: int) -> str:
    """One `visible_at` serves delay and visibility (pgmq's `vt`)."""
    return state_of(visible_at_ms <= now_ms, receive_count > 0)


def state_of(due: bool, received: bool) -> str:
    """A message is visible once due; before that it is in flight if it was ever received
    (its visibility timeout runs), else delayed (its DelaySeconds run)."""
    if due:
        return VISIBLE
    return IN_FLIGHT if received else DELAYED


def counts(tally: Mapping[tuple[bool, bool], int]) -> Counts:
    """A queue's Counts from a store's tally of its live messages by (due: visible_at <=
    now, received: receive_count > 0), the two facts a state depends on."""
    found = Counts()
    for (due, received), number in tally.items():
        kind = state_of(due, received)
        setattr(found, kind, getattr(found, kind) + number)
    return found


# --- receiving ---------------------------------------------------------------------------------


def spent(messages: Iterable[StoredMessage], max_receive_count: int) -> list[StoredMessage]:
    """Of the messages a receive claimed (their receive count includes this receive), those
    to move to the dead-letter queue instead of returning: "When the ReceiveCount for a
    message exceeds the maxReceiveCount for a queue, Amazon SQS moves the message to a
    dead-letter queue" (SQS Developer Guide, dead-letter queues). Each takes its place
    among the receive's MaxNumberOfMessages all the same, so that a receive never reads
    more of a backlog than it could return."""
    return [m for m in messages if m.receive_count > max_receive_count]


def visibility_outcome(token: str, found: tuple[str | None, int] | None, now_ms: int) -> str:
    """What ChangeMessageVisibility does with a handle, given the message's (latest
    receipt, visible_at), or None when it is gone: OK (change it), STALE (the handle is
    not the latest receive's, or the message is gone: ReceiptHandleIsInvalid) or
    NOT_IN_FLIGHT (its visibility already ran out: MessageNotInflight)."""
    if found is None or found[0] != token:
        return STALE
    if found[1] <= now_ms:
        return NOT_IN_FLIGHT
    return OK


def delete_in_flight_after_ms(queue: QueueRecord, now_ms: int) -> int | None:
    """A delete takes a message whose handle is its latest receipt; on a FIFO queue only
    while that receive's visibility lasts ("the receipt handle expires with the
    visibility"), so a handle deletes nothing that may have gone to another receiver."""
    return now_ms if queue.fifo else None


# FIFO group availability (written in each SQL store's claim, as the one filter it is):
# among the queue's first FIFO_SCAN messages in order, a visible, live message is a
# candidate unless its group has a message IN_FLIGHT (state above). Candidates come out
# in sequence order.

# --- moving (StartMessageMoveTask) ---------------------------------------------------------------

# Messages to move are taken oldest first: "Dead-letter queues redrive messages in the order
# they are received, starting with the oldest message" (SQS Developer Guide, configuring a
# dead-letter queue redrive); a message's age counts from its SentTimestamp, which a move to
# a standard dead-letter queue keeps. So: by sent_ms, then seq (the send order) for ties and
# for a clock that stepped back. Each store's `movable` returns them in this order.
MOVE_ORDER = ("sent_ms", "seq")


def may_move(message_queue_id: int, destination_queue_id: int) -> bool:
    """A message never moves onto the queue it is in: that would only reset its receive
    count and leave it to be found again by the same task forever (a dead-letter queue
    may name itself as its own)."""
    return message_queue_id != destination_queue_id
