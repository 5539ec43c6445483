"""The small interface every lease backend meets: four conditional primitives.

Leader election, the leader's per-task "last enqueued" times and the receivers' run ledger
are all written once above these, whichever backend holds the records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Lease:
    """A named record: who holds it, until when, at which version, with what data."""

    name: str
    holder: str
    version: int  # bumped by every successful write
    expires_ms: int  # epoch milliseconds, by the backend's clock
    data: str  # opaque to the backend; kept across handovers
    # How long it had left when read, by the clock that judges it (the server's, or the
    # DynamoDB writer's): a follower sleeps that long instead of asking again and again.
    # None when the backend does not say (a Conveyor server older than this field).
    expires_in_ms: int | None = None


class LeaseConflict(Exception):
    """A conditional write was refused: someone else holds the lease, or the version moved."""


class LeaseUnavailable(Exception):
    """The backend did not answer (or answered with an error worth retrying)."""


class LeaseRefused(LeaseUnavailable):
    """The endpoint does not serve this lease backend at all (Amazon SQS or moto asked for
    Conveyor's lease API, an access key without the lease actions): asking again soon is
    pointless."""


class LeaseBackend(Protocol):
    """Conditional lease primitives (DynamoDB-style). Every call may raise LeaseUnavailable."""

    async def acquire(self, name: str, holder: str, ttl_s: float) -> Lease:
        """Take the lease if free, expired or already ours; else raise LeaseConflict."""
        ...

    async def update(self, name: str, holder: str, version: int, ttl_s: float,
                     data: str) -> Lease:
        """Renew and write `data` if we hold it unexpired at `version`; else LeaseConflict."""
        ...

    async def release(self, name: str, holder: str) -> None:
        """Let it go now if ours (its data stays)."""
        ...

    async def get(self, name: str) -> Lease | None:
        """Read it, or None if it was never written."""
        ...

    async def close(self) -> None:
        """Free connections."""
        ...
