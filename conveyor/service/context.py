"""Who is asking, and how queues are named to them: URLs and ARNs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from conveyor.service import validate


@dataclass(frozen=True, slots=True)
class RequestContext:
    region: str  # from the SigV4 credential scope
    account_id: str
    base_url: str  # scheme://host[:port] as the client addressed us
    sender_id: str = ""  # the caller's access key id: SenderId of what it sends
    # Which queue names the caller may see in a list's results (ListQueues,
    # ListDeadLetterSourceQueues, ListWorkers); None: every queue. The server's
    # authorization table (server/authz.py) sets it; the service only applies it.
    visible: Callable[[str], bool] | None = None

    def sees(self, name: str) -> bool:
        """Whether a list's results may show the queue called `name` to this caller."""
        return self.visible is None or self.visible(name)

    def queue_url(self, name: str) -> str:
        return f"{self.base_url}/{self.account_id}/{name}"

    def queue_arn(self, name: str, region: str | None = None) -> str:
        return f"arn:aws:sqs:{region or self.region}:{self.account_id}:{name}"


@dataclass(frozen=True)
class Arn:
    region: str
    account_id: str
    name: str


def parse_arn(value: str) -> Arn | None:
    parts = value.split(":")
    if len(parts) != 6 or parts[:3] != ["arn", "aws", "sqs"] or not parts[5]:
        return None
    if not all(validate.plain_name(part) for part in parts[3:]):
        return None
    return Arn(parts[3], parts[4], parts[5])
