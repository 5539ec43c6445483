"""What the console's buttons do: each one SQS call (or a few) through calls.Calls.

Handlers run only behind Console._post's gate (origin, form, CSRF token). Each answers
with a redirect to the page to look at next, telling what was done (`?done=`), or with
an error page carrying the SQS error the API would have answered (AccessDenied is 403),
and then nothing has changed. Destructive actions also need the queue's name typed into
their form: checked here, not only by the page's script.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from html import escape
from typing import Any
from urllib.parse import urlencode

from conveyor.server.console import attribute_form, bulk, forms, messages, overview, parts
from conveyor.server.console.auth import CSRF_FIELD, Session
from conveyor.server.console.calls import Calls, Operator
from conveyor.server.console.forms import Form, FormError
from conveyor.server.console.frame import PREFIX, redirect, render
from conveyor.server.http import Request, Response
from conveyor.service import QueueRecord, RequestContext, Service, StoredMessage
from conveyor.service.inspect import backing_off
from conveyor.service.messages import encode_handle
from conveyor.service.validate import plain_name
from conveyor.sqs.errors import SqsError

# A state-changing console request: (request, its form, its session) -> response. Runs only
# behind Console._post's checks.
Action = Callable[[Request, Form, Session | None], Awaitable[Response]]
Handler = Callable[[Request, Form, Operator], Awaitable[Response]]


class Actions:
    def __init__(self, service: Service, calls: Calls, account_id: str,
                 operator_of: Callable[[Session | None], Operator], jobs: bulk.Jobs) -> None:
        self.service = service
        self.jobs = jobs
        self.calls = calls
        self.account_id = account_id
        self.operator_of = operator_of

    def table(self) -> dict[str, Action]:
        """POST /console/<name> -> its action."""
        handlers: dict[str, Handler] = {
            "create-queue": self.create_queue, "send-message": self.send_message,
            "edit-queue": self.edit_queue, "edit-tags": self.edit_tags,
            "purge-queue": self.purge_queue, "delete-queue": self.delete_queue,
            "delete-messages": self.delete_messages, "redrive": self.redrive,
            "cancel-redrive": self.cancel_redrive, "drain-worker": self.drain_worker,
            "move-messages": self.move_messages, "bulk-messages": self.bulk_messages,
            "cancel-bulk": self.cancel_bulk,
            "retry-now": self.retry_now, "pause-queue": self.pause_queue,
            "resume-queue": self.resume_queue}
        return {name: self._guarded(h) for name, h in handlers.items()}

    def _guarded(self, handler: Handler) -> Action:
        async def run(req: Request, form: Form, session: Session | None) -> Response:
            try:
                return await handler(req, form, self.operator_of(session))
            except FormError as error:
                return _refused(400, "InvalidForm", str(error), form)
            except SqsError as error:
                return _refused(error.status, error.code, error.message, form)
        return run

    def _ctx(self, req: Request, form: Form, operator: Operator) -> RequestContext:
        region = form.get("region", "")
        if not region or not plain_name(region) or len(region) > 64:
            raise FormError("The form names no region.")
        host = req.headers.get("host") or "localhost"
        return RequestContext(region, self.account_id, f"{req.scheme}://{host}",
                              operator.key.key_id if operator.key else "")

    # --- queues ---------------------------------------------------------------------

    async def create_queue(self, req: Request, form: Form, operator: Operator) -> Response:
        """CreateQueue from the create form; a number out of its range comes back under
        its field with everything typed, nothing created."""
        ctx = self._ctx(req, form, operator)
        typed = attribute_form.typed_of(form)
        numbers = attribute_form.numbers(form, self.service.limits, {}, typed)
        if typed.errors:
            again = overview.create_form(form.get(CSRF_FIELD, ""), typed, self.service.limits)
            return render(400, "Not done", "<p>Some values are not ones a queue takes: "
                          f'nothing was created. <a href="{PREFIX}">All queues</a></p>{again}')
        request = forms.create_queue(form, ctx, numbers)
        await self.calls.call(operator, ctx, "CreateQueue", request)
        return _to_queue(ctx.region, request["QueueName"], done="created")

    async def edit_queue(self, req: Request, form: Form, operator: Operator) -> Response:
        """SetQueueAttributes with what the typed form changed (the redrive policy too);
        values out of the service's ranges come back under their fields, nothing set."""
        ctx, name = self._ctx(req, form, operator), form.get("queue", "")
        await self.calls.authorize(operator, ctx, "SetQueueAttributes",
                                   {"QueueUrl": ctx.queue_url(name)})
        queue = await self.service.queue(ctx, name)
        changes, typed = attribute_form.changes(form, ctx, queue, self.service.limits)
        if typed.errors:  # nothing set: the form again, as typed, each error by its field
            picked = await attribute_form.candidates(self.service, queue, operator.sees)
            again = parts.form("edit-queue", form.get(CSRF_FIELD, ""), {
                "region": ctx.region, "queue": name},
                attribute_form.fields(queue, typed, picked, self.service.limits))
            return render(400, "Not done", "<p>Some values are not ones the queue takes: "
                          f"nothing was changed. Back to {parts.queue_link(ctx.region, name)}"
                          f"</p><h2>Edit attributes</h2>{again}")
        if not changes:
            return _to_queue(ctx.region, name, done="unchanged")
        await self.calls.call(operator, ctx, "SetQueueAttributes",
                              {"QueueUrl": ctx.queue_url(name), "Attributes": changes})
        return _to_queue(ctx.region, name, done="edited", id=", ".join(sorted(changes)))

    async def edit_tags(self, req: Request, form: Form, operator: Operator) -> Response:
        """TagQueue and UntagQueue to make the queue's tags the form's lines."""
        ctx, name = self._ctx(req, form, operator), form.get("queue", "")
        url = ctx.queue_url(name)
        queue = await self.service.queue(ctx, name)
        added, removed = forms.edited_tags(form, queue.tags)
        # Both checked before either runs: a key allowed one but not the other changes nothing.
        if added:
            await self.calls.authorize(operator, ctx, "TagQueue", {"QueueUrl": url})
        if removed:
            await self.calls.authorize(operator, ctx, "UntagQueue", {"QueueUrl": url})
        if added:
            await self.calls.call(operator, ctx, "TagQueue", {"QueueUrl": url, "Tags": added})
        if removed:
            await self.calls.call(operator, ctx, "UntagQueue",
                                  {"QueueUrl": url, "TagKeys": removed})
        if not added and not removed:
            return _to_queue(ctx.region, name, done="unchanged")
        return _to_queue(ctx.region, name, done="tagged", n=len(added), m=len(removed))

    async def purge_queue(self, req: Request, form: Form, operator: Operator) -> Response:
        ctx, name = self._ctx(req, form, operator), _confirmed(form)
        await self.calls.call(operator, ctx, "PurgeQueue", {"QueueUrl": ctx.queue_url(name)})
        return _to_queue(ctx.region, name, done="purged")

    async def delete_queue(self, req: Request, form: Form, operator: Operator) -> Response:
        ctx, name = self._ctx(req, form, operator), _confirmed(form)
        await self.calls.call(operator, ctx, "DeleteQueue", {"QueueUrl": ctx.queue_url(name)})
        return redirect(f"{PREFIX}?{urlencode({'done': 'queue-deleted', 'id': name})}")

    async def pause_queue(self, req: Request, form: Form, operator: Operator) -> Response:
        """ConveyorQueues.PauseQueue: receives answer nothing until resumed."""
        ctx, name = self._ctx(req, form, operator), form.get("queue", "")
        await self.calls.call(operator, ctx, "PauseQueue", {"QueueUrl": ctx.queue_url(name)})
        return _to_queue(ctx.region, name, done="paused")

    async def resume_queue(self, req: Request, form: Form, operator: Operator) -> Response:
        """ConveyorQueues.ResumeQueue: delivery again, parked long polls woken."""
        ctx, name = self._ctx(req, form, operator), form.get("queue", "")
        await self.calls.call(operator, ctx, "ResumeQueue", {"QueueUrl": ctx.queue_url(name)})
        return _to_queue(ctx.region, name, done="resumed")

    # --- messages -------------------------------------------------------------------

    async def send_message(self, req: Request, form: Form, operator: Operator) -> Response:
        ctx, name = self._ctx(req, form, operator), form.get("queue", "")
        request = forms.send_message(form, ctx.queue_url(name))
        sent = await self.calls.call(operator, ctx, "SendMessage", request)
        return _to_queue(ctx.region, name, done="sent", id=sent["MessageId"])

    async def delete_messages(self, req: Request, form: Form, operator: Operator) -> Response:
        """The ticked messages (looked up, not received), deleted as `_delete` says."""
        ctx, name = self._ctx(req, form, operator), form.get("queue", "")
        await self.calls.authorize(operator, ctx, "DeleteMessage",
                                   {"QueueUrl": ctx.queue_url(name)})
        ids = forms.selected(form)
        if not ids:
            raise FormError("Tick at least one message to delete.")
        queue = await self.service.queue(ctx, name)
        found = [m for m, _ in (await messages.find(self.service, queue, set(ids))).values()]
        deleted = await self._delete(operator, ctx, queue, found)
        left = len(ids) - deleted
        return _to_queue(ctx.region, name, done="not-deleted" if left else "deleted-messages",
                         n=deleted, m=left)

    async def _delete(self, operator: Operator, ctx: RequestContext, queue: QueueRecord,
                      found: list[StoredMessage]) -> int:
        """Delete messages looked up (not received): those received since they arrived by
        DeleteMessageBatch with their latest receipt, as any client deletes; the others,
        which no receipt names, by the service's console-only drop, recorded like a call.
        How many went."""
        url = ctx.queue_url(queue.name)
        handles = [encode_handle(queue, m.seq, m.receipt) for m in found
                   if m.receipt is not None]
        deleted = 0
        batch = self.service.limits.max_batch_entries
        for start in range(0, len(handles), batch):
            entries = [{"Id": str(i), "ReceiptHandle": h}
                       for i, h in enumerate(handles[start:start + batch])]
            result = await self.calls.call(operator, ctx, "DeleteMessageBatch",
                                           {"QueueUrl": url, "Entries": entries})
            deleted += len(result.get("Successful", []))
        unreceived = [m for m in found if m.receipt is None]
        if unreceived:
            dropped = await self.service.drop_unreceived(queue, unreceived, operator.key_id)
            self.calls.record(operator, ctx, "DeleteMessage", {"QueueUrl": url},
                              f"ok: {len(dropped)} not received, deleted by the console")
            deleted += len(dropped)
        return deleted

    async def retry_now(self, req: Request, form: Form, operator: Operator) -> Response:
        """Make a message waiting out its back-off (its latest delivery failed) visible
        now: ChangeMessageVisibility to 0 with the receipt of that receive, checked and
        run as the API runs it. One received since is the receiver's: the receipt is stale
        and nothing changes."""
        ctx, name = self._ctx(req, form, operator), form.get("queue", "")
        message_id = form.get("message", "")
        queue = await self.service.queue(ctx, name)
        found = (await messages.find(self.service, queue, {message_id})).get(message_id)
        now_ms = self.service.clock.now_ms()
        if found is None or found[0].receipt is None or not backing_off(*found, now_ms):
            raise FormError("This message is not waiting out a back-off (it is visible, "
                            "gone, or being delivered again): nothing was changed.")
        m = found[0]
        await self.calls.call(operator, ctx, "ChangeMessageVisibility", {
            "QueueUrl": ctx.queue_url(name), "VisibilityTimeout": 0,
            "ReceiptHandle": encode_handle(queue, m.seq, m.receipt)})
        return _to_queue(ctx.region, name, done="retried", id=message_id)

    async def bulk_messages(self, req: Request, form: Form, operator: Operator) -> Response:
        """Start a job that deletes, moves or redrives every message matching the filter
        (bulk.py), once the queue's name or the count shown was typed. Checked here as the
        selection's buttons are (DeleteMessage; StartMessageMoveTask between the queues),
        and every call the job makes is checked again."""
        ctx, name = self._ctx(req, form, operator), form.get("queue", "")
        expected = form.get("expected", "")
        if not name or form.get("confirm") not in (name, expected):
            raise FormError("Type the queue's name or the count to confirm: nothing was "
                            "changed.")
        kind = form.get("kind", "")
        if kind not in bulk.KINDS:
            raise FormError("Choose to delete, move or redrive.")
        f = bulk.Filter(form.get("search", ""), form.get("view") == messages.FAILING)
        if not f.wanted and not f.failing:
            raise FormError("Filter the messages first (to delete them all, purge).")
        destination = form.get("destination", "").strip() if kind == "move" else ""
        if kind == "move" and not destination:
            raise FormError("Name the queue to move them to.")
        queue = await self.service.queue(ctx, name)
        await self.calls.authorize(operator, ctx, *bulk.permission(kind, ctx, name, destination))
        act: bulk.Act
        if kind == "delete":
            async def act(found: list[StoredMessage]) -> int:
                return await self._delete(operator, ctx, queue, found)
        else:
            target = await self.service.queue(ctx, destination) if destination else None

            async def act(found: list[StoredMessage]) -> int:
                return await self._move(operator, ctx, queue, found, target)
        job = self.jobs.start(bulk.Job(
            0, ctx.region, name, kind, f, destination,
            int(expected) if expected.isdigit() else 0, operator.key_id,
            self.service.clock.now_ms()), self.service, queue, act)
        self.calls.record(operator, ctx, f"Bulk{bulk.KINDS[kind]}", {"QueueUrl": name},
                          f"started: {f.describe()}")
        return _to_queue(ctx.region, name, done="bulk-started", id=job.id)

    async def cancel_bulk(self, req: Request, form: Form, operator: Operator) -> Response:
        """Stop a bulk job before its next step: allowed to a key that may start such a
        job (bulk.permission, the check bulk_messages makes). What it did stays done."""
        ctx, name = self._ctx(req, form, operator), form.get("queue", "")
        number = form.get("job", "")
        job = self.jobs.get(int(number)) if number.isdigit() and len(number) < 12 else None
        if job is None or job.region != ctx.region or job.queue != name:
            raise FormError("No such bulk job on this node (a restart ends them): nothing "
                            "was changed.")
        await self.calls.authorize(operator, ctx, *bulk.permission(job.kind, ctx, job.queue,
                                                                   job.destination))
        if job.status == "RUNNING":
            job.cancelling = True
        self.calls.record(operator, ctx, f"Bulk{bulk.KINDS[job.kind]}", {"QueueUrl": name},
                          f"cancel asked: {job.done:,} of {job.expected:,} done")
        return _to_queue(ctx.region, name, done="bulk-cancelled", id=job.id)

    async def _move_target(self, operator: Operator, ctx: RequestContext, name: str,
                           destination: str) -> QueueRecord | None:
        """The queue to move to (None: each dead letter back to its source), once the key
        may start a move task between the two (StartMessageMoveTask's own check)."""
        await self.calls.authorize(operator, ctx, *bulk.permission("move", ctx, name,
                                                                   destination))
        return await self.service.queue(ctx, destination) if destination else None

    async def _move(self, operator: Operator, ctx: RequestContext, queue: QueueRecord,
                    found: list[StoredMessage], target: QueueRecord | None) -> int:
        moved = await self.service.move_selected(queue, found, target, operator.key_id)
        request = {"SourceArn": ctx.queue_arn(queue.name)}
        self.calls.record(operator, ctx, "MoveMessages", request,
                          f"ok: {moved} of {len(found)} moved by the console")
        return moved

    async def move_messages(self, req: Request, form: Form, operator: Operator) -> Response:
        """Move the ticked messages (looked up, not received) to the queue typed, or each
        dead letter back to its source: allowed to a key that may start a move task
        between the two queues (StartMessageMoveTask's own check), recorded like a call."""
        ctx, name = self._ctx(req, form, operator), form.get("queue", "")
        destination = await self._move_target(operator, ctx, name,
                                              form.get("destination", "").strip())
        ids = forms.selected(form)
        if not ids:
            raise FormError("Tick at least one message to move.")
        queue = await self.service.queue(ctx, name)
        found = [m for m, _ in (await messages.find(self.service, queue, set(ids))).values()]
        moved = await self._move(operator, ctx, queue, found, destination)
        return _to_queue(ctx.region, name, done="moved" if moved == len(ids) else "not-moved",
                         n=moved, m=len(ids) - moved)

    # --- dead letters ---------------------------------------------------------------

    async def redrive(self, req: Request, form: Form, operator: Operator) -> Response:
        ctx, name = self._ctx(req, form, operator), form.get("queue", "")
        request: dict[str, Any] = {"SourceArn": ctx.queue_arn(name)}
        if form.get("destination"):
            request["DestinationArn"] = ctx.queue_arn(form["destination"])
        if form.get("rate", "").strip():
            request["MaxNumberOfMessagesPerSecond"] = forms.integer(form, "rate", 0)
        await self.calls.call(operator, ctx, "StartMessageMoveTask", request)
        return _to_queue(ctx.region, name, done="redrive")

    async def cancel_redrive(self, req: Request, form: Form, operator: Operator) -> Response:
        ctx, name = self._ctx(req, form, operator), form.get("queue", "")
        result = await self.calls.call(operator, ctx, "CancelMessageMoveTask",
                                       {"TaskHandle": form.get("task", "")})
        return _to_queue(ctx.region, name, done="cancelled",
                         n=result["ApproximateNumberOfMessagesMoved"])

    # --- workers --------------------------------------------------------------------

    async def drain_worker(self, req: Request, form: Form, operator: Operator) -> Response:
        """DrainWorker: a key limited to some queues drains only their workers (the
        worker's queue is a queue the call implies: server/authz.py)."""
        ctx, worker_id = self._ctx(req, form, operator), form.get("worker", "")
        await self.calls.call(operator, ctx, "DrainWorker", {"WorkerId": worker_id})
        return redirect(f"{PREFIX}?{urlencode({'done': 'drain-requested', 'id': worker_id})}"
                        "#workers")


