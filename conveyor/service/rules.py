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
from dataclasses import dataclass

import orjson

from conveyor.ratelimit import Rate
from conveyor.store.base import OK, STALE, Counts, QueueRecord, StoredMessage

# How many visible messages a FIFO receive walks, at most, looking for available groups:
# SQS "looks through the first 120,000 messages to determine available message groups"
# (SQS Developer Guide, FIFO queue quotas), so a backlog in a held group holds back groups
# found after it.
FIFO_SCAN = 120_000

# How many message groups a fair (standard-queue) receive visits, at most, before it falls
# back to the oldest visible messages: groups whose messages are all in flight cost a look
# each, so the walk is bounded however many tenants a queue has.
FAIR_GROUPS = 100

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

DIED = "ConveyorDied"  # where a dead letter keeps why it died, in its system attributes JSON


def spent(messages: Iterable[StoredMessage], max_receive_count: int) -> list[StoredMessage]:
    """Of the messages a receive claimed (their receive count includes this receive), those
    to move to the dead-letter queue instead of returning: "When the ReceiveCount for a
    message exceeds the maxReceiveCount for a queue, Amazon SQS moves the message to a
    dead-letter queue" (SQS Developer Guide, dead-letter queues). Each takes its place
    among the receive's MaxNumberOfMessages all the same, so that a receive never reads
    more of a backlog than it could return."""
    return [m for m in messages if m.receive_count > max_receive_count]


def with_death(message: StoredMessage, now_ms: int) -> str:
    """A spent message's system-attributes JSON (stored with it) with why it died added
    under DIED, for the console: its receive count (past maxReceiveCount), its first
    receive and its last, the receive at `now_ms` that moved it. Receives never return
    this member (they read AWSTraceHeader alone)."""
    system = orjson.loads(message.system) if message.system else {}
    system[DIED] = {"receive_count": message.receive_count,
                    "first_receive_ms": message.first_receive_ms, "last_receive_ms": now_ms}
    return orjson.dumps(system).decode()


def visibility_outcome(queue: QueueRecord, token: str,
                       found: tuple[str | None, int] | None) -> str:
    """What ChangeMessageVisibility does with a handle, given the message's (latest
    receipt, visible_at), or None when it is gone: OK (change it) or STALE (the message is
    gone, or on a FIFO queue the handle is not its latest receive's: "Message does not
    exist or is not available for visibility timeout change").

    As real AWS does (LocalStack's AWS-validated tests in tests/aws/services/sqs/test_sqs.py):
    a handle whose visibility ran out still changes it while nobody received the message
    again (test_change_message_visibility_after_visibility_timeout_expiration answers 200,
    test_extend_message_visibility_timeout_set_in_queue); on a standard queue a handle from
    an earlier receive changes it too (test_terminate_visibility_timeout_after_receive:
    the first receive's handle with VisibilityTimeout=0 makes a message received again
    visible at once). A store keeps only the latest receipt, so on a standard queue any
    handle of a message received at least once is taken as one of its handles."""
    if found is None or found[0] is None:
        return STALE
    if queue.fifo and found[0] != token:
        return STALE
    return OK


def delete_in_flight_after_ms(queue: QueueRecord, now_ms: int) -> int | None:
    """A delete takes a message whose handle is its latest receipt; on a FIFO queue only
    while that receive's visibility lasts ("the receipt handle expires with the
    visibility"), so a handle deletes nothing that may have gone to another receiver."""
    return now_ms if queue.fifo else None


def delete_takes_any_receipt(queue: QueueRecord) -> bool:
    """On a standard queue a handle from an earlier receive of a message deletes it too:
    moto's maintainers checked this against AWS ("Old receipt handles should be kept, as
    it is possible to change message visibility or delete a message using them. ... All
    tests have been verified against AWS", getmoto/moto#4655, whose
    test_delete_message_using_old_receipt_handle deletes with the first of two handles),
    and LocalStack, held against AWS's recordings, keeps every handle of a message for
    its delete (localstack-core/localstack/services/sqs/models.py, SqsQueue.remove). The
    API reference's "the request succeeds, but the message will not be deleted" is not
    what AWS was seen doing. As for visibility changes (visibility_outcome), a store keeps
    only the latest receipt, so any handle of a message received in its queue counts.
    A FIFO queue still wants the latest receipt, in flight (delete_in_flight_after_ms)."""
    return not queue.fifo


