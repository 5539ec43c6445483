"""OpenTelemetry spans of the worker itself (issue 24, part 4), with the real SDK (a dev
dependency) and its console exporter, configured only by the standard variables
(OpenTelemetry SDK environment variables: OTEL_TRACES_EXPORTER, OTEL_SERVICE_NAME,
OTEL_BSP_SCHEDULE_DELAY; https://opentelemetry.io/docs/specs/otel/configuration/
sdk-environment-variables/).

The producer's context is W3C Trace Context's own example (https://www.w3.org/TR/trace-context/
§3.2: `00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`): the worker's POST span must
be its child, and the app must get the POST span as its parent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from conveyor.worker.telemetry import _exporter_names
from tests.support import unavailable
from tests.worker.conftest import aio, make_queue, queue_total, recording_app, run, wait_until

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


def test_which_exporters_the_environment_asks_for():
    assert _exporter_names({}) == []  # nothing asked: no tracing at all
    assert _exporter_names({"OTEL_TRACES_EXPORTER": "none"}) == []
    assert _exporter_names({"OTEL_TRACES_EXPORTER": "console, otlp"}) == ["console", "otlp"]
    # The spec's default exporter is otlp: an endpoint alone asks for it.
    assert _exporter_names({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == ["otlp"]


def _spans(text: str) -> list[dict[str, Any]]:
    """The console exporter's output: one indented JSON object per span, back to back."""
    decoder, spans, at = json.JSONDecoder(), [], 0
    while (at := text.find("{", at)) >= 0:
        span, at = decoder.raw_decode(text, at)
        spans.append(span)
    return spans


def test_worker_spans_join_the_producers_trace(sqs, queue_name, tmp_path: Path):
    try:
        import opentelemetry.sdk  # noqa: F401
    except ImportError:
        unavailable("opentelemetry-sdk is not installed (pip install -e '.[dev]')")
    url = make_queue(sqs, queue_name)
    traceparent = f"00-{TRACE_ID}-{PARENT_ID}-01"
    out = tmp_path / "spans.txt"

    async def scenario() -> None:
        async with recording_app() as app:
            env = {**os.environ, "OTEL_TRACES_EXPORTER": "console",
                   "OTEL_BSP_SCHEDULE_DELAY": "100"}
            env.pop("OTEL_SERVICE_NAME", None)
            with out.open("wb") as stdout, (tmp_path / "worker.log").open("wb") as stderr:
                worker = subprocess.Popen(
                    [sys.executable, "-m", "conveyor", "worker", "--worker-queue-url", url,
                     "--app-url", app.url, "--poll-wait-time", "1"],
                    stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, env=env)
            try:
                await aio(sqs.send_message, QueueUrl=url, MessageBody="traced",
                          MessageAttributes={"traceparent": {
                              "DataType": "String", "StringValue": traceparent}})
                await wait_until(lambda: app.requests, 60, "the POST")
                await wait_until(lambda: queue_total(sqs, url) == 0, 30, "the delete")
            finally:
                worker.send_signal(signal.SIGTERM)  # spans are flushed on the way out
                await aio(worker.wait, 30)
        [request] = app.requests
        spans = _spans(out.read_text())
        [post] = [s for s in spans if s["name"] == "POST"]
        assert post["context"]["trace_id"] == "0x" + TRACE_ID
        assert post["parent_id"] == "0x" + PARENT_ID
        assert post["kind"] == "SpanKind.CLIENT"
        assert post["attributes"]["messaging.system"] == "aws_sqs"
        assert post["attributes"]["messaging.destination.name"] == queue_name
        assert post["attributes"]["http.response.status_code"] == 200
        assert post["resource"]["attributes"]["service.name"] == "conveyor-worker"
        span_id = post["context"]["span_id"].removeprefix("0x")
        assert request.headers["traceparent"] == f"00-{TRACE_ID}-{span_id}-01"
        names = {s["name"] for s in spans}
        assert f"receive {queue_name}" in names
        assert f"DeleteMessageBatch {queue_name}" in names
        received = [s for s in spans if s["name"] == f"receive {queue_name}"
                    and s["attributes"].get("messaging.batch.message_count", 0) > 0]
        assert received

    run(scenario())
