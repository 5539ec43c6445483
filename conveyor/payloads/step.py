"""The claim check as a step of each delivery (a worker hook, runtime/hooks.py): the
offloaded body fetched before the POST (`prepare`), the blob deleted once the message is
(`after_delete`). The delivery path knows nothing of blobs."""

from __future__ import annotations

from typing import Any

from conveyor.client import Message
from conveyor.payloads.resolver import PayloadResolver
from conveyor.runtime.hooks import WorkerHook


class PayloadStep(WorkerHook):
    """A PayloadResolver taking part in each delivery."""

    def __init__(self, resolver: PayloadResolver) -> None:
        self.resolver = resolver

    @classmethod
    def from_config(cls, config: Any) -> PayloadStep:
        """From a WorkerConfig's Payload* options."""
        return cls(PayloadResolver.from_options(
            config.payload_endpoint_url, config.payload_region or config.region,
            config.payload_access_key, config.payload_bucket,
            delete_after=config.delete_payloads))

    async def prepare(self, message: Message) -> Message:
        """The message with its stored body (PayloadUnavailable when it cannot be had)."""
        return await self.resolver.resolve(message)

    def after_delete(self, message: Message, refusal: str | None) -> None:
        """Deleted for good: its blob goes too (unless DeletePayloads is off)."""
        self.resolver.after_delete(message, refusal)

    async def close(self) -> None:
        """Let the blob deletions under way finish."""
        await self.resolver.close()
