"""POST one message to the app, the way Elastic Beanstalk's sqsd does, and classify the answer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from conveyor import __version__
from conveyor.client import Message
from conveyor.client.attempts import ANSWER_HEAD_BYTES
from conveyor.clock import Clock
from conveyor.runtime.hooks import DeliveryRequest, WorkerHook
from conveyor.worker import telemetry
from conveyor.worker.backoff import parse_retry_after
from conveyor.worker.config import WorkerConfig
from conveyor.worker.http1 import (
    AppClient,
    ConnectFailed,
    ConnectionBroken,
    ConnectTimeout,
    Response,
    ResponseTimeout,
)
from conveyor.worker.signing import SIGNATURE_HEADER, sign
from conveyor.worker.trace_context import trace_headers

# Apps such as django-eb-sqs-worker check that the User-Agent starts with aws-sqsd.
USER_AGENT = f"aws-sqsd/3.0.4 (conveyor/{__version__})"
_ATTR_TYPES = ("String", "Number")
_RETRY_AFTER_STATUSES = (429, 503)
# A health check that takes longer than this is a failed one.
HEALTH_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one POST: success, or why not."""

    ok: bool
    status: str  # the HTTP status as text, or a reason: connect-failed, inactivity-timeout...
    elapsed_s: float
    retry_after_s: int | None = None
    detail: str = ""
    # A failure's answer, its first ANSWER_HEAD_BYTES: what the server keeps with the
    # message's attempts and the failed attempt's log line shows (worker/attempts.py).
    answer_head: bytes = b""


def sqsd_headers(message: Message, queue_name: str, mime_type: str) -> dict[str, str]:
    """The headers sqsd sends with each message (seed 000), attributes included."""
    headers = {
        "Content-Type": mime_type,
        "User-Agent": USER_AGENT,
        "X-Aws-Sqsd-Msgid": message.message_id,
        "X-Aws-Sqsd-Queue": queue_name,
        "X-Aws-Sqsd-Receive-Count": str(message.receive_count),
    }
    first_ms = message.first_receive_ms or message.sent_ms
    if first_ms is not None:
        headers["X-Aws-Sqsd-First-Received-At"] = iso8601_utc(first_ms / 1000)
    for name, value in message.message_attributes.items():
        data_type = str(value.get("DataType", ""))
        text = value.get("StringValue")
        if data_type.split(".", 1)[0] in _ATTR_TYPES and text is not None and _header_safe(text):
            headers[f"X-Aws-Sqsd-Attr-{name}"] = text
    return headers


