"""The producer's side of the claim check: a body above the threshold goes to the blob
store and a pointer goes on the queue, in the Extended Client's format, so the Extended
Client (Java or Python) and Conveyor's worker both read it.

For apps:

    from conveyor.payloads import BlobSettings, BlobStore, Offloader
    offloader = Offloader(BlobStore(BlobSettings(endpoint_url=..., bucket="payloads")))
    offloader.send_message(boto3.client("sqs", ...), QueueUrl=url, MessageBody=big)
    offloader.send_message_batch(sqs, QueueUrl=url, Entries=[{"Id": "1", ...}, ...])
"""

from __future__ import annotations

import gzip
import uuid
from typing import Any

from conveyor.payloads.blobs import BlobStore
from conveyor.payloads.pointer import (
    DEFAULT_THRESHOLD_BYTES,
    EMBEDDED_BUCKET,
    EMBEDDED_STORE_PATH,
    GZIP,
    RESERVED_ATTRIBUTES,
    Pointer,
    message_size,
)

# Stored bodies are written with this type, so a reader of the bucket sees what they are.
_CONTENT_TYPES = {"": "text/plain; charset=utf-8", GZIP: "application/gzip"}


class OffloadError(ValueError):
    """The message cannot be offloaded as asked (no bucket, a reserved attribute...)."""


class Offloader:
    """Decides whether a body goes to the blob store, puts it there, and builds the pointer.

    `threshold_bytes` is compared with the message's size as SQS counts it (body and
    attributes); None asks the queue for its MaximumMessageSize on first use."""

    def __init__(self, store: BlobStore, *, bucket: str = "", threshold_bytes: int | None = None,
                 compress: bool = False, always: bool = False) -> None:
        self.store = store
        self.bucket = bucket or store.settings.bucket
        if not self.bucket:
            msg = "offloading needs a bucket (PayloadBucket, --payload-bucket)"
            raise OffloadError(msg)
        self.threshold_bytes = threshold_bytes
        self.compress = compress
        self.always = always
        self._queue_thresholds: dict[str, int] = {}  # threshold_bytes None: per queue URL

    def needs_offload(self, body: str, attributes: dict[str, Any], threshold_bytes: int) -> bool:
        """True when the message would be larger than `threshold_bytes` (or `always`)."""
        return self.always or message_size(body, attributes) > threshold_bytes

    def offload(self, body: str, attributes: dict[str, Any] | None = None) -> tuple[str, dict]:
        """Store `body` and return the pointer body and the attributes that go with it."""
        attributes = dict(attributes or {})
        reserved = sorted(set(attributes) & set(RESERVED_ATTRIBUTES))
        if reserved:  # the Extended Client refuses these too (INVALID_ATTRIBUTE_NAME_PRESENT)
            msg = f"message attribute {reserved[0]} is reserved for the payload pointer"
            raise OffloadError(msg)
        encoding = GZIP if self.compress else ""
        data = body.encode()
        if encoding:
            data = gzip.compress(data)
        pointer = Pointer(self.bucket, str(uuid.uuid4()), encoding)
        self.store.put(pointer.bucket, pointer.key, data, _CONTENT_TYPES[encoding])
        return pointer.body(), {**attributes, **pointer.attributes(len(data))}

    def prepare(self, body: str, attributes: dict[str, Any] | None,
                threshold_bytes: int) -> tuple[str, dict]:
        """The body and attributes to send: offloaded when over `threshold_bytes`."""
        attributes = dict(attributes or {})
        if not self.needs_offload(body, attributes, threshold_bytes):
            return body, attributes
        return self.offload(body, attributes)

    def _threshold(self, sqs: Any, queue_url: str) -> int:
        """threshold_bytes, or the queue's MaximumMessageSize, asked on first use only."""
        if self.threshold_bytes is not None:
            return self.threshold_bytes
        if queue_url not in self._queue_thresholds:
            self._queue_thresholds[queue_url] = queue_threshold(sqs, queue_url)
        return self._queue_thresholds[queue_url]

    def send_message(self, sqs: Any, **kwargs: Any) -> dict[str, Any]:
        """boto3's `sqs.send_message(**kwargs)`, with MessageBody offloaded when large."""
        threshold = self._threshold(sqs, kwargs["QueueUrl"])
        kwargs["MessageBody"], attributes = self.prepare(
            kwargs["MessageBody"], kwargs.get("MessageAttributes"), threshold)
        if attributes:
            kwargs["MessageAttributes"] = attributes
        return sqs.send_message(**kwargs)

    def send_message_batch(self, sqs: Any, **kwargs: Any) -> dict[str, Any]:
        """boto3's `sqs.send_message_batch(**kwargs)`, each entry offloaded when large
        (as the Extended Client's send_message_batch does)."""
        threshold = self._threshold(sqs, kwargs["QueueUrl"])
        entries = []
        for entry in kwargs["Entries"]:
            body, attributes = self.prepare(entry["MessageBody"],
                                            entry.get("MessageAttributes"), threshold)
            entries.append({**entry, "MessageBody": body,
                            **({"MessageAttributes": attributes} if attributes else {})})
        return sqs.send_message_batch(**{**kwargs, "Entries": entries})


def default_store(sqs_endpoint_url: str) -> tuple[str, str]:
    """(blob endpoint, bucket) a producer uses when told none: the embedded store of the
    Conveyor server it sends to; for Amazon SQS none (offloading needs --payload-bucket)."""
    if "amazonaws.com" in sqs_endpoint_url:
        return "", ""
    return sqs_endpoint_url.rstrip("/") + EMBEDDED_STORE_PATH, EMBEDDED_BUCKET


def queue_threshold(sqs: Any, queue_url: str) -> int:
    """The queue's MaximumMessageSize (boto3 client), the Extended Client's 256 KiB if it
    says none."""
    answer = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["MaximumMessageSize"])
    return int(answer.get("Attributes", {}).get("MaximumMessageSize", DEFAULT_THRESHOLD_BYTES))
