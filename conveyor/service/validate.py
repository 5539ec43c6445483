"""Checks on what clients send: bodies, message attributes, batch entries, names."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from conveyor.sqs.errors import (
    BatchEntryIdsNotDistinct,
    EmptyBatchRequest,
    InvalidAttributeName,
    InvalidBatchEntryId,
    InvalidMessageContents,
    InvalidParameterValue,
    MissingParameter,
    TooManyEntriesInBatchRequest,
    UnsupportedOperation,
    invalid_value,
)
from conveyor.sqs.limits import Limits

# The characters SQS allows in a message body and in attribute values.
_INVALID_CHARS = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# Tab, LF, CR and 0x20-0x7F: the ASCII allowed; deleting them leaves nothing of valid text.
_ASCII_ALLOWED = b"\t\n\r" + bytes(range(0x20, 0x80))
_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")
# What a queue name, a prefix of one, a region or an account id in a URL or ARN is made of.
_NAME_CHARS = re.compile(r"[A-Za-z0-9_.-]*")
_BATCH_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
# Letters and digits of any script, `_`, `-`, `.`: AWS accepts `attr.1øßä` and refuses
# `!`, `"`, `§`, `(`, `?` (LocalStack's AWS-validated
# test_send_message_with_invalid_string_attributes).
_ATTRIBUTE_NAME = re.compile(r"[\w.-]+")
# MessageGroupId / MessageDeduplicationId: alphanumerics and punctuation.
_TOKEN = re.compile(r"[A-Za-z0-9!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]+")
_DATA_TYPES = ("String", "Number", "Binary")
_SYSTEM_ATTRIBUTES = ("AWSTraceHeader",)


def queue_name(name: str, fifo: bool, limits: Limits) -> None:
    base = name[:-5] if fifo and name.endswith(".fifo") else name
    if fifo and not name.endswith(".fifo"):
        raise InvalidParameterValue(
            "The name of a FIFO queue can only include alphanumeric characters, hyphens, or "
            "underscores, must end with .fifo suffix and be 1 to 80 in length.")
    if not _QUEUE_NAME.fullmatch(base) or len(name) > limits.max_queue_name_chars:
        raise InvalidParameterValue(
            "Can only include alphanumeric characters, hyphens, or underscores. "
            "1 to 80 in length")


def plain_name(text: str) -> bool:
    """Letters, digits, `_`, `-` and `.` only (or nothing): a name in a queue URL or ARN,
    or a prefix of one. Anything else names no queue and is never looked up."""
    return _NAME_CHARS.fullmatch(text) is not None


def body(text: str, name: str = "MessageBody") -> None:
    if text == "":
        raise MissingParameter(f"The request must contain the parameter {name}.")
    if not valid_chars(text):
        raise InvalidMessageContents(
            "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | "
            "#x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF")


def valid_chars(text: str) -> bool:
    """Only characters SQS accepts in a message body: no NUL or other control characters."""
    if text.isascii():  # most text: a byte table is several times cheaper than the regex
        return not text.encode().translate(None, _ASCII_ALLOWED)
    return not _INVALID_CHARS.search(text)


def message_attributes(attributes: Mapping[str, Any], limits: Limits) -> int:
    """Validate user message attributes; return their size in bytes (counted in the body)."""
    if len(attributes) > limits.max_message_attributes:
        raise InvalidParameterValue(
            f"Number of message attributes [{len(attributes)}] exceeds the allowed maximum "
            f"[{limits.max_message_attributes}].")
    size = 0
    for name, value in attributes.items():
        attribute_name(name, limits)
        size += len(name.encode()) + _attribute_value(name, value, limits, user=True)
    return size


def attributes_size(attributes: Any) -> int:
    """What message attributes add to a message's size (names, types and values, in
    bytes), counting only what is well formed: validation reports the rest per entry."""
    # None first: most messages have no attributes, and it spares them the ABC check.
    if attributes is None or not isinstance(attributes, Mapping):
        return 0
    size = 0
    for name, value in attributes.items():
        if not isinstance(value, Mapping):
            continue
        size += len(str(name).encode()) + len(str(value.get("DataType", "")).encode())
        data = value.get("BinaryValue", value.get("StringValue", ""))
        size += len(data) if isinstance(data, bytes) else len(str(data).encode())
    return size


def system_attributes(attributes: Mapping[str, Any], limits: Limits) -> None:
    for name, value in attributes.items():
        if name not in _SYSTEM_ATTRIBUTES:
            raise InvalidParameterValue(
                f"Message system attribute name '{name}' is invalid.")
        if value.get("DataType") != "String":
            raise InvalidParameterValue(
                f"Message system attribute '{name}' must have DataType String.")
        _attribute_value(name, value, limits, user=False)


def attribute_name(name: str, limits: Limits) -> None:
    lowered = name.lower()
    if (not name or len(name) > limits.max_attribute_name_chars
            or not _ATTRIBUTE_NAME.fullmatch(name) or ".." in name
            or name.startswith(".") or name.endswith(".")
            or lowered.startswith(("aws.", "amazon."))):
        raise InvalidParameterValue(
            f"Message (user) attribute name '{name}' is invalid. Names can contain "
            "alphanumeric characters, hyphens, underscores and periods, can't start or end "
            "with a period or contain consecutive periods, can't start with AWS. or Amazon., "
            f"and can be up to {limits.max_attribute_name_chars} characters long.")


def _attribute_value(name: str, value: Mapping[str, Any], limits: Limits, user: bool) -> int:
    kind = "user" if user else "system"
    data_type = value.get("DataType")
    if not data_type:
        raise InvalidParameterValue(
            f"The message ({kind}) attribute '{name}' must contain a non-empty attribute type.")
    base = data_type.split(".", 1)[0]
    if (base not in _DATA_TYPES or len(data_type) > limits.max_data_type_chars
            or data_type.endswith(".")):
        raise InvalidParameterValue(
            f"The type of message ({kind}) attribute '{name}' is invalid. You must use only "
            "the following supported type prefixes: Binary, Number, String.")
    if value.get("StringListValues") or value.get("BinaryListValues"):
        # AWS's code and wording: UnsupportedOperation in yavosh/pail's recording of SQS
        # (test/diff/testdata/golden/sqs-edge-cases.json, "send-string-list-values"), the
        # message as boto3 reported it from SQS in a public bug report.
        raise UnsupportedOperation(
            "Message attribute list values in SendMessage operation are not supported.")
    if base == "Binary":
        if "StringValue" in value:
            raise InvalidParameterValue(
                f"Message ({kind}) attribute '{name}' with type 'Binary' must use field "
                "'BinaryValue'.")
        data = value.get("BinaryValue")
        if not data:
            raise InvalidParameterValue(
                f"Message ({kind}) attribute '{name}' must contain a non-empty value of type "
                "'Binary'.")
        return len(data_type.encode()) + len(data)
    if "BinaryValue" in value:
        raise InvalidParameterValue(
            f"Message ({kind}) attribute '{name}' with type '{base}' must use field "
            "'StringValue'.")
    text = value.get("StringValue")
    if not text:
        raise InvalidParameterValue(
            f"Message ({kind}) attribute '{name}' must contain a non-empty value of type "
            f"'{base}'.")
    if not valid_chars(text):
        raise InvalidParameterValue(
            f"Message ({kind}) attribute '{name}' value contains invalid characters.")
    if base == "Number" and not _is_sqs_number(text):
        raise InvalidParameterValue(
            f"Value {text} for parameter MessageAttribute {name} is invalid. "
            "Reason: Invalid number.")
    return len(data_type.encode()) + len(text.encode())


def _is_sqs_number(text: str) -> bool:
    """SQS numbers: up to 38 significant digits, between -10^128 and 10^126."""
    try:
        number = Decimal(text.strip())
    except InvalidOperation:
        return False
    if not number.is_finite():
        return False
    digits = len(number.as_tuple().digits)
    return digits <= 38 and Decimal("-1e128") <= number <= Decimal("1e126")


def token(value: str, name: str, max_chars: int) -> None:
    """MessageGroupId / MessageDeduplicationId / ReceiveRequestAttemptId."""
    if not value or len(value) > max_chars or not _TOKEN.fullmatch(value):
        raise invalid_value(value, name, f"{name} can only include alphanumeric and "
                            f"punctuation characters. 1 to {max_chars} in length.")


def batch_entries(entries: Sequence[Mapping[str, Any]], entry_name: str, limits: Limits) -> None:
    if not entries:
        raise EmptyBatchRequest(f"There should be at least one {entry_name} in the request.")
    if len(entries) > limits.max_batch_entries:
        raise TooManyEntriesInBatchRequest(
            f"Maximum number of entries per request are {limits.max_batch_entries}. "
            f"You have sent {len(entries)}.")
    seen: set[str] = set()
    for entry in entries:
        entry_id = entry.get("Id")
        if entry_id is None:
            raise MissingParameter(f"The request must contain the parameter {entry_name}.N.Id.")
        if not _BATCH_ID.fullmatch(entry_id) or len(entry_id) > limits.max_batch_id_chars:
            raise InvalidBatchEntryId(
                "A batch entry id can only contain alphanumeric characters, hyphens and "
                f"underscores. It can be at most {limits.max_batch_id_chars} letters long.")
        if entry_id in seen:
            raise BatchEntryIdsNotDistinct(f"Id {entry_id} repeated.")
        seen.add(entry_id)


def requested_names(names: Sequence[str], allowed: Sequence[str], what: str) -> set[str]:
    """Attribute names asked for in a read; `All` expands to `allowed`."""
    wanted: set[str] = set()
    for name in names:
        if name == "All":
            wanted.update(allowed)
        elif name in allowed:
            wanted.add(name)
        else:
            raise InvalidAttributeName(f"Unknown {what} {name}.")
    return wanted
