"""The Amazon SQS Extended Client's claim-check format, without I/O.

A message whose body lives in S3 carries, as its SQS body, the JSON pointer
`["software.amazon.payloadoffloading.PayloadS3Pointer", {"s3BucketName": B, "s3Key": K}]`
and the Number attribute `ExtendedPayloadSize` (the stored body's size in bytes). Older
Java clients wrote `com.amazon.sqs.javamessaging.MessageS3Pointer` and
`SQSLargePayloadSize`; readers accept both. A message is offloaded when the attribute is
present: that, not the body's look, is how the Extended Client recognises one, so an app's
own JSON that merely resembles a pointer is left alone. Source: the `amazon-sqs-extended-client`
package (sqs_extended_client/client.py: RESERVED_ATTRIBUTE_NAME, MESSAGE_POINTER_CLASS,
_store_message_in_s3, _receive_message_decorator) and the Java library
(SQSExtendedClientConstants, PayloadS3Pointer).

Conveyor adds one optional attribute, `ConveyorPayloadEncoding: gzip`, when the stored
body is gzip-compressed; readers other than Conveyor's do not know it, so compression is
off by default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"
LEGACY_POINTER_CLASS = "com.amazon.sqs.javamessaging.MessageS3Pointer"
SIZE_ATTRIBUTE = "ExtendedPayloadSize"
LEGACY_SIZE_ATTRIBUTE = "SQSLargePayloadSize"
ENCODING_ATTRIBUTE = "ConveyorPayloadEncoding"
RESERVED_ATTRIBUTES = (SIZE_ATTRIBUTE, LEGACY_SIZE_ATTRIBUTE, ENCODING_ATTRIBUTE)
GZIP = "gzip"
# Where a Conveyor server serves its embedded blob store (conveyor/server/s3subset.py), and
# the bucket it creates at start.
EMBEDDED_STORE_PATH = "/_conveyor/s3"
EMBEDDED_BUCKET = "conveyor-payloads"
# The Extended Client's default threshold (DEFAULT_MESSAGE_SIZE_THRESHOLD): SQS's 256 KiB.
DEFAULT_THRESHOLD_BYTES = 262_144


class PointerError(ValueError):
    """A message says it is offloaded (it carries the size attribute) but its body is not a
    pointer the Extended Client would read."""


@dataclass(frozen=True, slots=True)
class Pointer:
    """Where an offloaded body lives, and how it was stored."""

    bucket: str
    key: str
    encoding: str = ""  # "" or "gzip"

    def body(self) -> str:
        """The SQS body that stands for the stored one."""
        return json.dumps([POINTER_CLASS, {"s3BucketName": self.bucket, "s3Key": self.key}])

    def attributes(self, stored_bytes: int) -> dict[str, dict[str, str]]:
        """The message attributes that mark the message as offloaded."""
        attributes = {SIZE_ATTRIBUTE: {"DataType": "Number", "StringValue": str(stored_bytes)}}
        if self.encoding:
            attributes[ENCODING_ATTRIBUTE] = {"DataType": "String", "StringValue": self.encoding}
        return attributes


def is_offloaded(message_attributes: dict[str, Any]) -> bool:
    """True when the message carries the Extended Client's size attribute (either name)."""
    return SIZE_ATTRIBUTE in message_attributes or LEGACY_SIZE_ATTRIBUTE in message_attributes


def read_pointer(body: str, message_attributes: dict[str, Any]) -> Pointer:
    """The pointer an offloaded message's body holds; PointerError when it holds none."""
    try:
        decoded = json.loads(body)
    except ValueError:
        decoded = None
    if not (isinstance(decoded, list) and len(decoded) == 2
            and decoded[0] in (POINTER_CLASS, LEGACY_POINTER_CLASS)
            and isinstance(decoded[1], dict)):
        msg = f"the body is not an S3 pointer: {body[:120]!r}"
        raise PointerError(msg)
    bucket, key = decoded[1].get("s3BucketName"), decoded[1].get("s3Key")
    if not (isinstance(bucket, str) and bucket and isinstance(key, str) and key):
        msg = f"the S3 pointer lacks s3BucketName or s3Key: {body[:120]!r}"
        raise PointerError(msg)
    encoding = str(message_attributes.get(ENCODING_ATTRIBUTE, {}).get("StringValue", ""))
    if encoding not in ("", GZIP):
        msg = f"unknown {ENCODING_ATTRIBUTE} {encoding[:40]!r} (only {GZIP!r} is known)"
        raise PointerError(msg)
    return Pointer(bucket, key, encoding)


def without_reserved(message_attributes: dict[str, Any]) -> dict[str, Any]:
    """The attributes an app should see: the claim-check ones removed, as the Extended
    Client removes its attribute on receive."""
    return {name: value for name, value in message_attributes.items()
            if name not in RESERVED_ATTRIBUTES}


def message_size(body: str, message_attributes: dict[str, Any]) -> int:
    """The size SQS counts against MaximumMessageSize: the body's UTF-8 bytes plus each
    attribute's name, type and value (the SQS developer guide's "message size" rule, as
    the Extended Client's _is_large computes it)."""
    total = len(body.encode())
    for name, value in message_attributes.items():
        total += len(name.encode()) + len(str(value.get("DataType", "")).encode())
        if "StringValue" in value:
            total += len(str(value["StringValue"]).encode())
        if "BinaryValue" in value:
            total += len(value["BinaryValue"])
    return total
