"""One queue's page: counts, the operator's actions on it, dead letters and their
redrive, messages, attributes and tags. Each action's form is shown only when the
operator's access key allows the call it makes (calls.Operator.may)."""

from __future__ import annotations

from html import escape

from conveyor.server.console import attribute_form, bulk, charts, messages, parts
from conveyor.server.console.frame import PREFIX, render
from conveyor.server.console.visit import Visit
from conveyor.server.http import Response
from conveyor.service import Counts, QueueRecord, RequestContext, Service
from conveyor.service.controls import is_paused
from conveyor.sqs.errors import SqsError

MOVE_TASKS_SHOWN = 10  # ListMessageMoveTasks' most


class QueuePage:
    def __init__(self, service: Service, jobs: bulk.Jobs) -> None:
        self.service = service
        self.jobs = jobs

    async def page(self, v: Visit, region: str, name: str) -> Response:
        ctx = v.ctx(region)
        if not await v.may("GetQueueAttributes", {"QueueUrl": name}, region):
            return _not_found(v, "Your access key may not look at this queue.")
        try:
            queue = await self.service.queue(ctx, name)
            attributes = (await self.service.get_queue_attributes(
                ctx, {"QueueUrl": name, "AttributeNames": ["All"]})).get("Attributes", {})
            sources = (await self.service.list_dead_letter_source_queues(
                ctx, {"QueueUrl": name})).get("queueUrls", [])
            tasks = (await self.service.list_message_move_tasks(
                ctx, {"SourceArn": ctx.queue_arn(name), "MaxResults": MOVE_TASKS_SHOWN}))
            await self.service.sample_oldest_age(queue)
        except SqsError as error:
            return _not_found(v, error.message)
        counts = Counts(int(attributes.get("ApproximateNumberOfMessages", 0)),
                        int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
                        int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)))
        source_names = [u.rsplit("/", 1)[-1] for u in sources]
        body = [f'<p><a href="{PREFIX}">All queues</a></p>', v.notice(),
                f"<p>URL <code>{escape(ctx.queue_url(name))}</code><br>"
                f"ARN <code>{escape(ctx.queue_arn(name))}</code></p>",
                f'<section id="counts" data-live>{_paused(queue)}{_counts(counts)}'
                f"{_limits(queue)}</section>",
                '<section id="activity" data-live>' + await charts.queue_activity(
                    self.service, queue, v.query) + "</section>",
                await self._actions(v, ctx, queue),
                "<h2>Dead letters</h2>",
                f"<p>Go to: {parts.redrive_cell(queue)}<br>"
                f"Come from: {parts.sources_cell(region, source_names)}</p>"]
        if source_names:
            body.append(await self._redrive_form(v, ctx, queue, source_names))
        body.append(await _tasks(v, ctx, tasks["Results"], self.service.clock.now_ms(),
                                 self.jobs.of(region, name)))
        body.append("<h2>Messages</h2>")
        if await v.may("ReceiveMessage", {"QueueUrl": name}, region):
            can_delete, can_move = await _may_change(v, ctx, name)
            body.append(await messages.section(self.service, v, queue, counts, can_delete,
                                               can_move))
        else:
            body.append(parts.muted("Your access key may not receive this queue's messages, "
                                    "so the console does not show them."))
        body += ["<h2>Attributes</h2>", '<section id="attributes" data-live>', parts.table(
            ["Name", "Value"], [[escape(k), parts.attribute_value(k, val)]
                                for k, val in sorted(attributes.items())]), "</section>",
                 await _edit_form(v, self.service, queue)]
        body += ["<h2>Tags</h2>", parts.table(["Key", "Value"], [
            [escape(k), escape(val)] for k, val in sorted(queue.tags.items())])
            if queue.tags else parts.muted("none"), await _tags_form(v, queue)]
        return render(200, name, "\n".join(body), refresh=True, who=v.who, header=v.header)

    async def message(self, v: Visit, region: str, name: str, message_id: str) -> Response:
        if not await v.may("ReceiveMessage", {"QueueUrl": name}, region):
            return _not_found(v, "Your access key may not look at this queue's messages.")
        try:
            queue = await self.service.queue(v.ctx(region), name)
        except SqsError as error:
            return _not_found(v, error.message)
        can_delete = await v.may("DeleteMessage", {"QueueUrl": name}, region)
        can_retry = await v.may("ChangeMessageVisibility", {"QueueUrl": name}, region)
        return await messages.page(self.service, v, queue, message_id, can_delete, can_retry)

    async def bulk(self, v: Visit, region: str, name: str) -> Response:
        """Everything matching the list's filter: counted, and acted on once confirmed."""
        if not await v.may("ReceiveMessage", {"QueueUrl": name}, region):
            return _not_found(v, "Your access key may not look at this queue's messages.")
        ctx = v.ctx(region)
        try:
            queue = await self.service.queue(ctx, name)
        except SqsError as error:
            return _not_found(v, error.message)
        can_delete, can_move = await _may_change(v, ctx, name)
        return await bulk.page(self.service, v, queue, can_delete, can_move)

    async def _actions(self, v: Visit, ctx: RequestContext, queue: QueueRecord) -> str:
        fields = {"region": queue.region, "queue": queue.name}
        request = {"QueueUrl": queue.name}
        out = []
        toggle = "resume-queue" if is_paused(queue) else "pause-queue"
        if await v.may("ResumeQueue" if is_paused(queue) else "PauseQueue", request,
                       queue.region):
            label = "Resume delivery" if is_paused(queue) else "Pause delivery"
            out.append(parts.form(toggle, v.csrf, fields, f"<button>{label}</button>",
                                  css="inline"))
        if await v.may("SendMessage", request, queue.region):
            out.append(parts.form("send-message", v.csrf, fields, _send_fields(queue)))
        if await v.may("PurgeQueue", request, queue.region):
            out.append(parts.form("purge-queue", v.csrf, fields, (
                "<details><summary>Purge</summary><p>Deletes every message in the queue. "
                "SQS allows one purge a minute.</p>" + parts.confirm_by_name(queue.name) +
                '<button class="danger">Purge queue</button></details>')))
        if await v.may("DeleteQueue", request, queue.region):
            out.append(parts.form("delete-queue", v.csrf, fields, (
                "<details><summary>Delete queue</summary><p>Deletes the queue and its "
                "messages; its name cannot be used again for a minute.</p>" +
                parts.confirm_by_name(queue.name) +
                '<button class="danger">Delete queue</button></details>')))
        return f'<div class="actions">{"".join(out)}</div>' if out else ""

    async def _redrive_form(self, v: Visit, ctx: RequestContext, queue: QueueRecord,
                            source_names: list[str]) -> str:
        if not await v.may("StartMessageMoveTask", {"SourceArn": ctx.queue_arn(queue.name)},
                     queue.region):
            return ""
        # A name typed, its sources offered: a list of every queue would weigh the page
        # down on a server with thousands.
        options = "".join(f'<option value="{escape(n)}">' for n in sorted(source_names))
        return parts.form("redrive", v.csrf, {"region": queue.region, "queue": queue.name}, (
            '<div class="bar"><label>Redrive all messages to <input name="destination" '
            'list="redrive-sources" autocomplete="off" placeholder="the queue each came '
            f'from" aria-label="destination queue"></label><datalist id="redrive-sources">'
            f"{options}</datalist>"
            '<label>at most <input name="rate" inputmode="numeric" pattern="[0-9]*" '
            'placeholder="500" aria-label="messages per second"> messages/s</label>'
            "<button>Start redrive</button></div>"))


