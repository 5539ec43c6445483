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

from aiohttp import web

from conveyor.worker.telemetry import _exporter_names
from tests.support import unavailable
from tests.worker.conftest import (
    Recorded,
    aio,
    make_queue,
    queue_total,
    recording_app,
    run,
    wait_until,
)

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


def _require_sdk() -> None:
    try:
        import opentelemetry.sdk  # noqa: F401
    except ImportError:
        unavailable("opentelemetry-sdk is not installed (pip install -e '.[dev]')")


def _traceparent(trace_id: str) -> dict[str, dict[str, str]]:
    return {"traceparent": {"DataType": "String",
                            "StringValue": f"00-{trace_id}-{PARENT_ID}-01"}}


async def _empty_200(_request: Recorded) -> web.StreamResponse:
    """Success for one message, and for a batch (Lambda: an empty answer, no failures)."""
    return web.Response(status=200)


def _traced_run(sqs: Any, url: str, tmp_path: Path, bodies: dict[str, str],
                *args: str) -> tuple[list[Recorded], list[dict[str, Any]]]:
    """Run a `conveyor worker` process with the console exporter until every body (each
    sent with the traceparent of its trace id) is delivered; the app's requests and the
    worker's spans."""
    _require_sdk()
    out = tmp_path / "spans.txt"

    async def scenario() -> list[Recorded]:
        async with recording_app(_empty_200) as app:
            env = {**os.environ, "OTEL_TRACES_EXPORTER": "console",
                   "OTEL_BSP_SCHEDULE_DELAY": "100"}
            env.pop("OTEL_SERVICE_NAME", None)
            with out.open("wb") as stdout, (tmp_path / "worker.log").open("wb") as stderr:
                worker = subprocess.Popen(
                    [sys.executable, "-m", "conveyor", "worker", "--worker-queue-url", url,
                     "--app-url", app.url, "--poll-wait-time", "1", *args],
                    stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, env=env)
            try:
                entries = [{"Id": str(i), "MessageBody": body,
                            "MessageAttributes": _traceparent(trace_id)}
                           for i, (body, trace_id) in enumerate(bodies.items())]
                await aio(sqs.send_message_batch, QueueUrl=url, Entries=entries)
                await wait_until(lambda: queue_total(sqs, url) == 0, 60, "every delete")
            finally:
                worker.send_signal(signal.SIGTERM)  # spans are flushed on the way out
                await aio(worker.wait, 30)
            return app.requests

    requests = run(scenario())
    return requests, _spans(out.read_text())


def test_worker_spans_join_the_producers_trace(sqs, queue_name, tmp_path: Path):
    url = make_queue(sqs, queue_name)
    [request], spans = _traced_run(sqs, url, tmp_path, {"traced": TRACE_ID})
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
    assert [s for s in spans if s["name"] == f"receive {queue_name}"
            and s["attributes"].get("messaging.batch.message_count", 0) > 0]


def test_a_batch_post_links_every_messages_trace(sqs, queue_name, tmp_path: Path):
    """BatchSize: one POST carries several traces, so its span links to each (the
    OpenTelemetry messaging conventions' way for batches) and is the app's parent."""
    url = make_queue(sqs, queue_name)
    traces = {f"job-{i}": f"{i + 1:032x}" for i in range(3)}
    requests, spans = _traced_run(sqs, url, tmp_path, traces, "--batch-size", "5")
    posts = {s["context"]["span_id"].removeprefix("0x"): s for s in spans if s["name"] == "POST"}
    linked = {link["context"]["trace_id"].removeprefix("0x")
              for post in posts.values() for link in post["links"]}
    assert linked == set(traces.values())
    assert sum(p["attributes"]["messaging.batch.message_count"] for p in posts.values()) == 3
    for request in requests:
        assert request.headers["traceparent"].split("-")[2] in posts