# --- FIFO groups -------------------------------------------------------------------------------
#
# What recordings of real AWS show (LocalStack's AWS-validated tests test_fifo_receive_message_*
# and test_fifo_message_group_visibility_*, tests/aws/services/sqs/test_sqs.py):
# - a group is available while its first live message (its head, by sequence) is visible;
#   the messages behind a head in flight wait, whatever their own visibility;
# - a receive takes as many messages as it can from one available group, in order, while
#   they are visible, then moves to the next group ("Amazon SQS first attempts to return as
#   many messages with the same message group ID as possible", SQS Developer Guide);
# - available groups come in the order their heads became visible (a head never received
#   became visible when it was sent): a group released by a visibility change, a
#   VisibilityTimeout=0 receive or an expiry goes behind the groups that were waiting, and
#   one released by deleting its head takes the place its next message's send gave it.
# So one `visible_at` per message decides it all: a store walks the visible, live messages
# of the queue in (visible_at, seq) order, each with its group's head seq, and the rules
# below pick the groups and their runs.


def fifo_groups(walk: Iterable[tuple[int, str, int, int | None]],
                limit: int) -> list[tuple[str, int]]:
    """The available groups, first first, as (group id, head seq), at most `limit` (each
    gives a receive at least one message): from a walk of visible, live messages in
    (visible_at, seq) order, each as (seq, group id, visible_at, its group's head seq), the
    messages that are their group's head. A store may stop its walk once `limit` groups are
    found; it stops anyway after FIFO_SCAN messages."""
    found: list[tuple[str, int]] = []
    for seq, group_id, _, head_seq in walk:
        if seq == head_seq:
            found.append((group_id, seq))
            if len(found) == limit:
                break
    return found


def fifo_run(run: Iterable[tuple[int, int]], now_ms: int) -> list[int]:
    """Of one available group's live messages from its head on, in order, as (seq,
    visible_at), those a receive takes: each while every one before it is visible too (one
    in flight holds back those behind it)."""
    taken = []
    for seq, visible_at_ms in run:
        if visible_at_ms > now_ms:
            break
        taken.append(seq)
    return taken


# --- fair queues (standard queues with message groups) ----------------------------------------
#
# SQS fair queues (July 2025): on a standard queue, messages that carry a MessageGroupId are
# delivered so that a group with a big backlog (a noisy tenant) does not hold back the
# others. Conveyor's rule: a receive visits the groups that have visible messages in turn,
# starting after the group the queue's previous receive visited last (group ids in order,
# wrapping round), at most FAIR_GROUPS of them, and deals their oldest visible messages
# round-robin, one from each group, then a second from each, up to MaxNumberOfMessages; what
# is left is filled with the queue's oldest visible messages (those without a group
# included). So any group with a visible message gets one within ceil(groups / 10) receives
# of 10, however deep another group's backlog.


def fair_deal(runs: list[list[int]], limit: int) -> list[int]:
    """Deal the groups' messages (each group's oldest first) round-robin, up to `limit`."""
    dealt: list[int] = []
    depth = 0
    while len(dealt) < limit:
        row = [run[depth] for run in runs if len(run) > depth]
        if not row:
            break
        dealt.extend(row[:limit - len(dealt)])
        depth += 1
    return dealt