async def _may_change(v: Visit, ctx: RequestContext, name: str) -> tuple[bool, bool]:
    """Whether the key may delete the queue's messages, and move them elsewhere."""
    return (await v.may("DeleteMessage", {"QueueUrl": name}, ctx.region),
            await v.may("StartMessageMoveTask", {"SourceArn": ctx.queue_arn(name)},
                        ctx.region))


async def _edit_form(v: Visit, service: Service, queue: QueueRecord) -> str:
    """SetQueueAttributes as a typed form (attribute_form.py)."""
    if not await v.may("SetQueueAttributes", {"QueueUrl": queue.name}, queue.region):
        return ""
    picked = await attribute_form.candidates(service, queue, v.sees)
    inner = attribute_form.fields(queue, attribute_form.current(queue), picked,
                                  service.limits)
    return parts.form("edit-queue", v.csrf, {"region": queue.region, "queue": queue.name},
                      f"<details><summary>Edit attributes</summary>{inner}</details>")


async def _tags_form(v: Visit, queue: QueueRecord) -> str:
    """TagQueue / UntagQueue: the tags as lines; a line removed is a tag removed."""
    request = {"QueueUrl": queue.name}
    if not (await v.may("TagQueue", request, queue.region)
            or await v.may("UntagQueue", request, queue.region)):
        return ""
    lines = "\n".join(f"{k} = {val}" for k, val in sorted(queue.tags.items()))
    return parts.form("edit-tags", v.csrf, {"region": queue.region, "queue": queue.name}, (
        "<details><summary>Edit tags</summary>"
        '<label>Tags <span class="muted">(<code>key = value</code> a line)</span>'
        f'<textarea name="tags">{escape(lines)}</textarea></label>'
        "<button>Save tags</button></details>"))


