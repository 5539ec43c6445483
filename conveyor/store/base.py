"""The store interface: a narrow set of atomic primitives every backend meets.

The service decides *what* to do (validation, defaults, SQS semantics, and in
service/rules.py the fate of every message); a store only claims candidates and makes
each state change atomic and durable, each in its engine's best way. Times are passed in
(`now_ms`, and cut-offs the rules work out) so tests and the service share one clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol


class StoreError(Exception):
    """A backend failure (disk full, a statement the database refused). Rendered as an
    internal error."""


class StoreUnavailable(StoreError):
    """The backend cannot be reached for now (its database restarts or is down): the same
    request may well succeed in a moment. Rendered as a retryable "service unavailable";
    the store itself logs the outage, once."""


class QueueElsewhere(StoreError):
    """The queue's row is not in this store (a shard the queue was moved away from): the
    sharded store asks its catalog where it is now (shards.py)."""


@dataclass(slots=True)
class QueueRecord:
    id: int
    region: str
    name: str
    attributes: dict[str, str]  # settable attributes, defaults filled in, as SQS strings
    tags: dict[str, str]
    created_s: int
    modified_s: int
    purged_s: int = 0
    fifo: bool = field(init=False)  # read on every message: worked out once

    def __post_init__(self) -> None:
        self.fifo = self.name.endswith(".fifo")

    @property
    def retention_ms(self) -> int:
        return int(self.attributes["MessageRetentionPeriod"]) * 1000


# init=False and __init__ written out: compiled, it is a quarter of the cost (setup.py)
@dataclass(slots=True, init=False)
class NewMessage:
    message_id: str
    body: str
    md5_body: str
    attributes: str | None  # JSON of message attributes (Binary values base64)
    md5_attributes: str | None
    system: str | None  # JSON of message system attributes (AWSTraceHeader)
    sent_ms: int
    sender_id: str
    visible_at_ms: int
    group_id: str | None = None
    dedup_key: str | None = None  # FIFO: scope-qualified deduplication id
    md5_system: str | None = None  # for the send's answer only; not stored

    def __init__(self, message_id: str, body: str, md5_body: str, attributes: str | None,
                 md5_attributes: str | None, system: str | None, sent_ms: int,
                 sender_id: str, visible_at_ms: int, group_id: str | None = None,
                 dedup_key: str | None = None, md5_system: str | None = None) -> None:
        self.message_id, self.body, self.md5_body = message_id, body, md5_body
        self.attributes, self.md5_attributes, self.system = attributes, md5_attributes, system
        self.sent_ms, self.sender_id, self.visible_at_ms = sent_ms, sender_id, visible_at_ms
        self.group_id, self.dedup_key, self.md5_system = group_id, dedup_key, md5_system


# init=False and __init__ written out: compiled, it is a quarter of the cost (setup.py)
@dataclass(slots=True, init=False)
class SentMessage:
    message_id: str
    seq: int
    duplicate: bool = False

    def __init__(self, message_id: str, seq: int, duplicate: bool = False) -> None:
        self.message_id, self.seq, self.duplicate = message_id, seq, duplicate


# init=False and __init__ written out: compiled, it is a quarter of the cost (setup.py)
@dataclass(slots=True, init=False)
class StoredMessage:
    seq: int
    message_id: str
    body: str
    md5_body: str
    attributes: str | None
    md5_attributes: str | None
    system: str | None
    sent_ms: int
    sender_id: str
    receive_count: int
    first_receive_ms: int | None
    receipt: str | None
    group_id: str | None
    dedup_key: str | None
    dlq_source_arn: str | None

    def __init__(self, seq: int, message_id: str, body: str, md5_body: str,
                 attributes: str | None, md5_attributes: str | None, system: str | None,
                 sent_ms: int, sender_id: str, receive_count: int,
                 first_receive_ms: int | None, receipt: str | None, group_id: str | None,
                 dedup_key: str | None, dlq_source_arn: str | None) -> None:
        self.seq, self.message_id, self.body, self.md5_body = seq, message_id, body, md5_body
        self.attributes, self.md5_attributes, self.system = attributes, md5_attributes, system
        self.sent_ms, self.sender_id, self.receive_count = sent_ms, sender_id, receive_count
        self.first_receive_ms, self.receipt = first_receive_ms, receipt
        self.group_id, self.dedup_key, self.dlq_source_arn = group_id, dedup_key, dlq_source_arn


@dataclass
class Counts:
    visible: int = 0
    in_flight: int = 0
    delayed: int = 0


# init=False and __init__ written out: compiled, it is a quarter of the cost (setup.py)
@dataclass(slots=True, init=False)
class Handle:
    """One entry of a delete / change-visibility call: a decoded receipt handle."""

    seq: int
    token: str
    visible_at_ms: int = 0

    def __init__(self, seq: int, token: str, visible_at_ms: int = 0) -> None:
        self.seq, self.token, self.visible_at_ms = seq, token, visible_at_ms


# Outcomes of one handle in delete / change-visibility, mapped to SQS errors above.
OK, STALE = "ok", "stale"

# A queue's live messages by (due: visible_at <= now, received: receive_count > 0).
Tally = dict[tuple[bool, bool], int]


class Picking(Protocol):
    """How a claim chooses among its candidates: the service's rules (service/rules.py),
    handed in with each claim. A store supplies what its engine finds fastest (a walk of
    the visible grouped messages with each group's head, a group's run, each group's
    oldest visible messages) and takes what these return."""

    # Read-only (properties), as the service's frozen dataclass gives them.
    @property
    def fifo_scan(self) -> int:
        """A FIFO walk stops after this many messages."""
        ...

    @property
    def fair_groups(self) -> int:
        """A fair receive visits at most this many groups."""
        ...

    @property
    def group_cap(self) -> int:
        """Most messages in flight per group (0: no cap)."""
        ...

    @property
    def group_rate(self) -> object | None:
        """The groups' receive rate, if any."""
        ...

    @property
    def group_limited(self) -> bool:
        """Whether a fair receive must know each group's room before dealing it: then
        each group gives at most its room and the fill takes ungrouped messages only."""
        ...

    def group_room(self, in_flight: int, tat_ms: float | None, now_ms: int,
                   limit: int) -> int:
        """How many messages a group with `in_flight` messages in flight and its bucket at
        `tat_ms` (None: full) may give a receive at `now_ms`, at most `limit`."""
        ...

    def group_spent(self, tat_ms: float | None, now_ms: int, taken: int) -> float | None:
        """A group's bucket after `taken` messages went (None: no group rate)."""
        ...

    def group_ready_ms(self, tat_ms: float | None, now_ms: int) -> int | None:
        """When a group out of tokens has one again (None: no group rate)."""
        ...

    def fifo_groups(self, walk: Iterable[tuple[int, str, int, int | None]],
                    limit: int) -> list[tuple[str, int]]:
        """From (seq, group id, visible_at, head seq) in (visible_at, seq) order, the
        available groups as (group id, head seq), first first."""
        ...

    def fifo_run(self, run: Iterable[tuple[int, int]], now_ms: int) -> list[int]:
        """From a group's (seq, visible_at) from its head on, the seqs to take."""
        ...

    def fair_deal(self, runs: list[list[int]], limit: int) -> list[int]:
        """From each visited group's oldest visible seqs, the seqs to take, in order."""
        ...


