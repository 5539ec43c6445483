"""A small asyncio SQS client over aiohttp, speaking the AWS JSON 1.0 protocol.

It works against `conveyor server`, Amazon SQS and any other SQS-compatible endpoint.
One general `call(action, params)` does the work; the typed helpers below it are thin.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import botocore.session
import orjson

from conveyor.client._signing import Signer, resolve_credentials
from conveyor.client.attempts import Attempt
from conveyor.client.errors import SQSError, SQSTransportError
from conveyor.client.messages import BatchResult, Message

# Called after every API call with (action, outcome, seconds); outcome is "ok",
# an error code, or "transport". Lets callers count calls without wrapping the client.
CallObserver = Callable[[str, str, float], None]

_AMZ_HOST = re.compile(r"^sqs[.-]([a-z0-9-]+)\.amazonaws\.com")
_DEFAULT_REGION = "us-east-1"
SQS_TARGET_PREFIX = "AmazonSQS."
WORKERS_TARGET_PREFIX = "ConveyorWorkers."  # Conveyor's own calls (not on Amazon SQS)
QUEUES_TARGET_PREFIX = "ConveyorQueues."  # Conveyor's queue controls (pause, resume)
# Long polls may legitimately take WaitTimeSeconds; allow this much on top.
_LONG_POLL_MARGIN_S = 10.0


def check_http_url(url: str) -> str:
    """`url` when it is an http(s) URL with a host and, if any, a port in 1-65535; else
    ValueError with a one-line reason (an endpoint that cannot work should be refused
    where it is given, not fail later deep inside signing or connecting)."""
    example = "e.g. http://127.0.0.1:9324"
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed IPv6 bracket
        msg = f"{url!r} is not a valid URL ({exc}; {example})"
        raise ValueError(msg) from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        msg = f"{url!r} is not an http(s) URL ({example})"
        raise ValueError(msg)
    if not parts.hostname:
        msg = f"{url!r} has no host name ({example})"
        raise ValueError(msg)
    try:
        port = parts.port
    except ValueError:  # not a number, or over 65535
        port = -1
    if port is not None and not 1 <= port <= 65535:
        shown = parts.netloc.rpartition(":")[2]
        msg = f"{url!r}: port {shown!r} is not a port number (1-65535)"
        raise ValueError(msg)
    return url


def endpoint_from_queue_url(queue_url: str) -> str:
    """The endpoint (scheme://host[:port]) a queue URL belongs to; ValueError if it has none."""
    try:
        check_http_url(queue_url)
    except ValueError as exc:
        msg = f"not a queue URL: {exc}"
        raise ValueError(msg) from None
    parts = urlsplit(queue_url)
    return f"{parts.scheme}://{parts.netloc}"


def queue_name_from_url(queue_url: str) -> str:
    """The queue name: the last path segment of its URL."""
    return urlsplit(queue_url).path.rstrip("/").rsplit("/", 1)[-1]


def resolve_region(region: str | None, endpoint_url: str) -> str:
    """Explicit region, else AWS_REGION / AWS_DEFAULT_REGION / profile, else the host's.

    Falls back to us-east-1, which local servers accept.
    """
    if region:
        return region
    env = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if env:
        return env
    configured = botocore.session.get_session().get_config_variable("region")
    if configured:
        return configured
    match = _AMZ_HOST.match(urlsplit(endpoint_url).hostname or "")
    return match.group(1) if match else _DEFAULT_REGION


class SQSClient:
    """An SQS client bound to one endpoint; use as `async with SQSClient(url) as sqs:`."""

    def __init__(self, endpoint_url: str, *, region: str | None = None,
                 access_key: str | None = None, secret_key: str | None = None,
                 session_token: str | None = None, timeout_s: float = 30.0,
                 max_connections: int = 32, observer: CallObserver | None = None) -> None:
        self.endpoint_url = check_http_url(endpoint_url).rstrip("/")
        self.region = resolve_region(region, self.endpoint_url)
        credentials = resolve_credentials(access_key, secret_key, session_token, self.endpoint_url)
        self._signer = Signer(credentials, self.region)
        self._url = self.endpoint_url + "/"
        self._timeout_s = timeout_s
        self._max_connections = max_connections
        self._observer = observer
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> SQSClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection pool."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_connections, keepalive_timeout=30)
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
        return self._session

    async def call(self, action: str, params: dict[str, Any], *,
                   timeout_s: float | None = None,
                   target_prefix: str = SQS_TARGET_PREFIX) -> dict[str, Any]:
        """Send one SQS action with its JSON parameters and return the decoded answer.

        `target_prefix` reaches the server's other JSON APIs signed the same way (e.g.
        `ConveyorLease.`). Raises SQSError for an error answer and SQSTransportError when
        none arrived.
        """
        body = orjson.dumps(params)
        headers = self._signer.headers(self._url, body, {
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": f"{target_prefix}{action}",
        })
        started = time.monotonic()
        outcome = "transport"
        try:
            with self._translate(action):
                status, resp_headers, raw = await self._post(body, headers, timeout_s)
            answer = _decode(action, self.endpoint_url, status, resp_headers, raw)
            outcome = "ok"
            return answer
        except SQSError as exc:
            outcome = exc.code
            raise
        finally:
            if self._observer is not None:
                self._observer(action, outcome, time.monotonic() - started)

    async def _post(self, body: bytes, headers: dict[str, str],
                    timeout_s: float | None) -> tuple[int, Any, bytes]:
        timeout = aiohttp.ClientTimeout(total=timeout_s or self._timeout_s)
        async with self._http().post(self._url, data=body, headers=headers,
                                     timeout=timeout) as resp:
            return resp.status, resp.headers, await resp.read()

    @contextmanager
    def _translate(self, action: str) -> Iterator[None]:
        try:
            yield
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            detail = str(exc) or type(exc).__name__
            raise SQSTransportError(action, self.endpoint_url, detail) from exc

    # -- queues ---------------------------------------------------------------

    async def create_queue(self, name: str, attributes: dict[str, str] | None = None,
                           tags: dict[str, str] | None = None) -> str:
        """CreateQueue; returns the queue URL (idempotent for identical attributes)."""
        params: dict[str, Any] = {"QueueName": name}
        if attributes:
            params["Attributes"] = attributes
        if tags:
            params["tags"] = tags
        return (await self.call("CreateQueue", params))["QueueUrl"]

    async def get_queue_url(self, name: str) -> str:
        """GetQueueUrl for a queue name."""
        return (await self.call("GetQueueUrl", {"QueueName": name}))["QueueUrl"]

    async def get_queue_attributes(self, queue_url: str,
                                   names: Sequence[str] = ("All",)) -> dict[str, str]:
        """GetQueueAttributes; returns the attribute map."""
        answer = await self.call("GetQueueAttributes",
                                 {"QueueUrl": queue_url, "AttributeNames": list(names)})
        return answer.get("Attributes") or {}

    async def set_queue_attributes(self, queue_url: str, attributes: dict[str, str]) -> None:
        """SetQueueAttributes."""
        await self.call("SetQueueAttributes", {"QueueUrl": queue_url, "Attributes": attributes})

    async def delete_queue(self, queue_url: str) -> None:
        """DeleteQueue."""
        await self.call("DeleteQueue", {"QueueUrl": queue_url})

    # -- messages -------------------------------------------------------------

    async def send_message(self, queue_url: str, body: str, *, delay_s: int | None = None,
                           attributes: dict[str, dict[str, Any]] | None = None,
                           group_id: str | None = None,
                           deduplication_id: str | None = None) -> str:
        """SendMessage; returns the new message id."""
        params: dict[str, Any] = {"QueueUrl": queue_url, "MessageBody": body}
        if delay_s is not None:
            params["DelaySeconds"] = delay_s
        if attributes:
            params["MessageAttributes"] = attributes
        if group_id is not None:
            params["MessageGroupId"] = group_id
        if deduplication_id is not None:
            params["MessageDeduplicationId"] = deduplication_id
        return (await self.call("SendMessage", params))["MessageId"]

    async def send_message_batch(self, queue_url: str,
                                 entries: Sequence[dict[str, Any]]) -> BatchResult:
        """SendMessageBatch; each entry is an SQS entry dict with `Id` and `MessageBody`."""
        answer = await self.call("SendMessageBatch",
                                 {"QueueUrl": queue_url, "Entries": list(entries)})
        return BatchResult.from_wire(answer)

    async def receive_messages(self, queue_url: str, *, max_messages: int = 10,
                               wait_time_s: int = 20, visibility_timeout_s: int | None = None,
                               system_attributes: Sequence[str] = ("All",),
                               message_attributes: Sequence[str] = ("All",)) -> list[Message]:
        """ReceiveMessage (long poll when wait_time_s > 0); returns the messages, maybe none."""
        params: dict[str, Any] = {
            "QueueUrl": queue_url,
            "MaxNumberOfMessages": max_messages,
            "WaitTimeSeconds": wait_time_s,
            # Current SDKs send the first name, older servers only know the second.
            "MessageSystemAttributeNames": list(system_attributes),
            "AttributeNames": list(system_attributes),
            "MessageAttributeNames": list(message_attributes),
        }
        if visibility_timeout_s is not None:
            params["VisibilityTimeout"] = visibility_timeout_s
        answer = await self.call("ReceiveMessage", params,
                                 timeout_s=wait_time_s + _LONG_POLL_MARGIN_S)
        return [Message.from_wire(raw) for raw in answer.get("Messages") or []]

    async def delete_message(self, queue_url: str, receipt_handle: str) -> None:
        """DeleteMessage."""
        await self.call("DeleteMessage", {"QueueUrl": queue_url, "ReceiptHandle": receipt_handle})

    async def delete_message_batch(self, queue_url: str,
                                   entries: Sequence[tuple[str, str]]) -> BatchResult:
        """DeleteMessageBatch over (entry id, receipt handle) pairs, at most 10."""
        wire = [{"Id": entry_id, "ReceiptHandle": receipt} for entry_id, receipt in entries]
        answer = await self.call("DeleteMessageBatch", {"QueueUrl": queue_url, "Entries": wire})
        return BatchResult.from_wire(answer)

    async def change_message_visibility(self, queue_url: str, receipt_handle: str,
                                        visibility_timeout_s: int) -> None:
        """ChangeMessageVisibility."""
        await self.call("ChangeMessageVisibility", {
            "QueueUrl": queue_url, "ReceiptHandle": receipt_handle,
            "VisibilityTimeout": visibility_timeout_s,
        })

    async def change_message_visibility_batch(
            self, queue_url: str, entries: Sequence[tuple[str, str, int]]) -> BatchResult:
        """ChangeMessageVisibilityBatch over (entry id, receipt handle, seconds), at most 10."""
        wire = [{"Id": entry_id, "ReceiptHandle": receipt, "VisibilityTimeout": seconds}
                for entry_id, receipt, seconds in entries]
        answer = await self.call("ChangeMessageVisibilityBatch",
                                 {"QueueUrl": queue_url, "Entries": wire})
        return BatchResult.from_wire(answer)

    # -- Conveyor's own: failed attempts kept with their messages -------------------------

    async def record_attempts(self, queue_url: str,
                              entries: Sequence[tuple[str, str, Attempt]]) -> BatchResult:
        """ConveyorWorkers.RecordAttempts over (entry id, receipt handle, attempt), at most
        10. An endpoint that is not Conveyor refuses it (SQSError)."""
        wire = [{"Id": entry_id, "ReceiptHandle": receipt, **attempt.to_wire()}
                for entry_id, receipt, attempt in entries]
        answer = await self.call("RecordAttempts", {"QueueUrl": queue_url, "Entries": wire},
                                 target_prefix=WORKERS_TARGET_PREFIX)
        return BatchResult.from_wire(answer)

    async def message_attempts(self, queue_url: str, message_id: str) -> list[Attempt]:
        """ConveyorWorkers.GetMessageAttempts: a message's recorded failed attempts, oldest
        first."""
        answer = await self.call("GetMessageAttempts",
                                 {"QueueUrl": queue_url, "MessageId": message_id},
                                 target_prefix=WORKERS_TARGET_PREFIX)
        return [Attempt.from_wire(raw) for raw in answer.get("Attempts") or []]


def _decode(action: str, endpoint: str, status: int, headers: Any, raw: bytes) -> dict[str, Any]:
    """Turn an HTTP answer into the result dict, or raise the matching error."""
    try:
        data = orjson.loads(raw) if raw.strip() else {}
    except orjson.JSONDecodeError:
        data = None
    if 200 <= status < 300:
        if not isinstance(data, dict):
            raise SQSTransportError(action, endpoint, f"HTTP {status} with a non-JSON body")
        return data
    raise _error(status, headers, data if isinstance(data, dict) else {})


def _error(status: int, headers: Any, data: dict[str, Any]) -> SQSError:
    """Build the SQSError for an error answer (JSON `__type` + `x-amzn-query-error`)."""
    raw_type = str(data.get("__type") or data.get("code") or "")
    type_name = raw_type.rsplit("#", 1)[-1].split(":", 1)[0] or f"HTTP{status}"
    message = str(data.get("message") or data.get("Message") or "")
    sender_fault = status < 500
    code = type_name
    query_error = headers.get("x-amzn-query-error", "")
    if query_error:
        code, _, fault = query_error.partition(";")
        sender_fault = fault != "Receiver" if fault else sender_fault
    return SQSError(code, message, status=status, type_name=type_name,
                    sender_fault=sender_fault, request_id=headers.get("x-amzn-RequestId", ""))