def _confirmed(form: Form) -> str:
    """The form's queue, once its name was typed into `confirm`."""
    name = form.get("queue", "")
    if not name or form.get("confirm") != name:
        raise FormError("Type the queue's name to confirm: nothing was changed.")
    return name


def _to_queue(region: str, name: str, **query: str | int) -> Response:
    return redirect(parts.queue_path(region, name, **query))


def _refused(status: int, code: str, message: str, form: Form) -> Response:
    region, name = form.get("region", ""), form.get("queue", "")
    back = (parts.queue_link(region, name) if region and name and plain_name(region)
            and plain_name(name) else f'<a href="{PREFIX}">All queues</a>')
    return render(status, "Not done", f"<p><b>{escape(code)}</b>: {escape(message)}</p>"
                  f"<p>Nothing was changed. Back to {back}</p>{_send_again(form)}")


def _send_again(form: Form) -> str:
    """After a refused send, the message typed, to correct and send again: an error
    never loses the body. The form's own fields and token go back as they came."""
    if "body" not in form:
        return ""
    kept = {k: form.get(k, "") for k in (CSRF_FIELD, "region", "queue", "delay", "group_id",
                                         "dedup_id")}
    return (f'<form method="post" action="{PREFIX}/send-message">{parts.hidden(kept)}'
            '<h2>The message you typed</h2>'
            f'<label>Body<textarea name="body" required>{escape(form["body"])}</textarea>'
            '</label><label>Message attributes<textarea name="attributes">'
            f'{escape(form.get("attributes", ""))}</textarea></label>'
            "<button>Send message</button></form>")
