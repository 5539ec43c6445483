"""Pick a lease backend from its spec: `server` or `dynamodb:TABLE`."""

from __future__ import annotations

from conveyor.client import SQSClient
from conveyor.cron.leases.base import LeaseBackend
from conveyor.cron.leases.dynamodb import DynamoDBLeases
from conveyor.cron.leases.server import ServerLeases


class LeaseSpecError(ValueError):
    """The lease backend spec is not `server` or `dynamodb:TABLE`."""


def parse_lease_spec(spec: str) -> tuple[str, str]:
    """(`server`, "") or (`dynamodb`, table)."""
    kind, _, table = spec.strip().partition(":")
    if kind == "server" and not table:
        return "server", ""
    if kind == "dynamodb" and table.strip():
        return "dynamodb", table.strip()
    msg = f"CronLease must be 'server' or 'dynamodb:TABLE', got {spec!r}"
    raise LeaseSpecError(msg)


def open_leases(spec: str, sqs: SQSClient, *, region: str | None = None) -> LeaseBackend:
    """The backend for `spec`; `server` shares the daemon's SQS client (same endpoint)."""
    kind, table = parse_lease_spec(spec)
    if kind == "dynamodb":
        return DynamoDBLeases(table, region=region or sqs.region)
    return ServerLeases(sqs)
