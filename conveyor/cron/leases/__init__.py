"""Lease backends for leader election: the Conveyor server's lease API, or DynamoDB."""

from conveyor.cron.leases.base import (
    Lease,
    LeaseBackend,
    LeaseConflict,
    LeaseRefused,
    LeaseUnavailable,
)
from conveyor.cron.leases.factory import LeaseSpecError, open_leases, parse_lease_spec

__all__ = ["Lease", "LeaseBackend", "LeaseConflict", "LeaseRefused", "LeaseSpecError",
           "LeaseUnavailable", "open_leases", "parse_lease_spec"]
