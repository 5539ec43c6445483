"""The run ledger: the receiving side of "exactly one run per scheduled time".

The leader claims a run in its lease before sending it, and confirms after SendMessage
succeeded. A leader that dies between the two leaves the run *in doubt*: the message may
or may not be in the queue, and SQS offers no way to ask. Its successor therefore sends
in-doubt runs again, so no run is ever missed, and a run can be enqueued twice only in
that narrow window. The receiving daemon closes it: before POSTing a scheduled job it
records "run (task, time) is message M" in a per-task ledger record, with conditional
writes on the same lease backend. The first message recorded for a run wins; a later
message for the same run is a duplicate and is deleted unposted. A redelivery of the
winning message (the app failed, visibility ran out) finds its own id and is POSTed again,
so SQS's retry rules are unchanged.

The ledger keeps the newest `KEEP_RUNS` runs per task: copies of one run are sent within
the grace period of each other, so they meet in the ledger long before they are pruned.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import re

import orjson

from conveyor import lease_names
from conveyor.cron.leases.base import LeaseBackend, LeaseConflict, LeaseUnavailable
from conveyor.runtime.hooks import TryLater

log = logging.getLogger(__name__)

KEEP_RUNS = 256
_LOCK_TTL_S = 10.0
_ATTEMPTS = 40
_NAME_OK = re.compile(r"[A-Za-z0-9_.:/#-]{1,64}")


class LedgerBusy(TryLater):
    """The ledger could not be written (contention or backend down); try the message later."""

    reason = "run-ledger-unavailable"


def ledger_name(lease_name: str, task: str) -> str:
    """The ledger record of one task (task names outside the lease alphabet are hashed)."""
    safe = task if _NAME_OK.fullmatch(task) else hashlib.sha256(task.encode()).hexdigest()[:32]
    return lease_names.cron_runs(lease_name, safe)


class RunLedger:
    """Records which message carries each run; `admit` says whether to POST this one."""

    def __init__(self, leases: LeaseBackend, lease_name: str, holder: str,
                 rng: random.Random | None = None) -> None:
        self._leases = leases
        self._lease_name = lease_name
        self._holder = holder
        self._rng = rng or random.Random()

    async def admit(self, task: str, scheduled_at: str, message_id: str) -> bool:
        """True if `message_id` is (or now becomes) the message of this run; False for a
        duplicate. Raises LedgerBusy when the record cannot be taken in time."""
        name = ledger_name(self._lease_name, task)
        for attempt in range(_ATTEMPTS):
            try:
                return await self._record(name, scheduled_at, message_id)
            except (LeaseConflict, LeaseUnavailable) as exc:
                last = exc
            await asyncio.sleep(min(0.5, 0.01 * 2 ** min(attempt, 6)) * self._rng.random())
        msg = f"run ledger {name} unavailable: {last}"
        raise LedgerBusy(msg)

    async def _record(self, name: str, scheduled_at: str, message_id: str) -> bool:
        lease = await self._leases.acquire(name, self._holder, _LOCK_TTL_S)
        try:
            runs = _decode(lease.data)
            owner = runs.get(scheduled_at)
            if owner is None:
                runs[scheduled_at] = message_id
                kept = dict(sorted(runs.items())[-KEEP_RUNS:])
                await self._leases.update(name, self._holder, lease.version, _LOCK_TTL_S,
                                          orjson.dumps(kept).decode())
                return True
            return owner == message_id
        finally:
            try:
                await self._leases.release(name, self._holder)
            except LeaseUnavailable as exc:  # it expires by itself within _LOCK_TTL_S
                log.debug("could not release ledger %s: %s", name, exc)


def _decode(data: str) -> dict[str, str]:
    if not data:
        return {}
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError:
        return {}
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