def _send_fields(queue: QueueRecord) -> str:
    fifo = ('<label>Message group id<br><input name="group_id" required></label>'
            '<label>Deduplication id <span class="muted">(needed unless content-based '
            'deduplication is on)</span><br><input name="dedup_id"></label>'
            if queue.fifo else
            '<label>Delay (s)<br><input name="delay" inputmode="numeric" pattern="[0-9]*">'
            '</label><label>Message group id <span class="muted">(optional: fair queues)'
            '</span><br><input name="group_id"></label>')
    return ("<details><summary>Send a message</summary>"
            '<label>Body<textarea name="body" required></textarea></label>'
            '<label>Message attributes <span class="muted">(<code>name = value</code> or '
            "<code>name (Number) = 5</code>, a line)</span>"
            f'<textarea name="attributes"></textarea></label>{fifo}'
            "<button>Send message</button></details>")


def _paused(queue: QueueRecord) -> str:
    if not is_paused(queue):
        return ""
    return parts.notice("Delivery paused: receives (and workers) get nothing from this "
                        "queue until it is resumed; sends, deletes and moves go on.",
                        error=True)


def _limits(queue: QueueRecord) -> str:
    """What bounds the queue's receives and delays, where anything does."""
    shown = parts.limits(queue)
    if not shown:
        return ""
    return '<h2>Limits</h2>' + parts.table(["Limit", "Setting"], [
        [escape(what), escape(much)] for what, much in shown])


def _counts(counts: Counts) -> str:
    return parts.table(["Visible", "In flight", "Delayed"], [parts.count_cells(counts)],
                       numeric=(0, 1, 2))


async def _tasks(v: Visit, ctx: RequestContext, tasks: list[dict], now_ms: int,
                 jobs: list[bulk.Job]) -> str:
    """The queue's move tasks (redrive all) and this node's bulk jobs, with progress."""
    if not tasks and not jobs:
        return '<section id="tasks" data-live></section>'
    cancels = {}
    for j in jobs:
        if j.status == "RUNNING" and not j.cancelling and await v.may(
                *bulk.permission(j.kind, ctx, j.queue, j.destination), ctx.region):
            cancels[j.id] = parts.form("cancel-bulk", v.csrf, {
                "region": ctx.region, "queue": j.queue, "job": str(j.id)},
                '<button class="danger">Cancel</button>')
    done = ("<h2>Bulk actions</h2>" + parts.table(
        ["Status", "Done", "What", "Started", "Destination", "Failure", ""],
        bulk.rows(jobs, now_ms, cancels))) if jobs else ""
    if not tasks:
        return f'<section id="tasks" data-live>{done}</section>'
    rows = []
    for t in tasks:
        moved = t["ApproximateNumberOfMessagesMoved"]
        to_move = t["ApproximateNumberOfMessagesToMove"]
        progress = (f'<progress value="{moved}" max="{max(to_move, moved, 1)}"></progress> '
                    f"{moved:,} of {to_move:,}")
        cancel = ""
        if "TaskHandle" in t and await v.may("CancelMessageMoveTask",
                                           {"TaskHandle": t["TaskHandle"]}, ctx.region):
            cancel = parts.form("cancel-redrive", v.csrf, {
                "region": ctx.region, "queue": t["SourceArn"].rsplit(":", 1)[-1],
                "task": t["TaskHandle"]}, '<button class="danger">Cancel</button>')
        destination = t.get("DestinationArn", "")
        rows.append([escape(t["Status"]), progress,
                     escape(str(t.get("MaxNumberOfMessagesPerSecond", "")) or "default"),
                     parts.when(t["StartedTimestamp"], now_ms),
                     escape(destination.rsplit(":", 1)[-1] if destination
                            else "their source queues"),
                     escape(t.get("FailureReason", "")), cancel])
    table = parts.table(["Status", "Moved", "Rate (messages/s)", "Started", "Destination",
                         "Failure", ""], rows)
    return (f'<section id="tasks" data-live><h2>Message move tasks</h2>{table}{done}'
            "</section>")


def _not_found(v: Visit, reason: str) -> Response:
    return render(404, "Queue not found", f"<p>{escape(reason)} "
                  f'<a href="{PREFIX}">All queues</a></p>', who=v.who, header=v.header)
