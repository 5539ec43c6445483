"""AWS JSON 1.0 protocol: `X-Amz-Target: AmazonSQS.<Action>`, what boto3 and the AWS CLI send."""

from __future__ import annotations

import base64
from typing import Any

import orjson

from conveyor.sqs import shapes
from conveyor.sqs.errors import InvalidAction, MalformedRequest, SqsError

CONTENT_TYPE = b"application/x-amz-json-1.0"
TARGET_PREFIX = "AmazonSQS."


def decode(target: str, body: bytes) -> tuple[str, dict[str, Any]]:
    """Return (action, canonical request) or raise an SqsError."""
    action = target[len(TARGET_PREFIX):] if target.startswith(TARGET_PREFIX) else ""
    if not action:
        raise InvalidAction(f"Unrecognized operation: {target[:100]}")
    shape = shapes.input_shape(action)
    try:
        request = orjson.loads(body) if body.strip() else {}
    except orjson.JSONDecodeError:
        raise MalformedRequest("The request body is not valid JSON.") from None
    return action, shapes.check_json(shape, request)


def encode(result: dict[str, Any]) -> bytes:
    return orjson.dumps(result, default=_bytes_to_b64)


def encode_error(error: SqsError) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = orjson.dumps({"__type": f"com.amazonaws.sqs#{error.code}", "message": error.message})
    fault = "Sender" if error.sender_fault else "Receiver"
    headers = [(b"x-amzn-query-error", f"{error.wire_query_code()};{fault}".encode())]
    return error.status, headers, body


def _bytes_to_b64(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(type(value).__name__)
