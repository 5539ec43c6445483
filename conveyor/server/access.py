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
patterns match queue names, case-sensitively like IAM resources.

Which queues a call touches, and which action it needs on each, is not decided here but
in the one authorization table (server/authz.py): this module only answers whether the
key may do an action on a queue.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

EVERYTHING = ("*",)

# Batch actions share their single action's IAM permission.
_PERMISSION = {"SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage",
               "ChangeMessageVisibilityBatch": "ChangeMessageVisibility"}


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

    @property
    def queues_unlimited(self) -> bool:
        return "*" in self.queues

    def may_call(self, action: str) -> bool:
        """Whether the key's actions admit `action` (a batch: or its single action)."""
        wanted = {action.lower(), _PERMISSION.get(action, action).lower()}
        return any(fnmatchcase(name, pattern) for pattern in self.actions for name in wanted)

    def may(self, action: str, queue: str | None) -> bool:
        """Whether the key may do `action` on the queue called `queue` (None: a queue that
        cannot be told, which only a key for every queue may touch)."""
        return self.may_call(action) and (self.queues_unlimited if queue is None
                                          else self.touches(queue))

    def touches(self, queue: str) -> bool:
        """Whether the queue called `queue` is within the key's queues."""
        return any(fnmatchcase(queue, pattern) for pattern in self.queues)

    def allows(self, action: str) -> bool:
        """True when the key's actions admit `action` (e.g. `s3:GetObject` on the
        embedded blob store, which has no queues to limit)."""
        return self.actions == EVERYTHING or self.may_call(action)


def normalized_actions(patterns: Iterable[str]) -> tuple[str, ...]:
    """Lower-cased, without an `sqs:` prefix: how `may_call` compares them."""
    return tuple(p.lower().removeprefix("sqs:") for p in patterns)
