"""The MD5 digests SQS returns and SDKs verify (MD5OfMessageBody, ...Attributes)."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from typing import Any

_STRING, _BINARY = 1, 2
# Copying a fresh digest skips OpenSSL's algorithm lookup, a third of a short body's cost.
_MD5 = hashlib.md5()


def md5_of_body(body: bytes) -> str:
    """MD5OfMessageBody, of the body's UTF-8 bytes (the caller has them already)."""
    digest = _MD5.copy()
    digest.update(body)
    return digest.hexdigest()


def md5_of_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> str:
    """Digest of message attributes as the SDKs compute it: sorted by name, each field
    length-prefixed (4-byte big-endian), then a transport byte and the value."""
    digest = hashlib.md5()
    for name in sorted(attributes):
        attribute = attributes[name]
        data_type = attribute["DataType"]
        _update(digest, name.encode("utf-8"))
        _update(digest, data_type.encode("utf-8"))
        if "BinaryValue" in attribute:
            digest.update(bytes([_BINARY]))
            _update(digest, attribute["BinaryValue"])
        else:
            digest.update(bytes([_STRING]))
            _update(digest, attribute["StringValue"].encode("utf-8"))
    return digest.hexdigest()


def _update(digest: Any, data: bytes) -> None:
    digest.update(struct.pack(">I", len(data)))
    digest.update(data)
