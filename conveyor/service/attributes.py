"""Queue attributes: names, defaults and the ranges SQS accepts."""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

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
# FIFO-only attributes that a standard queue refuses with a message of their own, as AWS
# answers CreateQueue (cloudfoundry/csb-brokerpak-aws, fifo_throughput_queues.md, "API
# limitations": real CreateQueue errors for a standard queue); the others are unknown there.
FIFO_ONLY_NAMED = ("DeduplicationScope", "FifoThroughputLimit")
# Where a FIFO queue keeps the DeduplicationScope it was created with (never reported: not a
# name GetQueueAttributes knows, and no client can set it). See dedup_scope.
CREATED_DEDUP_SCOPE = "conveyor:CreatedDeduplicationScope"
# Conveyor's own queue attributes (no SQS counterpart), each with the value it reads as
# when unset: always readable by name; settable by SQS's calls, and listed under `All`,
# only where Limits.conveyor_attributes allows (relaxed mode), and in any mode by
# Conveyor's own SetConveyorAttributes (service/queues.py). ConveyorPaused: delivery paused
# (service/controls.py). ConveyorMaxDelaySeconds: the longest DelaySeconds the queue takes,
# on itself and on its messages, from SQS's 900 s (Limits.max_delay_s, unset) up to its
# MessageRetentionPeriod: delays past 15 minutes for a queue that opts in.
MAX_DELAY = "ConveyorMaxDelaySeconds"
# Tenant limits (service/rules.py, tenant limits), enforced by the store's claim on every
# node: GROUP_CAP, the most messages of one MessageGroupId in flight at once (standard
# queues: a FIFO queue's groups have one); RATE / GROUP_RATE, messages a second handed out
# by receives, queue-wide and per group, with BURST / GROUP_BURST at once (0: the rate's
# one second, at least 1). 0 is "no limit" for each.
GROUP_CAP = "ConveyorGroupConcurrency"
RATE, BURST = "ConveyorReceiveRate", "ConveyorReceiveBurst"
GROUP_RATE, GROUP_BURST = "ConveyorGroupReceiveRate", "ConveyorGroupReceiveBurst"
STANDARD_ONLY = (GROUP_CAP, GROUP_RATE, GROUP_BURST)  # FIFO claims deal groups their way
OWN = {"ConveyorPaused": "false", MAX_DELAY: "900", GROUP_CAP: "0", RATE: "0", BURST: "0",
       GROUP_RATE: "0", GROUP_BURST: "0"}
# The highest of each limit: far past any use, low enough that a typo is refused.
MAX_LIMIT = 100_000


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


def fifo_at_creation(given: dict[str, str]) -> bool:
    """Whether CreateQueue's attributes make a FIFO queue. `FifoQueue` may only be `true`:
    `false` is "Unknown Attribute FifoQueue." (SQS's answer to CloudFormation's
    `FifoQueue: false`, quoted in aws/aws-cdk#31922, 2024)."""
    value = given.get("FifoQueue")
    if value is None:
        return False
    if value.lower() == "true":
        return True
    if value.lower() == "false":
        raise InvalidAttributeName("Unknown Attribute FifoQueue.")
    raise InvalidAttributeValue("Invalid value for the parameter FifoQueue.")


def check(name: str, value: str, limits: Limits, fifo: bool, existing: bool = False) -> str:
    """Validate one settable attribute (of a queue being created, or `existing`); return
    its normalized value."""
    if name == "FifoQueue" and existing:
        return _check_fifo_change(value, fifo)
    if name in FIFO_ONLY_NAMED and not fifo:
        raise InvalidAttributeName(f"You can specify the {name} only when FifoQueue is set "
                                   "to true.")
    if name in STANDARD_ONLY and fifo and limits.conveyor_attributes:
        raise InvalidAttributeName(f"You can specify the {name} only on a standard queue: "
                                   "a FIFO queue's groups have one message in flight.")
    own = name in OWN and limits.conveyor_attributes
    if (name not in SETTABLE and not own) or (name in FIFO_ONLY and not fifo):
        raise InvalidAttributeName(f"Unknown Attribute {name}.")
    checker = _CHECKS.get(name)
    normalized = checker(value, limits) if checker else value
    if normalized is None or not valid_chars(value):
        raise InvalidAttributeValue(f"Invalid value for the parameter {name}.")
    return normalized