class Bucket(Protocol):
    """A token bucket's rule (service/rules.py, Rate), kept by a store as one number."""

    def room(self, tat_ms: float | None, now_ms: int) -> int: ...
    def spend(self, tat_ms: float | None, now_ms: int, taken: int) -> float: ...
    def ready_ms(self, tat_ms: float | None, now_ms: int, wanted: int) -> int: ...


class Claim(Protocol):
    """What a receive took, locked until the claim's block ends: `messages`, in the order
    to return them, already received (in flight until the claim's visible-at time, their
    receive count counting this receive, `receipt` this receive's token). The service
    decides what becomes of each (service/rules.py) and applies it here."""

    messages: list[StoredMessage]
    # When a group its receive rate held back has a token again (None: none was held).
    retry_ms: int | None

    async def dead_letter(self, seqs: list[int], dead_letter_queue_id: int, source_arn: str,
                          now_ms: int, systems: list[str | None] | None = None) -> None:
        """Move these claimed messages to the dead-letter queue, visible and with no
        receipt, remembering where they came from; given `systems` (one for each seq),
        their system attributes JSON becomes those (why they died). Each keeps its receive
        count (less this claim, which delivered nothing) and its first receive:
        ApproximateReceiveCount is "the number of times a message has been received across
        all queues but not deleted" (SQS API reference, ReceiveMessage; botocore's model),
        so a dead letter shows maxReceiveCount + 1 at its first receive there (recorded
        from AWS in yavosh/pail, test/diff/testdata/golden/sqs-dead-letter.json:
        maxReceiveCount 1, "ApproximateReceiveCount: 2" from the dead-letter queue; a drill
        against SQS: maxReceiveCount 5, then "6"; a Lambda event from a dead-letter queue
        carried the source's ApproximateFirstReceiveTimestamp, 4 ms after its
        SentTimestamp). The dead-letter queue's own maxReceiveCount counts the same
        receives. A dead-letter queue deleted meanwhile takes none: they stay where they
        are, in flight until the claim's visible-at time."""


