"""Who may do what: access keys, each optionally limited to actions and queue names.

A key without limits may do everything (today's configs keep working). A limited key
names the actions it may call and the queues it may touch, as shell-style patterns:

```yaml
access_keys:
  AKIDADMIN: admin-secret                  # full access
  AKIDPRODUCER:
    secret: producer-secret
    actions: ["SendMessage*", "GetQueueUrl"]
    queues: ["orders-*"]
  AKIDDASHBOARD:
    secret: dashboard-secret
    actions: ["ListQueues", "GetQueue*", "ListDeadLetterSourceQueues"]
```

Actions match the way IAM's `sqs:` actions do: case-insensitively, with an optional
`sqs:` prefix, and a batch call is allowed by its single action's permission
(`sqs:SendMessage` covers SendMessageBatch, as the SQS developer guide says). Queue
patterns match queue names, case-sensitively like IAM resources. A call that names no
queue (ListQueues) needs only the action; a call whose queue cannot be told
(CancelMessageMoveTask) needs a key that may touch every queue (`"*"`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from conveyor.service.base import queue_name_from
from conveyor.service.context import parse_arn
from conveyor.sqs.errors import AccessDenied

EVERYTHING = ("*",)

# Batch actions share their single action's IAM permission.
_PERMISSION = {"SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage",
               "ChangeMessageVisibilityBatch": "ChangeMessageVisibility"}
# Actions whose queue we cannot tell from the request: allowed only on every queue
# (DrainWorker names a worker, whose queue only the store knows).
_UNKNOWN_QUEUE = frozenset({"CancelMessageMoveTask", "DrainWorker"})


@dataclass(frozen=True, slots=True)
class AccessKey:
    key_id: str
    secret: str
    session_token: str | None = None
    actions: tuple[str, ...] = EVERYTHING
    queues: tuple[str, ...] = EVERYTHING

    @property
    def unlimited(self) -> bool:
        return self.actions == EVERYTHING and self.queues == EVERYTHING

    def check(self, action: str, request: dict[str, Any], account_id: str,
              endpoint: str) -> None:
        """Raise AccessDenied (and change nothing) for a call beyond this key's limits."""
        if self.unlimited:
            return
        names = queues_named(action, request, account_id)
        if not self._may_call(action) or not self._may_touch(names):
            raise AccessDenied(f"Access to the resource {endpoint}/ is denied.")

    def allows(self, action: str) -> bool:
        """True when the key's actions admit `action` (e.g. `s3:GetObject` on the
        embedded blob store, which has no queues to limit)."""
        return self.actions == EVERYTHING or self._may_call(action)

    def _may_call(self, action: str) -> bool:
        wanted = {action.lower(), _PERMISSION.get(action, action).lower()}
        return any(fnmatchcase(name, pattern) for pattern in self.actions for name in wanted)

    def _may_touch(self, names: Iterable[str] | None) -> bool:
        if names is None:
            return "*" in self.queues
        return all(any(fnmatchcase(name, pattern) for pattern in self.queues)
                   for name in names)


def normalized_actions(patterns: Iterable[str]) -> tuple[str, ...]:
    """Lower-cased, without an `sqs:` prefix: how `_may_call` compares them."""
    return tuple(p.lower().removeprefix("sqs:") for p in patterns)


def queues_named(action: str, request: dict[str, Any], account_id: str) -> list[str] | None:
    """The queue names a call touches ([] for none); None when they cannot be told.

    A URL or ARN that names no queue of this account yields the name "" — no pattern but
    "*" matches it, and the service refuses such a call with its own error anyway."""
    if action in _UNKNOWN_QUEUE:
        return None
    names: list[str] = []
    urls = request.get("QueueUrls", [])  # PollMessages parked on several queues
    if not isinstance(urls, list) or not all(isinstance(url, str) for url in urls):
        return None  # malformed: the service refuses it, after a key for every queue
    if isinstance(request.get("QueueUrl"), str):
        urls = [request["QueueUrl"], *urls]
    names += [queue_name_from(url, account_id) or "" for url in urls]
    if action in ("CreateQueue", "GetQueueUrl") and isinstance(request.get("QueueName"), str):
        names.append(request["QueueName"])
    announce = request.get("Announce")  # PollMessages carrying an AnnounceWorker request
    for call in (request, announce if isinstance(announce, dict) else {}):
        if isinstance(call.get("Queue"), str):  # the worker registry's calls name a queue
            names.append(call["Queue"])
    for member in ("SourceArn", "DestinationArn"):
        if isinstance(request.get(member), str):
            arn = parse_arn(request[member])
            names.append(arn.name if arn and arn.account_id == account_id else "")
    return names