def _check_fifo_change(value: str, fifo: bool) -> str:
    """SetQueueAttributes' FifoQueue, as AWS answers it (LocalStack's recording of AWS,
    test_set_unsupported_attribute_fifo, 14-11-2023): unknown on a standard queue, `true`
    accepted (and nothing changes) on a FIFO queue, anything else refused."""
    if not fifo:
        raise InvalidAttributeName("Unknown Attribute FifoQueue.")
    if value.lower() != "true":
        raise InvalidAttributeValue("Invalid value for the parameter FifoQueue. Reason: "
                                    "Modifying queue type is not supported.")
    return "true"


def max_delay_s(values: dict[str, str], limits: Limits) -> int:
    """The longest DelaySeconds a queue with attributes `values` takes."""
    return int(values.get(MAX_DELAY, limits.max_delay_s))


def group_cap(values: dict[str, str]) -> int:
    """The most messages of one group in flight at once (0: no cap)."""
    return int(values.get(GROUP_CAP, "0"))


def receive_rate(values: dict[str, str], group: bool) -> tuple[float, int] | None:
    """(messages a second, burst) of the queue's own receive rate, or of each group's;
    None when there is none."""
    per_s = float(values.get(GROUP_RATE if group else RATE, "0"))
    if not per_s:
        return None
    burst = int(values.get(GROUP_BURST if group else BURST, "0"))
    return per_s, burst or max(1, math.ceil(per_s))


def check_delays(values: dict[str, str], limits: Limits) -> None:
    """A queue's delays against each other once its attributes are all known: its
    DelaySeconds within its delay limit (SQS's 900 s unless raised), a raised limit
    within its MessageRetentionPeriod (a message must live to be delivered)."""
    if int(values.get("DelaySeconds", "0")) > max_delay_s(values, limits):
        raise InvalidAttributeValue("Invalid value for the parameter DelaySeconds.")
    # Only a raised limit: SQS itself takes a 900 s delay beside a 60 s retention.
    retention = values.get("MessageRetentionPeriod")
    if MAX_DELAY in values and retention is not None and int(values[MAX_DELAY]) > int(retention):
        raise InvalidAttributeValue(f"Invalid value for the parameter {MAX_DELAY}. Reason: "
                                    "it may not exceed MessageRetentionPeriod.")


def at_creation(values: dict[str, str]) -> dict[str, str]:
    """A new queue's attributes, with the deduplication scope it deduplicates by for good
    (a FIFO queue's; see dedup_scope)."""
    if "DeduplicationScope" in values:
        return {**values, CREATED_DEDUP_SCOPE: values["DeduplicationScope"]}
    return values


def dedup_scope(values: dict[str, str]) -> str | None:
    """The scope a FIFO queue's deduplication ids are kept in: the DeduplicationScope the
    queue was created with. Changing the attribute later changes what it reads, not how the
    queue deduplicates: AWS went on deduplicating queue-wide after a queue created with
    `queue` was set to `messageGroup` (LocalStack's investigation against AWS,
    localstack/localstack#10324, 2024-02-26: "You can change the attributes, but AWS does not
    seem to change the deduplication behaviour of the queue"; #10887, 2024-05-24: it "cannot
    be changed on AWS after queue creation"). A queue made before Conveyor kept the created
    scope follows its current attribute."""
    return values.get(CREATED_DEDUP_SCOPE, values.get("DeduplicationScope"))


def check_encryption(values: dict[str, str]) -> None:
    """SSE-KMS and SSE-SQS together are refused (LocalStack's recording of AWS,
    test_sse_kms_and_sqs_are_mutually_exclusive: InvalidAttributeName)."""
    if values.get("KmsMasterKeyId") and values.get("SqsManagedSseEnabled") == "true":
        raise InvalidAttributeName("You can use one type of server-side encryption (SSE) at "
                                   "one time. You can either enable KMS SSE or SQS SSE.")


def apply(current: dict[str, str], changes: dict[str, str]) -> dict[str, str]:
    """`current` with checked `changes` applied: an empty optional attribute is removed,
    and the encryption attributes follow each other.

    A KMS key turns SSE-SQS off and reads with the default data-key reuse period (300 s)
    unless one was given; SSE-SQS turned on drops the KMS key; removing the KMS key drops
    its reuse period. A queue without a KMS key reads no KmsDataKeyReusePeriodSeconds
    (LocalStack's recording of AWS, test_sse_queue_attributes: asked for all three, an
    SSE-SQS queue reads only SqsManagedSseEnabled)."""
    values = dict(current)
    for key, value in changes.items():
        if (value == "" and key in OPTIONAL) or OWN.get(key) == value:
            values.pop(key, None)  # an own attribute at its default is not kept
        else:
            values[key] = value
    if changes.get("KmsMasterKeyId"):
        values["SqsManagedSseEnabled"] = changes.get("SqsManagedSseEnabled", "false")
        values.setdefault("KmsDataKeyReusePeriodSeconds", KMS_REUSE_DEFAULT_S)
    elif changes.get("SqsManagedSseEnabled") == "true" or changes.get("KmsMasterKeyId") == "":
        values.pop("KmsMasterKeyId", None)
        values.pop("KmsDataKeyReusePeriodSeconds", None)
    return values


