"""The one owner of each message's fate in a worker: done, retried (with which visibility),
held, released, dead-lettered or expired is decided here and nowhere else.

Settlement holds every message the worker received and has not finished with (`jobs`),
the group queues (`groups`: FIFO, or capped by GroupConcurrency), the messages waiting
here without a slot (`waiting`) and the dispatchers' buffer. The daemon polls and
dispatches; the outage (outage.py), the batch dispatchers (batch_dispatch.py) and the
heartbeats (heartbeat.py) act on messages only through it.

The promises it keeps, and checks where they are kept (`Invariants`):

1. Dead-lettered only for the app's own failures. A message goes to the dead-letter queue
   (here, or by the queue's redrive policy through its receive count) only after the app
   itself failed it MaxRetries / maxReceiveCount times: a non-2xx answer, no answer in
   InactivityTimeout after the request was sent, an answer that breaks the protocol. A
   refused connection or an unreachable app is no failure of the message (breaker.py):
   the message is held here, invisible, its visibility extended by the heartbeats, and no
   receive is spent on it. Receives are what the redrive policy counts
   (ApproximateReceiveCount, "Using dead-letter queues" in the Amazon SQS Developer Guide),
   and the worker cannot give one back: so it never releases a message while the app is
   unavailable (a released message is received again, +1, by this worker's parked polls
   or another's), and the only receives a message spends are the ones that carry it to an
   app that answers, plus one per drain or crash of the worker that held it.
2. A 2xx is final: the message is deleted and never POSTed again by this worker.
3. FIFO: within a group, nothing is POSTed before every earlier message succeeded or was
   dead-lettered, and never two POSTs at once (a batch carries a group's messages in one).
   A group capped here (GroupConcurrency, local_limits.py): never more of its messages at
   the app at once than the cap; the others wait their turn here, invisible, while other
   groups' messages pass them.
4. An outage of any length, starting at any moment, costs no receive: what the worker
   holds stays held (up to 12 hours of visibility, SQS's limit, and RetentionPeriod), and
   goes to the app, in order, when it answers again.

Every POST's outcome reaches `attempted` (the one place an attempt's outcome is known,
refused ones included: where a record of each failed attempt belongs); `retry` is the one
place where a failure of the message's own is acted on.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from conveyor.client import Message, SQSClient, SQSError, SQSTransportError
from conveyor.client.attempts import answer_head
from conveyor.clock import Clock
from conveyor.runtime.hooks import PastRetention, TryLater, WorkerHook
from conveyor.worker.attempts import AttemptLog
from conveyor.worker.backoff import MAX_VISIBILITY_S, failure_visibility
from conveyor.worker.batcher import Batcher
from conveyor.worker.breaker import Verdict, verdict
from conveyor.worker.config import WorkerConfig
from conveyor.worker.delivery import Outcome
from conveyor.worker.flow import Slots
from conveyor.worker.groups import GroupQueues
from conveyor.worker.job import Job, Waiting, log_fields
from conveyor.worker.metrics import WorkerMetrics
from conveyor.worker.queues import WorkerQueues, send_to_dead_letter

if TYPE_CHECKING:
    from conveyor.worker.outage import AppOutage
    from conveyor.worker.partitions import RoutedBatcher

# The daemon's logger: its lines read (and are filtered) as they did when this was daemon.py.
log = logging.getLogger("conveyor.worker.daemon")

# A dead-letter queue that refused a message's copy is tried again this much later.
_DEAD_LETTER_RETRY_S = 10
# Message ids answered 2xx remembered, to check that none is POSTed again.
_DONE_REMEMBERED = 10_000


class Invariants:
    """The promises of the module's docstring, checked where the fates are decided. A broken
    one is logged as an error (and counted): it is a bug of the worker, never of the app."""

    def __init__(self, queue_name: str) -> None:
        self._queue_name = queue_name
        self.broken: list[str] = []
        self._done: OrderedDict[str, None] = OrderedDict()
        self._posting: dict[str, int] = {}  # group → its places at the app in use
        self._fifo = queue_name.endswith(".fifo")  # SQS requires the suffix

    def check(self, holds: bool, what: str, message: Message) -> None:
        if holds:
            return
        self.broken.append(what)
        log.error("worker invariant broken (%s): queue=%s message=%s", what, self._queue_name,
                  message.message_id)

    def done(self, message: Message) -> None:
        self._done[message.message_id] = None
        if len(self._done) > _DONE_REMEMBERED:
            self._done.popitem(last=False)

    def posting(self, jobs: Sequence[Job], groups: GroupQueues[Job]) -> None:
        """Before one POST of `jobs` (in order): none answered 2xx before; per held group
        (groups.py), its message is at the group's front and no more of the group than its
        cap are at the app at once. FIFO: a group's first message in the POST is its first
        here (the others follow it in the batch), and no other POST of it is open."""
        for job in jobs:
            self.check(job.message.message_id not in self._done, "a 2xx is final", job.message)
        fifo = self._fifo
        for job, group in self._counted(jobs):
            self.check(groups.at_front(group, job),
                       "FIFO order within a group" if fifo else "a group's cap", job.message)
            self.check(self._posting.get(group, 0) < groups.cap,
                       "one POST at a time per group" if fifo else "a group's cap", job.message)
            self._posting[group] = self._posting.get(group, 0) + 1

    def posted(self, jobs: Sequence[Job]) -> None:
        """After that POST."""
        if not self._posting:  # no held group at the app: nothing to count down
            return
        for _job, group in self._counted(jobs):
            left = self._posting.get(group, 0) - 1
            if left > 0:
                self._posting[group] = left
            else:
                self._posting.pop(group, None)

    def _counted(self, jobs: Sequence[Job]) -> list[tuple[Job, str]]:
        """The messages of a POST that take a place at their group's front: each one of a
        capped group; FIFO, a group's first in the POST (the batch carries its followers)."""
        counted: list[tuple[Job, str]] = []
        for job in jobs:
            group = job.group
            if group is not None and not (self._fifo and any(g == group for _, g in counted)):
                counted.append((job, group))
        return counted


