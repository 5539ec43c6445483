"""Everything matching a filter, acted on at once: delete, move or redrive, with progress.

The filter is the queue page's (a search, the failing view, or both: messages.selects).
`/console/queues/<region>/<name>/bulk?search=...&view=...` counts the messages it takes,
through the whole queue (a keyset scan, SCAN_STEP messages a read, so memory stays
bounded at any depth), and asks for the queue's name or that count to be typed before the
`bulk-messages` action starts a job. A job scans the queue again and acts on each step's
matching messages exactly as the selection's buttons act on ticked ones (actions.py: each
SQS call checked against the operator's key by server/authz.py), so a message received
meanwhile is left to its receiver. Its progress shows with the queue's move tasks, with a
Cancel button for a key that could have started it: a cancelled job stops before its next
step, and what it did stays done.

Jobs run on the node that started them and are kept in its memory (the last MAX_JOBS):
behind a load balancer their progress shows on that node's pages; a restart ends a job
part-way, and what it did stays done.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from html import escape

from conveyor.server.console import parts
from conveyor.server.console.frame import render
from conveyor.server.console.messages import FAILING, selects
from conveyor.server.console.visit import Visit
from conveyor.server.http import Response
from conveyor.service import QueueRecord, RequestContext, Service, StoredMessage, StoreError
from conveyor.sqs.errors import SqsError

log = logging.getLogger("conveyor.server.console")

SCAN_STEP = 500  # messages read (and acted on) per step
MAX_JOBS = 50  # jobs remembered, finished or not
KINDS = {"delete": "Delete", "move": "Move", "redrive": "Redrive"}

def permission(kind: str, ctx: RequestContext, queue: str, destination: str
               ) -> tuple[str, dict[str, str]]:
    """The call a key must be allowed (server/authz.py) to start, or cancel, a job of this
    kind: DeleteMessage on the queue, or starting a move task between the two queues
    (StartMessageMoveTask's own check; no destination: each dead letter's source)."""
    if kind == "delete":
        return "DeleteMessage", {"QueueUrl": ctx.queue_url(queue)}
    request = {"SourceArn": ctx.queue_arn(queue)}
    if destination:
        request["DestinationArn"] = ctx.queue_arn(destination)
    return "StartMessageMoveTask", request


# Acts on one step's matching messages; how many it deleted or moved.
Act = Callable[[list[StoredMessage]], Awaitable[int]]


@dataclass(frozen=True, slots=True)
class Filter:
    wanted: str  # searched text ("" for none)
    failing: bool  # the failing view's messages only

    def describe(self) -> str:
        what = "failing messages" if self.failing else "messages"
        return f"{what} matching “{self.wanted}”" if self.wanted else what

    def query(self) -> dict[str, str]:
        return {"search": self.wanted, "view": FAILING if self.failing else ""}


def filter_of(v: Visit) -> Filter:
    return Filter(v.query.get("search", ""), v.query.get("view") == FAILING)


async def matching(service: Service, queue: QueueRecord, f: Filter
                   ) -> AsyncIterator[list[StoredMessage]]:
    """The queue's messages the filter takes, a step at a time, in visibility order."""
    after: tuple[int, int] | None = None
    while True:
        step = await service.peek(queue, SCAN_STEP, after)
        yield [m for m, _ in step if selects(m, f.wanted, f.failing)]
        if len(step) < SCAN_STEP:
            return
        last, visible_at = step[-1]
        after = (visible_at, last.seq)


async def count(service: Service, queue: QueueRecord, f: Filter) -> int:
    return sum([len(found) async for found in matching(service, queue, f)])


@dataclass(slots=True)
class Job:
    id: int
    region: str
    queue: str
    kind: str  # a key of KINDS
    filter: Filter
    destination: str  # a move's queue ("" for a redrive: each to its source)
    expected: int  # matching when confirmed
    by: str  # the access key that started it
    started_ms: int
    status: str = "RUNNING"  # then COMPLETED, CANCELLED or FAILED
    done: int = 0  # deleted or moved
    failure: str = ""
    cancelling: bool = False  # asked to stop: it does before its next step


