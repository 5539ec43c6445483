"""Leases: a small API beside SQS for leader election (periodic tasks).

Wire: the JSON 1.0 protocol with `X-Amz-Target: ConveyorLease.<Action>`, signed like any
SQS call. A lease is a named record with a holder, an expiry and opaque data; every
successful write bumps its version, and writes are conditional, as with DynamoDB:

- AcquireLease {Name, Holder, TtlSeconds}: take it if free, expired, or already ours.
- UpdateLease {Name, Holder, Version, TtlSeconds, Data}: renew and write data, only if we
  hold it at that version (the leader's "last enqueued" times move with its lease).
- ReleaseLease {Name, Holder}: let it go now, keeping its data.
- GetLease {Name}: read it.

A lease in an answer is {Name, Holder, Version, ExpiresAt (epoch ms), ExpiresIn (ms it has
left by the server's clock, 0 once expired), Data}: ExpiresIn lets a follower sleep until
the lease can change hands without comparing its clock with the server's.
A refused condition is `ConditionalCheckFailedException` (HTTP 400), with the current
lease in the message so the caller can tell who leads.
"""

from __future__ import annotations

import re
from typing import Any

from mypy_extensions import trait

from conveyor.service.base import ServiceBase
from conveyor.service.context import RequestContext
from conveyor.sqs.errors import InvalidParameterValue, MissingParameter, SqsError
from conveyor.store.base import LeaseRecord

TARGET_PREFIX = "ConveyorLease."
ACTIONS: tuple[str, ...] = ("AcquireLease", "UpdateLease", "ReleaseLease", "GetLease")
MAX_TTL_S = 3600
MAX_DATA_CHARS = 256 * 1024
_NAME = re.compile(r"[A-Za-z0-9_.:/#-]{1,256}")

Request = dict[str, Any]


class ConditionalCheckFailed(SqsError):
    """Another holder has the lease (its wire facts: errors.WIRE)."""


@trait  # one of Service's parts (setup.py: mypyc compiles them as traits)
class LeaseActions(ServiceBase):
    async def acquire_lease(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        name, holder, ttl_ms = _name(req), _holder(req), checked_ttl_ms(req)
        lease = await self.store.lease_acquire(ctx.region, name, holder, ttl_ms,
                                               self.clock.now_ms())
        return await self._granted(ctx, name, lease)

    async def update_lease(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        name, holder, ttl_ms = _name(req), _holder(req), checked_ttl_ms(req)
        version = req.get("Version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise MissingParameter("The request must contain the integer parameter Version.")
        data = req.get("Data", "")
        if not isinstance(data, str) or len(data) > MAX_DATA_CHARS:
            raise InvalidParameterValue(f"Data must be a string of at most {MAX_DATA_CHARS} "
                                        "characters.")
        lease = await self.store.lease_update(ctx.region, name, holder, version, data, ttl_ms,
                                              self.clock.now_ms())
        return await self._granted(ctx, name, lease)

    async def release_lease(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        await self.store.lease_release(ctx.region, _name(req), _holder(req))
        return {}

    async def get_lease(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        lease = await self.store.lease_get(ctx.region, _name(req))
        return {"Lease": _lease_out(lease, self.clock.now_ms())} if lease else {}

    async def _granted(self, ctx: RequestContext, name: str,
                       lease: LeaseRecord | None) -> dict[str, Any]:
        if lease is not None:
            return {"Lease": _lease_out(lease, self.clock.now_ms())}
        current = await self.store.lease_get(ctx.region, name)
        held = (f"held by {current.holder} at version {current.version} until "
                f"{current.expires_ms}" if current else "does not exist")
        raise ConditionalCheckFailed(f"The conditional request failed: lease {name} {held}.")


def _lease_out(lease: LeaseRecord, now_ms: int) -> dict[str, Any]:
    return {"Name": lease.name, "Holder": lease.holder, "Version": lease.version,
            "ExpiresAt": lease.expires_ms, "ExpiresIn": max(0, lease.expires_ms - now_ms),
            "Data": lease.data}


def _name(req: Request) -> str:
    name = req.get("Name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidParameterValue("Name must be 1-256 characters of letters, digits and "
                                    "_ . : / # -.")
    return name


def _holder(req: Request) -> str:
    holder = req.get("Holder")
    if not isinstance(holder, str) or not 1 <= len(holder) <= 256:
        raise InvalidParameterValue("Holder must be a string of 1-256 characters.")
    return holder


def checked_ttl_ms(req: Request) -> int:
    """TtlSeconds, checked, in milliseconds (leases and worker announcements)."""
    ttl = req.get("TtlSeconds")
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= MAX_TTL_S:
        raise InvalidParameterValue(f"TtlSeconds must be a number in (0, {MAX_TTL_S}].")
    return int(ttl * 1000)
