"""`/health`, Prometheus `/metrics` and any JSON views on a long-running part's own port."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

HealthReport = Callable[[], tuple[bool, dict[str, Any]]]


class Exposition(Protocol):
    def exposition(self) -> bytes: ...


class StatusServer:
    """A tiny aiohttp site: GET /health (200 or 503 with a JSON body), GET /metrics, and
    GET <path> for each extra JSON view (the scaler adds /status)."""

    def __init__(self, host: str, port: int, metrics: Exposition, health: HealthReport,
                 views: Mapping[str, Callable[[], dict[str, Any]]] | None = None) -> None:
        self._host = host
        self._port = port
        self._metrics = metrics
        self._health = health
        self._views = dict(views or {})
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Bind and serve."""
        app = web.Application()
        app.router.add_get("/health", self._get_health)
        app.router.add_get("/metrics", self._get_metrics)
        for path, view in self._views.items():
            app.router.add_get(path, self._json_view(view))
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

    @staticmethod
    def _json_view(view: Callable[[], dict[str, Any]]) -> Callable[..., Any]:
        async def get(_request: web.Request) -> web.Response:
            return web.json_response(view())
        return get
