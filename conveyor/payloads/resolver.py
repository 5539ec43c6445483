"""The worker's side of the claim check: an offloaded message's real body, fetched before
the POST, and its blob deleted after the app's 200 (never before).

A blob that cannot be had fails its message like an app error would (retried after the
back-off, then dead-lettered), but it says nothing about the app, so it never trips the
circuit breaker. The dead-letter copy keeps the pointer, and the blob stays, so a redrive
can deliver it later.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import zlib

from conveyor.client import Message
from conveyor.payloads.blobs import BlobError, BlobSettings, BlobStore
from conveyor.payloads.pointer import (
    GZIP,
    Pointer,
    PointerError,
    is_offloaded,
    read_pointer,
    without_reserved,
)
from conveyor.runtime.hooks import Unavailable

log = logging.getLogger("conveyor.payloads")

# A gzip body inflating past this is refused rather than held in memory: 256 MiB is far
# beyond any job body an app accepts in one POST.
MAX_INFLATED_BYTES = 256 * 1024 * 1024


class PayloadUnavailable(Unavailable):
    """The message's body could not be fetched or decoded; the message fails this attempt."""

    def __init__(self, reason: str, pointer: Pointer | None = None) -> None:
        where = f"s3://{pointer.bucket}/{pointer.key}: " if pointer is not None else ""
        super().__init__(where + reason)  # the log line names the bucket and key
        self.reason = reason
        self.pointer = pointer


class PayloadResolver:
    """Turns offloaded messages back into whole ones, and cleans up after them."""

    def __init__(self, store: BlobStore, *, delete_after: bool = True,
                 allowed_bucket: str = "") -> None:
        self._store = store
        self._delete_after = delete_after
        self._allowed_bucket = allowed_bucket
        self._deleting: set[asyncio.Task[None]] = set()

    @classmethod
    def from_options(cls, endpoint_url: str, region: str, access_key: str, bucket: str, *,
                     delete_after: bool) -> PayloadResolver:
        """The worker's resolver, from its Payload* options (see the worker's --help)."""
        store = BlobStore(BlobSettings(endpoint_url, region, access_key, bucket))
        return cls(store, delete_after=delete_after, allowed_bucket=bucket)

    async def resolve(self, message: Message) -> Message:
        """`message` itself when it is not offloaded; else a copy with the stored body and
        without the claim-check attributes (the app never sees the pointer)."""
        if not is_offloaded(message.message_attributes):
            return message
        pointer = self._pointer(message)
        try:
            data = await self._store.aget(pointer.bucket, pointer.key)
        except BlobError as exc:
            raise PayloadUnavailable(exc.reason, pointer) from exc
        body = _decode(data, pointer)
        return dataclasses.replace(message, body=body,
                                   message_attributes=without_reserved(message.message_attributes))

    async def resolve_each(self, messages: list[Message]) -> list[Message | PayloadUnavailable]:
        """`resolve` for several messages at once, each one's failure in its place. Only
        the offloaded ones are fetched (concurrently); the others are themselves, with no
        task made for them."""
        async def one(message: Message) -> Message | PayloadUnavailable:
            try:
                return await self.resolve(message)
            except PayloadUnavailable as exc:
                return exc

        resolved: list[Message | PayloadUnavailable] = list(messages)
        offloaded = [i for i, message in enumerate(messages)
                     if is_offloaded(message.message_attributes)]
        if offloaded:
            found = await asyncio.gather(*(one(messages[i]) for i in offloaded))
            for i, result in zip(offloaded, found, strict=True):
                resolved[i] = result
        return resolved

    async def _discard(self, message: Message) -> None:
        """After the app's 200 and the message's deletion: delete its blob (after_delete
        checked it is configured: the Extended Client's cleanupS3Payload, on by default).
        A failure is logged: the message is done either way, and S3 lifecycle rules catch
        what is left."""
        try:
            pointer = read_pointer(message.body, message.message_attributes)
            await self._store.adelete(pointer.bucket, pointer.key)
        except (PointerError, BlobError) as exc:
            log.warning("could not delete the payload of a finished message: message=%s %s",
                        message.message_id, exc,
                        extra={"message_id": message.message_id, "outcome": "payload-kept"})

    def cleans_up(self, message: Message) -> bool:
        """True when the message's blob is to go once the message is deleted (after_delete)."""
        return self._delete_after and is_offloaded(message.message_attributes)

    def after_delete(self, message: Message, refusal: str | None) -> None:
        """The message's DeleteMessage came back: `refusal` None means it is gone, and its
        blob may go too (in the background); refused, the blob stays for the redelivery."""
        if refusal is None and self.cleans_up(message):
            task = asyncio.get_running_loop().create_task(self._discard(message))
            self._deleting.add(task)
            task.add_done_callback(self._deleting.discard)

    async def close(self) -> None:
        """Let the blob deletions under way finish (a drain waits for them)."""
        if self._deleting:
            await asyncio.gather(*self._deleting, return_exceptions=True)
        self._store.close()

    def _pointer(self, message: Message) -> Pointer:
        try:
            pointer = read_pointer(message.body, message.message_attributes)
        except PointerError as exc:
            raise PayloadUnavailable(str(exc)) from None
        if self._allowed_bucket and pointer.bucket != self._allowed_bucket:
            # A sender could otherwise make the worker read (and delete) any object its
            # credentials reach.
            msg = f"bucket {pointer.bucket!r} is not PayloadBucket {self._allowed_bucket!r}"
            raise PayloadUnavailable(msg, pointer)
        return pointer


def _decode(data: bytes, pointer: Pointer) -> str:
    if pointer.encoding == GZIP:
        data = _gunzip(data, pointer)
    try:
        return data.decode()
    except UnicodeDecodeError:
        msg = "the stored body is not UTF-8 text (compressed without ConveyorPayloadEncoding?)"
        raise PayloadUnavailable(msg, pointer) from None


def _gunzip(data: bytes, pointer: Pointer) -> bytes:
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip framing
    try:
        out = inflater.decompress(data, MAX_INFLATED_BYTES)
    except zlib.error as exc:
        raise PayloadUnavailable(f"the stored body is not valid gzip: {exc}", pointer) from None
    if inflater.unconsumed_tail:
        msg = f"the stored body inflates past {MAX_INFLATED_BYTES} bytes"
        raise PayloadUnavailable(msg, pointer)
    return out