class Jobs:
    """This node's bulk jobs, newest last."""

    def __init__(self) -> None:
        self._jobs: OrderedDict[int, Job] = OrderedDict()
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()

    def get(self, job_id: int) -> Job | None:
        return self._jobs.get(job_id)

    def of(self, region: str, queue: str) -> list[Job]:
        return [j for j in reversed(self._jobs.values())
                if j.region == region and j.queue == queue]

    def start(self, job: Job, service: Service, source: QueueRecord, act: Act) -> Job:
        job.id = next(self._ids)
        self._jobs[job.id] = job
        while len(self._jobs) > MAX_JOBS:
            self._jobs.popitem(last=False)
        task = asyncio.get_running_loop().create_task(self._run(job, service, source, act))
        self._tasks.add(task)  # held until done: the loop keeps only weak references
        task.add_done_callback(self._tasks.discard)
        return job

    async def _run(self, job: Job, service: Service, source: QueueRecord, act: Act) -> None:
        try:
            async for found in matching(service, source, job.filter):
                if job.cancelling:
                    break
                if found:
                    job.done += await act(found)
                await asyncio.sleep(0)  # a step at a time: a cancel is served between them
            job.status = "CANCELLED" if job.cancelling else "COMPLETED"
        except (SqsError, StoreError) as exc:
            job.status, job.failure = "FAILED", str(exc)
        except Exception as exc:  # a task nobody awaits: told on the page and logged
            log.exception("console: bulk %s of %s failed", job.kind, job.queue)
            job.status, job.failure = "FAILED", f"internal error: {type(exc).__name__}"
        log.info("console: bulk %s of %s on %s by access key %s: %s, %d done", job.kind,
                 job.filter.describe(), job.queue, job.by, job.status, job.done,
                 extra={"queue": job.queue, "access_key": job.by})


def progress(job: Job) -> str:
    """How far a job got: "N of M", or "cancelled after N of M"."""
    so_far = f"{job.done:,} of {job.expected:,}"
    return f"cancelled after {so_far}" if job.status == "CANCELLED" else so_far


def rows(jobs: list[Job], now_ms: int, cancels: dict[int, str]) -> list[list[str]]:
    """The queue page's progress rows of these jobs (beside its move tasks); `cancels`:
    the Cancel form of each running job the operator may cancel."""
    out = []
    for j in jobs:
        most = max(j.expected, j.done, 1)
        what = f"{KINDS[j.kind]} {j.filter.describe()}"
        status = "CANCELLING" if j.cancelling and j.status == "RUNNING" else j.status
        out.append([escape(status), f'<progress value="{j.done}" max="{most}"></progress> '
                    f"{escape(progress(j))}", escape(what), parts.when(j.started_ms, now_ms),
                    escape(j.destination or ("their source queues" if j.kind == "redrive"
                                             else "")), escape(j.failure),
                    cancels.get(j.id, "")])
    return out


async def page(service: Service, v: Visit, queue: QueueRecord, can_delete: bool,
               can_move: bool) -> Response:
    """What the filter takes, counted through the whole queue, and the form that acts
    on all of it once the queue's name or the count is typed."""
    f = filter_of(v)
    back = parts.queue_link(queue.region, queue.name)
    listed = parts.queue_path(queue.region, queue.name, **f.query())
    if not f.wanted and not f.failing:
        return render(400, "Nothing filtered", f"<p>Search {back}'s messages, or open its "
                      "failing view, then act on everything matching (to delete every "
                      "message, purge the queue).</p>", who=v.who, header=v.header)
    n = await count(service, queue, f)
    intro = (f'<p>{back} · <a href="{escape(listed)}">the list</a></p>'
             f"<p><b>{n:,}</b> {escape(f.describe())} in {escape(queue.name)}, counted "
             "through the whole queue now; a job acts on those it finds as it goes (a "
             "message received meanwhile is left to its receiver).</p>")
    if not n or not (can_delete or can_move):
        note = ("Nothing to act on." if not n else
                "Your access key may neither delete nor move this queue's messages.")
        return render(200, "Everything matching", intro + parts.muted(note), who=v.who,
                      header=v.header)
    choices = []
    if can_delete:
        choices.append('<label><input type="radio" name="kind" value="delete" checked> '
                       "Delete them</label>")
    if can_move:
        checked = "" if can_delete else " checked"
        choices.append(f'<label><input type="radio" name="kind" value="move"{checked}> Move '
                       'them to <input name="destination" autocomplete="off" '
                       'aria-label="queue to move to" placeholder="queue name"></label>'
                       '<label><input type="radio" name="kind" value="redrive"> Redrive '
                       "them: each dead letter back to the queue it came from</label>")
    fields = {"region": queue.region, "queue": queue.name, "expected": str(n), **f.query()}
    form = parts.form("bulk-messages", v.csrf, fields, (
        f'<fieldset><legend>Act on all {n:,}</legend>{"".join(choices)}'
        f"{parts.confirm_by_name(queue.name, also=str(n))}"
        f'<button class="danger">Apply to {n:,} messages</button></fieldset>'))
    return render(200, "Everything matching", intro + form, who=v.who, header=v.header)