class Held(Protocol):
    """Messages locked for a change of visibility: `found` maps each seq that exists in
    the queue to its (latest receipt, visible_at)."""

    found: dict[int, tuple[str | None, int]]

    async def set_visible_at(self, changes: list[tuple[int, int]]) -> None:
        """Make each (seq, visible_at) so, for held messages the service chose."""


@dataclass(slots=True)
class Annotated:
    """Where a message is and what it carries, for a change of its system attributes."""

    queue_id: int
    receipt: str | None  # its latest receive's token; None when not received there
    dlq_source_arn: str | None  # set when dead-lettered: the queue it came from
    system: str | None  # its system attributes JSON


class Amending(Protocol):
    """Messages locked for a change of their system attributes JSON: `found` maps each seq
    that exists, in whatever queue it is now, to where it is and what it carries."""

    found: dict[int, Annotated]

    async def set_system(self, changes: list[tuple[int, str]]) -> None:
        """Make each (seq, system attributes JSON) so, for messages the service chose."""


@dataclass
class MoveTaskRecord:
    handle: str
    source_queue_id: int
    destination_queue_id: int | None  # None: back to each message's source queue
    max_per_second: int | None
    status: str  # RUNNING, COMPLETED, CANCELLED, FAILED
    started_ms: int
    moved: int = 0
    to_move: int = 0
    failure: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


@dataclass
class QueueEnding:
    """What a queue's deletion ends beside the rows keyed by its id (its own row with its
    attributes, tags and Policy, its messages, deduplication ids, move tasks and activity),
    as the service decided it (service/identity.py). A store ends all of it in the
    transaction that deletes the queue's row."""

    lease_names: list[str] = field(default_factory=list)  # lease records of its region
    lease_prefixes: list[str] = field(default_factory=list)  # ... whose names begin so
    worker_ids: list[str] = field(default_factory=list)  # announcements to forget
    failed_tasks: list[MoveTaskRecord] = field(default_factory=list)  # other queues' tasks


# The spans of the activity buckets the service keeps (service/activity.py's RANGES).
ACTIVITY_SPANS_MIN = (1, 10, 60)


class ActivityRow(NamedTuple):
    """What a queue did in one bucket of time, for the console's charts (service/activity.py):
    a row of the `activity` table."""

    queue_id: int
    span_min: int  # the minutes the bucket covers (1, 10 or 60: one per chart range)
    minute: int  # its first minute, in minutes since the epoch
    sent: int
    received: int
    deleted: int
    dead_lettered: int  # messages that arrived in this queue as dead letters
    failed: int  # failed attempts that workers recorded (RecordAttempts)
    oldest_s: int | None  # the oldest waiting message's age, the most sampled; None: never


# An ActivityRow as a store reads it back: a plain tuple in the same order (an overview reads
# thousands; a named tuple each costs more than the rest of the read).
ActivityTuple = tuple[int, int, int, int, int, int, int, int, int | None]


@dataclass
class LeaseRecord:
    name: str
    holder: str
    version: int  # bumped by every successful write
    expires_ms: int
    data: str  # opaque to the store (periodic tasks keep their last enqueued times here)


