"""Leases through the Conveyor server's lease API (`X-Amz-Target: ConveyorLease.<Action>`).

An endpoint that is not a Conveyor server (Amazon SQS, moto) refuses the API: Amazon SQS
with a 4xx, moto with an HTML 500. Told apart from a Conveyor server's passing trouble as
every Conveyor extension is (runtime/extensions.py), such an answer is `LeaseRefused`, so
the scheduler neither retries it every few seconds nor runs at all (the worker refuses at
start, service.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from conveyor.client import SQSClient, SQSError, SQSTransportError
from conveyor.clock import Clock
from conveyor.cron.leases.base import Lease, LeaseConflict, LeaseRefused, LeaseUnavailable
from conveyor.runtime.extensions import Extension

TARGET_PREFIX = "ConveyorLease."
_CONFLICT = "ConditionalCheckFailedException"


class ServerLeases:
    """The lease API beside SQS on the same endpoint, signed like SQS calls.

    Expiry is judged by the server's clock, so the daemons' clocks need not agree.
    """

    def __init__(self, sqs: SQSClient, *, own_client: bool = False,
                 clock: Clock | None = None) -> None:
        self._sqs = sqs
        self._own_client = own_client
        self.extension = Extension("ConveyorLease", clock=clock or Clock())

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
        await self._call("ReleaseLease", {"Name": name, "Holder": holder})

    async def get(self, name: str) -> Lease | None:
        """GetLease."""
        answer = await self._call("GetLease", {"Name": name})
        return _lease(answer["Lease"]) if answer.get("Lease") else None

    async def close(self) -> None:
        """Close the client if this backend made it."""
        if self._own_client:
            await self._sqs.close()

    async def _lease(self, action: str, params: dict[str, Any]) -> Lease:
        return _lease((await self._call(action, params))["Lease"])

    async def _call(self, action: str, params: dict[str, Any]) -> dict[str, Any]:
        with self._translated():
            answer = await self._sqs.call(action, params, target_prefix=TARGET_PREFIX)
        self.extension.worked()
        return answer

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except SQSError as exc:
            if exc.matches(_CONFLICT):
                self.extension.worked()  # a lease API answered
                raise LeaseConflict(exc.message) from None
            if self.extension.refused(exc):
                msg = (f"{self._sqs.endpoint_url} does not serve Conveyor's lease API "
                       f"({exc})")
                raise LeaseRefused(msg) from exc
            raise LeaseUnavailable(str(exc)) from exc
        except SQSTransportError as exc:
            raise LeaseUnavailable(str(exc)) from exc


def _lease(raw: dict[str, Any]) -> Lease:
    expires_in = raw.get("ExpiresIn")  # absent from a server older than the field
    return Lease(raw["Name"], raw["Holder"], int(raw["Version"]), int(raw["ExpiresAt"]),
                 raw.get("Data") or "",
                 int(expires_in) if isinstance(expires_in, int | float) else None)
