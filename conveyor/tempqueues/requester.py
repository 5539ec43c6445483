"""Request-response over queues: a requester waits on a temporary queue for the reply."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from .core import (
    Message,
    Params,
    parse_virtual_url,
    response_queue_url,
    to_host_send,
    with_response_queue,
)
from .errors import ResponseTimeout, is_queue_missing
from .names import DEFAULT_PREFIX
from .temporary import TemporaryQueuesClient

log = logging.getLogger(__name__)


class Requester:
    """Sends requests and waits for their responses on temporary virtual queues.

    Pass a `TemporaryQueuesClient` to share its host queues, or keyword options to have one
    created (and shut down with this requester).
    """

    def __init__(self, sqs: Any, *, temporary: TemporaryQueuesClient | None = None,
                 queue_attributes: dict[str, str] | None = None,
                 **temporary_options: Any) -> None:
        self._owns_temporary = temporary is None
        self.temporary = temporary or TemporaryQueuesClient(sqs, **temporary_options)
        self.sqs = sqs
        self.queue_attributes = dict(queue_attributes or {})
        self.queue_name_prefix = getattr(self.temporary, "prefix", DEFAULT_PREFIX)

    def create_response_queue(self) -> str:
        """A new temporary virtual queue for one response (no SQS call once its host exists)."""
        name = f"{self.queue_name_prefix}{uuid.uuid4()}"
        return self.temporary.create_queue(QueueName=name,
                                           Attributes=self.queue_attributes)["QueueUrl"]

    def send_request(self, request: Params, response_url: str) -> dict[str, Any]:
        """Send a request (SendMessage parameters) asking for a reply on `response_url`."""
        return self.temporary.send_message(**with_response_queue(request, response_url))

    def acknowledge(self, response_url: str, reply: Message) -> None:
        """Delete a received reply from its host queue."""
        self.temporary.delete_message(QueueUrl=response_url,
                                      ReceiptHandle=reply["ReceiptHandle"])

    def send_message_and_get_response(self, request: Params, timeout_s: float) -> Message:
        """Send `request` and return the first reply; ResponseTimeout after `timeout_s`."""
        url = self.create_response_queue()
        try:
            self.send_request(request, url)
            deadline_s = time.monotonic() + timeout_s
            while (remaining_s := deadline_s - time.monotonic()) > 0:
                replies = self.temporary.virtual.wait_for_messages(url, 1, remaining_s)
                if replies:
                    self.acknowledge(url, replies[0])
                    return replies[0]
            raise ResponseTimeout(url, timeout_s)
        finally:
            self.temporary.delete_queue(QueueUrl=url)

    def shutdown(self) -> None:
        """Shut down the temporary queues client if this requester created it."""
        if self._owns_temporary:
            self.temporary.shutdown()


class Responder:
    """Sends responses to the queue a request names; works with a plain boto3 client."""

    def __init__(self, sqs: Any) -> None:
        self.sqs = sqs

    @staticmethod
    def is_response_message_requested(message: Message) -> bool:
        """True if the request (received with its message attributes) expects a reply."""
        return response_queue_url(message) is not None

    def send_response_message(self, request: Message, response: Params) -> bool:
        """Send `response` (SendMessage parameters without QueueUrl) to the request's queue.

        Returns False, after logging, when no reply was requested or the response queue is
        gone (the requester gave up): such a response is dropped, not raised.
        """
        url = response_queue_url(request)
        if url is None:
            log.warning("message %s asked for no response; none sent",
                        request.get("MessageId"))
            return False
        queue_id = parse_virtual_url(url)
        params = to_host_send(response, queue_id) if queue_id else {**response, "QueueUrl": url}
        try:
            self.sqs.send_message(**params)
        except Exception as exc:
            if not is_queue_missing(exc):
                raise
            log.warning("response queue %s of message %s no longer exists: response dropped",
                        url, request.get("MessageId"))
            return False
        return True

    def shutdown(self) -> None:
        """Nothing to release; for symmetry with Requester."""
