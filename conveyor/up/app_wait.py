"""Wait until the app answers HTTP, so `conveyor up` says "ready" only when jobs can flow.

Any HTTP answer counts (a job endpoint may well answer a GET with 404 or 405), except 502,
503 and 504: those come from a proxy whose app behind it is not up yet.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

import aiohttp

_NOT_UP = (502, 503, 504)
_PROBE_TIMEOUT_S = 2.0
_PROBE_EVERY_S = 0.25


class AppNotAnswering(RuntimeError):
    """The app did not answer in time; the message says where and what happened last."""


async def probe(url: str) -> str | None:
    """None if the app at `url` answers a GET; else what went wrong, in a few words."""
    timeout = aiohttp.ClientTimeout(total=_PROBE_TIMEOUT_S)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, \
                session.get(url, allow_redirects=False) as resp:
            if resp.status in _NOT_UP:
                return f"HTTP {resp.status} from a proxy in front of it"
            return None
    except aiohttp.ClientConnectorError as exc:
        errno = exc.os_error.errno if exc.os_error else None
        return os.strerror(errno).lower() if errno else str(exc)
    except TimeoutError:
        return f"no answer within {_PROBE_TIMEOUT_S:g}s"
    except (aiohttp.ClientError, OSError) as exc:
        return str(exc) or type(exc).__name__


async def wait_for_app(url: str, timeout_s: float,
                       on_waiting: Callable[[str], None] | None = None) -> None:
    """Return once the app at `url` answers; `on_waiting(reason)` is called once if it does
    not at first. Raises AppNotAnswering after `timeout_s` (0: wait for ever)."""
    deadline = time.monotonic() + timeout_s if timeout_s else None
    told = False
    while True:
        problem = await probe(url)
        if problem is None:
            return
        if not told and on_waiting is not None:
            on_waiting(problem)
            told = True
        if deadline is not None and time.monotonic() >= deadline:
            msg = (f"the app at {url} did not answer within {timeout_s:g}s (last: {problem}). "
                   "Start it, check --app (and --http-path), or wait longer with "
                   "--app-timeout.")
            raise AppNotAnswering(msg)
        await asyncio.sleep(_PROBE_EVERY_S)
