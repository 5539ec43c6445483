"""The workers and autoscalers that announce themselves (conveyor/runtime/presence.py)."""

from __future__ import annotations

from html import escape

from conveyor.server.console import parts
from conveyor.server.console.visit import Visit
from conveyor.service import Service
from conveyor.service.workers import WorkerRecord


async def workers_section(service: Service, v: Visit) -> str:
    announced = await service.live_workers()
    now_ms = service.clock.now_ms()
    scalers = [w for w in announced if w.kind == "scaler"]
    html = _worker_table([w for w in announced if w.kind == "worker"], now_ms)
    if scalers:
        html += _scaler_table(scalers, now_ms)
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


def _seen(record: WorkerRecord, now_ms: int) -> str:
    return parts.when(record.last_seen_ms, now_ms)


def _worker_table(workers: list[WorkerRecord], now_ms: int) -> str:
    if not workers:
        return ('<h2>Workers</h2><p class="muted">none has announced itself '
                "(conveyor worker does, every 10 s)</p>")
    rows = []
    for w in workers:
        status = w.status
        average = status.get("processing_avg_s")
        rows.append([
            escape(w.worker_id), parts.queue_link(w.region, w.queue),
            escape(str(status.get("status", "?"))), escape(str(status.get("in_flight", ""))),
            escape(str(status.get("processed", ""))),
            f"{average:.3f} s" if isinstance(average, int | float) else "",
            escape(str(status.get("app", ""))),
            parts.when(w.first_seen_ms, now_ms), _seen(w, now_ms)])
    return "<h2>Workers</h2>" + parts.table(
        ["Worker", "Queue", "State", "In flight", "Processed", "Average job", "App",
         "Up since", "Last seen"], rows, numeric=(3, 4))
