"""Queue semantics, one method per SQS action, shared by every store."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from conveyor.service.attempts import AttemptActions
from conveyor.service.context import RequestContext
from conveyor.service.controls import ControlActions
from conveyor.service.leases import LeaseActions
from conveyor.service.messages import MessageActions, ReceivePlan
from conveyor.service.queues import QueueActions
from conveyor.service.redrive import RedriveActions
from conveyor.service.workers import WorkerActions
from conveyor.sqs.errors import InvalidAction

# What the HTTP layer and console meet through the service without opening a store: the
# records its reads return and the two failures any call may raise (rendered as an
# internal error, and as a retryable "service unavailable").
from conveyor.store.base import Counts, QueueRecord, StoredMessage, StoreError, StoreUnavailable

Action = Callable[[RequestContext, dict[str, Any]], Awaitable[dict[str, Any]]]

__all__ = ["Counts", "QueueRecord", "ReceivePlan", "RequestContext", "Service", "StoreError",
           "StoreUnavailable", "StoredMessage"]


class Service(QueueActions, MessageActions, RedriveActions, LeaseActions, WorkerActions,
              AttemptActions, ControlActions):
    """The SQS API over a store. `action(name)` finds the method for a wire action."""

    def action(self, name: str) -> Action:
        method = self._action_cache.get(name)
        if method is None:
            method = getattr(self, _snake(name), None)
            if method is None or name == "ReceiveMessage":
                raise InvalidAction(f"The action {name} is not valid for this endpoint.")
            self._action_cache[name] = method  # only names the protocol knows get here
        return method


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