def iso8601_utc(epoch_s: float) -> str:
    """`2026-01-31T12:34:56Z`."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _header_safe(text: str) -> bool:
    return "\r" not in text and "\n" not in text


class Deliverer:
    """Holds the keep-alive connections to the app and POSTs messages through them."""

    def __init__(self, config: WorkerConfig, queue_name: str, *, clock: Clock) -> None:
        self._config = config
        self._clock = clock
        self._queue_name = queue_name
        parts = urlsplit(config.app_url)
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._base_path = parts.path.rstrip("/")
        self._path = self._base_path + config.http_path
        self._client = AppClient(config.app_url, config.connect_timeout, clock=clock)
        self._timeout_s = config.inactivity_timeout
        self._rewriters: list[WorkerHook] = []

    @property
    def path(self) -> str:
        """Where messages are POSTed: AppURL's path + HttpPath."""
        return self._path

    async def open(self) -> None:
        """Nothing to open: connections are made on first use."""

    async def close(self) -> None:
        """Close idle connections."""
        self._client.close()

    def use(self, hooks: Sequence[WorkerHook]) -> None:
        """The hooks that rewrite each request (WorkerHook.request), in order: only those
        that override it, so that without any a POST costs nothing more."""
        self._rewriters = [hook for hook in hooks
                           if type(hook).request is not WorkerHook.request]

    def request_for(self, message: Message) -> DeliveryRequest:
        """The POST of `message`: sqsd's path, headers and body, as the hooks rewrite it."""
        headers = sqsd_headers(message, self._queue_name, self._config.mime_type)
        request = DeliveryRequest(self._path, headers, message.body.encode(),
                                  base_path=self._base_path)
        for hook in self._rewriters:
            request = hook.request(message, request)
        return request

    def goes_alone(self, message: Message) -> bool:
        """True for a message a hook sends alone (a scheduled job to its task's url),
        never in a batch."""
        return bool(self._rewriters) and self.request_for(message).alone

    async def deliver(self, message: Message) -> Outcome:
        """POST `message` to the app and report the outcome (never raises for app errors).

        The hooks may rewrite the request (a scheduled job goes to its task's url). With
        tracing on (telemetry.py) the POST is a span, and the app's parent."""
        request = self.request_for(message)
        headers = request.headers
        trace = trace_headers(message)
        headers.update(trace)
        path = request.path
        attributes = {} if telemetry.tracer() is None else telemetry.messaging(  # for a span
            self._queue_name, "process", "process", **{
                "messaging.message.id": message.message_id, "http.request.method": "POST",
                "url.full": self._origin + path})
        with telemetry.span("POST", "CLIENT", attributes, parent=trace) as span:
            if span is not None:
                telemetry.inject(headers)
            outcome, _answer = await self.post(path, headers, request.body,
                                               keep_body_bytes=ANSWER_HEAD_BYTES)
            if span is not None:
                telemetry.http_outcome(span, outcome.status, outcome.ok, outcome.detail)
        return outcome

    async def post(self, path: str, headers: dict[str, str], body: bytes, *,
                   keep_body_bytes: int = 0) -> tuple[Outcome, Response | None]:
        """POST `body` (signed when SigningSecret is set) and classify the answer; the answer
        too when there was one, its body kept up to `keep_body_bytes`."""
        if self._config.signing_secret:
            headers[SIGNATURE_HEADER] = sign(self._config.signing_secret, body,
                                            self._clock.now_s())
        monotonic_s = self._clock.monotonic_s
        started = monotonic_s()
        try:
            response = await self._client.post(path, headers, body, self._timeout_s,
                                               keep_body_bytes=keep_body_bytes)
        except ConnectFailed as exc:
            return Outcome(False, "connect-failed", monotonic_s() - started,
                           detail=str(exc)), None
        except ConnectTimeout as exc:
            return Outcome(False, "connect-timeout", monotonic_s() - started,
                           detail=str(exc)), None
        except ResponseTimeout as exc:
            return Outcome(False, "inactivity-timeout", monotonic_s() - started,
                           detail=str(exc)), None
        except ConnectionBroken as exc:
            # Not a byte of answer: the app (or its proxy) dropped the request, which is
            # how one that restarts or crashes behaves; a cut-off answer is the app's.
            status = "connection-error" if exc.answered else "no-answer"
            return Outcome(False, status, monotonic_s() - started, detail=str(exc)), None
        except OSError as exc:
            detail = str(exc) or type(exc).__name__
            return Outcome(False, "connection-error", monotonic_s() - started,
                           detail=detail), None
        return self._outcome(response, monotonic_s() - started), response

    async def healthy(self, path: str) -> bool:
        """GET `path` (HealthCheckPath): True for a 2xx answer within HEALTH_TIMEOUT_S."""
        try:
            response = await self._client.get(self._base_path + path, {"User-Agent": USER_AGENT},
                                              min(HEALTH_TIMEOUT_S, self._timeout_s))
        except (ConnectFailed, ConnectTimeout, ResponseTimeout, ConnectionBroken, OSError):
            return False
        return 200 <= response.status < 300

    def _outcome(self, response: Response, elapsed_s: float) -> Outcome:
        status = response.status
        ok = status == 200 or (self._config.accept_any_2xx and 200 <= status < 300)
        retry_after = None
        if status in _RETRY_AFTER_STATUSES:
            retry_after = parse_retry_after(response.headers.get("retry-after"),
                                            self._clock.now_ms() / 1000)
        return Outcome(ok, str(status), elapsed_s, retry_after,
                       answer_head=b"" if ok else response.body[:ANSWER_HEAD_BYTES])

