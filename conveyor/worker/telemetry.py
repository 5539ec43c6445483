"""Optional OpenTelemetry spans of the worker's own work: each receive, each POST to the
app, each batch of deletes or visibility changes.

Nothing is needed by default and nothing happens: the OpenTelemetry packages are imported
only when the environment asks for traces, with the SDK's standard variables
(https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/):

- `OTEL_TRACES_EXPORTER` names the exporters (`console`, `otlp`, ... as installed
  packages register them; `none` = off), or an `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`
  alone picks `otlp`, the spec's default exporter;
- `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`
  and each exporter's own variables are read by the SDK itself; `OTEL_SDK_DISABLED=true`
  turns it all off;
- a worker run under `opentelemetry-instrument` uses the tracer provider set up there.

A POST's span is a child of the producer's span (the message's traceparent, see
trace_context.py), and the app then gets the POST span as its parent, so the trace reads
producer → worker POST → the app's own spans. Span names and attributes follow
OpenTelemetry's semantic conventions for messaging (`messaging.system` `aws_sqs`) and
HTTP clients.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from importlib.metadata import entry_points
from typing import Any

log = logging.getLogger(__name__)

_TRUE = {"true", "1", "yes", "on"}
_OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_SERVICE = "conveyor-worker"


@cache
def tracer() -> Any | None:
    """This process's tracer, or None while tracing is off (decided once)."""
    return _tracer(os.environ)


def _tracer(env: Mapping[str, str]) -> Any | None:
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        return None
    exporters = _exporter_names(env)
    if not exporters and "opentelemetry.trace" not in sys.modules:
        return None  # not asked for, and nobody set OpenTelemetry up: import nothing
    try:
        from opentelemetry import trace
    except ImportError:
        if exporters:
            log.warning("OTEL_* asks for traces but OpenTelemetry is not installed "
                        "(pip install opentelemetry-sdk): no spans")
        return None
    if _configured_elsewhere(trace.get_tracer_provider()):
        return trace.get_tracer(__name__)
    if not exporters:
        return None
    provider = _provider(exporters, env)
    if provider is None:
        return None
    trace.set_tracer_provider(provider)
    return trace.get_tracer(__name__)


def _exporter_names(env: Mapping[str, str]) -> list[str]:
    names = [name.strip() for name in env.get("OTEL_TRACES_EXPORTER", "").split(",")
             if name.strip()]
    if not names and any(env.get(name) for name in _OTLP_ENDPOINTS):
        names = ["otlp"]
    return [] if names == ["none"] else [name for name in names if name != "none"]


def _configured_elsewhere(provider: Any) -> bool:
    """True when something (opentelemetry-instrument, the app's own code) already set a
    real tracer provider: the API's placeholders are a proxy and a no-op."""
    kind = type(provider).__name__
    return kind not in ("ProxyTracerProvider", "NoOpTracerProvider")


def _provider(exporters: list[str], env: Mapping[str, str]) -> Any | None:
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("OTEL_TRACES_EXPORTER is set but the OpenTelemetry SDK is not installed "
                    "(pip install opentelemetry-sdk): no spans")
        return None
    # The environment's service name wins over ours (Resource.create merges ours last).
    named = ("OTEL_SERVICE_NAME" in env
             or "service.name=" in env.get("OTEL_RESOURCE_ATTRIBUTES", ""))
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": _SERVICE}))
    registered = {entry.name: entry
                  for entry in entry_points(group="opentelemetry_traces_exporter")}
    for name in exporters:
        entry = registered.get(name)
        if entry is None:
            log.warning("OTEL_TRACES_EXPORTER names %r, which no installed package provides "
                        "(installed: %s): left out", name, ", ".join(sorted(registered)) or "none")
            continue
        provider.add_span_processor(BatchSpanProcessor(entry.load()()))
    return provider


def messaging(queue: str, operation: str, kind: str, **more: Any) -> dict[str, Any]:
    """Messaging semantic-convention attributes for one operation on `queue`."""
    return {"messaging.system": "aws_sqs", "messaging.destination.name": queue,
            "messaging.operation.name": operation, "messaging.operation.type": kind, **more}


@contextmanager
def span(name: str, kind: str, attributes: Mapping[str, Any],
         parent: Mapping[str, str] | None = None,
         links: Sequence[Mapping[str, str]] = ()) -> Iterator[Any | None]:
    """A span (None while tracing is off), current inside the block. `kind` is an
    OpenTelemetry SpanKind name (CLIENT, CONSUMER); `parent`, W3C headers to continue;
    `links`, W3C headers of other traces it belongs to (a batch's messages)."""
    active = tracer()
    if active is None:
        yield None
        return
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    propagator = TraceContextTextMapPropagator()
    context = propagator.extract(dict(parent)) if parent else None
    linked = [trace.get_current_span(propagator.extract(dict(headers))).get_span_context()
              for headers in links if headers]
    with active.start_as_current_span(
            name, context=context, kind=trace.SpanKind[kind], attributes=dict(attributes),
            links=[trace.Link(ctx) for ctx in linked if ctx.is_valid]) as current:
        yield current


def http_outcome(current: Any, status: str, ok: bool, detail: str) -> None:
    """A POST's outcome on its span (HTTP client semantic conventions)."""
    if status.isdigit():
        current.set_attribute("http.response.status_code", int(status))
    if not ok:
        from opentelemetry.trace import Status, StatusCode

        current.set_attribute("error.type", status)
        current.set_status(Status(StatusCode.ERROR, detail or status))


def inject(headers: dict[str, str]) -> None:
    """Make the current span the app's parent: its traceparent (and tracestate) replace
    the producer's in `headers`."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    TraceContextTextMapPropagator().inject(headers)
