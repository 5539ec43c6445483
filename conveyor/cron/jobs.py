"""The scheduled-job message, as Elastic Beanstalk's sqsd sends and reads it.

Sent by the leader: body `elasticbeanstalk scheduled job`, message attributes
`beanstalk.sqsd.path` (the task url), `beanstalk.sqsd.task_name` and
`beanstalk.sqsd.scheduled_time` (ISO 8601 UTC), and with a signing key
`beanstalk.sqsd.conveyor-signature` (signing.py). The daemon that receives one POSTs an
empty body to the task url with `X-Aws-Sqsd-Taskname`, `X-Aws-Sqsd-Scheduled-At` and
`X-Aws-Sqsd-Sender-Id` besides the usual headers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from conveyor.client import Message, SQSClient, queue_name_from_url
from conveyor.cron.signing import ATTR_SIGNATURE, run_signature
from conveyor.cron.state import Run

BODY = "elasticbeanstalk scheduled job"
ATTR_PATH = "beanstalk.sqsd.path"
ATTR_TASK = "beanstalk.sqsd.task_name"
ATTR_TIME = "beanstalk.sqsd.scheduled_time"
ATTR_PREFIX = "beanstalk.sqsd."
_BATCH = 10  # SendMessageBatch's limit


def iso(moment: datetime) -> str:
    """`2026-01-31T23:00:00Z`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_attributes(run: Run, queue_name: str = "",
                   signing_key: str = "") -> dict[str, dict[str, str]]:
    """The message attributes of one run, signed for `queue_name` when a key is given."""
    values = [(ATTR_PATH, run.url), (ATTR_TASK, run.task), (ATTR_TIME, iso(run.at))]
    if signing_key:
        values.append((ATTR_SIGNATURE, run_signature(signing_key, queue_name, run.task,
                                                     run.url, iso(run.at), BODY)))
    return {name: {"DataType": "String", "StringValue": value} for name, value in values}


async def send_runs(sqs: SQSClient, queue_url: str, runs: Sequence[Run], *,
                    signing_key: str = "") -> list[Run]:
    """Enqueue `runs` (batches of 10), signed when `signing_key` is given; return those the
    queue accepted. Raises on transport errors, in which case the caller cannot know which
    were sent."""
    queue_name = queue_name_from_url(queue_url)
    sent: list[Run] = []
    for start in range(0, len(runs), _BATCH):
        chunk = runs[start:start + _BATCH]
        entries = [{"Id": str(i), "MessageBody": BODY,
                    "MessageAttributes": run_attributes(run, queue_name, signing_key)}
                   for i, run in enumerate(chunk)]
        result = await sqs.send_message_batch(queue_url, entries)
        sent.extend(chunk[int(i)] for i in result.successful)
    return sent


@dataclass(frozen=True, slots=True)
class ScheduledJob:
    """A received scheduled-job message, read back into what the POST needs."""

    task: str
    path: str
    scheduled_at: str  # as sent: ISO 8601 UTC
    signature: str = ""  # as sent, "" when unsigned

    @classmethod
    def from_message(cls, message: Message) -> ScheduledJob | None:
        """The job, or None for an ordinary message."""
        attrs = message.message_attributes
        if ATTR_TASK not in attrs or message.body != BODY:
            return None
        task, path, at, signature = (_text(attrs.get(n)) for n in (
            ATTR_TASK, ATTR_PATH, ATTR_TIME, ATTR_SIGNATURE))
        if not task or not path.startswith("/"):
            return None
        return cls(task, path, at, signature)

    def headers(self, message: Message) -> dict[str, str]:
        """The periodic-task headers sqsd adds."""
        headers = {"X-Aws-Sqsd-Taskname": self.task, "X-Aws-Sqsd-Scheduled-At": self.scheduled_at}
        sender = message.attributes.get("SenderId")
        if sender:
            headers["X-Aws-Sqsd-Sender-Id"] = sender
        return {k: v for k, v in headers.items() if "\r" not in v and "\n" not in v}


def _text(value: dict[str, Any] | None) -> str:
    return str((value or {}).get("StringValue") or "")