KMS_REUSE_DEFAULT_S = "300"  # the API reference's default for KmsDataKeyReusePeriodSeconds
_JSON_VALUED = ("Policy", "RedrivePolicy", "RedriveAllowPolicy")


def same_value(name: str, current: str, wanted: str) -> bool:
    """Whether CreateQueue's `wanted` value is the existing queue's: JSON-valued attributes
    compare as JSON values (key order, and `maxReceiveCount` 100 or "100", do not count)."""
    if current == wanted:
        return True
    if name not in _JSON_VALUED or not current or not wanted:
        return False
    return _json_value(current) == _json_value(wanted)


def _json_value(text: str) -> object:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    count = value.get("maxReceiveCount") if isinstance(value, dict) else None
    if isinstance(count, str) and count.strip().lstrip("-").isdigit():
        value["maxReceiveCount"] = int(count)
    return value


Bound = int | Callable[[Limits], int]  # a number, or one the limits give


def _int_range(low: Bound, high: Bound):
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


def _rate(value: str, limits: Limits) -> str | None:
    """Messages a second: 0 (none) or a positive decimal, up to MAX_LIMIT, at most three
    decimals (a message every 1000 s)."""
    try:
        number = Decimal(value)
    except InvalidOperation:
        return None
    if not number.is_finite() or not 0 <= number <= MAX_LIMIT or number != round(number, 3):
        return None
    return format(number.normalize(), "f") if number else "0"


def _boolean(value: str, limits: Limits) -> str | None:
    return value.lower() if value.lower() in ("true", "false") else None


def _json_object(value: str, limits: Limits) -> str | None:
    if value == "":
        return ""
    try:
        return value if isinstance(orjson.loads(value), dict) else None
    except orjson.JSONDecodeError:
        return None


# The whole-number attributes and the (lowest, highest) values they take: the SQS API
# reference's SetQueueAttributes (botocore's model documents the same), with the limits'
# numbers (relaxed mode allows larger messages).
RANGES: dict[str, tuple[Bound, Bound]] = {
    # Up to the longest any queue may take; check_delays holds it to the queue's own limit.
    "DelaySeconds": (0, lambda lim: lim.max_retention_s),
    MAX_DELAY: (lambda lim: lim.max_delay_s, lambda lim: lim.max_retention_s),
    "MaximumMessageSize": (lambda lim: lim.min_max_message_size,
                           lambda lim: lim.max_message_bytes),
    "MessageRetentionPeriod": (lambda lim: lim.min_retention_s,
                               lambda lim: lim.max_retention_s),
    "ReceiveMessageWaitTimeSeconds": (0, lambda lim: lim.max_wait_s),
    "VisibilityTimeout": (0, lambda lim: lim.max_visibility_s),
    "KmsDataKeyReusePeriodSeconds": (60, 86400),
}


def bounds(name: str, limits: Limits, values: dict[str, str] | None = None
           ) -> tuple[int, int] | None:
    """The lowest and highest value a whole-number attribute takes (given the queue's
    `values`, DelaySeconds up to its own delay limit); None for another attribute."""
    found = RANGES.get(name)
    if found is None:
        return None
    low, high = (b(limits) if callable(b) else b for b in found)
    if name == "DelaySeconds" and values is not None:
        high = min(high, max_delay_s(values, limits))
    return low, high


_CHECKS = {
    **{name: _int_range(*pair) for name, pair in RANGES.items()},
    "SqsManagedSseEnabled": _boolean,
    "ConveyorPaused": _boolean,
    GROUP_CAP: _int_range(0, MAX_LIMIT),
    RATE: _rate,
    GROUP_RATE: _rate,
    BURST: _int_range(0, MAX_LIMIT),
    GROUP_BURST: _int_range(0, MAX_LIMIT),
    "FifoQueue": _boolean,
    "ContentBasedDeduplication": _boolean,
    "DeduplicationScope": _one_of("messageGroup", "queue"),
    "FifoThroughputLimit": _one_of("perQueue", "perMessageGroupId"),
    "Policy": _json_object,
    "RedrivePolicy": _json_object,
    "RedriveAllowPolicy": _json_object,
}
