"""The overview: every queue the operator may look at, a page at a time, dead-letter
queues that hold messages first in mind, the create form, workers and recent actions.

Only the queues shown are counted (each count is an index range in the store), so the
page costs the same with ten queues or ten thousand; filtering by name and paging walk
the list of queue records, which the store keeps small (no messages in it).
"""

from __future__ import annotations

from html import escape
from urllib.parse import urlencode

from conveyor.server.console import attribute_form, charts, parts
from conveyor.server.console.calls import Done
from conveyor.server.console.frame import PREFIX, render
from conveyor.server.console.partitions import partitions_section
from conveyor.server.console.visit import Visit
from conveyor.server.console.workers import workers_section
from conveyor.server.http import Response
from conveyor.service import Counts, QueueRecord, Service
from conveyor.service.activity import HOUR, History, Range
from conveyor.service.redrive import dead_letter_arn
from conveyor.sqs.limits import Limits

PAGE_SIZE = 100  # queues per page
MAX_DLQ_CHECKS = 200  # dead-letter queues counted for the warning on every view


class Overview:
    def __init__(self, service: Service) -> None:
        self.service = service

    async def page(self, v: Visit, default_region: str, recent: list[Done]) -> Response:
        everything = [q for q in await self.service.all_queues()
                      if await v.may("GetQueueAttributes", {"QueueUrl": q.name}, q.region)]
        everything.sort(key=lambda q: (q.region, q.name))
        sources = _sources(everything, v.account_id)
        wanted = v.query.get("q", "")
        shown = [q for q in everything if wanted in q.name] if wanted else everything
        page = min(v.number("page"), max(1, -(-len(shown) // PAGE_SIZE)))
        rows = shown[(page - 1) * PAGE_SIZE:page * PAGE_SIZE]
        counts = {q.id: await self.service.counts(q) for q in rows}
        range_ = charts.chosen_range(v.query)
        ids = [q.id for q in rows]
        histories = await self.service.histories(ids, range_)
        hours = histories if range_ is HOUR else await self.service.histories(ids)
        holding = await self._dead_letters_holding(everything, sources, v.account_id)
        body = [v.notice(), await self._create_form(v, default_region),
                f'<section id="queues" data-live>{_alert(holding)}',
                _filter_bar(wanted, page, len(shown), range_),
                charts.range_links(PREFIX, v.query, range_),
                self._table(v, rows, counts, histories, hours, sources, holding, range_)
                if rows else _empty(v, wanted),
                "</section>",
                await partitions_section(self.service, everything, counts),
                await workers_section(self.service, v),
                f'<section id="recent" data-live>{await _recent(v, recent, self.service)}'
                "</section>"]
        return render(200, "Queues", "\n".join(body), refresh=True, who=v.who,
                      header=v.header)

    async def _dead_letters_holding(self, queues: list[QueueRecord],
                                    sources: dict[str, list[str]],
                                    account_id: str) -> dict[int, Counts]:
        """The dead-letter queues with messages in them (the first MAX_DLQ_CHECKS)."""
        dlqs = [q for q in queues if _arn(q, account_id) in sources][:MAX_DLQ_CHECKS]
        holding = {}
        for q in dlqs:
            counts = await self.service.counts(q)
            if counts.visible + counts.in_flight + counts.delayed:
                holding[q.id] = counts
        return holding

    def _table(self, v: Visit, rows: list[QueueRecord], counts: dict[int, Counts],
               histories: dict[int, History | None], hours: dict[int, History | None],
               sources: dict[str, list[str]], holding: dict[int, Counts],
               range_: Range) -> str:
        cells = [[_name_cell(q, q.id in holding), escape(q.region),
                  "FIFO" if q.fifo else "standard", *parts.count_cells(counts[q.id]),
                  charts.overview_chart(histories[q.id], range_),
                  charts.failure_rate(hours[q.id]),
                  parts.redrive_cell(q),
                  parts.sources_cell(q.region, sources.get(_arn(q, v.account_id), []))]
                 for q in rows]
        return parts.table(["Queue", "Region", "Type", "Visible", "In flight", "Delayed",
                            f"Received, {escape(range_.title.removeprefix('the '))}",
                            "Failed, last hour", "Dead letters go to",
                            "Dead-letter queue of"], cells, numeric=(3, 4, 5, 7),
                           row_classes=["alert" if q.id in holding else "" for q in rows])

    async def _create_form(self, v: Visit, region: str) -> str:
        if not await v.may("CreateQueue", {}, region):
            return ""
        return create_form(v.csrf, attribute_form.Typed({"region": region}),
                           self.service.limits)


def create_form(csrf: str, typed: attribute_form.Typed, limits: Limits) -> str:
    """The create-queue form, with what was typed and each field's error (open when any:
    a refused form comes back as it was)."""
    kept = typed.values

    def value(name: str) -> str:
        return f'value="{escape(kept.get(name, ""))}"'

    def ticked(name: str) -> str:
        return " checked" if kept.get(name) == "on" else ""

    inner = (
        '<summary>Create a queue</summary>'
        f'<label>Name<br><input name="name" required maxlength="80" {value("name")} '
        # `-` escaped: browsers compile `pattern` with the `v` flag, where an
        # unescaped `-` at a class's end is a syntax error (and the check is off).
        'pattern="[A-Za-z0-9_\\-]+(\\.fifo)?" autocomplete="off"></label>'
        f'<label>Region<br><input name="region" {value("region")} required></label>'
        f'<label><input type="checkbox" name="fifo"{ticked("fifo")}> FIFO (the name gets '
        ".fifo)</label>"
        f'<label><input type="checkbox" name="content_dedup"{ticked("content_dedup")}> '
        "Content-based deduplication (FIFO)</label>"
        '<label>Dead-letter queue <span class="muted">(name of an existing queue of the '
        f'same type)</span><br><input name="dlq" autocomplete="off" {value("dlq")}></label>'
        '<label>Receives before dead-lettering<br><input name="max_receive_count" '
        f'inputmode="numeric" pattern="[0-9]*" placeholder="5" '
        f'{value("max_receive_count")}></label>'
        # The edit form's typed fields, units and ranges (a new queue's: no attributes yet).
        f"{attribute_form.number_fields(typed, limits, {})}"
        '<label>More attributes <span class="muted">(<code>Name = value</code> a line)'
        f'</span><textarea name="attributes">{escape(kept.get("attributes", ""))}'
        '</textarea></label>'
        '<label>Tags <span class="muted">(<code>key = value</code> a line)</span>'
        f'<textarea name="tags">{escape(kept.get("tags", ""))}</textarea></label>'
        "<button>Create queue</button>")
    shown = " open" if typed.errors else ""
    return parts.form("create-queue", csrf, {}, f"<details{shown}>{inner}</details>")


def _name_cell(queue: QueueRecord, holding: bool) -> str:
    link = (parts.queue_link(queue.region, queue.name) + parts.paused_badge(queue)
            + parts.limits_badge(queue))
    return (f'{link} <span class="badge" title="a dead-letter queue holding messages">'
            "dead letters</span>" if holding else link)


def _sources(queues: list[QueueRecord], account_id: str) -> dict[str, list[str]]:
    """Dead-letter queue ARN -> the names of the queues that send it their dead letters."""
    sources: dict[str, list[str]] = {}
    for q in queues:
        target = dead_letter_arn(q)
        if target:
            sources.setdefault(target, []).append(q.name)
    return sources


def _arn(queue: QueueRecord, account_id: str) -> str:
    return f"arn:aws:sqs:{queue.region}:{account_id}:{queue.name}"


def _alert(holding: dict[int, Counts]) -> str:
    if not holding:
        return ""
    total = sum(c.visible + c.in_flight + c.delayed for c in holding.values())
    return parts.notice(f"{len(holding)} dead-letter queue{'s' if len(holding) > 1 else ''} "
                        f"hold{'' if len(holding) > 1 else 's'} {total:,} message"
                        f"{'s' if total != 1 else ''} (marked below).", error=True)


def _filter_bar(wanted: str, page: int, total: int, range_: Range) -> str:
    pages = max(1, -(-total // PAGE_SIZE))
    links = []
    if page > 1:
        links.append(f'<a href="{PREFIX}?{_query(wanted, page - 1, range_)}">← previous</a>')
    if page < pages:
        links.append(f'<a href="{PREFIX}?{_query(wanted, page + 1, range_)}">next →</a>')
    kept = "" if range_ is HOUR else parts.hidden({"range": range_.name})
    return (f'<form class="bar" method="get" action="{PREFIX}">{kept}'
            f'<input type="search" name="q" value="{escape(wanted)}" '
            'placeholder="Filter by name (press /)" aria-label="Filter queues by name">'
            f'<button>Filter</button><span class="muted">{total:,} queue'
            f'{"" if total == 1 else "s"} · page {page} of {pages}</span>'
            f'{" ".join(links)}</form>')


def _query(wanted: str, page: int, range_: Range) -> str:
    query: dict[str, str | int] = {"q": wanted} if wanted else {}
    query["page"] = page
    if range_ is not HOUR:
        query["range"] = range_.name
    return escape(urlencode(query))


def _empty(v: Visit, wanted: str) -> str:
    if wanted:
        return parts.muted("No queue name contains that.")
    host = escape(v.req.headers.get("host") or "127.0.0.1:9324")
    return ("<p>No queues yet. Create one above, or for example:</p>"
            f"<p><code>aws --endpoint-url {escape(v.req.scheme)}://{host} sqs create-queue "
            "--queue-name jobs</code></p>")


async def _recent(v: Visit, recent: list[Done], service: Service) -> str:
    """The console's last actions on queues this operator may look at."""
    recent = [d for d in recent if not d.target or d.target == "move task"
              or (await _worker_shown(v, d, service) if d.target.startswith("worker ")
                  else await v.may("GetQueueAttributes", {"QueueUrl": d.target}, d.region))]
    if not recent:
        return ""
    now_ms = service.clock.now_ms()
    rows = [[parts.when(d.at_ms, now_ms), f"<code>{escape(d.key_id)}</code>",
             escape(d.action), escape(f"{d.target} ({d.region})" if d.target else ""),
             escape(d.outcome)] for d in recent[:20]]
    return "<h2>Recent actions</h2>" + parts.table(
        ["When", "Access key", "Action", "On", "Outcome"], rows)


async def _worker_shown(v: Visit, done: Done, service: Service) -> bool:
    """A drain is shown to whoever may see its worker's queue (while the worker lives)."""
    queue = await service.worker_queue(v.ctx(done.region), done.target.removeprefix("worker "))
    return v.sees(queue if queue is not None else "")  # "": a queue only "*" covers
