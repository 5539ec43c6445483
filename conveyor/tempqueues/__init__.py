"""Temporary queues over any SQS endpoint: virtual queues, request-response, orphan sweeping.

Interoperates on the wire with the AWS Java temporary-queues client (see `names`).
Works with a plain boto3 SQS client; never imports the Conveyor server.

    sqs = boto3.client("sqs", endpoint_url="http://localhost:9324")
    requester = Requester(sqs)                      # owns a TemporaryQueuesClient
    reply = requester.send_message_and_get_response(
        {"QueueUrl": request_queue_url, "MessageBody": "login alice"}, timeout_s=20)
    requester.shutdown()

    # on the serving side (receive with MessageAttributeNames=["All"]):
    Responder(sqs).send_response_message(request_message, {"MessageBody": "ok"})
"""

from __future__ import annotations

from .aio import AsyncRequester, AsyncResponder, wait_for_messages
from .core import VirtualQueueId, parse_virtual_url
from .errors import (
    ClientClosed,
    InvalidVirtualQueueAttributes,
    ResponseTimeout,
    TempQueuesError,
)
from .names import (
    DEFAULT_PREFIX,
    HOST_QUEUE_URL,
    IDLE_QUEUE_RETENTION_PERIOD,
    RESPONSE_QUEUE_URL,
    VIRTUAL_QUEUE_NAME_ATTRIBUTE,
)
from .requester import Requester, Responder
from .sweeper import Sweeper, SweepStats
from .temporary import TemporaryQueuesClient
from .virtual import OrphanHandler, VirtualQueuesClient, log_and_drop

__all__ = [
    "DEFAULT_PREFIX",
    "HOST_QUEUE_URL",
    "IDLE_QUEUE_RETENTION_PERIOD",
    "RESPONSE_QUEUE_URL",
    "VIRTUAL_QUEUE_NAME_ATTRIBUTE",
    "AsyncRequester",
    "AsyncResponder",
    "ClientClosed",
    "InvalidVirtualQueueAttributes",
    "OrphanHandler",
    "Requester",
    "Responder",
    "ResponseTimeout",
    "SweepStats",
    "Sweeper",
    "TempQueuesError",
    "TemporaryQueuesClient",
    "VirtualQueueId",
    "VirtualQueuesClient",
    "log_and_drop",
    "parse_virtual_url",
    "wait_for_messages",
]