class Store(Protocol):
    """What the service needs from a backend. Every method is one atomic change."""

    shared: bool  # True when several server nodes use the same store
    clock_skew_ms: int  # the store's clock minus ours; the service keeps the store's time
    # Set by the server: another node made (queue id, count) messages receivable.
    on_remote_ready: Callable[[int, int], None]
    # Set by the server: messages may have become receivable on other nodes without word
    # reaching us (the store lost its notifications for a while); every long poll looks.
    on_remote_missed: Callable[[], None]
    # Set by the server: another node was asked to drain this worker (its id).
    on_remote_drain: Callable[[str], None]

    async def close(self) -> None: ...
    def outage(self) -> str | None:
        """Why the store cannot serve now (an outage it has noticed), else None."""
        ...
    def gauges(self) -> dict[str, tuple[str, float]]:
        """The store's own figures for /metrics: metric name -> (help, value)."""
        ...
    def counters(self) -> dict[str, tuple[str, float]]:
        """Like gauges, for figures that only grow (exported with a `_total` suffix)."""
        ...
    async def announce(self, queue_id: int, count: int) -> None:
        """Wake long polls on other nodes: `count` messages became receivable."""
    async def announce_drain(self, worker_id: str) -> None:
        """Wake the worker's long polls on other nodes: a drain was asked of it."""
    def exclusive(self, name: str) -> AbstractAsyncContextManager[bool]:
        """Yield True if this node may run `name` now, no other node running it meanwhile."""

    # queues
    async def create_queue(self, region: str, name: str, attributes: dict[str, str],
                           tags: dict[str, str], now_s: int) -> QueueRecord: ...
    async def get_queue(self, region: str, name: str) -> QueueRecord | None: ...
    async def get_queue_by_id(self, queue_id: int) -> QueueRecord | None: ...
    async def list_queues(self, region: str | None, prefix: str) -> list[QueueRecord]: ...
    async def update_queue(self, queue: QueueRecord) -> None: ...
    async def delete_queue(self, queue: QueueRecord, now_s: int,
                           ending: QueueEnding | None = None) -> None:
        """Delete the queue and every row keyed by its id (each store's TABLE_KINDS says
        which tables hold what), end what `ending` names, and note the name as deleted at
        `now_s`; the queue's id is never handed out again."""
    async def deleted_at(self, region: str, name: str) -> int | None: ...

    # messages
    async def send(self, queue: QueueRecord, messages: list[NewMessage], now_ms: int,
                   dedup_ms: int) -> list[SentMessage]:
        """Store the messages (a FIFO queue's duplicates within `dedup_ms` only named). A
        shared store also tells other nodes, as `announce` does, how many of those stored
        are receivable at `now_ms`, in the same round trip."""
        ...
    def claim(self, queue: QueueRecord, max_messages: int, now_ms: int, cutoff_ms: int,
              visible_at_ms: int, picking: Picking) -> AbstractAsyncContextManager[Claim]:
        """Take up to `max_messages` messages that are visible at `now_ms` and were sent
        after `cutoff_ms`, as received, until `visible_at_ms`: a standard queue's due
        first (dealt fairly across message groups when it has grouped messages), a FIFO
        queue's by group as `picking` chooses. Receivers elsewhere skip what a claim
        holds."""
        ...
    async def delete(self, queue: QueueRecord, handles: list[Handle],
                     in_flight_after_ms: int | None = None, *,
                     any_receipt: bool = False) -> list[str]:
        """Delete each message whose latest receipt is the handle's (with `any_receipt`,
        each message received since it came to this queue, whatever the handle's token;
        and, given `in_flight_after_ms`, whose visibility lasts past it): OK if it was
        deleted or is gone, STALE if it is still there."""
        ...
    async def drop(self, queue: QueueRecord, seqs: list[int]) -> list[int]:
        """Delete the queue's messages of these seqs that have no receipt (not received
        since they arrived in this queue, so no DeleteMessage can name them); the seqs
        that went. A message received meanwhile is left to its receiver."""
        ...
    def hold(self, queue: QueueRecord, seqs: list[int]) -> AbstractAsyncContextManager[Held]:
        """Lock the queue's messages of these seqs for a change of visibility."""
        ...
    def amend(self, queue: QueueRecord, seqs: list[int]
              ) -> AbstractAsyncContextManager[Amending]:
        """Lock the messages of these seqs, received from `queue` (so kept where it is
        kept), in any queue now, for a change of their system attributes JSON (the
        worker's attempt records travel with a dead letter)."""
        ...
    async def find_message(self, queue: QueueRecord, message_id: str,
                           scan_limit: int) -> StoredMessage | None:
        """The queue's message of this id among its `scan_limit` oldest (by sent_ms), in
        any state; None if not there."""
        ...
    async def purge(self, queue: QueueRecord, now_ms: int) -> None:
        """Delete the messages sent up to `now_ms` and forget the queue's deduplication
        ids (LocalStack's AWS-validated test_purge_queue_clears_fifo_deduplication_cache)."""
        ...
    async def tally(self, queue: QueueRecord, now_ms: int, cutoff_ms: int) -> Tally:
        """How many messages sent after `cutoff_ms` are (due, received) at `now_ms`."""
        ...
    async def next_visible_ms(self, queue: QueueRecord, now_ms: int) -> int | None: ...
    async def take_tokens(self, queue: QueueRecord, wanted: int, now_ms: int,
                          rate: Bucket) -> tuple[int, int]:
        """Take up to `wanted` tokens of the queue's own receive-rate bucket (a negative
        `wanted`: give that many back), atomically across nodes: (tokens taken, when the
        bucket holds `wanted` again)."""
        ...
    async def expire(self, cutoffs: dict[int, int], now_ms: int) -> int:
        """Delete each queue's messages sent at or before its cut-off (queue id -> ms), the
        messages of queues that no longer exist, and deduplication entries expired by
        `now_ms`; how many messages went."""
        ...
    async def peek(self, queue: QueueRecord, limit: int, cutoff_ms: int,
                   after: tuple[int, int] | None = None) -> list[tuple[StoredMessage, int]]:
        """Up to `limit` messages sent after `cutoff_ms` with their visible-at times, the
        next to be received first (by visible_at, then seq), changing nothing (the
        console's view); `after` (visible_at, seq): only those past it, a keyset cursor
        read off the ready index, so a page deep in the queue costs what the first does."""
        ...

    # dead-letter move tasks
    async def movable(self, queue: QueueRecord, limit: int, now_ms: int,
                      cutoff_ms: int) -> list[StoredMessage]:
        """Up to `limit` visible messages sent after `cutoff_ms`, oldest first (by sent_ms,
        then seq: rules.MOVE_ORDER)."""
        ...
    async def move(self, queue: QueueRecord, moves: list[tuple[int, int]], now_ms: int) -> int:
        """Move each (seq, destination queue id) of `queue`'s messages that is still
        visible as a fresh, visible message of its destination, if that queue still exists;
        how many moved."""
        ...
    async def dead_letter_origins(self, queue: QueueRecord) -> list[str]:
        """The distinct source-queue ARNs of the queue's dead letters (every message in it,
        visible or not): where a move task without a destination would send them."""
        ...
    async def save_move_task(self, task: MoveTaskRecord) -> None:
        """Insert or replace the task, while its source queue exists: a task saved as its
        source is deleted is not left behind."""
    async def move_tasks(self, source_queue_id: int | None) -> list[MoveTaskRecord]: ...

    # leases (leader election): conditional writes, None when the condition fails
    async def lease_acquire(self, region: str, name: str, holder: str, ttl_ms: int,
                            now_ms: int) -> LeaseRecord | None: ...
    async def lease_update(self, region: str, name: str, holder: str, version: int,
                           data: str, ttl_ms: int, now_ms: int) -> LeaseRecord | None: ...
    async def lease_release(self, region: str, name: str, holder: str) -> None: ...
    async def lease_get(self, region: str, name: str) -> LeaseRecord | None: ...

    # workers' announcements (the console's list of who is working), JSON records
    async def save_worker(self, worker_id: str, record: str, now_ms: int, expires_ms: int,
                          max_workers: int) -> bool:
        """Insert or renew; False (and nothing written) for a new worker when `max_workers`
        are live. A worker keeps its first-seen time until its announcement runs out."""
    async def workers(self, now_ms: int) -> list[tuple[str, int, str]]:
        """(worker id, first seen ms, record) of the live workers, the oldest first; the
        expired ones are forgotten."""

    # the console's charts (service/activity.py)
    async def add_activity(self, rows: list[ActivityRow],
                           prune_before: list[tuple[int, int]]) -> None:
        """Add each row's counts to its bucket's (the larger oldest age is kept); then,
        for each (span_min, minute) of `prune_before`, forget that span's buckets that
        begin before the minute."""
    async def activity(self, queue_ids: list[int], span_min: int, from_minute: int
                       ) -> list[ActivityTuple]:
        """The rows of these queues' buckets of `span_min` from `from_minute` on."""

    # the console's sign-in throttle (service/signins.py): failures per subject
    async def sign_in_failures(self, subjects: list[str]) -> dict[str, tuple[int, int]]:
        """subject -> (failures counted, last failure ms) for the subjects that have any."""
    async def count_sign_in_failure(self, subjects: list[str], now_ms: int,
                                    forget_before_ms: int) -> dict[str, tuple[int, int]]:
        """Count one failure at `now_ms` for each subject, all at once: one more than its
        count, or 1 when its last failure came before `forget_before_ms` (so is forgotten);
        forget every subject whose last failure came before it. What each now holds."""
    async def clear_sign_in_failures(self, subjects: list[str]) -> None:
        """Forget the subjects' failures."""
