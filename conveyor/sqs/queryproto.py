"""The Query protocol: form-encoded `Action=...`, XML replies (kombu/Celery, older SDKs)."""

from __future__ import annotations

import base64
import re
from typing import Any
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

import orjson
from botocore.model import Shape

from conveyor.sqs import shapes
from conveyor.sqs.errors import InvalidAction, MalformedRequest, MissingAction, SqsError

CONTENT_TYPE = b"text/xml"
JSON_CONTENT_TYPE = b"application/json"
# Actions a queue's own URL does not take (LocalStack's AWS-validated tests
# test_get_create_queue_fails, test_get_list_queues_fails: InvalidAction, 400).
NOT_ON_QUEUE_URL = frozenset({"CreateQueue", "ListQueues"})
NAMESPACE = "http://queue.amazonaws.com/doc/2012-11-05/"
# What XML 1.0 cannot carry at all, even escaped (NUL and other C0 controls, U+FFFE/FFFF):
# an error message may quote such input back, so it is replaced rather than sent broken.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def decode(query_string: bytes, body: bytes,
           path_queue_url: str | None = None) -> tuple[str, dict[str, Any]]:
    """Return (action, canonical request). Body and query string both count; older SDKs
    POST to the queue URL itself, so `path_queue_url` stands in for a missing QueueUrl."""
    try:
        text = body.decode("utf-8") + "&" + query_string.decode("utf-8")
        params = dict(parse_qsl(text, keep_blank_values=True, strict_parsing=False,
                                errors="strict", max_num_fields=10_000))
    except (UnicodeDecodeError, ValueError):
        raise MalformedRequest("The request body is not valid form data.") from None
    action = params.get("Action")
    if not action:
        raise MissingAction()
    shape = shapes.input_shape(action)
    if path_queue_url and action in NOT_ON_QUEUE_URL:
        raise InvalidAction(f"The action {action} is not valid for this endpoint.")
    if path_queue_url and "QueueUrl" in shape.members:
        params.setdefault("QueueUrl", path_queue_url)
    try:
        return action, shapes.from_query(shape, params)
    except SqsError as error:
        error.action = action
        raise


def encode(action: str, result: dict[str, Any], request_id: str) -> bytes:
    """The XML reply. A result with nothing in it is `<ActionResult/>`: AWS answers an empty
    ReceiveMessage so (LocalStack's AWS-validated test_get_send_and_receive_messages)."""
    parts = [f'<?xml version="1.0"?><{action}Response xmlns="{NAMESPACE}">']
    shape = shapes.output_shape(action)
    if shape is not None:
        start = len(parts)
        _struct(shape, result, parts)
        if len(parts) == start:  # an empty result is one empty element, as AWS writes it
            parts.append(f"<{action}Result/>")
        else:
            parts.insert(start, f"<{action}Result>")
            parts.append(f"</{action}Result>")
    parts.append(f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>")
    parts.append(f"</{action}Response>")
    return "".join(parts).encode("utf-8")


def encode_json(action: str, result: dict[str, Any], request_id: str) -> bytes:
    """The reply for `Accept: application/json`: the XML reply's tree as JSON, member names
    as keys, maps as lists of name/value pairs (LocalStack's AWS-validated
    test_get_queue_attributes_json_format reads
    GetQueueAttributesResponse.GetQueueAttributesResult.Attributes[].Name/Value)."""
    body: dict[str, Any] = {}
    shape = shapes.output_shape(action)
    if shape is not None:
        body[f"{action}Result"] = _json_struct(shape, result)
    body["ResponseMetadata"] = {"RequestId": request_id}
    return orjson.dumps({f"{action}Response": body})


def encode_error(error: SqsError, request_id: str,
                 as_json: bool = False) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    if isinstance(error, MissingAction):  # AWS sends this bare, and in XML even to JSON
        return error.status, [], b"<UnknownOperationException/>"
    fault = "Sender" if error.sender_fault else "Receiver"
    message = error.message_for("query")
    if as_json:  # test_get_list_queues_fails_json_format reads Error.Code and Error.Message
        return error.status, [], orjson.dumps({
            "Error": {"Type": fault, "Code": error.query_code, "Message": message},
            "RequestId": request_id})
    body = (
        f'<?xml version="1.0"?><ErrorResponse xmlns="{NAMESPACE}"><Error>'
        f"<Type>{fault}</Type><Code>{escape(error.query_code)}</Code>"
        f"<Message>{_text(message)}</Message><Detail/></Error>"
        f"<RequestId>{request_id}</RequestId></ErrorResponse>"
    )
    return error.status, [], body.encode("utf-8")


def _json_struct(shape: Shape, value: dict[str, Any]) -> dict[str, Any]:
    return {name: _json_member(member, value[name]) for name, member in shape.members.items()
            if value.get(name) is not None}


def _json_member(shape: Shape, value: Any) -> Any:
    kind = shape.type_name
    if kind == "list":
        return [_json_member(shape.member, item) for item in value]
    if kind == "map":
        key_name, value_name = shapes.map_key_names(shape)
        return [{key_name: key, value_name: _json_member(shape.value, item)}
                for key, item in value.items()]
    if kind == "structure":
        return _json_struct(shape, value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


def _struct(shape: Shape, value: dict[str, Any], parts: list[str]) -> None:
    for name, member in shape.members.items():
        if name in value and value[name] is not None:
            _member(shapes.query_name(name, member), member, value[name], parts)


def _member(tag: str, shape: Shape, value: Any, parts: list[str]) -> None:
    kind = shape.type_name
    if kind == "list":
        for item in value:
            _member(tag, shape.member, item, parts)
    elif kind == "map":
        key_name, value_name = shapes.map_key_names(shape)
        for key, item in value.items():
            parts.append(f"<{tag}><{key_name}>{_text(key)}</{key_name}>")
            _member(value_name, shape.value, item, parts)
            parts.append(f"</{tag}>")
    elif kind == "structure":
        parts.append(f"<{tag}>")
        _struct(shape, value, parts)
        parts.append(f"</{tag}>")
    else:
        parts.append(f"<{tag}>{_scalar(value)}</{tag}>")


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return _text(str(value))


def _text(value: str) -> str:
    # \r would be normalized away by XML parsers; SQS sends it as a character reference.
    return escape(_NOT_XML.sub("\ufffd", value)).replace("\r", "&#xD;")
