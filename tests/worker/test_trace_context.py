"""Traces through to the app: X-Amzn-Trace-Id from AWSTraceHeader, W3C traceparent /
tracestate from the message (issue 24, part 4).

Values are the specs' own examples: W3C Trace Context Level 1
(https://www.w3.org/TR/trace-context/, 3.2 and 3.3: `00-4bf92f3577b34da6a3ce929d0e0e4736-
00f067aa0ba902b7-01`, `rojo=00f067aa0ba902b7,congo=t61rcWkgMzE`) and the AWS X-Ray tracing
header (X-Ray Developer Guide, "Tracing header": `Root=1-5759e988-bd862e3fe1be46a994272793;
Parent=53995c3f42cd8ad8;Sampled=1`).
"""

from __future__ import annotations

import pytest

from conveyor.worker.trace_context import (
    traceparent_from_xray,
    valid_traceparent,
    valid_tracestate,
)
from tests.worker.conftest import (
    aio,
    make_queue,
    queue_total,
    recording_app,
    run,
    running_worker,
    wait_until,
)

W3C_PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
W3C_STATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
XRAY = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


@pytest.mark.parametrize("value", [
    W3C_PARENT,
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
    "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future",  # 3.2.4: later versions
])
def test_valid_traceparents_pass(value):
    assert valid_traceparent(value) == value


@pytest.mark.parametrize("value", [
    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff is invalid
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace-id
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # all-zero parent-id
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # uppercase
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  # version 00 is 55 chars
    "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  # short trace-id
    "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
    "",
])
def test_invalid_traceparents_are_dropped(value):
    assert valid_traceparent(value) is None


def test_tracestate_members_are_checked():
    assert valid_tracestate(W3C_STATE) == W3C_STATE
    assert valid_tracestate("rojo=00f067aa0ba902b7, ,congo=t61rcWkgMzE") == W3C_STATE
    assert valid_tracestate("fw529a3039@dt=abc") == "fw529a3039@dt=abc"  # tenant@system key
    assert valid_tracestate("Rojo=1") is None  # keys are lowercase
    assert valid_tracestate("rojo=1,rojo=2") is None  # keys are unique
    assert valid_tracestate("rojo") is None
    assert valid_tracestate("rojo=a,b") is None
    assert valid_tracestate(",".join(f"k{i}=v" for i in range(33))) is None  # at most 32


def test_xray_header_maps_to_a_traceparent():
    """OpenTelemetry's AWS X-Ray propagators: trace id = timestamp + unique id."""
    assert traceparent_from_xray(XRAY) == (
        "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01")
    assert traceparent_from_xray(XRAY.replace("Sampled=1", "Sampled=0")).endswith("-00")
    assert traceparent_from_xray("Root=1-5759e988-bd862e3fe1be46a994272793") is None
    assert traceparent_from_xray("Root=2-5759e988-bd862e3fe1be46a994272793;"
                                 "Parent=53995c3f42cd8ad8") is None


def _string(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


def test_app_receives_the_producers_trace(sqs, queue_name):
    """Sent through boto3 with the AWSTraceHeader system attribute (the SQS API reference,
    SendMessage `MessageSystemAttributes`: the only one is AWSTraceHeader) and W3C message
    attributes; the app sees each as a header, invalid values dropped."""
    url = make_queue(sqs, queue_name)
    cases = {
        "xray": ({"MessageSystemAttributes": {"AWSTraceHeader": _string(XRAY)}},
                 {"X-Amzn-Trace-Id": XRAY,
                  "traceparent": "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"}),
        "w3c": ({"MessageAttributes": {"traceparent": _string(W3C_PARENT),
                                       "tracestate": _string(W3C_STATE)}},
                {"traceparent": W3C_PARENT, "tracestate": W3C_STATE}),
        "both": ({"MessageSystemAttributes": {"AWSTraceHeader": _string(XRAY)},
                  "MessageAttributes": {"traceparent": _string(W3C_PARENT)}},
                 {"X-Amzn-Trace-Id": XRAY, "traceparent": W3C_PARENT}),
        "w3c-in-trace-header": ({"MessageSystemAttributes": {
            "AWSTraceHeader": _string(W3C_PARENT)}},
            {"X-Amzn-Trace-Id": W3C_PARENT, "traceparent": W3C_PARENT}),
        "invalid": ({"MessageAttributes": {
            "traceparent": _string(W3C_PARENT.replace("00-", "ff-", 1)),
            "tracestate": _string(W3C_STATE)}}, {}),
        "invalid-w3c-valid-xray": ({"MessageSystemAttributes": {"AWSTraceHeader": _string(XRAY)},
                                    "MessageAttributes": {
                                        "traceparent": _string("00-bad"),
                                        "tracestate": _string(W3C_STATE)}},
                                   {"X-Amzn-Trace-Id": XRAY, "traceparent":
                                    "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"}),
        "bad-state": ({"MessageAttributes": {"traceparent": _string(W3C_PARENT),
                                             "tracestate": _string("Rojo=1")}},
                      {"traceparent": W3C_PARENT}),
        "none": ({}, {}),
    }
    names = ("x-amzn-trace-id", "traceparent", "tracestate")

    async def scenario() -> None:
        async with recording_app() as app, running_worker(url, app.url):
            for body, (extra, _expected) in cases.items():
                await aio(sqs.send_message, QueueUrl=url, MessageBody=body, **extra)
            await wait_until(lambda: len(app.requests) == len(cases), what="every POST")
            await wait_until(lambda: queue_total(sqs, url) == 0, what="the deletes")
        for request in app.requests:
            _extra, expected = cases[request.body.decode()]
            got = {name: value for name, value in request.headers.items()
                   if name.lower() in names}
            assert {k.lower(): v for k, v in got.items()} == {
                k.lower(): v for k, v in expected.items()}, request.body

    run(scenario())
