"""An asyncio SQS client (AWS JSON 1.0 protocol) shared by the worker tier's client parts."""

from conveyor.client.attempts import Attempt
from conveyor.client.client import (
    CallObserver,
    SQSClient,
    check_http_url,
    endpoint_from_queue_url,
    queue_name_from_url,
    resolve_region,
)
from conveyor.client.errors import SQSError, SQSTransportError
from conveyor.client.messages import BatchFailure, BatchResult, Message

__all__ = [
    "Attempt", "BatchFailure", "BatchResult", "CallObserver", "Message", "SQSClient", "SQSError",
    "SQSTransportError", "check_http_url", "endpoint_from_queue_url", "queue_name_from_url",
    "resolve_region",
]
