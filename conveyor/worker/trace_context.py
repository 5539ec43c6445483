"""The producer's trace, carried from a message to the app's request headers.

A message can carry its trace two ways: the `AWSTraceHeader` system attribute (AWS X-Ray's
`Root=1-...;Parent=...;Sampled=1`, set from a send's `X-Amzn-Trace-Id`), and W3C Trace
Context in message attributes named `traceparent` / `tracestate` (what OpenTelemetry's
messaging instrumentations write). The app gets `X-Amzn-Trace-Id` unchanged, and a
`traceparent` (with its `tracestate`) when one is valid, so its spans join the producer's
trace whichever tracer it runs.

Formats: W3C Trace Context Level 1, https://www.w3.org/TR/trace-context/ (section 3.2
traceparent, 3.3 tracestate); AWS X-Ray tracing header,
https://docs.aws.amazon.com/xray/latest/devguide/xray-concepts.html#xray-concepts-tracingheader;
an X-Ray trace id maps to a W3C one by dropping `1-` and the dash, as OpenTelemetry's AWS
X-Ray propagators do (opentelemetry-propagator-aws-xray).
"""

from __future__ import annotations

import re

from conveyor.client import Message

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
XRAY_HEADER = "X-Amzn-Trace-Id"
XRAY_ATTRIBUTE = "AWSTraceHeader"

# version-format = trace-id "-" parent-id "-" trace-flags, all lowercase hex (3.2.2).
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
# list-member = key "=" value (3.3.1.3); simple-key or tenant@system multi-tenant key.
_TRACESTATE_KEY = re.compile(
    r"[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13}")
_TRACESTATE_VALUE = re.compile(r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")
_TRACESTATE_MAX_MEMBERS = 32
_XRAY_ROOT = re.compile(r"1-([0-9a-fA-F]{8})-([0-9a-fA-F]{24})")
_XRAY_PARENT = re.compile(r"[0-9a-fA-F]{16}")


def valid_traceparent(value: str) -> str | None:
    """`value` when it is a traceparent the spec lets a receiver use, else None.

    Version ff is invalid; all-zero trace and parent ids are invalid; a version 00 header
    is exactly 55 characters; a later version may carry more after a dash (3.2.4)."""
    match = _TRACEPARENT.match(value)
    if match is None:
        return None
    version, trace_id, parent_id, _flags = match.groups()
    if version == "ff" or trace_id == "0" * 32 or parent_id == "0" * 16:
        return None
    if len(value) > 55 and (version == "00" or value[55] != "-"):
        return None
    return value


def valid_tracestate(value: str) -> str | None:
    """`value` when every list member is well formed, at most 32 of them, keys unique."""
    members = [member.strip() for member in value.split(",")]
    members = [member for member in members if member]  # empty members are allowed (3.3.1.1)
    if not members or len(members) > _TRACESTATE_MAX_MEMBERS:
        return None
    keys: set[str] = set()
    for member in members:
        key, sep, text = member.partition("=")
        if (not sep or key in keys or not _TRACESTATE_KEY.fullmatch(key)
                or not _TRACESTATE_VALUE.fullmatch(text)):
            return None
        keys.add(key)
    return ",".join(members)


def traceparent_from_xray(header: str) -> str | None:
    """A traceparent for an X-Ray header that names its root and parent, else None."""
    fields = dict(part.strip().partition("=")[::2] for part in header.split(";"))
    root = _XRAY_ROOT.fullmatch(fields.get("Root", ""))
    parent = fields.get("Parent", "")
    if root is None or not _XRAY_PARENT.fullmatch(parent):
        return None
    flags = "01" if fields.get("Sampled") == "1" else "00"
    return valid_traceparent(f"00-{''.join(root.groups()).lower()}-{parent.lower()}-{flags}")


def trace_headers(message: Message) -> dict[str, str]:
    """The trace headers for the app's request: X-Amzn-Trace-Id from AWSTraceHeader, and
    traceparent (+ tracestate) from the message attributes, else from AWSTraceHeader when it
    holds a traceparent or an X-Ray header with a parent. Invalid values are dropped."""
    headers: dict[str, str] = {}
    xray = message.attributes.get(XRAY_ATTRIBUTE, "")
    if xray and "\r" not in xray and "\n" not in xray:
        headers[XRAY_HEADER] = xray
    parent = _attribute(message, TRACEPARENT)
    traceparent = valid_traceparent(parent) if parent is not None else None
    state = _attribute(message, TRACESTATE) if traceparent is not None else None
    if traceparent is None and xray:  # the trace header may carry one, or an X-Ray parent
        traceparent = valid_traceparent(xray) or traceparent_from_xray(xray)
    if traceparent is None:
        return headers
    headers[TRACEPARENT] = traceparent
    if state is not None and (tracestate := valid_tracestate(state)) is not None:
        headers[TRACESTATE] = tracestate
    return headers


def _attribute(message: Message, name: str) -> str | None:
    value = message.message_attributes.get(name) or {}
    text = value.get("StringValue")
    return text.strip() if isinstance(text, str) else None
