"""Run a Worker in the foreground: event loop, signals, logging."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable

from conveyor.worker.config import WorkerConfig
from conveyor.worker.daemon import Worker

LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def setup_logging(level: str) -> None:
    """Plain, greppable log lines on stderr."""
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT)


def run_loop(main: Callable[[], Awaitable[None]]) -> None:
    """asyncio.run with uvloop when it is installed."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a declared dependency off Windows
        asyncio.run(main())
    else:
        uvloop.run(main())


def install_signal_handlers(stop: Callable[[], None]) -> None:
    """SIGTERM / SIGINT call `stop` (the first drains, the second hurries the drain)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):  # Windows
            loop.add_signal_handler(sig, stop)


async def serve(config: WorkerConfig) -> None:
    """Run one worker until a signal stops it."""
    worker = Worker(config)
    install_signal_handlers(worker.stop)
    await worker.run()
