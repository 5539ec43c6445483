"""Run a long-lived part (worker, scheduler, scaler, `up`) in the foreground: event loop
and signals."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable


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

