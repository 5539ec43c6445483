"""SQS's request and response shapes, read from botocore's service model.

Both wire protocols decode into the same canonical request: a dict shaped like the
JSON protocol's, with integers, booleans and bytes already typed. The model tells the
Query codec each parameter's type and element name, and rejects wrong types.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from botocore.loaders import Loader
from botocore.model import ListShape, MapShape, ServiceModel, Shape, StructureShape

from conveyor.sqs.errors import (
    InvalidAction,
    InvalidParameterValue,
    MissingParameter,
    QueueDoesNotExist,
    SqsError,
)

# Query-era element names that the JSON model no longer carries, by member name.
_QUERY_NAMES = {
    "Attributes": "Attribute",
    "AttributeNames": "AttributeName",
    "MessageAttributes": "MessageAttribute",
    "MessageAttributeNames": "MessageAttributeName",
    "MessageSystemAttributes": "MessageSystemAttribute",
    "MessageSystemAttributeNames": "MessageSystemAttributeName",
    "Tags": "Tag",
    "tags": "Tag",
    "TagKeys": "TagKey",
    "QueueUrls": "QueueUrl",
    "queueUrls": "QueueUrl",
    "AWSAccountIds": "AWSAccountId",
    "Actions": "ActionName",
    "StringListValues": "StringListValue",
    "BinaryListValues": "BinaryListValue",
}


@cache
def service_model() -> ServiceModel:
    return ServiceModel(Loader().load_service_model("sqs", "service-2"), "sqs")


@cache
def operation_names() -> frozenset[str]:
    return frozenset(service_model().operation_names)


def input_shape(action: str) -> StructureShape:
    if action not in operation_names():
        raise InvalidAction(f"The action {action} is not valid for this endpoint.")
    return service_model().operation_model(action).input_shape


def output_shape(action: str) -> StructureShape | None:
    return service_model().operation_model(action).output_shape


def query_name(member: str, shape: Shape) -> str:
    """The element / parameter name a member has in the Query protocol (only lists and
    maps are renamed; _QUERY_NAMES holds no scalar member)."""
    if isinstance(shape, ListShape) and isinstance(shape.member, StructureShape):
        return shape.member.name  # e.g. SendMessageBatchRequestEntry, Message
    return _QUERY_NAMES.get(member, member)


def map_key_names(shape: MapShape) -> tuple[str, str]:
    return ("Key", "Value") if shape.name == "TagMap" else ("Name", "Value")


# --- JSON: validate types, compiled once per shape ---------------------------------

Checker = Callable[[Any], Any]


class _Mismatch(Exception):
    """A wrong type somewhere below; members add their names on the way up."""

    def __init__(self, expected: str, path: str = "") -> None:
        self.expected, self.path = expected, path


@cache
def json_checker(action: str) -> Callable[[Any], dict[str, Any]]:
    """The check of an action's decoded JSON request: types checked, blobs decoded, the
    request returned. Compiled once per action (one cached lookup per request); an
    unknown action raises InvalidAction, and is not cached."""
    check = _checker(input_shape(action))

    def check_json(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise InvalidParameterValue("The request body must be a JSON object.")
        try:
            return check(value)
        except _Mismatch as exc:
            raise _wrong_type(exc.path, exc.expected) from None

    return check_json


_SCALAR_TYPES = {"string": str, "integer": int, "boolean": bool}


@cache
def _checker(shape: Shape) -> Checker:
    kind = shape.type_name
    if kind == "structure":
        return _struct_checker(shape)
    if kind == "list":
        return _list_checker(shape)
    if kind == "map":
        return _map_checker(shape)
    if kind == "blob":
        def check_blob(value: Any) -> bytes:
            if not isinstance(value, str):
                raise _Mismatch("base64 string")
            return _b64decode(value, "")
        return check_blob
    expected = _SCALAR_TYPES.get(kind)
    if expected is None:
        return lambda value: value

    def check_scalar(value: Any) -> Any:
        # bool is an int in Python; JSON true is not an SQS integer.
        if type(value) is not expected:
            raise _Mismatch(kind)
        return value
    return check_scalar


def _struct_checker(shape: StructureShape) -> Checker:
    # Scalar members are checked inline: most members are, and a call each adds up
    # over the entries of a batch.
    scalars = {name: _SCALAR_TYPES[member.type_name] for name, member in shape.members.items()
               if member.type_name in _SCALAR_TYPES}
    members = {name: _checker(member) for name, member in shape.members.items()
               if name not in scalars}
    required = tuple(shape.required_members)

    def check_struct(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise _Mismatch("structure")
        # Most structures (batch entries above all) hold only well-typed scalars: then
        # the value itself is the canonical one, and no copy is made.
        for name, item in value.items():
            if type(item) is not scalars.get(name):
                return check_members(value)
        return require(value)

    def check_members(value: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, item in value.items():
            if item is None:
                continue
            expected = scalars.get(name)
            if expected is not None:
                if type(item) is not expected:  # bool is an int; JSON true is not an integer
                    raise _Mismatch(shape.members[name].type_name, name)
                out[name] = item
                continue
            check = members.get(name)
            if check is None:
                continue  # unknown members are ignored, as the AWS JSON protocol does
            try:
                out[name] = check(item)
            except _Mismatch as exc:
                raise _Mismatch(exc.expected, _join(name, exc.path)) from None
        return require(out)

    def require(value: dict[str, Any]) -> dict[str, Any]:
        for name in required:
            if name not in value:
                raise missing(name)
        return value
    return check_struct


def _list_checker(shape: ListShape) -> Checker:
    check_item = _checker(shape.member)

    def check_list(value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise _Mismatch("list")
        try:
            return [check_item(item) for item in value]
        except _Mismatch as exc:
            raise _Mismatch(exc.expected, _join("member", exc.path)) from None
    return check_list


def _map_checker(shape: MapShape) -> Checker:
    check_value = _checker(shape.value)

    def check_map(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise _Mismatch("map")
        out = {}
        for key, item in value.items():
            try:
                out[key] = check_value(item)
            except _Mismatch as exc:
                raise _Mismatch(exc.expected, _join(key, exc.path)) from None
        return out
    return check_map


def _join(name: str, path: str) -> str:
    return f"{name}.{path}" if path else name


# --- Query: flat form parameters to the canonical dict ------------------------------


def from_query(shape: StructureShape, params: Mapping[str, str]) -> dict[str, Any]:
    """Turn `Attribute.1.Name=x`-style form parameters into the canonical request."""
    tree: dict[str, Any] = {}
    for key, value in params.items():
        node = tree
        *parents, leaf = key.split(".")
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break
            node = child
        else:
            if leaf not in node:
                node[leaf] = value
    return _query_struct(shape, tree, "")


def _query_struct(shape: StructureShape, tree: Any, path: str) -> dict[str, Any]:
    if not isinstance(tree, dict):
        raise _wrong_type(path.rstrip("."), "structure")
    out: dict[str, Any] = {}
    for name, member in shape.members.items():
        wire = query_name(name, member)
        if wire in tree:
            out[name] = _query_value(member, tree[wire], f"{path}{wire}")
        elif member.type_name == "list" and name in shape.required_members:
            out[name] = []  # the Query protocol cannot send an empty list: absent is empty
    _require(shape, out, path)
    return out


def _query_value(shape: Shape, node: Any, path: str) -> Any:
    kind = shape.type_name
    if kind in ("structure", "list", "map"):
        if kind == "structure":
            return _query_struct(shape, node, path + ".")
        items = _numbered(node, path)
        if kind == "list":
            return [_query_value(shape.member, item, f"{path}.{i}") for i, item in items]
        key_name, value_name = map_key_names(shape)
        out = {}
        for i, item in items:
            for part in (key_name, value_name):
                if not isinstance(item, dict) or part not in item:
                    raise MissingParameter(
                        f"The request must contain the parameter {path}.{i}.{part}.")
            key = _query_value(shape.key, item[key_name], f"{path}.{i}.{key_name}")
            out[key] = _query_value(shape.value, item[value_name], f"{path}.{i}.{value_name}")
        return out
    if not isinstance(node, str):
        raise _wrong_type(path, kind)
    if kind == "integer":
        try:
            return int(node)
        except ValueError:
            raise _wrong_type(path, "integer") from None
    if kind == "boolean":
        if node.lower() not in ("true", "false"):
            raise _wrong_type(path, "boolean")
        return node.lower() == "true"
    if kind == "blob":
        return _b64decode(node, path)
    return node


def _numbered(node: Any, path: str) -> list[tuple[int, Any]]:
    """Members `1..n` of a flattened list, in order; gaps are refused as SQS does."""
    if not isinstance(node, dict):
        raise _wrong_type(path, "list")
    try:
        indexed = sorted((int(k), v) for k, v in node.items() if k != "member")
    except ValueError:
        raise InvalidParameterValue(f"Invalid list index in parameter {path}.") from None
    if "member" in node:  # non-flattened `Name.member.N` form
        return _numbered(node["member"], path + ".member")
    return indexed


def _require(shape: StructureShape, out: Mapping[str, Any], path: str) -> None:
    for name in shape.required_members:
        if name not in out:
            member = shape.members[name]
            if isinstance(member, MapShape):  # named by its first entry's key, as AWS
                # does: "The request must contain the parameter Attribute.Name." for a
                # SetQueueAttributes without attributes (LocalStack's AWS-validated
                # TestMissingParameter.test_sqs_send_message).
                name = f"{query_name(name, member)}.{map_key_names(member)[0]}"
            raise missing(path + name)


# Required members whose absence AWS reports otherwise than MissingParameter: a CreateQueue
# or GetQueueUrl without QueueName is an invalid value (LocalStack's AWS-validated
# TestMissingParameter.test_sqs_create_queue, Query protocol; the JSON protocol's
# "get-queue-url-missing-name" recorded from AWS in yavosh/pail,
# test/diff/testdata/golden/sqs-errors.json); a request without QueueUrl names no queue
# (the same recordings, sqs-edge-cases.json, "send-missing-queue-url").
_ABSENT_AS: dict[str, Callable[[], SqsError]] = {
    "QueueName": lambda: InvalidParameterValue(
        "Value for parameter QueueName is invalid. Reason: Must specify a queue name."),
    "QueueUrl": QueueDoesNotExist,
}


def missing(path: str) -> SqsError:
    """The error for a required member `path` that the request leaves out."""
    absent = _ABSENT_AS.get(path)
    if absent is not None:
        return absent()
    return MissingParameter(f"The request must contain the parameter {path}.")


def _b64decode(value: str, path: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidParameterValue(f"Value for parameter {path} is not valid base64.") from None


def _wrong_type(path: str, expected: str) -> InvalidParameterValue:
    return InvalidParameterValue(f"Value for parameter {path} is invalid. Expected a {expected}.")