class Settlement:
    """Every message the worker holds, and the only code that decides what becomes of one."""

    def __init__(self, config: WorkerConfig, queue_name: str, *, metrics: WorkerMetrics,
                 clock: Clock, rng: random.Random, slots: Slots, waiting: Waiting,
                 stopping: asyncio.Event, hooks: Sequence[WorkerHook],
                 queues_of: Callable[[Message], WorkerQueues], attempts: AttemptLog) -> None:
        self.config = config
        self.attempts = attempts  # each failed attempt, logged and kept with its message
        self.queue_name = queue_name
        self.metrics = metrics
        self.clock = clock
        self.jobs: dict[str, Job] = {}  # by receipt handle
        # FIFO: a cap of one per group, in order; a standard queue's groups are held only
        # when the worker caps them itself (`cap_groups`).
        self.groups: GroupQueues[Job] = (GroupQueues() if queue_name.endswith(".fifo")
                                         else GroupQueues(0, ordered=False))
        self.waiting = waiting
        self.buffer: asyncio.Queue[Job | None] = asyncio.Queue()
        self.invariants = Invariants(queue_name)
        self.outage: AppOutage | None = None  # set by the daemon, which builds both
        self._rng = rng
        self._slots = slots
        self._stopping = stopping
        # Only the hooks that override each step are called: without any, a step costs
        # nothing per message.
        self._admitters = _overriding(hooks, "before_delivery")
        self._listeners = _overriding(hooks, "after_delivery")
        self._deletion_listeners = _overriding(hooks, "after_delete")
        self._queues_of = queues_of
        self._fifo = queue_name.endswith(".fifo")  # SQS requires the suffix
        self._sqs: SQSClient | None = None
        self._delete: Batcher | RoutedBatcher | None = None
        self._change: Batcher | RoutedBatcher | None = None

    def bind(self, sqs: SQSClient, delete: Batcher | RoutedBatcher,
             change: Batcher | RoutedBatcher) -> None:
        """The SQS calls it acts through, once the daemon has them."""
        self._sqs, self._delete, self._change = sqs, delete, change

    def change(self, message_id: str, entry: tuple[str, int]) -> asyncio.Future[str | None]:
        """ChangeMessageVisibility (the heartbeats' extensions)."""
        assert self._change is not None
        return self._change.submit(message_id, entry)

    def cap_groups(self, cap: int) -> None:
        """Hold at most `cap` messages of each MessageGroupId at the app at once (a standard
        queue whose server does not cap its groups; before the first receive)."""
        self.groups.cap = cap

    # -- taking messages in -------------------------------------------------------------

    def accept(self, messages: list[Message], received_s: float) -> None:
        """Hold newly received messages: to the dispatchers, or behind their group's front
        (FIFO, or capped): there a FIFO message takes no slot (see _HELD_PER_SLOT in
        daemon.py), a capped one keeps its own, as this worker keeps it from every other."""
        visible_until = received_s + self.config.visibility_timeout
        now = self.clock.monotonic_s()
        for message in messages:
            job = Job(message, received_s, visible_until, accepted_s=now)
            self.jobs[message.receipt_handle] = job
            if self.groups.cap and message.group_id is not None:
                job.group = message.group_id
                if not self.groups.add(job.group, job):
                    if self.groups.ordered:
                        self._slots.give(1)
                        self.waiting.add(job)
                    continue
            self.buffer.put_nowait(job)
        self.metrics.received(len(messages))

    async def admit(self, job: Job) -> bool:
        """True when the message is to be POSTed now; else it has been dealt with (dead-
        lettered, expired, a duplicate scheduled run, held while the app is unavailable)."""
        if job.exhausted:  # its copy to the dead-letter queue failed before: try again
            await self.to_dead_letter(job, "MaxRetries")
            return False
        try:
            for hook in self._admitters:
                if not await hook.before_delivery(job.message):
                    self._submit_delete(job.message)
                    self.finish(job)
                    return False
        except PastRetention as exc:
            await self.expire(job, exc.age_s)
            return False
        except TryLater as exc:
            await self.retry(job, Outcome(False, exc.reason, 0.0, detail=str(exc)))
            return False
        if self.outage is not None and self.outage.is_open:  # held, not tried
            self.outage.park(job)
            return False
        return True

    # -- after a POST ---------------------------------------------------------------------

    def attempted(self, job: Job, outcome: Outcome) -> None:
        """One POST of `job` came back with `outcome` (a probe's too): every attempt's
        outcome passes here once, before its message is settled or held. The hooks hear of
        it, and each failed attempt is logged and kept with its message (status, reason,
        the app's answer, when)."""
        if not outcome.ok:
            self.attempts.failed(self._queues_of(job.message).queue_url, job.message, outcome)
        for hook in self._listeners:
            hook.after_delivery(job.message, outcome.ok, outcome.status)

    async def settle(self, job: Job, outcome: Outcome) -> None:
        """Act on a POST's outcome: delete, retry, or hold it while the app is unavailable."""
        self.attempted(job, outcome)
        if self.outage is not None and self.outage.hold_if_unavailable(job, outcome):
            return
        if outcome.ok:
            self.done(job, outcome)
        else:
            await self.retry(job, outcome)

    def done(self, job: Job, outcome: Outcome) -> None:
        """The app answered 2xx: delete it, for good."""
        message = job.message
        self.invariants.done(message)
        self._delete_for_good(message)
        self.finish(job)
        self.metrics.succeeded(outcome.elapsed_s)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("job done: queue=%s message=%s status=%s time=%.3fs", self.queue_name,
                      message.message_id, outcome.status, outcome.elapsed_s,
                      extra=log_fields(self.queue_name, message, outcome="done",
                                       status=outcome.status))

    async def retry(self, job: Job, outcome: Outcome, *, counted: bool = False) -> None:
        """The message failed with `outcome` (its own failure: `attempted` has seen it):
        the one place a failure is acted on. Try it again after a back-off: SQS gives it back (or,
        once its next receive would exceed maxReceiveCount, moves it to the dead-letter
        queue) - unless later messages of its FIFO group wait here behind it: then it is
        tried again, or dead-lettered, here (SQS would not hand it out again while its
        group's later messages are in flight, and handing those back too would cost each
        of them a receive)."""
        message, config = job.message, self.config
        self.invariants.check(verdict(outcome) is not Verdict.DOWN,
                              "a refused connection is no failure of the message", message)
        count = message.receive_count
        limit = self._queues_of(message).max_receive_count
        final = limit is not None and count >= limit
        if final:
            seconds = 0
            self.metrics.dead_lettered()
        elif outcome.retry_after_s is not None:
            seconds = min(outcome.retry_after_s, MAX_VISIBILITY_S)
        else:
            seconds = failure_visibility(count, config.error_visibility_timeout,
                                         config.max_error_visibility_timeout, self._rng)
        if not counted:
            self.metrics.failed(outcome.status, outcome.elapsed_s)
        held = self._holds_group(job)
        after = "moves to the dead-letter queue" if final else f"retry in {seconds}s"
        if held:
            after += f" (group {job.group}: {self.groups.behind(job.group or '')} behind it)"
        detail = f" ({outcome.detail})" if outcome.detail else ""
        answer = answer_head(outcome.answer_head, 120)  # enough to tell why; all is kept
        log.warning("job failed: queue=%s message=%s status=%s time=%.3fs receive_count=%d "
                    "%s%s%s", self.queue_name, message.message_id, outcome.status,
                    outcome.elapsed_s, count, after, detail,
                    f" answer={answer!r}" if answer else "",
                    extra=log_fields(self.queue_name, message,
                                     outcome="dead-letter" if final else "retry",
                                     status=outcome.status, receive_count=count,
                                     retry_in_s=seconds))
        if not held:
            self._hand_back(job, seconds)
        elif final:
            job.exhausted = True
            await self.to_dead_letter(job, "MaxRetries")
        else:
            # Tried again here, not received again: count the attempt as SQS would, for
            # maxReceiveCount and for the app's X-Aws-Sqsd-Receive-Count.
            message.attributes["ApproximateReceiveCount"] = str(count + 1)
            self.hold(job, seconds)

    # -- the fates ------------------------------------------------------------------------

    def hold(self, job: Job, seconds: float) -> None:
        """Keep a message here (invisible, its group held back) and dispatch it again after
        `seconds`."""
        job.started_s = None
        self.waiting.add(job)
        job.retry = asyncio.get_running_loop().call_later(seconds, self.dispatch, job)

    def release(self, job: Job) -> None:
        """Hand a message back at once (visibility 0) so another worker can take it: only
        when it waits for nothing here (buffered past half its visibility) or the worker
        drains; never while the app is unavailable (the module's rule 1)."""
        assert self._change is not None
        if job.released:
            return
        self.invariants.check(self._stopping.is_set() or self.outage is None
                              or not self.outage.is_open,
                              "no release while the app is unavailable", job.message)
        job.released = True
        self._change.submit(job.message.message_id, (job.message.receipt_handle, 0))
        self.metrics.released()
        log.info("released: queue=%s message=%s", self.queue_name, job.message.message_id,
                 extra=log_fields(self.queue_name, job.message, outcome="released"))
        self.finish(job)

    def dispatch(self, job: Job) -> None:
        """Hand a held message to the dispatchers now, ahead of the next receive."""
        job.retry = None
        if (job.released or job.message.receipt_handle not in self.jobs
                or job.started_s is not None):  # at the app (in its group's batch)
            return
        if job.waiting:  # held without a slot: it takes one now (a capped one kept its own)
            self.waiting.discard(job)
            self._slots.overdraw(1)
        self.buffer.put_nowait(job)

    async def expire(self, job: Job, age_s: float) -> None:
        """RetentionPeriod is over: delete the message unposted (as Elastic Beanstalk does),
        or with ExpiredToDeadLetter move it to the dead-letter queue."""
        message = job.message
        if (self.config.expired_to_dead_letter
                and self._queues_of(message).dead_letter_url is not None):
            if await self.to_dead_letter(job, f"RetentionPeriod, age {age_s:.0f}s"):
                self.metrics.expired()
            return
        self._delete_for_good(message)
        self.finish(job)
        self.metrics.expired()
        log.info("message expired, deleted unposted: queue=%s message=%s age=%.0fs "
                 "RetentionPeriod=%ds", self.queue_name, message.message_id, age_s,
                 self.config.retention_period,
                 extra=log_fields(self.queue_name, message, outcome="expired",
                                  age_s=round(age_s, 3)))

    async def to_dead_letter(self, job: Job, reason: str) -> bool:
        """Copy a message into the dead-letter queue, then delete it; True when done.
        If the copy fails, the message is tried again later: nothing disappears."""
        assert self._sqs is not None
        message = job.message
        dead_letter_url = self._queues_of(message).dead_letter_url
        assert dead_letter_url is not None
        try:
            copy_id = await send_to_dead_letter(self._sqs, dead_letter_url, message)
        except (SQSTransportError, SQSError) as exc:
            log.warning("could not move to the dead-letter queue, trying again in %ds: "
                        "queue=%s message=%s: %s", _DEAD_LETTER_RETRY_S, self.queue_name,
                        message.message_id, exc)
            self._later(job, _DEAD_LETTER_RETRY_S)
            return False
        self._submit_delete(message)
        self.finish(job)
        log.warning("moved to the dead-letter queue (%s): queue=%s message=%s "
                    "dead_letter_message=%s", reason, self.queue_name, message.message_id,
                    copy_id, extra=log_fields(self.queue_name, message, outcome="dead-lettered",
                                              dead_letter_message_id=copy_id))
        return True

    def finish(self, job: Job) -> None:
        """The worker is done with this message; its group's next (FIFO, or capped) may go."""
        self.jobs.pop(job.message.receipt_handle, None)
        if self.outage is not None:
            self.outage.forget(job)
        self.waiting.discard(job)
        if job.retry is not None:
            job.retry.cancel()
            job.retry = None
        if job.group is None:
            return
        following = self.groups.remove(job.group, job)
        if following is None:
            return
        if self._stopping.is_set():
            if following.started_s is None:  # else at the app, in the same batch
                self.release(following)  # and so, one by one, the rest of its group
        else:
            self.dispatch(following)

    def release_unstarted(self) -> None:
        """The drain: hand back every message not at the app (buffered, waiting behind its
        group, held for a retry or through an outage). Each will cost one receive."""
        while not self.buffer.empty():
            job = self.buffer.get_nowait()
            if job is not None:
                self.release(job)
        for job in list(self.jobs.values()):
            if job.started_s is None:
                self.release(job)

    # -- helpers --------------------------------------------------------------------------

    def _hand_back(self, job: Job, seconds: int) -> None:
        """Return a message to SQS, visible again after `seconds`."""
        assert self._change is not None
        self.finish(job)
        self._change.submit(job.message.message_id, (job.message.receipt_handle, seconds))

    def _later(self, job: Job, seconds: int) -> None:
        """Try again after `seconds`: here if its FIFO group waits behind it, else via SQS."""
        if self._holds_group(job):
            self.hold(job, seconds)
        else:
            self._hand_back(job, seconds)

    def _holds_group(self, job: Job) -> bool:
        """True when later messages of this one's FIFO group wait here behind it."""
        return (job.group is not None and self.groups.ordered
                and self.groups.behind(job.group) > 0
                and not self._stopping.is_set())

    def _delete_for_good(self, message: Message) -> None:
        """Delete a message no copy of which lives on (done, or expired); the hooks hear
        of it (a stored body goes too). A dead-letter copy keeps its body."""
        self._submit_delete(message, for_good=True)

    def _submit_delete(self, message: Message, *, for_good: bool = False) -> None:
        assert self._delete is not None
        future = self._delete.submit(message.message_id, message.receipt_handle)
        future.add_done_callback(lambda f: self._deleted(message, f.result(), for_good))

    def _deleted(self, message: Message, refusal: str | None, for_good: bool) -> None:
        if for_good:
            for hook in self._deletion_listeners:
                hook.after_delete(message, refusal)
        if refusal is not None:
            log.warning("delete failed, the message will be delivered again: queue=%s "
                        "message=%s code=%s", self.queue_name, message.message_id, refusal,
                        extra=log_fields(self.queue_name, message, outcome="delete-failed",
                                         code=refusal))


def _overriding(hooks: Sequence[WorkerHook], step: str) -> list[WorkerHook]:
    """The hooks whose class overrides WorkerHook's do-nothing `step`."""
    default = getattr(WorkerHook, step)
    return [hook for hook in hooks if getattr(type(hook), step) is not default]
