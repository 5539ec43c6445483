"""`/health` and Prometheus `/metrics` on the worker's own port."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from conveyor.worker.metrics import WorkerMetrics

HealthReport = Callable[[], tuple[bool, dict[str, Any]]]


class StatusServer:
    """A tiny aiohttp site: GET /health (200 or 503 with a JSON body) and GET /metrics."""

    def __init__(self, host: str, port: int, metrics: WorkerMetrics, health: HealthReport) -> None:
        self._host = host
        self._port = port
        self._metrics = metrics
        self._health = health
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Bind and serve."""
        app = web.Application()
        app.router.add_get("/health", self._get_health)
        app.router.add_get("/metrics", self._get_metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._host, self._port).start()

    async def stop(self) -> None:
        """Stop serving."""
        if self._runner is not None:
            await self._runner.cleanup()

    async def _get_health(self, _request: web.Request) -> web.Response:
        healthy, report = self._health()
        return web.json_response(report, status=200 if healthy else 503)

    async def _get_metrics(self, _request: web.Request) -> web.Response:
        response = web.Response(body=self._metrics.exposition())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response
