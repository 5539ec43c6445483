"""The scaler's own port: GET /metrics (Prometheus), /status (JSON), /health."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from conveyor.scale.scaler import Scaler


class ScaleStatusServer:
    """A tiny aiohttp site over one Scaler."""

    def __init__(self, scaler: Scaler, host: str, port: int) -> None:
        self._scaler = scaler
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Bind and serve."""
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/status", self._status)
        app.router.add_get("/health", self._health)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._host, self._port).start()

    async def stop(self) -> None:
        """Stop serving."""
        if self._runner is not None:
            await self._runner.cleanup()

    async def _metrics(self, _request: web.Request) -> web.Response:
        response = web.Response(body=self._scaler.metrics.exposition())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def _status(self, _request: web.Request) -> web.Response:
        return web.json_response(self._scaler.status())

    async def _health(self, _request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})
