"""AWS JSON 1.0 protocol: `X-Amz-Target: AmazonSQS.<Action>`, what boto3 and the AWS CLI send."""

from __future__ import annotations

import base64
from typing import Any

import orjson

from conveyor.sqs import shapes
from conveyor.sqs.errors import InvalidAction, MalformedRequest, SqsError

CONTENT_TYPE = b"application/x-amz-json-1.0"
TARGET_PREFIX = "AmazonSQS."


def decode(target: str, body: bytes,
           extensions: dict[str, frozenset[str]] | None = None) -> tuple[str, dict[str, Any]]:
    """Return (action, canonical request) or raise an SqsError. `extensions` maps other
    target prefixes (Conveyor's own APIs) to their actions; their bodies are checked by
    the service, not by the SQS model."""
    prefix, _, action = target.partition(".")
    if prefix + "." != TARGET_PREFIX:
        own = (extensions or {}).get(prefix + ".")
        if own is None or action not in own:
            raise InvalidAction(f"Unrecognized operation: {target[:100]}")
        return action, _load(body)
    if not action:
        raise InvalidAction(f"Unrecognized operation: {target[:100]}")
    check = shapes.json_checker(action)  # an unknown action before a malformed body
    try:
        return action, check(_load(body))
    except SqsError as error:
        error.action = action
        raise


def _load(body: bytes) -> dict[str, Any]:
    """The body's JSON object ({} for an empty body)."""
    try:
        request = orjson.loads(body) if body.strip() else {}
    except orjson.JSONDecodeError:
        raise MalformedRequest("The request body is not valid JSON.") from None
    if not isinstance(request, dict):  # AWS: MalformedInput for `[]` or `"x"` (errors.py)
        raise MalformedRequest("The request body must be a JSON object.")
    return request


def encode(result: dict[str, Any]) -> bytes:
    return orjson.dumps(result, default=_bytes_to_b64)


def encode_error(error: SqsError) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The JSON shape of an error: `__type` the JSON name, `x-amzn-query-error` the Query
    code SDKs report (errors.py says where each comes from)."""
    body = orjson.dumps({"__type": f"{error.json_namespace}#{error.code}",
                         "message": error.message_for("json")})
    fault = "Sender" if error.sender_fault else "Receiver"
    headers = [(b"x-amzn-query-error", f"{error.query_code};{fault}".encode())]
    return error.status, headers, body


def _bytes_to_b64(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(type(value).__name__)
