"""The workers and autoscalers that announce themselves (conveyor/runtime/presence.py), a
Drain button per worker (DrainWorker), and each autoscaled queue's decisions as a
timeline (RecordScalingDecision, service/workers.py)."""

from __future__ import annotations

from html import escape
from typing import Any

from conveyor.server.console import parts
from conveyor.server.console.visit import Visit
from conveyor.service import Service
from conveyor.service.workers import WorkerRecord

TIMELINE_SHOWN = 20  # decisions per queue on the page (the server keeps MAX_DECISIONS)


async def workers_section(service: Service, v: Visit) -> str:
    """The workers and scalers of the queues the operator may see, and their decisions."""
    announced = [w for w in await service.live_workers() if v.sees(w.queue)]
    now_ms = service.clock.now_ms()
    scalers = [w for w in announced if w.kind == "scaler"]
    html = await _worker_table(v, [w for w in announced if w.kind == "worker"], now_ms)
    if scalers:
        html += _scaler_table(scalers, now_ms)
        for queue in sorted({(s.region, s.queue) for s in scalers}):
            decisions = await service.scaling_decisions(*queue)
            html += _timeline(*queue, decisions[:TIMELINE_SHOWN], now_ms)
    return f'<section id="workers" data-live>{html}</section>'


def _scaler_table(scalers: list[WorkerRecord], now_ms: int) -> str:
    rows = []
    for s in scalers:
        status = s.status
        rows.append([
            parts.queue_link(s.region, s.queue), escape(str(status.get("policy", ""))),
            escape(f"{status.get('current', '?')} → {status.get('desired', '?')}"),
            escape(f"{status.get('metric', '?')} / {status.get('target', '?')}"),
            escape(str(status.get("reason", ""))), _seen(s, now_ms)])
    return "<h2>Autoscaling</h2>" + parts.table(
        ["Queue", "Policy", "Workers now → wanted", "Backlog per worker / target",
         "Last decision", "Last seen"], rows)


def _timeline(region: str, queue: str, decisions: list[dict[str, Any]], now_ms: int) -> str:
    """The queue's scaling decisions, the newest first, as an ordered list."""
    if not decisions:
        return ""
    items = []
    for d in decisions:
        at = d.get("At")
        when = parts.when(at, now_ms) if isinstance(at, int) else ""
        change = f"{d.get('current', '?')} → {d.get('desired', '?')}"
        figures = (f"backlog {d.get('backlog', '?')}, {d.get('metric', '?')} per worker "
                   f"(target {d.get('target', '?')})")
        items.append(f'<li class="decision {escape(str(d.get("direction", "")))}">{when} '
                     f"<b>{escape(change)}</b> {escape(str(d.get('reason', '')))} "
                     f'<span class="muted">{escape(figures)}</span></li>')
    return (f'<h3>Scaling decisions: {parts.queue_link(region, queue)}</h3>'
            f'<ol class="timeline" aria-label="scaling decisions of {escape(queue)}">'
            f'{"".join(items)}</ol>')


def _seen(record: WorkerRecord, now_ms: int) -> str:
    return parts.when(record.last_seen_ms, now_ms)


async def _worker_table(v: Visit, workers: list[WorkerRecord], now_ms: int) -> str:
    if not workers:
        return ('<h2>Workers</h2><p class="muted">none has announced itself '
                "(conveyor worker does, every 10 s)</p>")
    rows = []
    for w in workers:
        status = w.status
        average = status.get("processing_avg_s")
        processed = status.get("processed")
        rate = status.get("jobs_per_s")  # over the worker's last minute
        app = escape(f"app: {status.get('app', '?')}")
        state = escape(str(status.get("status", "?")))
        if status.get("app_down_since"):
            state += f' <span class="muted">since {escape(str(status["app_down_since"]))}</span>'

        rows.append([
            f'<span title="{app}">{escape(w.worker_id)}</span>',
            parts.queue_link(w.region, w.queue),
            state, escape(str(status.get("in_flight", ""))),
            escape(str(processed if processed is not None else "")),
            f"{rate:.2f}" if isinstance(rate, int | float) else "",
            escape(str(status.get("failed", ""))),
            f"{average:.3f} s" if isinstance(average, int | float) else "",
            escape(str(status.get("version", ""))), parts.when(w.first_seen_ms, now_ms),
            _seen(w, now_ms), await _drain(v, w)])
    return "<h2>Workers</h2>" + parts.table(
        ["Worker", "Queue", "State", "In flight", "Processed", "Jobs/s (1 min)", "Failed",
         "Average job", "Version", "Up since", "Last seen", ""], rows,
        numeric=(3, 4, 5, 6))


async def _drain(v: Visit, worker: WorkerRecord) -> str:
    """A Drain button, for keys allowed DrainWorker, on a worker not already draining."""
    if worker.status.get("status") in ("draining", "stopped") or not await v.may(
            "DrainWorker", {"WorkerId": worker.worker_id}, worker.region):
        return ""
    return parts.form("drain-worker", v.csrf, {"region": worker.region,
                                               "worker": worker.worker_id},
                      f'<button title="finish its jobs, stop receiving and exit, as on '
                      f'SIGTERM" aria-label="Drain {escape(worker.worker_id)}">Drain</button>',
                      css="inline")
