"""Queue attributes: names, defaults and the ranges SQS accepts."""

from __future__ import annotations

from collections.abc import Callable

import orjson

from conveyor.service.validate import valid_chars
from conveyor.sqs.errors import InvalidAttributeName, InvalidAttributeValue
from conveyor.sqs.limits import Limits

COMPUTED = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "QueueArn",
)
FIFO_ONLY = ("FifoQueue", "ContentBasedDeduplication", "DeduplicationScope",
             "FifoThroughputLimit")
SETTABLE = (
    "DelaySeconds", "MaximumMessageSize", "MessageRetentionPeriod", "Policy",
    "ReceiveMessageWaitTimeSeconds", "VisibilityTimeout", "RedrivePolicy", "RedriveAllowPolicy",
    "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled", *FIFO_ONLY,
)
# Attributes whose absence means "not set": never reported empty.
OPTIONAL = ("Policy", "RedrivePolicy", "RedriveAllowPolicy", "KmsMasterKeyId")


def defaults(limits: Limits, fifo: bool) -> dict[str, str]:
    values = {
        "DelaySeconds": "0",
        "MaximumMessageSize": "1048576",  # SQS's default; relaxed mode only allows more
        "MessageRetentionPeriod": "345600",
        "ReceiveMessageWaitTimeSeconds": "0",
        "VisibilityTimeout": "30",
        "SqsManagedSseEnabled": "true",
    }
    if fifo:
        values |= {"FifoQueue": "true", "ContentBasedDeduplication": "false",
                   "DeduplicationScope": "queue", "FifoThroughputLimit": "perQueue"}
    return values


def check(name: str, value: str, limits: Limits, fifo: bool) -> str:
    """Validate one settable attribute; return its normalized value."""
    if name not in SETTABLE or (name in FIFO_ONLY and not fifo and name != "FifoQueue"):
        raise InvalidAttributeName(f"Unknown Attribute {name}.")
    checker = _CHECKS.get(name)
    normalized = checker(value, limits) if checker else value
    if normalized is None or not valid_chars(value):
        raise InvalidAttributeValue(f"Invalid value for the parameter {name}.")
    return normalized


def _int_range(low: int | Callable[[Limits], int], high: int | Callable[[Limits], int]):
    def check_range(value: str, limits: Limits) -> str | None:
        lo = low(limits) if callable(low) else low
        hi = high(limits) if callable(high) else high
        try:
            number = int(value)
        except ValueError:
            return None
        return str(number) if lo <= number <= hi else None
    return check_range


def _one_of(*choices: str):
    def check_choice(value: str, limits: Limits) -> str | None:
        return value if value in choices else None
    return check_choice


def _boolean(value: str, limits: Limits) -> str | None:
    return value.lower() if value.lower() in ("true", "false") else None


def _json_object(value: str, limits: Limits) -> str | None:
    if value == "":
        return ""
    try:
        return value if isinstance(orjson.loads(value), dict) else None
    except orjson.JSONDecodeError:
        return None


_CHECKS = {
    "DelaySeconds": _int_range(0, lambda lim: lim.max_delay_s),
    "MaximumMessageSize": _int_range(lambda lim: lim.min_max_message_size,
                                     lambda lim: lim.max_message_bytes),
    "MessageRetentionPeriod": _int_range(lambda lim: lim.min_retention_s,
                                         lambda lim: lim.max_retention_s),
    "ReceiveMessageWaitTimeSeconds": _int_range(0, lambda lim: lim.max_wait_s),
    "VisibilityTimeout": _int_range(0, lambda lim: lim.max_visibility_s),
    "KmsDataKeyReusePeriodSeconds": _int_range(60, 86400),
    "SqsManagedSseEnabled": _boolean,
    "FifoQueue": _boolean,
    "ContentBasedDeduplication": _boolean,
    "DeduplicationScope": _one_of("messageGroup", "queue"),
    "FifoThroughputLimit": _one_of("perQueue", "perMessageGroupId"),
    "Policy": _json_object,
    "RedrivePolicy": _json_object,
    "RedriveAllowPolicy": _json_object,
}
