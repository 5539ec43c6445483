"""Leases through the Conveyor server's lease API (`X-Amz-Target: ConveyorLease.<Action>`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from conveyor.client import SQSClient, SQSError, SQSTransportError
from conveyor.cron.leases.base import Lease, LeaseConflict, LeaseUnavailable

TARGET_PREFIX = "ConveyorLease."
_CONFLICT = "ConditionalCheckFailedException"


class ServerLeases:
    """The lease API beside SQS on the same endpoint, signed like SQS calls.

    Expiry is judged by the server's clock, so the daemons' clocks need not agree.
    """

    def __init__(self, sqs: SQSClient, *, own_client: bool = False) -> None:
        self._sqs = sqs
        self._own_client = own_client

    async def acquire(self, name: str, holder: str, ttl_s: float) -> Lease:
        """AcquireLease."""
        return await self._lease("AcquireLease", {"Name": name, "Holder": holder,
                                                  "TtlSeconds": ttl_s})

    async def update(self, name: str, holder: str, version: int, ttl_s: float,
                     data: str) -> Lease:
        """UpdateLease."""
        return await self._lease("UpdateLease", {"Name": name, "Holder": holder,
                                                 "Version": version, "TtlSeconds": ttl_s,
                                                 "Data": data})

    async def release(self, name: str, holder: str) -> None:
        """ReleaseLease."""
        with _translated():
            await self._sqs.call("ReleaseLease", {"Name": name, "Holder": holder},
                                 target_prefix=TARGET_PREFIX)

    async def get(self, name: str) -> Lease | None:
        """GetLease."""
        with _translated():
            answer = await self._sqs.call("GetLease", {"Name": name},
                                          target_prefix=TARGET_PREFIX)
        return _lease(answer["Lease"]) if answer.get("Lease") else None

    async def close(self) -> None:
        """Close the client if this backend made it."""
        if self._own_client:
            await self._sqs.close()

    async def _lease(self, action: str, params: dict[str, Any]) -> Lease:
        with _translated():
            answer = await self._sqs.call(action, params, target_prefix=TARGET_PREFIX)
        return _lease(answer["Lease"])


def _lease(raw: dict[str, Any]) -> Lease:
    return Lease(raw["Name"], raw["Holder"], int(raw["Version"]), int(raw["ExpiresAt"]),
                 raw.get("Data") or "")


@contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except SQSError as exc:
        if exc.matches(_CONFLICT):
            raise LeaseConflict(exc.message) from None
        raise LeaseUnavailable(str(exc)) from exc
    except SQSTransportError as exc:
        raise LeaseUnavailable(str(exc)) from exc
