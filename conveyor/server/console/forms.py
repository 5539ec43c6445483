"""From the console's forms to SQS requests, shaped as a JSON 1.0 body would carry them.

Only the shape is made here (numbers as integers, attribute lines as SQS's maps); what
the values may be is the service's to decide, as for any SQS client.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from conveyor.service.context import RequestContext

Form = dict[str, str]

# `name = value` or `name (Type) = value`, one per line.
_LINE = re.compile(r"\s*(?P<name>[^=()]+?)\s*(?:\((?P<type>[^()]+)\))?\s*=\s*(?P<value>.*?)\s*")
_SELECTED = "m."  # a checked message's field name: m.<message id>


class FormError(ValueError):
    """A form the console cannot turn into a request (a word where a number goes)."""


def create_queue(form: Form, ctx: RequestContext, numbers: dict[str, str]) -> dict[str, Any]:
    """CreateQueue from the create form: name, FIFO, the typed number fields (`numbers`,
    already in seconds and bytes: attribute_form.numbers), a dead-letter queue with its
    maxReceiveCount, more attributes and tags as `name = value` lines."""
    name = form.get("name", "").strip()
    fifo = form.get("fifo") == "on"
    if fifo and not name.endswith(".fifo"):
        name += ".fifo"
    attributes = dict(numbers)
    if fifo:
        attributes["FifoQueue"] = "true"
        if form.get("content_dedup") == "on":
            attributes["ContentBasedDeduplication"] = "true"
    dlq = form.get("dlq", "").strip()
    if dlq:
        attributes["RedrivePolicy"] = orjson.dumps({
            "deadLetterTargetArn": ctx.queue_arn(dlq),
            "maxReceiveCount": integer(form, "max_receive_count", 5)}).decode()
    attributes |= dict(pairs(form.get("attributes", "")))
    request: dict[str, Any] = {"QueueName": name}
    if attributes:
        request["Attributes"] = attributes
    tags = dict(pairs(form.get("tags", "")))
    if tags:
        request["tags"] = tags
    return request


def edited_tags(form: Form, current: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """(tags to set, keys to remove) that turn `current` into the form's `key = value`
    lines: TagQueue and UntagQueue."""
    wanted = dict(pairs(form.get("tags", "")))
    return ({k: v for k, v in wanted.items() if current.get(k) != v},
            sorted(k for k in current if k not in wanted))


def send_message(form: Form, queue_url: str) -> dict[str, Any]:
    """SendMessage from the send form: body, attributes lines, delay, FIFO ids."""
    request: dict[str, Any] = {"QueueUrl": queue_url, "MessageBody": form.get("body", "")}
    attributes = message_attributes(form.get("attributes", ""))
    if attributes:
        request["MessageAttributes"] = attributes
    if form.get("delay", "").strip():
        request["DelaySeconds"] = integer(form, "delay", 0)
    for field, member in (("group_id", "MessageGroupId"),
                          ("dedup_id", "MessageDeduplicationId")):
        if form.get(field, "").strip():
            request[member] = form[field].strip()
    return request


def message_attributes(text: str) -> dict[str, dict[str, str]]:
    """`name = value` (a String) or `name (Type) = value` lines as SQS message attributes;
    Binary values in base64, as the JSON protocol carries them."""
    attributes = {}
    for name, data_type, value in lines(text):
        kind = data_type.split(".", 1)[0]
        member = "BinaryValue" if kind == "Binary" else "StringValue"
        attributes[name] = {"DataType": data_type, member: value}
    return attributes


def pairs(text: str) -> list[tuple[str, str]]:
    """`name = value` lines (queue attributes, tags)."""
    out = []
    for name, data_type, value in lines(text):
        if data_type != "String":
            raise FormError(f"Write {name} as `name = value`, without a type.")
        out.append((name, value))
    return out


def lines(text: str) -> list[tuple[str, str, str]]:
    """(name, type, value) of each non-blank line; String when no type is given."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        found = _LINE.fullmatch(line)
        if found is None:
            raise FormError(f"Line {number}: write `name = value` or `name (Type) = value`.")
        out.append((found["name"], (found["type"] or "String").strip(), found["value"]))
    return out


def integer(form: Form, field: str, default: int) -> int:
    text = form.get(field, "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise FormError(f"{field.replace('_', ' ').capitalize()} must be a whole number, "
                        f"not {text[:40]!r}.") from None


def selected(form: Form) -> list[str]:
    """The message ids whose boxes were ticked (fields `m.<message id>`)."""
    return [k[len(_SELECTED):] for k, v in form.items() if k.startswith(_SELECTED) and v]


def selection_field(message_id: str) -> str:
    return _SELECTED + message_id