# --- tenant limits (standard queues with message groups) ---------------------------------------
#
# Conveyor's own queue attributes (service/attributes.py) bound what receives hand out, in
# the store's claim, so the bounds hold across every node and client sharing the store:
# - ConveyorGroupConcurrency: a group with `cap` messages in flight (received, invisible,
#   not deleted) gets no more until one is deleted or becomes visible again. A FIFO queue
#   keeps its own cap of one (fifo_groups, fifo_run).
# - ConveyorReceiveRate / ConveyorGroupReceiveRate: messages handed out per second by the
#   queue, and by each group, each a token bucket with a burst. A bucket is kept as one
#   number, its theoretical arrival time (GCRA, as in ATM networks' policing and in
#   redis-cell): the bucket is full once `tat_ms` <= now; each message taken moves it
#   one interval on; what is left is how far it may still go within the burst
#   (conveyor/ratelimit.py, shared with the worker, which applies a rate itself where
#   the server cannot).
# A queue under any group limit deals its grouped messages only through the fair deal,
# each group within its room; the fill takes messages without a group alone, so no
# unvisited group gets past its limit.


def group_room(cap: int, rate: Rate | None, in_flight: int, tat_ms: float | None,
               now_ms: int, limit: int) -> int:
    """How many messages a receive may take from one group: within `cap` messages in
    flight (0: no cap) and the group's bucket (None: no rate), at most `limit`."""
    room = limit
    if cap:
        room = min(room, max(0, cap - in_flight))
    if rate is not None:
        room = min(room, rate.room(tat_ms, now_ms))
    return room


# What held a group back, by the name /metrics counts it under (service/tenants.py).
HELD_BY_CAP, HELD_BY_GROUP_RATE = "group_concurrency", "group_receive_rate"


def group_holds(cap: int, rate: Rate | None, in_flight: int, tat_ms: float | None,
                now_ms: int, limit: int) -> list[str]:
    """Which of a group's limits leave it room for fewer than `limit` (group_room)."""
    held = []
    if cap and cap - in_flight < limit:
        held.append(HELD_BY_CAP)
    if rate is not None and rate.room(tat_ms, now_ms) < limit:
        held.append(HELD_BY_GROUP_RATE)
    return held


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


@dataclass(frozen=True, slots=True)
class Picking:
    """The rules a store's claim applies to choose messages (store.base.Picking): handed
    to the store with each claim, so that stores never import the service."""

    fifo_scan: int
    fair_groups: int
    group_cap: int = 0  # ConveyorGroupConcurrency: most in flight per group; 0 = no cap
    group_rate: Rate | None = None  # ConveyorGroupReceiveRate's bucket per group

    @property
    def group_limited(self) -> bool:
        """Whether each group's room must be known before its messages are dealt."""
        return bool(self.group_cap) or self.group_rate is not None

    def group_room(self, in_flight: int, tat_ms: float | None, now_ms: int,
                   limit: int) -> int:
        return group_room(self.group_cap, self.group_rate, in_flight, tat_ms, now_ms, limit)

    def group_spent(self, tat_ms: float | None, now_ms: int, taken: int) -> float | None:
        """A group's bucket after `taken` went (None: the queue has no group rate)."""
        if self.group_rate is None:
            return None
        return self.group_rate.spend(tat_ms, now_ms, taken)

    def group_ready_ms(self, tat_ms: float | None, now_ms: int) -> int | None:
        """When a group out of tokens has one again (None: no group rate)."""
        if self.group_rate is None:
            return None
        return self.group_rate.ready_ms(tat_ms, now_ms, 1)

    def fifo_groups(self, walk: Iterable[tuple[int, str, int, int | None]],
                    limit: int) -> list[tuple[str, int]]:
        return fifo_groups(walk, limit)

    def fifo_run(self, run: Iterable[tuple[int, int]], now_ms: int) -> list[int]:
        return fifo_run(run, now_ms)

    def fair_deal(self, runs: list[list[int]], limit: int) -> list[int]:
        return fair_deal(runs, limit)


def picking(group_cap: int = 0, group_rate: Rate | None = None) -> Picking:
    """The claim rules with today's bounds (read at each call: tests lower them) and the
    queue's group limits."""
    return Picking(FIFO_SCAN, FAIR_GROUPS, group_cap, group_rate)

