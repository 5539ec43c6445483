"""A small example app for `conveyor up --demo`: it answers the worker's POSTs the way a
real job endpoint would — some jobs succeed at once, one needs retries, one never works."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import orjson
from aiohttp import web

Printer = Callable[[str], None]

# The jobs `conveyor up --demo` sends (bodies are what any producer would send).
DEMO_JOBS: tuple[dict[str, object], ...] = (
    {"task": "resize-image", "image": "cat.jpg", "width": 640},
    {"task": "send-email", "to": "ada@example.com", "template": "welcome"},
    {"task": "resize-image", "image": "dog.png", "width": 1280},
    {"task": "charge-card", "order": 1042, "fail_times": 2},
    {"task": "build-report", "month": "2026-01", "seconds": 1.5},
    {"task": "rate-limited-api", "call": "geocode", "throttle_times": 1},
    {"task": "import-broken-file", "file": "corrupt.csv", "always_fail": True},
)


class DemoApp:
    """The demo job endpoint: POST / with a JSON job; answers 200, 500 or 429."""

    def __init__(self, printer: Printer = print) -> None:
        self._print = printer
        self.done: set[str] = set()

    def application(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application()
        app.router.add_post("/", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        """Do (pretend to do) one job."""
        job = orjson.loads(await request.read() or b"{}")
        msg_id = request.headers.get("X-Aws-Sqsd-Msgid", "?")
        attempt = int(request.headers.get("X-Aws-Sqsd-Receive-Count", "1"))
        label = f"{job.get('task', 'job')} #{msg_id[:8]} (attempt {attempt})"
        await asyncio.sleep(float(job.get("seconds", random.uniform(0.05, 0.3))))
        if job.get("always_fail") or attempt <= int(job.get("fail_times", 0)):
            self._print(f"  app  ✗ {label}: failed, answering 500")
            return web.Response(status=500, text="job failed")
        if attempt <= int(job.get("throttle_times", 0)):
            self._print(f"  app  ⏳ {label}: rate limited, answering 429 Retry-After: 1")
            return web.Response(status=429, headers={"Retry-After": "1"})
        self.done.add(msg_id)
        self._print(f"  app  ✓ {label}: done")
        return web.Response(status=200, text="ok")


async def start_demo_app(app: DemoApp, host: str = "127.0.0.1",
                         port: int = 0) -> tuple[web.AppRunner, str]:
    """Serve `app` in this event loop; returns the runner and its base URL."""
    runner = web.AppRunner(app.application(), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound_host, bound_port = runner.addresses[0][:2]
    return runner, f"http://{bound_host}:{bound_port}"
