"""The names of the lease records Conveyor's own parts keep, each written once here.

A lease record (the store's conditional-write record, service/leases.py) is named by its
writer. Conveyor's parts name theirs after a queue or a worker, so that a queue's deletion
can end them with it (service/identity.py, DESIGN.md invariant 6). The server side
(drains, scaling decisions) and the periodic tasks (conveyor/cron, an SQS client that
never imports the server) both name theirs from this one module. KINDS lists every kind:
tests/store/test_identity.py fails for a lease name made elsewhere that it does not know.
"""

from __future__ import annotations

from collections.abc import Callable

CRON_PREFIX = "conveyor-cron:"
RUNS_INFIX = "#runs:"
DRAIN_PREFIX = "drain worker "  # a space: no lease call can name it (service/leases.py)
DECISIONS_PREFIX = "scaling decisions "


def cron_leader(queue_name: str) -> str:
    """The lease every periodic-task scheduler of one queue campaigns for."""
    return f"{CRON_PREFIX}{queue_name}"


def cron_runs(leader_lease: str, task: str) -> str:
    """The run ledger of one periodic task (`task` already safe for a lease name)."""
    return f"{leader_lease}{RUNS_INFIX}{task}"


def drain(worker_id: str) -> str:
    """A drain request waiting for its worker's next announcement (service/workers.py)."""
    return f"{DRAIN_PREFIX}{worker_id}"


def scaling_decisions(queue_name: str) -> str:
    """A queue's timeline of scaling decisions (service/workers.py)."""
    return f"{DECISIONS_PREFIX}{queue_name}"


def of_queue(queue_name: str) -> tuple[list[str], list[str]]:
    """The lease records named after a queue, in its region: (exact names, name prefixes).
    Drain requests are named after workers: the service ends those of the queue's workers."""
    leader = cron_leader(queue_name)
    return [leader, scaling_decisions(queue_name)], [cron_runs(leader, "")]


# Every kind of lease name Conveyor makes: its maker, and what it is keyed by ("queue",
# "worker"); client leases (AcquireLease's Name, opaque to the server) are keyed by none.
KINDS: dict[str, tuple[Callable[..., str] | None, str | None]] = {
    "cron leader": (cron_leader, "queue"),
    "cron runs": (cron_runs, "queue"),
    "drain": (drain, "worker"),
    "scaling decisions": (scaling_decisions, "queue"),
    "client lease": (None, None),
}
