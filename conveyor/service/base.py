"""State and helpers every action shares: the store, limits, clock and queue lookup."""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import orjson

from conveyor.clock import Clock
from conveyor.service import validate
from conveyor.service.context import RequestContext
from conveyor.sqs.errors import InvalidParameterValue, QueueDoesNotExist
from conveyor.sqs.limits import Limits
from conveyor.store.base import QueueRecord, Store

# Called with (queue, number of messages that just became receivable) to wake long polls.
ReadyHook = Callable[[QueueRecord, int], None]
LaterHook = Callable[[QueueRecord, float], None]


class ServiceBase:
    def __init__(self, store: Store, limits: Limits, clock: Clock | None = None,
                 account_id: str = "000000000000", queue_cache_s: float = float("inf")) -> None:
        self.store = store
        self.limits = limits
        self.clock = clock or Clock()
        self.account_id = account_id
        self.log = logging.getLogger("conveyor.service")
        self.on_ready: ReadyHook = lambda queue, count: None
        # Called with (queue, seconds) when a message will become receivable that soon.
        self.on_later: LaterHook = lambda queue, seconds: None
        # Queue records are read on every call; cache them. A single node invalidates on
        # each change; shared stores pass a short `queue_cache_s`.
        self._queue_cache_s = queue_cache_s
        self._queues: dict[tuple[str, str], tuple[QueueRecord, float]] = {}
        # FIFO ReceiveRequestAttemptId replays: (queue id, attempt id) → (until ms, result),
        # and which attempt returned each message, to end a replay once one is touched.
        self._attempts: dict[tuple[int, str], tuple[int, dict[str, Any]]] = {}
        self._attempt_of: dict[tuple[int, int], tuple[int, str]] = {}
        self._action_cache: dict[str, Any] = {}
        self._names: dict[str, str | None] = {}  # queue URL or name → queue name

    async def queue(self, ctx: RequestContext, url_or_name: str) -> QueueRecord:
        """Find a queue by URL (any host) or bare name, in the caller's region."""
        name = self._names.get(url_or_name, "")
        if name == "":
            name = queue_name_from(url_or_name, ctx.account_id)
            if len(self._names) > 10_000:
                self._names.clear()
            self._names[url_or_name] = name
        key = (ctx.region, name or "")
        cached = self._queues.get(key)
        if cached and time.monotonic() - cached[1] < self._queue_cache_s:
            return cached[0]
        queue = await self.store.get_queue(ctx.region, name) if name else None
        if queue is None:
            raise QueueDoesNotExist()
        self._queues[key] = (queue, time.monotonic())
        return queue

    def paginate(self, names: list[str], req: dict[str, Any], key: str,
                 to_url: Callable[[str], str]) -> dict[str, Any]:
        """SQS pagination: NextToken only when MaxResults was given and more remain."""
        max_results = req.get("MaxResults")
        start = 0
        if req.get("NextToken"):
            start = _decode_token(req["NextToken"])
        page_size = max_results or self.limits.max_list_queues
        page = names[start:start + page_size]
        result: dict[str, Any] = {}
        if page:
            result[key] = [to_url(n) for n in page]
        if max_results and start + page_size < len(names):
            result["NextToken"] = base64.urlsafe_b64encode(
                orjson.dumps({"offset": start + page_size})).decode()
        return result

    def forget(self, queue: QueueRecord) -> None:
        self._queues.pop((queue.region, queue.name), None)

    async def check_redrive(self, ctx: RequestContext, queue: QueueRecord) -> None:
        """Validate a queue's RedrivePolicy / RedriveAllowPolicy (see redrive.py)."""
        raise NotImplementedError


def queue_name_from(url_or_name: str, account_id: str) -> str | None:
    """`http://host/<account>/<name>` or `<name>` → name; None when it cannot name a queue
    (then it is never looked up: PostgreSQL, for one, cannot even compare a NUL)."""
    if "/" not in url_or_name:
        name = url_or_name
    else:
        try:
            path = urlsplit(url_or_name).path if "://" in url_or_name else url_or_name
        except ValueError:  # e.g. `http://[`: an unclosed IPv6 host
            return None
        parts = [p for p in path.split("/") if p]
        if len(parts) != 2 or parts[0] != account_id:
            return None
        name = parts[1]
    return name if name and validate.plain_name(name) else None


def _decode_token(token: str) -> int:
    try:
        offset = orjson.loads(base64.urlsafe_b64decode(token.encode()))["offset"]
    except (ValueError, KeyError, TypeError):
        raise InvalidParameterValue("Invalid NextToken value.") from None
    if not isinstance(offset, int) or offset < 0:
        raise InvalidParameterValue("Invalid NextToken value.")
    return offset
